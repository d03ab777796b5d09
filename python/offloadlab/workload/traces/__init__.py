"""Web traces: read World Cup 98 binary logs and Common/Combined Log Format access logs as
a stream of request tables, write both formats, and generate a synthetic trace.

- :mod:`.wc98` — the World Cup 98 binary log: record layout, reader, writer.
- :mod:`.clf` — the Common and Combined Log Format: parser, writer.
- :mod:`.synthetic` — a synthetic web trace, as tables or written in either format.
- :mod:`.files` — plain or gzipped input, atomic and reproducible output.

This module holds what they share, the request table and the reader that yields it, and
:func:`read_trace` (either format) and :func:`assign_connections`. It re-exports the
formats' readers and writers and the generator of :mod:`.synth` (``traces.read_wc98``,
``traces.synthetic``, ...).

Request table
-------------
Every reader yields pandas DataFrames with exactly these columns, in this order (the
analysis in ``offloadlab.workload`` consumes this schema)::

    time_s      float64  seconds since the first record read (file order; negative if a
                         log is not sorted by time, e.g. a server logging at completion)
    client      int64    WC98 clientID; for CLF an IPv4 host's 32-bit value (a.b.c.d ->
                         a<<24|b<<16|c<<8|d), any other host (IPv6, a name) 2**32 plus a
                         62-bit BLAKE2b hash of the text: stable across files and runs
    object      str      WC98 objectID in decimal; for CLF the request target (the path)
    size_bytes  int64    response bytes; -1 when unknown (CLF "-", WC98 0xffffffff)
    status      int16    HTTP status; -1 for WC98's OTHER_CODES (a code outside its table)
    method      str      "GET", "HEAD", ...; WC98's OTHER_METHODS is "OTHER"; a CLF
                         request line that is not "METHOD target [HTTP/x.y]" gives "-"
    conn_id     int64    connection id; -1 when the format has none (WC98 and CLF have
                         none; :func:`assign_connections` derives them)

``df.attrs["epoch_s"]`` (and ``reader.report.epoch_s``) is the Unix time (UTC) of the first
record, so ``epoch_s + time_s`` is the absolute time. Both formats have 1 s resolution.
:func:`empty_table` is the schema with no rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from offloadlab.errors import InputError
from offloadlab.workload.traces.files import GZIP_ERRORS, open_binary, trace_paths

COLUMNS = ("time_s", "client", "object", "size_bytes", "status", "method", "conn_id")
# pandas' own string dtype: pyarrow-backed "str" from pandas 3 on, object before.
_STR = pd.Series([""], dtype=str).dtype
DTYPES = {"time_s": np.dtype(np.float64), "client": np.dtype(np.int64), "object": _STR,
          "size_bytes": np.dtype(np.int64), "status": np.dtype(np.int16), "method": _STR,
          "conn_id": np.dtype(np.int64)}
MAX_EXAMPLES = 10  # errors kept in a ReadReport


def empty_table(extra: Sequence[str] = ()) -> pd.DataFrame:
    """The request table with no rows (and the WC98 ``extra`` columns if asked)."""
    cols = {c: pd.Series([], dtype=DTYPES[c]) for c in COLUMNS}
    for c in extra:
        cols[c] = pd.Series([], dtype=np.int16 if c == "server" else _STR)
    df = pd.DataFrame(cols)
    df.attrs["epoch_s"] = None
    return df


# ------------------------------------------------------------------ building a table


def _strings(values) -> pd.Series | np.ndarray:
    """A pyarrow string array, or a list of str, as pandas' default string column."""
    if isinstance(values, pa.Array | pa.ChunkedArray):
        if isinstance(_STR, pd.StringDtype):
            return pd.Series(values, dtype=_STR)
        return pd.Series(values.to_numpy(zero_copy_only=False), dtype=object)
    return pd.Series(values, dtype=_STR)


def _from_codes(codes: np.ndarray, names: Sequence[str]) -> pd.Series:
    """Strings ``names[codes]``, built by pyarrow (a dictionary cast, no Python loop)."""
    dictionary = pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)),
                                                pa.array(list(names), pa.string()))
    return _strings(pc.cast(dictionary, pa.string()))


