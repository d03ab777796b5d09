"""The hit ratio of an LRU cache under independent requests (seed 003's proxy tier, seed
001's object cache), by Che's approximation; and the cache itself, replayed request by
request (:func:`replay`, :func:`replay_stream`).

Requests draw object i with probability p_i, independently. Under LRU an object stays
in the cache for T seconds of requests after its last use, the *characteristic time*,
the same for every object. So it is found there with probability
h_i = 1 - exp(-p_i T), and T is where the expected cache content fills the cache:

    sum_i s_i (1 - exp(-p_i T)) = C      (s_i: size, C: capacity, both in bytes)

Time is counted in requests, so the rate drops out. The approximation is known to be
close for Zipf popularity (Che, Tung and Wang 2002; Fricker, Robert and Roberts 2012);
the tests hold it to a simulated LRU.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from offloadlab.errors import InputError


@dataclass(frozen=True)
class HitRatio:
    """``per_object`` hit probabilities; ``requests`` (the hit ratio) and ``bytes`` (the
    byte hit ratio) over the request mix; ``characteristic`` is T in requests (inf when
    everything fits)."""

    per_object: np.ndarray
    requests: float
    bytes: float
    characteristic: float


def lru(probabilities, sizes, capacity: float) -> HitRatio:
    """Che's approximation for an LRU cache of ``capacity`` bytes (see the module
    notes). Objects larger than the whole cache never hit."""
    p = np.asarray(probabilities, float)
    s = np.asarray(sizes, float)
    if p.shape != s.shape or p.ndim != 1 or len(p) == 0:
        raise InputError("probabilities and sizes: give one of each per object")
    if not (np.isfinite(p).all() and (p >= 0).all() and p.sum() > 0):
        raise InputError("probabilities: give finite shares >= 0, not all zero")
    if not (np.isfinite(s).all() and (s > 0).all()):
        raise InputError("sizes: give every object a size > 0 bytes")
    if not (np.isfinite(capacity) and capacity >= 0):
        raise InputError(f"capacity={capacity}: give a size in bytes >= 0")
    p = p / p.sum()
    fits = (s <= capacity) & (p > 0)
    if s[fits].sum() <= capacity:  # everything that can be cached fits: no evictions
        t = np.inf
        per_object = fits.astype(float)
    else:
        def excess(t: float) -> float:
            return float((s[fits] * -np.expm1(-p[fits] * t)).sum()) - capacity
        hi = 1.0
        while excess(hi) < 0:
            hi *= 2
        t = brentq(excess, 0.0, hi, xtol=1e-12 * hi, rtol=1e-12)
        per_object = np.where(fits, -np.expm1(-p * t), 0.0)
    return HitRatio(per_object=per_object, requests=float((p * per_object).sum()),
                    bytes=float((p * s * per_object).sum() / (p * s).sum()),
                    characteristic=float(t))


@dataclass(frozen=True)
class Replay:
    """Per request whether the cache answered it (``hits``), and the evictions, entries
    and bytes used at the end."""

    hits: np.ndarray
    evictions: int
    entries: int
    used: int


def replay(keys: Sequence, charges: Sequence[int], capacity: int,
           storable: Sequence[bool]) -> Replay:
    """An LRU cache of ``capacity`` bytes, request by request, as the server's
    (crates/offload-server/src/cache): a request whose key is stored hits and becomes
    the most recent entry; a miss is stored, charged ``charges[i]`` bytes, when its
    answer is ``storable[i]`` and the charge fits the budget, after evicting the least
    recently used entries until it fits."""
    entries: OrderedDict = OrderedDict()
    hits = np.zeros(len(keys), dtype=bool)
    used = evictions = 0
    for i, (key, charge, store) in enumerate(zip(keys, charges, storable, strict=True)):
        if key in entries:
            entries.move_to_end(key)
            hits[i] = True
        elif store and charge <= capacity:
            while used + charge > capacity:
                used -= entries.popitem(last=False)[1]
                evictions += 1
            entries[key] = charge
            used += charge
    return Replay(hits, evictions, len(entries), used)


def replay_stream(frame: pd.DataFrame, capacity: int, largest: int) -> Replay:
    """:func:`replay` of a request stream's frame through the server's cache, whose
    largest stored body is ``largest`` bytes. The server keys a request by its path
    ("/" and the object) and charges the path's and the body's length; it never stores
    a dynamic page (``dynamic``). A closed-loop stream is taken in the order its
    requests would arrive with instant answers: by each client's running think time.
    ``hits`` are in that order (:func:`arrival_order`)."""
    frame = frame.iloc[arrival_order(frame)]
    objects = pd.Categorical(frame["object"])
    dynamic = (frame["dynamic"].to_numpy(bool) if "dynamic" in frame
               else np.zeros(len(frame), bool))
    # A dynamic page has its own key, as the server adds its query to the path.
    keys = objects.codes.astype(np.int64) + dynamic * len(objects.categories)
    sizes = frame["size_bytes"].to_numpy(np.int64)
    path_bytes = np.array([len(c) + 1 for c in objects.categories], np.int64)
    charges = path_bytes[objects.codes] + sizes
    return replay(keys.tolist(), charges.tolist(), capacity,
                  (~dynamic & (sizes <= largest)).tolist())


def arrival_order(frame: pd.DataFrame) -> np.ndarray:
    """Row positions in arrival order: as they are for an open-loop stream (``time_s``),
    by each client's running think time for a closed loop, rows of one time keeping
    their order."""
    if "think_s" not in frame:
        return np.arange(len(frame))
    clock = frame.groupby("client", sort=False)["think_s"].cumsum().to_numpy()
    return np.argsort(clock, kind="stable")
