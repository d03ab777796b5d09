"""Web traces: read World Cup 98 binary logs and Common/Combined Log Format access logs as
a stream of request tables, write both formats, and generate a synthetic trace.

- :mod:`.wc98` — the World Cup 98 binary log: record layout, reader, writer.
- :mod:`.clf` — the Common and Combined Log Format: parser, writer.
- :mod:`.synthetic` — a synthetic web trace, as tables or written in either format.
- :mod:`.files` — plain or gzipped input, atomic and reproducible output.

- :mod:`.table` — what they share: the request table and the reader that yields it.

This module holds the registry of formats, :data:`FORMATS` (each a :class:`TraceFormat`:
its name, what it is, and its reader, writer and synthesiser), :func:`read_trace` (any
format) and :func:`assign_connections`, and re-exports the table, the formats' readers
and writers and the generator of :mod:`.synth` (``traces.read_wc98``,
``traces.synthetic``, ...). Those are imported when first used, and so are numpy and
pandas: the command line reads :data:`FORMATS` for its help, which must start without
them.

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

import importlib
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from offloadlab.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from offloadlab.workload.traces.table import TraceReader

# What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    "clf": ("read_clf", "write_clf"),
    "files": ("GZIP_ERRORS", "open_binary", "trace_paths"),
    "synth": ("SynthSpec", "synth_clf", "synth_wc98", "synthetic", "synthetic_chunks"),
    "table": ("COLUMNS", "DTYPES", "ReadReport", "TraceReader", "empty_table"),
    "wc98": ("DEFAULT_EPOCH_S", "head_problem", "read_wc98", "write_wc98"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "COLUMNS", "DEFAULT_EPOCH_S", "DTYPES", "FORMATS", "ReadReport", "SynthSpec",
    "TraceFormat", "TraceReader", "assign_connections", "empty_table", "read_clf",
    "read_trace", "read_wc98", "sniff_format", "synth_clf", "synth_wc98", "synthetic",
    "synthetic_chunks", "trace_format", "write_clf", "write_wc98",
]


def __getattr__(name: str):
    if name in _EXPORTS:  # a submodule not imported yet
        return importlib.import_module(f"{__name__}.{name}")
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


# ------------------------------------------------------------------ the formats


@dataclass(frozen=True)
class TraceFormat:
    """A trace format: its ``name`` (as ``--format`` takes it), what it is (``title``),
    and its functions: ``read_NAME`` and ``write_NAME`` of module NAME, ``synth_NAME``
    of :mod:`.synth`."""

    name: str
    title: str

    @property
    def read(self) -> Callable[..., TraceReader]:
        return __getattr__(f"read_{self.name}")

    @property
    def write(self) -> Callable[..., int]:
        return __getattr__(f"write_{self.name}")

    @property
    def synth(self) -> Callable[..., int]:
        return __getattr__(f"synth_{self.name}")


FORMATS = {f.name: f for f in (TraceFormat("wc98", "World Cup 98 binary log"),
                               TraceFormat("clf", "Common or Combined Log Format access log"))}


def trace_format(name: str, what: str = "trace format") -> TraceFormat:
    """The format called ``name``; ``what`` names the value in the error (e.g. a flag)."""
    if name not in FORMATS:
        raise InputError(f"{what} {name!r}: use {' or '.join(map(repr, FORMATS))}")
    return FORMATS[name]


# ------------------------------------------------------------------ any format

_WC98_NAME = re.compile(r"wc_day\d+_\d+(\.gz)?$|\.wc98(\.gz)?$")


def sniff_format(path) -> str:
    """"wc98" or "clf" (see :func:`detect_format`)."""
    return detect_format(path)[0]


def detect_format(path) -> tuple[str, str]:
    """"wc98" or "clf", and why: by the name (wc_dayX_Y[.gz], *.wc98[.gz]), else WC98
    when the first 4 KiB (decompressed) are plausible WC98 records
    (:func:`~offloadlab.workload.traces.wc98.head_problem`), else an access log. A NUL
    byte alone does not make a WC98 log: text logs can hold one."""
    from offloadlab.workload.traces.files import GZIP_ERRORS, open_binary, trace_paths
    from offloadlab.workload.traces.wc98 import head_problem

    p = trace_paths(path)[0]
    if _WC98_NAME.search(p.name):
        return "wc98", "its name is that of a WC98 log"
    with open_binary(p) as f:
        try:
            head = f.read(4096)
        except GZIP_ERRORS:
            head = b""
    problem = head_problem(head)
    if problem is None:
        return "wc98", f"its first {len(head) // 20} records are valid WC98 records"
    return "clf", f"it does not start with WC98 records ({problem})"


def read_trace(path, *, format: str | None = None, **options) -> TraceReader:
    """Open a trace of any format (``format`` a name of :data:`FORMATS`, else sniffed);
    ``options`` go to the format's reader."""
    fmt, why = (format, "") if format else detect_format(path)
    reader = trace_format(fmt).read(path, **options)
    reader.assumed = why
    return reader


# ------------------------------------------------------------------ connections


def assign_connections(tables: Iterable[pd.DataFrame], window_s: float = 15.0
                       ) -> Iterator[pd.DataFrame]:
    """Derive ``conn_id`` for traces without one, as the trace replayer of reference 004
    §5 does: a client's request that comes at most ``window_s`` after its previous
    request rides the same persistent connection, a later one opens a new connection.
    Rows must be in time order (as the logs are). Ids count from 0 in order of each
    connection's first request; the state carried between chunks is one entry per client.
    """
    import numpy as np
    import pandas as pd

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