def _frame(cols: dict) -> pd.DataFrame:
    return pd.DataFrame(cols, copy=False)


def _joined(frames: list[pd.DataFrame], epoch_s: float | None) -> pd.DataFrame:
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    df.attrs["epoch_s"] = epoch_s
    return df


# ------------------------------------------------------------------ checking a table to write


def _missing(df: pd.DataFrame, where: str) -> None:
    if lacking := [c for c in COLUMNS if c not in df.columns]:
        raise InputError(f"{where}: the table lacks column(s) {', '.join(lacking)}; a request "
                         f"table has {', '.join(COLUMNS)}")


def _refuse(where: str, row_base: int, bad: np.ndarray, column: str, values, fix: str):
    """Raise InputError naming the first ``bad`` row, if there is one."""
    if not bad.any():
        return
    i = int(np.flatnonzero(bad)[0])
    value = values[i].item() if isinstance(values[i], np.generic) else values[i]
    raise InputError(f"{where}: row {row_base + i}: {column} {value!r} {fix}")


# ------------------------------------------------------------------ the reader and its report


@dataclass
class ReadReport:
    """What a read did: rows yielded, records or lines skipped, the first errors.

    ``errors`` holds up to ``max_examples`` messages, each starting with where the
    problem is (``file:line`` for CLF, ``file: byte offset N`` for WC98). ``done`` turns
    true when the last file has been read to its end.
    """

    format: str
    paths: tuple[str, ...]
    records: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    epoch_s: float | None = None
    done: bool = False
    max_examples: int = MAX_EXAMPLES

    def skip(self, count: int, examples: Iterable[str] = ()) -> None:
        self.skipped += count
        self.note(examples)

    def note(self, messages: Iterable[str]) -> None:
        for m in messages:
            if len(self.errors) >= self.max_examples:
                break
            self.errors.append(m)

    @property
    def room(self) -> int:
        """How many more example messages the report keeps."""
        return self.max_examples - len(self.errors)

    def summary(self) -> str:
        text = f"{self.format}: {self.records:,} requests read, {self.skipped:,} skipped"
        if self.errors:
            text += "; first problems:\n  " + "\n  ".join(self.errors)
        return text


class TraceReader:
    """An iterable of request tables (see the module docstring), one per chunk.

    Iterating reads the file(s) from the start, in constant memory, and yields at least
    one (possibly empty) DataFrame; ``report`` describes the latest iteration.
    ``table()`` reads everything into one DataFrame (for files that fit in memory).
    ``chunks(report)`` yields the tables of one read; its ``extra`` names the columns
    beyond :data:`COLUMNS` it adds.
    """

    def __init__(self, fmt: str, paths: tuple[Path, ...],
                 chunks: Callable[[ReadReport], Iterator[pd.DataFrame]], max_examples: int):
        self.format = fmt
        self.paths = paths
        self._chunks = chunks
        self._max_examples = max_examples
        self.report = self._new_report()

    def _new_report(self) -> ReadReport:
        return ReadReport(self.format, tuple(map(str, self.paths)),
                          max_examples=self._max_examples)

    def __iter__(self) -> Iterator[pd.DataFrame]:
        self.report = report = self._new_report()
        return self._run(report)

    def _run(self, report: ReadReport) -> Iterator[pd.DataFrame]:
        yielded = False
        for df in self._chunks(report):
            report.records += len(df)
            df.attrs["epoch_s"] = report.epoch_s
            yielded = True
            yield df
        report.done = True
        if not yielded:
            yield empty_table(extra=self._chunks.extra)

    def table(self) -> pd.DataFrame:
        """All requests in one DataFrame, with ``attrs["epoch_s"]``."""
        return _joined(list(self), self.report.epoch_s)


# The formats build on the names above, so they are imported only now.
from offloadlab.workload.traces.clf import read_clf, write_clf  # noqa: E402
from offloadlab.workload.traces.synth import (  # noqa: E402
    SynthSpec,
    synth_clf,
    synth_wc98,
    synthetic,
    synthetic_chunks,
)
from offloadlab.workload.traces.wc98 import DEFAULT_EPOCH_S, read_wc98, write_wc98  # noqa: E402

