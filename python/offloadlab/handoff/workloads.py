"""The four web workloads of seed 004 (Kim & Rixner, reference 004 §5) as lists of
persistent connections for the packet-level handoff simulator.

What the simulator does with them
    Closed-loop clients with no think time (SPECweb99 clients are throttled to
    ``client_kbps`` instead) each take the next connection of the list (wrapping round
    at its end), send its requests one after another on one persistent TCP connection,
    close it and take the next. So a workload is only this: connections, each a list of
    requests with a response body size and a dynamic flag (:class:`Connections`, stored
    as a CSR index ``offsets`` into per-request arrays).

The four workloads (:data:`WORKLOADS`, :func:`build`). None of the paper's inputs is
available here, so all four are synthetic imitations; each ``description`` says so.

    W   World Cup 98-like. A synthetic trace (:data:`W_TRACE`, drawn by
        :func:`offloadlab.workload.traces.synthetic`) standing in for a busy stretch of
        the 1998 World Cup log: many small objects, Zipf popularity, a large client
        population with Zipf activity. GETs with status 200 are kept and grouped into
        connections as the paper's replayer did: a client's request at most 15 s after
        its previous one rides the same connection
        (:func:`offloadlab.workload.traces.assign_connections`).
    I   IBM-trace substitute. The IBM trace is not public; this is a second synthetic
        trace (:data:`I_TRACE`) with larger objects and fewer, more active clients
        (longer sessions), filtered and grouped the same way.
    S   SPECweb99-static-like, 4096 clients at 400 kbit/s. Sizes follow SPECweb99's
        rule (:func:`specweb99_sizes`); 70 % of requests ride keep-alive connections of
        5–15 requests (uniform), the rest one request per connection.
    D   SPECweb99-like, 2048 clients at 400 kbit/s: S with 30 % of requests dynamic.

How a trace becomes a list of N connections
    The trace is drawn block by block and its connections numbered in order of their
    first request. It ends ``WINDOW_S`` after the N-th connection opens: every kept
    connection had at least one whole window to go on, and the few that outlive the
    segment (the busiest clients' connections) are cut there, as in any segment of a
    real log. The first N connections are kept; their requests stay in time order.

Figure 4 (acceptance check A19)
    The paper's traces have about 50 % of connections carrying < 10 % of the packets
    and < 10 % of connections carrying > 45 % of them (:func:`skew`,
    :func:`lifetime_curve`; packets per connection are :meth:`Connections.packets`).
    At the defaults (20,000 connections, seed 0, MSS 1460, 250 header bytes):

    ====  ==================  ===============  ==================  ==================
    code  bottom 50 % share   top 10 % share   requests per conn   bytes per response
                                               (mean / median)     (mean)
    ====  ==================  ===============  ==================  ==================
    W     0.084               0.700            7.9 / 2             3,197
    I     0.070               0.653            11.7 / 4            7,917
    S     0.063               0.617            2.7 / 1             14,603
    D     0.064               0.618            2.7 / 1             14,552
    ====  ==================  ===============  ==================  ==================

    Over seeds 0-19: W 0.063-0.094 / 0.68-0.76 (mean response 2.7-4.9 KB), I
    0.051-0.070 / 0.65-0.72 (7.7-11.6 KB), S and D 0.061-0.065 / 0.62-0.64. S and D
    meet the check under SPECweb99's own rules: most of their connections carry one
    file of at most 9 KB (3-9 packets); the keep-alive connections of about ten
    requests, and the 1 % of 100-900 KB files, carry the rest. D's dynamic share is
    0.300. The top share is above
    the paper's "> 45 %" for all four (the paper's oracle that takes the longest 10 %
    of W's connections gets > 60 % of the packets, A12, so its Figure 4 is steep too).

    W and I depend on the list length: a shorter list is a shorter segment, whose
    busiest clients' connections are cut sooner. With 10,000 connections, seeds 0-9
    give bottom <= 0.101 and top >= 0.62; with 5,000, W's bottom share reaches 0.117;
    1,000 connections of I give 0.15 / 0.43. Use 10,000 or more for Figure 4 runs.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offloadlab.errors import InputError, RunError
from offloadlab.workload.counts import UniformInt
from offloadlab.workload.fileset import zipf_probabilities
from offloadlab.workload.specs import SPECWEB99_FILE_RANKS, SPECWEB99_SIZES, SpecWeb99Spec
from offloadlab.workload.traces import (
    SynthSpec,
    assign_connections,
    read_trace,
    synthetic_chunks,
)
from offloadlab.workload.traces.synth import BLOCK

MSS = 1460  # bytes of payload per segment (1518-byte Ethernet frames)
HEADER_BYTES = 250  # HTTP response header sent ahead of each body
WINDOW_S = 15.0  # the replayer's persistent-connection window (reference 004 §5)
MAX_CONNECTIONS = 10_000_000

# World Cup 98 stand-in. The log's transfers are mostly small images and pages (a mean
# of a few KB) with a few large files, and a few clients (proxies) send a large share
# of the requests. Sizes: a lognormal body with a median of about 1.1 KB (e^7.0) and a
# wide spread (sigma 1.4), a Pareto tail (alpha 1.5) above 100 KB, capped at 1 MiB:
# about 3 KB per request. Popularity: Zipf(0.7) over 20,000 objects, flatter than the
# log's. The simulator sees only sizes, and the generator sizes objects independently
# of their popularity, so with Zipf(1) the top object takes ~10 % of the requests and
# its one size draw swings the mean response between seeds (one seed in our trials
# drew a 3 MB top object: 300 KB per request). With Zipf(0.7), 98 % of seeds give a
# mean within 2.7-3.7 KB. Client count, activity skew and rate set the connection
# lengths under the 15 s window: 6,000 clients with Zipf(0.8) activity at 1,200
# requests/s give a median of 2 requests per connection, a mean of 8 and the Figure 4
# shape (bottom half < 10 % of packets, top tenth about two thirds; the paper's oracle
# that takes the longest 10 % gets > 60 %, A12) with no connection holding more than
# about 4 % of the packets. About one request in five is a 304 (no body; roughly the
# log's share as we recall it, not checked here): they, HEADs and errors only thin the
# stream, as they are dropped before the grouping (the replayer keeps GETs with status
# 200 only).
W_TRACE = SynthSpec(
    n_objects=20_000,
    zipf_alpha=0.7,
    size_body=(7.0, 1.4),
    size_tail=(1.5, 100_000.0),
    max_size_bytes=1 << 20,
    n_clients=6_000,
    client_alpha=0.8,
    rate=1_200.0,
    status_mix=((200, 0.80), (304, 0.18), (404, 0.02)),
    method_mix=(("GET", 0.998), ("HEAD", 0.002)),
)

# IBM substitute. A corporate site rather than an event: more objects (50,000, Zipf
# 0.7 for the reason above), larger ones (median about 3 KB, e^8.0, sigma 1.4, a Pareto
# tail above 200 KB capped at 4 MiB: about 8 KB per request) and longer sessions: 2,000
# clients with flatter activity (Zipf 0.6) at 450 requests/s, so a typical client comes
# back within the 15 s window more often (median 4 requests per connection, mean about 12).
I_TRACE = SynthSpec(
    n_objects=50_000,
    zipf_alpha=0.7,
    size_body=(8.0, 1.4),
    size_tail=(1.5, 200_000.0),
    max_size_bytes=4 << 20,
    n_clients=2_000,
    client_alpha=0.6,
    rate=450.0,
    status_mix=((200, 0.85), (304, 0.13), (404, 0.02)),
    method_mix=(("GET", 0.998), ("HEAD", 0.002)),
)

# SPECweb99: the repository's file-set rule (4 classes x 9 files, class mix 35/50/14/1,
# Zipf within a class). The directory (Zipf alpha 1) does not change a size, so sizes
# are drawn from the class and file alone.
SPECWEB99 = SpecWeb99Spec(name="handoff-specweb99", description="SPECweb99-like sizes")
KEEP_ALIVE_SHARE = 0.7  # share of requests on keep-alive connections
KEEP_ALIVE_LENGTH = UniformInt(5, 15)  # requests on a keep-alive connection
DYNAMIC_SHARE = 0.3  # SPECweb99's default mix: 70 % static, 30 % dynamic
SPECWEB99_CLIENT_KBPS = 400.0  # the paper's clients held 320-400 kbit/s: the top as a cap

WORKLOADS: dict[str, str] = {
    "W": "World Cup 98-like: synthetic trace (not the real log), ~1 KB median objects, "
         "Zipf clients, GET 200 only, 15 s persistent connections",
    "I": "IBM-trace substitute (the IBM trace is not public): synthetic trace with larger "
         "objects and longer sessions, GET 200 only, 15 s persistent connections",
    "S": "SPECweb99-static-like (not the SPEC kit): SPECweb99 file sizes, 70 % of requests "
         "on 5-15-request keep-alive connections, all static, 400 kbit/s clients",
    "D": "SPECweb99-like (not the SPEC kit): as S with 30 % dynamic requests sized like "
         "static files, 400 kbit/s clients",
}
# The paper's client count and per-client cap (kbit/s) for each workload (§5).
_CLIENTS: dict[str, tuple[int, float | None]] = {
    "W": (2048, None), "I": (2048, None),
    "S": (4096, SPECWEB99_CLIENT_KBPS), "D": (2048, SPECWEB99_CLIENT_KBPS),
}
_TRACES = {"W": W_TRACE, "I": I_TRACE}


# ------------------------------------------------------------------ the workload


def _int_array(field: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InputError(f"Connections.{field}: give a 1-D array of whole numbers, not "
                         f"{arr.ndim}-D {arr.dtype}")
    return np.array(arr, dtype=np.int64)


def _segments(sizes: np.ndarray, mss: int, header_bytes: int) -> np.ndarray:
    """Data segments the server sends for each response: header and body, MSS each."""
    return (sizes + (header_bytes + mss - 1)) // mss


@dataclass(frozen=True, eq=False)
class Connections:
    """A workload as a list of persistent connections.

    Connection ``i`` carries requests ``offsets[i]`` to ``offsets[i + 1] - 1`` in order;
    request ``k`` gets a response body of ``sizes[k]`` bytes and is dynamic content when
    ``dynamic[k]``. ``clients`` and ``client_kbps`` (None: no cap) are the paper's client
    count and per-client bandwidth for the workload. Every connection carries at least
    one request. The arrays are copied and made read-only.
    """

    name: str
    description: str
    offsets: np.ndarray
    sizes: np.ndarray
    dynamic: np.ndarray
    clients: int
    client_kbps: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"Connections.name={self.name!r}: give a workload code, e.g. 'W'")
        offsets = _int_array("offsets", self.offsets)
        sizes = _int_array("sizes", self.sizes)
        dynamic = np.asarray(self.dynamic)
        if dynamic.ndim != 1 or (dynamic.size and dynamic.dtype != np.bool_):
            raise InputError(f"Connections.dynamic: give a 1-D bool array (one flag per "
                             f"request), not {dynamic.ndim}-D {dynamic.dtype}")
        dynamic = np.array(dynamic, dtype=bool)
        if len(offsets) < 2 or offsets[0] != 0:
            raise InputError("Connections.offsets: must start at 0 and hold n_connections + 1 "
                             f"entries (at least one connection); got {offsets[:3].tolist()}"
                             f"{'...' if len(offsets) > 3 else ''} of length {len(offsets)}")
        steps = np.diff(offsets)
        if (steps <= 0).any():
            i = int(np.argmax(steps <= 0))
            raise InputError(f"Connections.offsets: must increase strictly (every connection "
                             f"has at least one request); offsets[{i}]={offsets[i]} and "
                             f"offsets[{i + 1}]={offsets[i + 1]}")
        if offsets[-1] != len(sizes):
            raise InputError(f"Connections.offsets: the last offset ({offsets[-1]}) must equal "
                             f"the number of requests in sizes ({len(sizes)})")
        if len(dynamic) != len(sizes):
            raise InputError(f"Connections.dynamic: {len(dynamic)} flags for {len(sizes)} "
                             "requests; give one per request")
        if (sizes < 0).any():
            k = int(np.argmax(sizes < 0))
            raise InputError(f"Connections.sizes: sizes[{k}]={sizes[k]}; response bodies are "
                             ">= 0 bytes")
        if isinstance(self.clients, bool) or not isinstance(self.clients, int | np.integer) \
                or self.clients < 1:
            raise InputError(f"Connections.clients={self.clients!r}: use a whole number >= 1")
        kbps = self.client_kbps
        if kbps is not None and (isinstance(kbps, bool) or not isinstance(kbps, int | float)
                                 or not (math.isfinite(kbps) and kbps > 0)):
            raise InputError(f"Connections.client_kbps={kbps!r}: use a rate > 0 kbit/s, or "
                             "None for no cap")
        for field, arr in (("offsets", offsets), ("sizes", sizes), ("dynamic", dynamic)):
            arr.setflags(write=False)
            object.__setattr__(self, field, arr)
        object.__setattr__(self, "clients", int(self.clients))
        if kbps is not None:
            object.__setattr__(self, "client_kbps", float(kbps))

    @property
    def n_connections(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_requests(self) -> int:
        return len(self.sizes)

    @property
    def requests_per_connection(self) -> np.ndarray:
        return np.diff(self.offsets)

    def _per_connection(self, per_request: np.ndarray) -> np.ndarray:
        total = np.concatenate(([0], np.cumsum(per_request, dtype=np.int64)))
        return total[self.offsets[1:]] - total[self.offsets[:-1]]

    def response_bytes(self) -> np.ndarray:
        """Response body bytes per connection (int64)."""
        return self._per_connection(self.sizes)

    def packets(self, mss: int = MSS, header_bytes: int = HEADER_BYTES) -> np.ndarray:
        """Segments the server sends per connection (int64): for each request
        ceil((size + header_bytes) / mss) data segments, plus the SYN/ACK and the FIN."""
        if isinstance(mss, bool) or not isinstance(mss, int | np.integer) or mss < 1:
            raise InputError(f"mss={mss!r}: use a whole number of bytes >= 1, e.g. 1460")
        if (isinstance(header_bytes, bool) or not isinstance(header_bytes, int | np.integer)
                or header_bytes < 0):
            raise InputError(f"header_bytes={header_bytes!r}: use a whole number of bytes "
                             ">= 0, e.g. 250")
        return self._per_connection(_segments(self.sizes, int(mss), int(header_bytes))) + 2

    def describe(self) -> dict:
        """Counts, means and the Figure 4 skew (:func:`skew`), as plain numbers."""
        per = self.requests_per_connection
        return {
            "name": self.name,
            "connections": self.n_connections,
            "requests": self.n_requests,
            "mean_requests_per_connection": float(per.mean()),
            "median_requests_per_connection": float(np.median(per)),
            "mean_response_bytes": float(self.sizes.mean()),
            "dynamic_share": float(self.dynamic.mean()),
            **skew(self),
            "clients": self.clients,
            "client_kbps": self.client_kbps,
        }


# ------------------------------------------------------------------ Figure 4


def _ranked(conns: Connections, mss: int, header_bytes: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """Packets and bytes per connection, fewest packets first (ties: fewer bytes)."""
    packets, body = conns.packets(mss, header_bytes), conns.response_bytes()
    order = np.lexsort((body, packets))
    return packets[order], body[order]


def lifetime_curve(conns: Connections, mss: int = MSS, header_bytes: int = HEADER_BYTES
                   ) -> pd.DataFrame:
    """Figure 4 of the paper: connections ranked by the packets they carry, fewest first.
    Row ``i`` covers the ``i + 1`` smallest connections: ``rank_share`` = (i + 1) / n,
    ``packet_share`` and ``byte_share`` the fractions of all packets and response bytes
    they carry (``byte_share`` is NaN when no response has a body)."""
    packets, body = _ranked(conns, mss, header_bytes)
    n = len(packets)
    cum_p, cum_b = np.cumsum(packets), np.cumsum(body)
    return pd.DataFrame({
        "rank_share": np.arange(1, n + 1) / n,
        "packet_share": cum_p / cum_p[-1],
        "byte_share": cum_b / cum_b[-1] if cum_b[-1] > 0 else np.full(n, np.nan),
    })


def skew(conns: Connections, mss: int = MSS, header_bytes: int = HEADER_BYTES
         ) -> dict[str, float]:
    """The two Figure 4 numbers (A19): the share of packets carried by the smallest
    ``n // 2`` connections and by the largest ``n // 10``. The paper reports < 0.10 and
    > 0.45 for its traces."""
    packets, _ = _ranked(conns, mss, header_bytes)
    n, total = len(packets), int(packets.sum())
    return {"bottom50_packet_share": int(packets[: n // 2].sum()) / total,
            "top10_packet_share": int(packets[n - n // 10:].sum()) / total}


# ------------------------------------------------------------------ building


def _whole(what: str, value, lo: int, hi: int, example: str) -> int:
    if (isinstance(value, bool) or not isinstance(value, int | np.integer)
            or not lo <= value <= hi):
        raise InputError(f"{what}={value!r}: use a whole number in [{lo:,}, {hi:,}], "
                         f"{example}")
    return int(value)


def build(name: str, *, connections: int = 20_000, seed: int = 0) -> Connections:
    """The first ``connections`` connections of workload ``name`` (W, I, S or D; see the
    module docstring), the same for the same ``seed``. Each workload draws from its own
    stream, keyed by the seed and the code."""
    code = name.upper() if isinstance(name, str) else None
    if code not in WORKLOADS:
        raise InputError(f"workload {name!r}: use one of {', '.join(WORKLOADS)} "
                         "(W World Cup-like, I IBM substitute, S SPECweb99-static, "
                         "D SPECweb99)")
    n = _whole("connections", connections, 1, MAX_CONNECTIONS, "e.g. connections=20000")
    seed = _whole("seed", seed, 0, 2**63 - 1, "e.g. seed=0")
    key = np.random.SeedSequence([seed, zlib.crc32(f"handoff/{code}".encode())])
    if code in _TRACES:
        trace_seed = int(key.generate_state(1)[0])
        offsets, sizes = trace_connections(_TRACES[code], n, trace_seed)
        dynamic = np.zeros(len(sizes), dtype=bool)
    else:
        share = DYNAMIC_SHARE if code == "D" else 0.0
        offsets, sizes, dynamic = specweb99_connections(n, np.random.default_rng(key), share)
    clients, kbps = _CLIENTS[code]
    return Connections(code, WORKLOADS[code], offsets, sizes, dynamic, clients, kbps)


@dataclass(frozen=True)
class Replayed:
    """What :func:`replay` read: requests parsed, lines or records skipped as malformed
    (with the first problems), requests kept (GET, status 200, known size) and the
    connections they made."""

    path: str
    format: str
    records: int
    skipped: int
    kept: int
    connections: int
    problems: tuple[str, ...]

    def summary(self) -> str:
        text = (f"{self.path} ({self.format}): {self.records:,} requests read, "
                f"{self.skipped:,} malformed lines or records skipped, {self.kept:,} static "
                f"GETs kept in {self.connections:,} connections")
        return text + "".join(f"\n  {p}" for p in self.problems)


def replay(path, connections: int = MAX_CONNECTIONS, window_s: float = WINDOW_S
           ) -> tuple[Connections, Replayed]:
    """A real log as W's connections: any WC98 or CLF file the trace readers accept
    (:func:`offloadlab.workload.traces.read_trace`). As the paper's replayer: GETs with
    status 200 (and a known size) only, a client's request at most ``window_s`` after
    its previous one on the same connection; the first ``connections`` connections,
    each with its requests in time order. Malformed lines are skipped and counted."""
    n = _whole("connections", connections, 1, MAX_CONNECTIONS, "e.g. connections=20000")
    reader = read_trace(path)
    df = reader.table()
    report = reader.report
    keep = ((df["method"] == "GET").to_numpy() & (df["status"].to_numpy() == 200)
            & (df["size_bytes"].to_numpy() >= 0))
    gets = df.loc[keep, ["time_s", "client", "size_bytes"]]
    if gets.empty:
        raise InputError(f"{path}: no GET with status 200 and a known size among "
                         f"{report.records:,} requests read ({report.skipped:,} lines "
                         "skipped); the replayer needs a log of static requests")
    # A log written at completion is not quite in time order; the grouping needs it.
    gets = gets.sort_values("time_s", kind="stable").reset_index(drop=True)
    grouped = next(assign_connections([gets], window_s))
    conn = grouped["conn_id"].to_numpy()
    first = conn < n
    conn, sizes = conn[first], grouped["size_bytes"].to_numpy()[first]
    order = np.argsort(conn, kind="stable")  # rows are in time order: stable keeps it
    count = int(conn.max()) + 1
    offsets = np.concatenate(([0], np.cumsum(np.bincount(conn, minlength=count))))
    clients, kbps = _CLIENTS["W"]
    name = str(path)
    work = Connections("W", f"the log {name}, GET 200 only, {window_s:g} s persistent "
                       "connections", offsets, sizes[order], np.zeros(len(sizes), bool),
                       clients, kbps)
    return work, Replayed(name, report.format, report.records, report.skipped,
                          int(keep.sum()), count, tuple(report.errors[:3]))


def _static_gets(spec: SynthSpec, seed: int, limit: int) -> Iterator[pd.DataFrame]:
    """The trace's GETs with status 200, block by block (drawn lazily up to ``limit``)."""
    for df in synthetic_chunks(limit, seed, spec):
        keep = (df["method"] == "GET").to_numpy() & (df["status"].to_numpy() == 200)
        yield df.loc[keep, ["time_s", "client", "size_bytes"]].reset_index(drop=True)


