"""Long-lived flows: seed 002's FastFlow detector over pcap files, request streams and
traces, the Space-Saving baseline, and synthetic traces with known heavy hitters.

The detector itself is Rust (``crates/offload-flows``); ``docs/flows.md`` states its
rule, its parameters and what was measured::

    r = detect_file("capture.pcap")            # or a stream (.parquet), a WC98/CLF trace
    r.flows, r.share                           # long-lived flows, their share of packets
    keys, heavy = synthetic(seed=1)            # a packet trace with planted heavy hitters
    precision_recall(detect(keys).flows, heavy)

A request becomes packets of the flow of its connection (``conn_id``): one for the
request and one per 1460-byte segment of the response body (ACKs are not counted).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab import _core
from offloadlab.errors import InputError

MSS = 1460
_PCAP_MAGIC = {b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1",
               b"\x0a\x0d\x0d\x0a"}  # classic pcap (µs, ns; both byte orders), pcapng


def defaults() -> dict[str, float]:
    """The detector's parameters and their defaults (they live in Rust only)."""
    return dict(_core.flows_defaults())


@dataclass(frozen=True)
class Flows:
    """What the detector found in one input, and the offline estimates.

    ``flows`` are the long-lived flows at the end (connection ids, or five-tuples as
    text for pcap), largest first; ``packets`` their estimated packets (exact counts
    while unlisted plus ``sample_every`` per sampled packet after). For pcap,
    ``skipped`` counts the frames not read as packets (not IP, or cut before the ports)
    and ``truncated`` the packets whose TCP or UDP header the snap length cut after the
    ports.
    """

    source: str
    flows: list
    packets: np.ndarray
    total_packets: int
    llf_packet_share: float
    entropy_bits: float
    flows_seen: int
    slf_flows: int
    llf_samples: int
    llf_sampled_flows: int
    llf_flows_mle: int | None
    flows_estimate: int | None
    kde_bandwidth: float | None
    kde_log10_packets: np.ndarray
    kde_density: np.ndarray
    peak_bytes: int
    peak_tracked: int
    epochs: int
    seconds: float
    skipped: int = 0
    truncated: int = 0
    params: dict = field(default_factory=dict)

    @property
    def share(self) -> np.ndarray:
        """Each long-lived flow's share of all packets."""
        return self.packets / max(self.total_packets, 1)

    @property
    def bytes_per_flow(self) -> float:
        """Peak memory of the online part per flow it held then."""
        return self.peak_bytes / max(self.peak_tracked, 1)

    def to_json(self) -> dict:
        mode = (float(10 ** self.kde_log10_packets[np.argmax(self.kde_density)])
                if len(self.kde_density) else None)
        return {
            "source": self.source, "params": self.params,
            "packets": self.total_packets, "skipped_frames": self.skipped,
            "truncated_packets": self.truncated,
            "long_lived": [{"flow": f, "packets": float(p), "share": float(s)}
                           for f, p, s in zip(self.flows, self.packets, self.share,
                                              strict=True)],
            "llf_packet_share": self.llf_packet_share, "entropy_bits": self.entropy_bits,
            "epochs": self.epochs, "flows_seen": self.flows_seen,
            "offline": {"slf_flows": self.slf_flows, "llf_samples": self.llf_samples,
                        "llf_sampled_flows": self.llf_sampled_flows,
                        "llf_flows_mle": self.llf_flows_mle,
                        "flows_estimate": self.flows_estimate,
                        "kde_bandwidth_log10": self.kde_bandwidth,
                        "kde_mode_packets": mode},
            "memory": {"peak_bytes": self.peak_bytes, "peak_tracked_flows": self.peak_tracked,
                       "bytes_per_flow": self.bytes_per_flow},
        }


def _settings(params: dict) -> list[tuple[str, float]]:
    known = defaults()
    for name, v in params.items():
        if name not in known:
            raise InputError(f"detector parameter {name!r} is unknown; the parameters are "
                             f"{', '.join(known)}")
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InputError(f"detector parameter {name}: {v!r} is not a number")
    return [(k, float(v)) for k, v in params.items()]


def _result(raw: dict, source: str, params: dict) -> Flows:
    arrays = {k: np.asarray(raw[k], dtype=float)
              for k in ("packets", "kde_log10_packets", "kde_density")}
    return Flows(source=source, params=params, **{**raw, **arrays})


def _call(fn, *args):
    """A core call whose ValueError is bad input (a parameter, an unreadable file)."""
    try:
        return fn(*args)
    except ValueError as e:
        raise InputError(str(e)) from None


def detect(keys: Sequence[int] | np.ndarray, source: str = "keys", **params) -> Flows:
    """Run the detector over flow ids, one per packet, in arrival order."""
    ids = np.asarray(keys)
    if ids.ndim != 1 or (len(ids) and (ids.dtype.kind not in "iu" or ids.min() < 0)):
        raise InputError(f"{source}: flow ids must be a flat sequence of integers >= 0")
    raw = _call(_core.flows_detect, ids.astype(np.uint64).tolist(), _settings(params))
    return _result(raw, source, params)