__all__ = [
    "COLUMNS", "DEFAULT_EPOCH_S", "DTYPES", "ReadReport", "SynthSpec", "TraceReader",
    "assign_connections", "empty_table", "read_clf", "read_trace", "read_wc98", "sniff_format",
    "synth_clf", "synth_wc98", "synthetic", "synthetic_chunks", "write_clf", "write_wc98",
]

# ------------------------------------------------------------------ either format

_WC98_NAME = re.compile(r"wc_day\d+_\d+(\.gz)?$|\.wc98(\.gz)?$")


def sniff_format(path) -> str:
    """"wc98" or "clf": by the name (wc_dayX_Y[.gz], *.wc98[.gz]), else by the first
    bytes (WC98 records are binary and hold NUL bytes; logs are text)."""
    p = trace_paths(path)[0]
    if _WC98_NAME.search(p.name):
        return "wc98"
    with open_binary(p) as f:
        try:
            head = f.read(4096)
        except GZIP_ERRORS:
            head = b""
    return "wc98" if b"\0" in head else "clf"


def read_trace(path, *, format: str | None = None, **options) -> TraceReader:
    """Open a trace of either format (``format`` "wc98" or "clf", else sniffed);
    ``options`` go to :func:`read_wc98` or :func:`read_clf`."""
    fmt = format or sniff_format(path)
    readers = {"wc98": read_wc98, "clf": read_clf}
    if fmt not in readers:
        raise InputError(f"trace format {fmt!r}: use 'wc98' or 'clf'")
    return readers[fmt](path, **options)


# ------------------------------------------------------------------ connections


def assign_connections(tables: Iterable[pd.DataFrame], window_s: float = 15.0
                       ) -> Iterator[pd.DataFrame]:
    """Derive ``conn_id`` for traces without one, as the trace replayer of reference 004
    §5 does: a client's request that comes at most ``window_s`` after its previous
    request rides the same persistent connection, a later one opens a new connection.
    Rows must be in time order (as the logs are). Ids count from 0 in order of each
    connection's first request; the state carried between chunks is one entry per client.
    """
    if not (window_s >= 0 and math.isfinite(window_s)):
        raise InputError(f"window_s={window_s!r}: use a finite time >= 0 seconds")
    last_t = pd.Series(dtype=np.float64)  # per client: time of its latest request
    last_c = pd.Series(dtype=np.int64)  # per client: its current connection
    next_id = 0
    for df in tables:
        n = len(df)
        if n == 0:
            yield df
            continue
        client, t = df["client"].to_numpy(), df["time_s"].to_numpy()
        order = np.lexsort((np.arange(n), client))  # by client, then row (= time) order
        cs, ts = client[order], t[order]
        start = np.ones(n, dtype=bool)
        start[1:] = cs[1:] != cs[:-1]
        starts = np.flatnonzero(start)
        prev = np.empty(n)
        prev[1:] = ts[:-1]
        prev[starts] = last_t.reindex(cs[starts]).to_numpy()  # NaN: a client not seen yet
        new = ~(ts - prev <= window_s)
        new_rows = np.zeros(n, dtype=bool)
        new_rows[order] = new
        ids = np.full(n, -1, dtype=np.int64)
        ids[new_rows] = next_id + np.arange(np.count_nonzero(new_rows))
        next_id += int(np.count_nonzero(new_rows))
        sorted_ids = ids[order]
        carry = starts[~new[starts]]
        sorted_ids[carry] = last_c.reindex(cs[carry]).to_numpy()
        fill = np.where(sorted_ids >= 0, np.arange(n), 0)  # every client run starts >= 0
        sorted_ids = sorted_ids[np.maximum.accumulate(fill)]
        conn = np.empty(n, dtype=np.int64)
        conn[order] = sorted_ids
        ends = np.r_[starts[1:] - 1, n - 1]
        last_t = pd.Series(ts[ends], index=cs[ends]).combine_first(last_t)
        last_c = pd.Series(sorted_ids[ends], index=cs[ends]).combine_first(last_c).astype(
            np.int64)
        out = df.copy()
        out["conn_id"] = conn
        yield out