def trace_connections(spec: SynthSpec, n: int, seed: int, window_s: float = WINDOW_S
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` connections of the synthetic trace (``spec``, ``seed``): its GETs
    with status 200, a client's requests at most ``window_s`` apart sharing a
    connection, the trace ending ``window_s`` after the n-th connection opens (module
    docstring). Returns CSR ``offsets`` and the ``sizes`` in connection, then time,
    order."""
    n = _whole("n", n, 1, MAX_CONNECTIONS, "e.g. n=20000")
    conn_parts, time_parts, size_parts = [], [], []
    end_s = None
    # The grouping carries its state from block to block, so the trace is drawn only as
    # far as it is needed. The limit only stops a spec that never opens n connections;
    # a whole number of blocks keeps the trace the same whatever n is.
    limit = -(-n * 10_000 // BLOCK) * BLOCK
    for df in assign_connections(_static_gets(spec, seed, limit), window_s):
        if not len(df):
            continue
        conn, t = df["conn_id"].to_numpy(), df["time_s"].to_numpy()
        conn_parts.append(conn)
        time_parts.append(t)
        size_parts.append(df["size_bytes"].to_numpy())
        if end_s is None and conn.max() >= n - 1:
            # ids are given in order of first request: the first row with id n - 1
            # is when the n-th connection opens.
            end_s = float(t[np.argmax(conn == n - 1)]) + window_s
        if end_s is not None and t[-1] > end_s:
            break
    if end_s is None:
        raise RunError(f"the synthetic trace gave fewer than {n:,} connections in "
                       f"{limit:,} requests")
    conn, t = np.concatenate(conn_parts), np.concatenate(time_parts)
    sizes = np.concatenate(size_parts).astype(np.int64)
    keep = (conn < n) & (t <= end_s)
    conn, sizes = conn[keep], sizes[keep]
    order = np.argsort(conn, kind="stable")  # rows are in time order: stable keeps it
    offsets = np.concatenate(([0], np.cumsum(np.bincount(conn, minlength=n))))
    return offsets, sizes[order]


def specweb99_sizes(rng: np.random.Generator, n: int, spec: SpecWeb99Spec = SPECWEB99
                    ) -> np.ndarray:
    """``n`` SPECweb99 response sizes (int64 bytes): a class by ``spec.class_mix``, a file
    of the class by Zipf(``spec.file_alpha``) over :data:`SPECWEB99_FILE_RANKS`, and
    that file's size, :data:`SPECWEB99_SIZES` (class c file j: (j + 1)·102.4·10^c
    bytes, truncated)."""
    file_p = zipf_probabilities(9, spec.file_alpha)[np.asarray(SPECWEB99_FILE_RANKS) - 1]
    cls = rng.choice(4, size=n, p=np.asarray(spec.class_mix))
    file = rng.choice(9, size=n, p=file_p)
    return np.asarray(SPECWEB99_SIZES, dtype=np.int64)[cls, file]


def specweb99_connections(n: int, rng: np.random.Generator, dynamic_share: float = 0.0
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` SPECweb99-like connections: ``offsets``, ``sizes`` and ``dynamic`` flags.

    A connection is keep-alive with probability q and then carries
    :data:`KEEP_ALIVE_LENGTH` requests (mean m = 10), else one. The share of requests
    on keep-alive connections is q·m / (q·m + 1 - q); setting it to s =
    :data:`KEEP_ALIVE_SHARE` gives q = s / (s + (1 - s)·m) = 0.7 / 3.7 ≈ 0.19. Each
    request is dynamic with probability ``dynamic_share``; a dynamic response is sized
    like a static one (SPECweb99's dynamic GETs return a file of the set with a small
    generated part; the size rule is kept rather than guessed).
    """
    s, m = KEEP_ALIVE_SHARE, KEEP_ALIVE_LENGTH.mean
    keep_alive = rng.random(n) < s / (s + (1 - s) * m)
    lengths = np.ones(n, dtype=np.int64)
    lengths[keep_alive] = KEEP_ALIVE_LENGTH.sample(rng, int(keep_alive.sum()))
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    total = int(offsets[-1])
    sizes = specweb99_sizes(rng, total)
    dynamic = rng.random(total) < dynamic_share if dynamic_share > 0 else np.zeros(total, bool)
    return offsets, sizes, dynamic