def detect_pcap(path: str | Path, **params) -> Flows:
    """Run the detector over a pcap file's packets, flows by five-tuple."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such pcap file")
    raw = _call(_core.flows_detect_pcap, str(path), _settings(params))
    return _result(raw, str(path), params)


def request_packets(frames: Iterable[pd.DataFrame], where: str = "requests") -> np.ndarray:
    """The flow id of each packet of requests (``conn_id``, ``size_bytes`` columns):
    the request, then its response's segments, request after request."""
    parts = []
    for f in frames:
        missing = [c for c in ("conn_id", "size_bytes") if c not in f]
        if missing:
            raise InputError(f"{where}: column {missing[0]!r} is missing; flows need each "
                             "request's conn_id and size_bytes")
        conn = f["conn_id"].to_numpy(np.int64)
        if (conn < 0).any():
            raise InputError(f"{where}: column 'conn_id' has no connection (-1); group the "
                             "requests into connections first (traces.assign_connections)")
        size = f["size_bytes"].to_numpy(np.int64)
        parts.append(np.repeat(conn, 1 + -(-np.maximum(size, 0) // MSS)))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def detect_file(path: str | Path, *, connections_s: float = 15.0, **params) -> Flows:
    """A pcap (or pcapng, refused with the fix), a request stream (Parquet) or a WC98 or
    Common Log Format trace, told apart by content. Traces without connections get them
    from :func:`~offloadlab.workload.traces.assign_connections` (``connections_s``)."""
    from offloadlab.workload import stream, traces

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file; give a pcap file, a stream (.parquet) or "
                         "a trace")
    with path.open("rb") as fh:
        head = fh.read(4)
    if head in _PCAP_MAGIC:
        r = detect_pcap(path, **params)
    else:
        frames = (stream.iter_batches(path) if head == b"PAR1" else
                  traces.assign_connections(iter(traces.read_trace(path)), connections_s))
        r = detect(request_packets(frames, str(path)), str(path), **params)
    if r.total_packets == 0:
        raise InputError(f"{path}: no packets or requests read; give a pcap file with IP "
                         "packets, a request stream (.parquet) or a WC98/CLF trace")
    return r


def space_saving(keys: Sequence[int] | np.ndarray, k: int, threshold: int) -> dict:
    """The Space-Saving baseline with ``k`` counters: the flows whose guaranteed count is
    above ``threshold`` packets (``flows``, ``packets``), ``bytes`` and ``seconds``."""
    if k < 1:
        raise InputError(f"space-saving k={k}: use at least 1 counter")
    return dict(_core.flows_space_saving(np.asarray(keys, np.uint64).tolist(), k, threshold))


def kde(points: Sequence[float], xs: Sequence[float]) -> tuple[float, np.ndarray]:
    """The Gaussian KDE of ``points`` with Silverman's bandwidth h = 1.06 σ̂ N^(−1/5)
    (σ̂ the 1/N standard deviation), evaluated at ``xs``: (h, densities)."""
    h, y = _call(_core.flows_kde, [float(p) for p in points], [float(x) for x in xs])
    return h, np.asarray(y)


def synthetic(*, heavy: int = 20, heavy_share: float = 0.5, short_flows: int = 20_000,
              max_short: int = 100, seed: int = 1) -> tuple[np.ndarray, set[int]]:
    """A packet trace (flow ids in arrival order) with ``heavy`` planted heavy hitters
    (ids 0..heavy-1, spread over the whole trace, together ``heavy_share`` of the
    packets, shares ∝ 1/sqrt(rank)) among ``short_flows`` short flows (ids from
    ``heavy``; bounded Pareto sizes, γ = 2.1, 1..``max_short`` packets, each in a short
    burst at a random time). Returns the ids and the set of heavy ids."""
    if not 0 < heavy_share < 1 or heavy < 1 or short_flows < 1 or max_short < 1:
        raise InputError("synthetic: needs heavy >= 1, short_flows >= 1, max_short >= 1 "
                         "and 0 < heavy_share < 1")
    rng = np.random.default_rng(seed)
    u = rng.random(short_flows)
    lo, hi, g = 1.0, max_short + 1.0, 2.1  # bounded Pareto by inversion
    sizes = np.floor(lo / (1 - u * (1 - (lo / hi) ** g)) ** (1 / g)).astype(np.int64)
    n_short = int(sizes.sum())
    n_heavy = round(n_short * heavy_share / (1 - heavy_share))
    weights = 1 / np.sqrt(np.arange(1, heavy + 1))
    heavy_ids = rng.choice(heavy, size=n_heavy, p=weights / weights.sum())
    short_ids = np.repeat(np.arange(heavy, heavy + short_flows), sizes)
    # A short flow lasts about its size times 1e-6 of the trace; heavy ones all of it.
    starts = np.repeat(rng.random(short_flows), sizes)
    short_t = starts + 1e-6 * np.concatenate([np.arange(s) for s in sizes])
    t = np.concatenate([rng.random(n_heavy), short_t])
    ids = np.concatenate([heavy_ids, short_ids])[np.argsort(t, kind="stable")]
    return ids, set(range(heavy))


def precision_recall(found: Iterable, truth: set) -> tuple[float, float]:
    """Precision (found that are true) and recall (true that are found)."""
    got = set(found)
    hits = len(got & truth)
    return (hits / len(got) if got else 1.0), (hits / len(truth) if truth else 1.0)
