"""Synthetic web trace: a request table drawn from :class:`SynthSpec`, or written as a
WC98 log or an access log.

:func:`synthetic` draws Zipf object popularity, object sizes from a lognormal body
spliced to a Pareto tail (SURGE's parameters), Poisson or bursty (Cox: a lognormal rate
multiplier per interval) arrivals, and a client population with Zipf activity. The draw
is blockwise and so independent of how it is written: ``synth_wc98`` writes, and
``read_wc98`` reads back, exactly ``synthetic``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from offloadlab.errors import InputError
from offloadlab.workload.popularity import zipf_probabilities
from offloadlab.workload.traces.clf import write_clf
from offloadlab.workload.traces.files import write_chunks
from offloadlab.workload.traces.table import (
    _frame,
    _from_codes,
    _joined,
    _strings,
    empty_table,
)
from offloadlab.workload.traces.wc98 import (
    DEFAULT_EPOCH_S,
    FILE_TYPES,
    METHODS,
    NO_SIZE,
    STATUS_CODES,
    WC98_RECORD,
)

SURGE_BODY = (9.357, 1.318)  # lognormal body of file sizes (mu, sigma of ln bytes), SURGE
SURGE_TAIL = (1.1, 133_000.0)  # Pareto tail (alpha, k bytes), spliced in above k
BLOCK = 1 << 18  # requests drawn per block; the draw does not depend on output chunking


@dataclass(frozen=True)
class SynthSpec:
    """A synthetic web trace.

    Objects: ``n_objects`` with Zipf popularity, P[rank r] ∝ r^-zipf_alpha, and one size
    each: lognormal(mu, sigma) (``size_body``) where that is at most k, else Pareto
    P[X > x] = (k/x)^alpha for x >= k (``size_tail``), capped at ``max_size_bytes``.
    Clients: ``n_clients`` with Zipf activity (``client_alpha``; proxies send a lot).
    Arrivals: Poisson at ``rate`` requests/s when ``burstiness`` is 0; otherwise the rate
    in each ``burst_s`` interval is ``rate`` times a lognormal factor of mean 1 and log
    standard deviation ``burstiness`` (a Cox process: bursts, same mean rate).
    Each request draws a status from ``status_mix`` and a method from ``method_mix``;
    a 200 carries its object's size, a 304 or a HEAD no body (-1, CLF "-"), other codes
    ``error_bytes``. Times are floored to ``resolution_s`` (1 s, as in the logs; None
    keeps them exact) and start at ``epoch_s`` (Unix s).
    """

    n_objects: int = 10_000
    zipf_alpha: float = 1.0
    size_body: tuple[float, float] = SURGE_BODY
    size_tail: tuple[float, float] = SURGE_TAIL
    max_size_bytes: int = 1 << 30
    n_clients: int = 2_000
    client_alpha: float = 0.8
    rate: float = 1000.0
    burstiness: float = 0.0
    burst_s: float = 10.0
    status_mix: tuple[tuple[int, float], ...] = ((200, 0.90), (304, 0.08), (404, 0.02))
    method_mix: tuple[tuple[str, float], ...] = (("GET", 0.99), ("HEAD", 0.005),
                                                 ("POST", 0.005))
    error_bytes: int = 350
    resolution_s: float | None = 1.0
    epoch_s: int = DEFAULT_EPOCH_S

    def __post_init__(self):
        problems = []
        if self.n_objects < 1 or self.n_clients < 1:
            problems.append("n_objects and n_clients must be >= 1")
        if self.n_clients > 2**32:
            problems.append("n_clients must be <= 2**32 (WC98 client ids are 32-bit)")
        if not (self.zipf_alpha >= 0 and self.client_alpha >= 0):
            problems.append("zipf_alpha and client_alpha must be >= 0")
        if not (self.size_body[1] > 0 and self.size_tail[0] > 0 and self.size_tail[1] > 0):
            problems.append("size_body sigma and size_tail alpha, k must be > 0")
        if not (0 < self.max_size_bytes < NO_SIZE):
            problems.append("max_size_bytes must lie in (0, 2**32 - 1)")
        if not (self.rate > 0 and math.isfinite(self.rate)):
            problems.append("rate must be a finite number of requests/s > 0")
        if not (self.burstiness >= 0 and self.burst_s > 0):
            problems.append("burstiness must be >= 0 and burst_s > 0")
        if self.resolution_s is not None and not self.resolution_s > 0:
            problems.append("resolution_s must be > 0 or None")
        if not (0 <= self.epoch_s < 2**32):
            problems.append("epoch_s must be a Unix time in [0, 2**32)")
        for name in ("status_mix", "method_mix"):
            probs = [p for _, p in getattr(self, name)]
            if not probs or min(probs) < 0 or abs(sum(probs) - 1) > 1e-9:
                problems.append(f"{name} probabilities must be >= 0 and sum to 1")
        if any(s not in STATUS_CODES for s, _ in self.status_mix):
            problems.append(f"status_mix codes must be among {STATUS_CODES}")
        if any(m not in METHODS for m, _ in self.method_mix):
            problems.append(f"method_mix methods must be among {METHODS}")
        if problems:
            raise InputError("SynthSpec: " + "; ".join(problems))


# ------------------------------------------------------------------ the draw


def _zipf_cdf(n: int, alpha: float) -> np.ndarray:
    cdf = np.cumsum(zipf_probabilities(n, alpha))
    return cdf / cdf[-1]  # exactly 1 at the end, so a draw below 1 always finds a rank


def object_sizes(spec: SynthSpec, rng: np.random.Generator) -> np.ndarray:
    """One size per object (bytes, int64): the lognormal body spliced to the Pareto tail."""
    mu, sigma = spec.size_body
    alpha, k = spec.size_tail
    x = rng.lognormal(mu, sigma, spec.n_objects)
    tail = x > k
    x[tail] = k * (1.0 - rng.random(np.count_nonzero(tail))) ** (-1.0 / alpha)
    return np.clip(np.rint(x), 1, spec.max_size_bytes).astype(np.int64)


class _Arrivals:
    """Arrival times, block by block: unit-rate exponential gaps in operational time u,
    mapped through the inverse of the cumulative intensity Λ(t) = rate·∫ M(s) ds."""

    def __init__(self, spec: SynthSpec, seed: int):
        self.spec, self.u, self.first = spec, 0.0, True
        self.rng = np.random.default_rng([seed, 1])
        self.T = np.zeros(1)  # interval boundaries (s) ...
        self.L = np.zeros(1)  # ... and Λ at them (expected requests)

    def block(self, gaps: np.ndarray) -> np.ndarray:
        if self.first:  # the first request comes at time 0
            gaps = np.concatenate(([0.0], gaps[1:]))
            self.first = False
        u = self.u + np.cumsum(gaps)
        self.u = float(u[-1])
        spec = self.spec
        if spec.burstiness == 0:
            return u / spec.rate
        while self.L[-1] < u[-1]:
            s = spec.burstiness
            m = np.exp(s * self.rng.standard_normal(1024) - s * s / 2)
            step = spec.rate * spec.burst_s * m
            self.T = np.concatenate((self.T, self.T[-1] + spec.burst_s * np.arange(1, 1025)))
            self.L = np.concatenate((self.L, self.L[-1] + np.cumsum(step)))
        t = np.interp(u, self.L, self.T)
        keep = max(int(np.searchsorted(self.L, u[-1], side="right")) - 1, 0)
        self.T, self.L = self.T[keep:], self.L[keep:]
        return t


def _blocks(n_requests: int, seed: int, spec: SynthSpec) -> Iterator[dict]:
    """Raw columns of the synthetic trace, ``BLOCK`` requests at a time."""
    if not isinstance(n_requests, int | np.integer) or n_requests < 0:
        raise InputError(f"n_requests={n_requests!r}: use a whole number >= 0")
    setup = np.random.default_rng([seed, 0])
    object_ids = setup.permutation(spec.n_objects).astype(np.int64)  # rank -> objectID
    sizes = object_sizes(spec, setup)  # by objectID
    offset = int(setup.integers(0, 2**32))
    client_ids = ((np.arange(1, spec.n_clients + 1, dtype=np.uint64) * 2654435761 + offset)
                  % 2**32).astype(np.int64)
    client_ids = client_ids[setup.permutation(spec.n_clients)]  # rank -> clientID
    obj_cdf = _zipf_cdf(spec.n_objects, spec.zipf_alpha)
    cli_cdf = _zipf_cdf(spec.n_clients, spec.client_alpha)
    statuses = np.array([s for s, _ in spec.status_mix], dtype=np.int16)
    st_cdf = np.cumsum([p for _, p in spec.status_mix])
    methods = np.array([METHODS.index(m) for m, _ in spec.method_mix], dtype=np.int8)
    me_cdf = np.cumsum([p for _, p in spec.method_mix])
    arrivals = _Arrivals(spec, seed)
    res = spec.resolution_s
    for k, start in enumerate(range(0, n_requests, BLOCK)):
        n = min(BLOCK, n_requests - start)
        rng = np.random.default_rng([seed, 2, k])
        t = arrivals.block(rng.exponential(1.0, n))
        if res is not None:
            t = np.floor(t / res) * res

        def pick(cdf, rng=rng, n=n):
            return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), len(cdf) - 1)

        obj = object_ids[pick(obj_cdf)]
        status = statuses[pick(st_cdf)]
        method = methods[pick(me_cdf)]
        size = np.where(status == 200, sizes[obj], spec.error_bytes)
        size[(status == 304) | (method == METHODS.index("HEAD"))] = -1
        yield {"t": t, "client": client_ids[pick(cli_cdf)], "object": obj, "size": size,
               "status": status, "method": method}


# ------------------------------------------------------------------ as tables


def _block_table(b: dict, epoch_s: float) -> pd.DataFrame:
    df = _frame({
        "time_s": b["t"],
        "client": b["client"],
        "object": _strings(pc.cast(pa.array(b["object"]), pa.string())),
        "size_bytes": b["size"].astype(np.int64),
        "status": b["status"],
        "method": _from_codes(b["method"], METHODS),
        "conn_id": np.full(len(b["t"]), -1, dtype=np.int64),
    })
    df.attrs["epoch_s"] = epoch_s
    return df


def synthetic_chunks(n_requests: int, seed: int = 0, spec: SynthSpec | None = None
                     ) -> Iterator[pd.DataFrame]:
    """:func:`synthetic` as a stream of tables (constant memory for any ``n_requests``)."""
    spec = spec or SynthSpec()
    for b in _blocks(n_requests, seed, spec):
        yield _block_table(b, float(spec.epoch_s))


def synthetic(n_requests: int, seed: int = 0, spec: SynthSpec | None = None) -> pd.DataFrame:
    """A synthetic request table of ``n_requests`` (see :class:`SynthSpec`), reproducible
    from ``seed``; ``attrs["epoch_s"]`` is ``spec.epoch_s`` and the first request is at
    ``time_s`` 0."""
    spec = spec or SynthSpec()
    frames = list(synthetic_chunks(n_requests, seed, spec)) or [empty_table()]
    return _joined(frames, float(spec.epoch_s))


# ------------------------------------------------------------------ as files


def _block_records(b: dict, epoch_s: int) -> np.ndarray:
    """The WC98 records of a raw block (fast path: no strings)."""
    rec = np.empty(len(b["t"]), dtype=WC98_RECORD)
    rec["timestamp"] = np.floor(epoch_s + b["t"])
    rec["client"] = b["client"]
    rec["object"] = b["object"]
    rec["size"] = np.where(b["size"] < 0, NO_SIZE, b["size"])
    rec["method"] = b["method"]
    code = np.searchsorted(STATUS_CODES, b["status"]).astype(np.uint8)  # sorted table
    rec["status"] = (1 << 6) | code  # HTTP/1.0
    rec["type"] = FILE_TYPES.index("OTHER")
    rec["server"] = 0
    return rec


def synth_wc98(path, n_requests: int, seed: int = 0, spec: SynthSpec | None = None) -> int:
    """Write :func:`synthetic` (n_requests, seed, spec) as a WC98 binary log (gzipped if
    ``path`` ends in .gz), in constant memory; returns the number of records. Reading it
    back gives exactly the synthetic table (whole-second times are exact in WC98)."""
    spec = spec or SynthSpec()
    if spec.resolution_s is not None and spec.resolution_s % 1:
        raise InputError(f"resolution_s={spec.resolution_s}: WC98 keeps whole seconds; use "
                         "a whole number of seconds, or write with write_wc98 (it floors)")
    records = (_block_records(b, spec.epoch_s) for b in _blocks(n_requests, seed, spec))
    return write_chunks(Path(path), records, lambda rec, _: rec.tobytes())


def synth_clf(path, n_requests: int, seed: int = 0, spec: SynthSpec | None = None, *,
              utc_offset_s: int = 0, combined: bool = True) -> int:
    """Write :func:`synthetic` as a Combined (or Common) Log Format file; returns the
    number of lines. Objects are written as the request target verbatim (their decimal
    ids), so the file reads back as exactly the synthetic table."""
    spec = spec or SynthSpec()
    return write_clf(path, synthetic_chunks(n_requests, seed, spec),
                     epoch_s=float(spec.epoch_s), utc_offset_s=utc_offset_s,
                     combined=combined)
