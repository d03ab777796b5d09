"""Trace replay: a trace's requests as a file set and an open-loop request stream.

:func:`replay` reads a trace once, chunk by chunk (any reader of
:mod:`~offloadlab.workload.traces`, or request tables of your own), and builds

- a **file set** (:func:`~offloadlab.workload.fileset.explicit`): one file per object the
  kept requests name, as large as the largest ``size_bytes`` the trace saw for it,
  ranked and weighted by its request count; the manifest's ``object`` column gives the
  trace's name for each file;
- a **stream** (:class:`~offloadlab.workload.stream_format.Stream`, open loop): one row
  per kept request, in trace order, at the trace's time counted from the first kept
  request and divided by ``speed``, on the trace's connections or on those
  :func:`~offloadlab.workload.traces.assign_connections` derives.

``offload load`` replays the pair against a server of the file set::

    r = replay(traces.read_trace("wc_day46_1.gz"), speed=2, limit=100_000)
    r.write("wc46")      # files, manifest.csv/.parquet, fileset.json and stream.parquet
    print(r.report.summary())

What is kept
    By default GET and HEAD requests with status 200: the static requests whose bodies
    a file can stand for, as seed 004's replayer sends (reference 004 §5: "static
    only"; it suggests keeping GETs with status 200). ``all_requests`` keeps every
    request; each is then replayed as a request for its object's file (the trace's
    method and status are not reproduced: the load generator sends one method per run).
    ``start_s``/``duration_s`` keep the requests whose trace time (seconds since the
    trace's first record) lies in [start_s, start_s + duration_s); ``limit`` keeps the
    first N requests that pass the other filters, and reading stops there (dropping the
    requests of objects of unknown size, below, comes after the limit).

Files
    Object ``i`` (numbered 0, 1, ... in order of first appearance among the kept
    requests) is ``o/<i // 1000>/<i><ext>``, e.g. ``o/000/000017.gif``: at most 1000 files
    per folder, digits padded to a common width, and the extension of the object's last
    path segment (query and fragment removed) if it is 1-8 letters or digits, lowercased,
    else ``.bin``. No part of the trace's object text enters a path beyond that
    extension, so any object (a WC98 id, a URL with a query, a scanner's junk) gives a
    safe path, and two objects never share one. Sizes: the largest ``size_bytes`` of the
    object's kept requests. An object none of whose kept requests has a size (-1: a
    304, a HEAD, CLF's ``-``) is dropped with its requests, counted, unless
    ``unknown_size`` gives it a size. Content is keyed by ``seed`` and the file id, as for
    every set.

Stream
    ``time_s`` = (trace time - trace time of the earliest kept request) / ``speed``;
    ``speed=2`` replays twice as fast. Traces have 1 s resolution, so requests of one
    second go out together. Rows stay in trace order; a log not sorted by time (a server
    logging at completion) is sorted stably by time. ``client`` is the trace's client.
    ``conn_id``: with ``window_s`` a number, the trace's own connection ids if its
    requests carry them (>= 0), else a client's request at most ``window_s`` after its
    previous kept request shares its connection (reference 004's 15 s; ids renumbered
    0, 1, ... in order of first appearance); with ``window_s=None`` every request has its
    own connection (HTTP/1.0). ``keep_alive`` is false exactly on each connection's last
    request, so a connection cut by a filter or the limit simply ends earlier.

Memory
    The table of objects is O(objects) and the trace is read in chunks; the stream,
    like every :class:`Stream`, is held in memory (about 160 bytes per kept request at
    the peak, while it is built and checked), so bound a long trace with ``limit`` or a
    window. With a window, reading stops at the first chunk whose requests all lie at or
    after its end: a trace is taken to be in time order up to within a chunk.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.errors import InputError
from offloadlab.workload import fileset as fs_mod
from offloadlab.workload import traces
from offloadlab.workload.checks import MAX_FILE_BYTES
from offloadlab.workload.objects import ObjectTable
from offloadlab.workload.specs import ExplicitSpec
from offloadlab.workload.stream_args import number, stream_meta
from offloadlab.workload.stream_format import Stream

__all__ = ["REPLAYED_METHODS", "REPLAYED_STATUS", "STREAM_FILE", "Replay", "ReplayReport",
           "object_paths", "replay"]

REPLAYED_METHODS = ("GET", "HEAD")
REPLAYED_STATUS = 200
STREAM_FILE = "stream.parquet"
DIR_FILES = 1000  # files per folder under o/
_NEEDED = ("time_s", "client", "object", "size_bytes", "status", "method", "conn_id")


@dataclass
class ReplayReport:
    """What :func:`replay` kept and dropped. Requests: ``read`` (rows of the trace looked
    at), ``not_replayed`` (not GET/HEAD with status 200; 0 with ``all_requests``),
    ``outside_window``, ``unknown_size`` (dropped: their object's size is unknown),
    ``kept``. ``stopped_at_limit``: reading stopped after ``limit`` kept requests (the
    trace may hold more). Objects: ``objects`` (files in the set),
    ``objects_unknown_size`` (dropped, or given ``unknown_size``). ``reordered``: rows
    moved to sort the stream by time. ``trace_span_s`` and ``span_s``: from the first to
    the last kept request, in the trace and in the stream (divided by ``speed``).
    ``start_epoch_s``: Unix time of the stream's time 0 if the trace gives one.
    ``trace_skipped``: records or lines the trace reader skipped as malformed.
    ``unknown_size_bytes``: the size given to objects of unknown size (None: dropped).

    Without a limit, ``read = not_replayed + outside_window + unknown_size + kept``;
    the limit leaves the rest of the last chunk read but uncounted."""

    source: str
    speed: float
    read: int = 0
    not_replayed: int = 0
    outside_window: int = 0
    unknown_size: int = 0
    kept: int = 0
    stopped_at_limit: bool = False
    objects: int = 0
    objects_unknown_size: int = 0
    connections: int = 0
    reordered: int = 0
    trace_span_s: float = 0.0
    span_s: float = 0.0
    start_epoch_s: float | None = None
    trace_skipped: int = 0
    unknown_size_bytes: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        text = (f"{self.source}: {self.read:,} requests read, {self.kept:,} kept; "
                f"dropped {self.not_replayed:,} not GET/HEAD with status 200, "
                f"{self.outside_window:,} outside the window")
        if self.unknown_size_bytes is None:
            text += (f", {self.unknown_size:,} of {self.objects_unknown_size:,} objects of "
                     "unknown size")
        if self.stopped_at_limit:
            text += "; stopped at the limit"
        if self.unknown_size_bytes is not None and self.objects_unknown_size:
            text += (f"; {self.objects_unknown_size:,} objects of unknown size given "
                     f"{self.unknown_size_bytes:,} bytes")
        return (f"{text}. {self.objects:,} objects, {self.connections:,} connections, "
                f"{self.trace_span_s:,.6g} s of trace in {self.span_s:,.6g} s "
                f"(speed {self.speed:g})")


@dataclass(frozen=True, eq=False)
class Replay:
    """A trace made replayable: the file set, the stream over it, and the report."""

    fileset: fs_mod.FileSet
    stream: Stream
    report: ReplayReport

    def write(self, out_dir: str | Path, progress: fs_mod.Progress | None = None, *,
              overwrite: bool = False, create_large: bool = False) -> fs_mod.Materialised:
        """Materialise the file set in ``out_dir`` (see
        :func:`~offloadlab.workload.fileset.materialise` for ``overwrite`` and
        ``create_large``) and write the stream to ``out_dir/stream.parquet``."""
        written = fs_mod.materialise(self.fileset, out_dir, progress, overwrite=overwrite,
                                     create_large=create_large)
        self.stream.write(Path(out_dir) / STREAM_FILE)
        return written


def replay(trace, *, speed: float = 1.0, window_s: float | None = 15.0,
           all_requests: bool = False, limit: int | None = None,
           start_s: float | None = None, duration_s: float | None = None,
           unknown_size: int | None = None, seed: int = 0, name: str = "trace",
           source: str | None = None) -> Replay:
    """Build the file set and the open-loop stream of a trace (module docstring).

    ``trace`` is a path (read with :func:`~offloadlab.workload.traces.read_trace`), a
    reader, an iterable of request tables, or one table. ``speed`` > 0 divides the
    trace's times. ``window_s`` (seconds, or None for a connection per request) groups
    a client's requests into connections when the trace has none. ``all_requests``
    keeps every request, not only GET/HEAD with status 200. ``limit`` keeps the first N
    requests that pass the filters; ``start_s`` and ``duration_s`` keep a window of
    trace time. ``unknown_size`` (bytes) is the size of an object the trace never gave
    one for; None drops such objects and their requests. ``seed`` keys the files'
    content; ``name`` names the set; ``source`` (default: the path) is recorded.
    """
    speed = _positive("speed", speed)
    if window_s is not None and not (number("window_s", window_s) >= 0):
        raise InputError(f"window_s={window_s!r}: use a time >= 0 seconds, or None for one "
                         "connection per request")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | np.integer)
                              or limit < 1):
        raise InputError(f"limit={limit!r}: use a whole number of requests >= 1")
    lo = -math.inf if start_s is None else number("start_s", start_s)
    hi = math.inf if duration_s is None else (
        (0.0 if start_s is None else lo) + _positive("duration_s", duration_s))
    if unknown_size is not None and (
            isinstance(unknown_size, bool) or not isinstance(unknown_size, int | np.integer)
            or not 0 <= unknown_size <= MAX_FILE_BYTES):
        raise InputError(f"unknown_size={unknown_size!r}: use a whole number of bytes >= 0, "
                         "or None to drop objects of unknown size")
    if isinstance(trace, str | Path):
        source = str(trace) if source is None else source
        trace = traces.read_trace(trace)
    elif isinstance(trace, pd.DataFrame):
        trace = [trace]
    source = "trace" if source is None else str(source)
    spec = ExplicitSpec(name=name, seed=seed, source=source,
                        description="objects of a trace, sized as the trace saw them")
    report = ReplayReport(source=source, speed=speed, unknown_size_bytes=unknown_size)
    acc = _Accumulator()
    for df in _filtered(trace, report, all_requests, lo, hi):
        if limit is not None and report.kept + len(df) >= limit:
            df = df.iloc[: limit - report.kept]
            report.stopped_at_limit = True
        acc.add(df)
        report.kept += len(df)
        if report.stopped_at_limit:
            break
    report.trace_skipped = getattr(getattr(trace, "report", None), "skipped", 0)
    if report.kept == 0:
        raise InputError(f"{source}: no request to replay ({report.read:,} read, "
                         f"{report.not_replayed:,} not GET/HEAD with status 200, "
                         f"{report.outside_window:,} outside the window); widen the window "
                         "(start_s, duration_s) or keep every request (all_requests=True)")
    fileset, frame = acc.result(report, spec, unknown_size, window_s)
    times = frame["time_s"].to_numpy()
    report.trace_span_s = float(times[-1] - times[0])
    report.start_epoch_s = None if acc.epoch_s is None else acc.epoch_s + float(times[0])
    frame["time_s"] = (times - times[0]) / speed
    report.span_s = float(frame["time_s"].iloc[-1])
    report.connections = int(frame["conn_id"].max()) + 1
    params = {"source": source, "speed": speed, "window_s": window_s,
              "all_requests": bool(all_requests), "limit": limit, "start_s": start_s,
              "duration_s": duration_s, "unknown_size": unknown_size,
              "start_epoch_s": report.start_epoch_s,
              **ObjectTable.of(fileset.frame()).params}
    stream = Stream(frame, stream_meta("replay", seed, params, None))
    return Replay(fileset, stream, report)


# ------------------------------------------------------------------ reading and filtering


def _filtered(chunks: Iterable[pd.DataFrame], report: ReplayReport, all_requests: bool,
              lo: float, hi: float) -> Iterator[pd.DataFrame]:
    """The requests to replay, chunk by chunk (counted in ``report``)."""
    for df in chunks:
        if not isinstance(df, pd.DataFrame):
            raise InputError(f"{report.source}: a trace is read as request tables (pandas "
                             f"DataFrames), not {type(df).__name__}")
        if lacking := [c for c in _NEEDED if c not in df.columns]:
            raise InputError(f"{report.source}: the request table lacks column(s) "
                             f"{', '.join(lacking)}; a request table has {', '.join(_NEEDED)}")
        n = len(df)
        report.read += n
        if n == 0:
            continue
        keep = np.ones(n, dtype=bool)
        if not all_requests:
            keep = (df["method"].isin(REPLAYED_METHODS).to_numpy()
                    & (df["status"].to_numpy() == REPLAYED_STATUS))
            report.not_replayed += n - int(keep.sum())
        t = df["time_s"].to_numpy(dtype=float)
        if not np.isfinite(t).all():
            raise InputError(f"{report.source}: a request's time_s is not a finite number "
                             f"(row {report.read - n + int(np.argmax(~np.isfinite(t)))})")
        if lo > -math.inf or hi < math.inf:
            inside = (t >= lo) & (t < hi)
            report.outside_window += int((keep & ~inside).sum())
            keep &= inside
        out = df.loc[keep, list(_NEEDED)]
        out.attrs = dict(df.attrs)
        yield out.reset_index(drop=True)
        if t.min() >= hi:  # this chunk lies past the window: so does the rest
            return


# ------------------------------------------------------------------ objects and rows


class _Accumulator:
    """The kept requests (compact columns) and the table of objects: id by first
    appearance, largest size seen, request count."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.sizes = np.full(1024, -1, dtype=np.int64)
        self.counts = np.zeros(1024, dtype=np.int64)
        self.parts: dict[str, list[np.ndarray]] = {c: [] for c in
                                                   ("time_s", "object", "client", "conn_id")}
        self.epoch_s: float | None = None

    def add(self, df: pd.DataFrame) -> None:
        if self.epoch_s is None and df.attrs.get("epoch_s") is not None:
            self.epoch_s = float(df.attrs["epoch_s"])
        if not len(df):
            return
        codes, uniques = pd.factorize(df["object"])
        if (codes < 0).any():
            raise InputError("a request has no object (a missing value in column 'object')")
        ids = np.fromiter((self.ids.setdefault(str(u), len(self.ids)) for u in uniques),
                          dtype=np.int64, count=len(uniques))
        obj = ids[codes]
        n_obj = len(self.ids)
        if n_obj > len(self.sizes):
            grow = max(n_obj, 2 * len(self.sizes)) - len(self.sizes)
            self.sizes = np.concatenate([self.sizes, np.full(grow, -1, dtype=np.int64)])
            self.counts = np.concatenate([self.counts, np.zeros(grow, dtype=np.int64)])
        np.maximum.at(self.sizes, obj, df["size_bytes"].to_numpy(dtype=np.int64))
        self.counts[:n_obj] += np.bincount(obj, minlength=n_obj)
        self.parts["object"].append(obj)
        for c in ("time_s", "client", "conn_id"):
            self.parts[c].append(df[c].to_numpy())

    def result(self, report: ReplayReport, spec: ExplicitSpec, unknown_size: int | None,
               window_s: float | None) -> tuple[fs_mod.FileSet, pd.DataFrame]:
        n_obj = len(self.ids)
        sizes, counts = self.sizes[:n_obj].copy(), self.counts[:n_obj]
        objects = np.array(list(self.ids), dtype=object)
        col = {c: np.concatenate(p) for c, p in self.parts.items()}
        col["time_s"] = col["time_s"].astype(np.float64)
        col["client"] = col["client"].astype(np.int64)
        known = sizes >= 0
        report.objects_unknown_size = int((~known).sum())
        if unknown_size is not None:
            sizes[~known] = unknown_size
        elif not known.all():
            rows = known[col["object"]]
            report.unknown_size = int((~rows).sum())
            report.kept -= report.unknown_size
            if report.kept == 0:
                raise InputError(f"{report.source}: no kept request has an object of known "
                                 "size; give unknown objects a size (unknown_size=BYTES)")
            renumber = np.cumsum(known) - 1
            col = {c: v[rows] for c, v in col.items()}
            col["object"] = renumber[col["object"]]
            objects, sizes, counts = objects[known], sizes[known], counts[known]
        t = col["time_s"]
        if (np.diff(t) < 0).any():
            order = np.argsort(t, kind="stable")
            report.reordered = int((order != np.arange(len(order))).sum())
            col = {c: v[order] for c, v in col.items()}
        conn = _connections(col, window_s)
        n = len(conn)
        last = np.zeros(n, dtype=bool)
        _, from_end = np.unique(conn[::-1], return_index=True)
        last[n - 1 - from_end] = True
        paths = object_paths(objects)
        report.objects = len(paths)
        fileset = fs_mod.explicit(spec, sizes, counts, paths, {"object": objects.tolist()})
        frame = pd.DataFrame({
            "time_s": col["time_s"],
            "object": pd.Categorical.from_codes(col["object"], pd.Index(paths, dtype=object)),
            "size_bytes": sizes[col["object"]],
            "conn_id": conn,
            "keep_alive": ~last,
            "client": col["client"],
        })
        return fileset, frame


def _connections(col: dict[str, np.ndarray], window_s: float | None) -> np.ndarray:
    """Connection ids 0, 1, ... in order of first appearance: one per request
    (``window_s`` None), the trace's own, or derived from the clients and the window."""
    given = col["conn_id"]
    if window_s is None:
        return np.arange(len(given), dtype=np.int64)
    if (given >= 0).all():
        return _first_seen(given)
    if (given >= 0).any():
        raise InputError("the trace gives a connection id (conn_id >= 0) on some requests "
                         "and none (-1) on others; give one on every request, or none "
                         "(then they are derived from the clients and the window)")
    table = pd.DataFrame({"time_s": col["time_s"], "client": col["client"]})
    derived = next(traces.assign_connections([table], window_s))
    return derived["conn_id"].to_numpy(np.int64)


def _first_seen(ids: np.ndarray) -> np.ndarray:
    """Renumber ids 0, 1, 2, ... in order of first appearance."""
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


def object_paths(objects) -> tuple[str, ...]:
    """The file path of each object, in order: ``o/<i // 1000>/<i><ext>`` (module
    docstring), e.g. ``o/000/000017.gif`` for object 17 named ``/images/logo.GIF?v=2``."""
    names = pd.Series(list(objects), dtype=object).astype(str)
    n = len(names)
    last = names.str.replace(r"[?#].*$", "", regex=True).str.rsplit("/", n=1).str[-1]
    ext = last.str.extract(r"\.([A-Za-z0-9]{1,8})$", expand=False)
    ext = ("." + ext.str.lower()).where(ext.notna(), ".bin")
    width = max(6, len(str(n - 1)))
    dir_width = max(3, len(str((n - 1) // DIR_FILES)))
    return tuple(f"o/{i // DIR_FILES:0{dir_width}d}/{i:0{width}d}{e}"
                 for i, e in enumerate(ext.tolist()))


def _positive(what: str, value) -> float:
    x = number(what, value)
    if not x > 0:
        raise InputError(f"{what}={value!r}: use a number > 0" + (
            ", e.g. speed=2 (twice as fast)" if what == "speed" else ""))
    return x

