"""Web traces: read World Cup 98 binary logs and Common/Combined Log Format access logs as
a stream of request tables, write both formats, and generate a synthetic trace.

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

World Cup 98 binary log (ITA, ita.ee.lbl.gov/html/contrib/WorldCup.html)
---------------------------------------------------------------------------
1.35 billion requests to www.france98.com, 30 Apr - 26 Jul 1998, one file per day or
part of a day (``wc_dayX_Y.gz``; days 1-4 are empty files; part Y holds 7 million requests
except the last). Each request is a fixed 20-byte big-endian (network order) record::

    offset size field      meaning
     0     u32  timestamp  seconds since the Epoch, GMT (local time in Paris was +0200)
     4     u32  clientID   one integer per client IP address, the same in every file
     8     u32  objectID   one integer per URL, the same in every file
    12     u32  size       response bytes; 0xffffffff (NO_SIZE) when the log had "-"
    16     u8   method     0 GET, 1 HEAD, 2 POST, 3 PUT, 4 DELETE, 5 TRACE, 6 OPTIONS,
                           7 CONNECT, 8 OTHER_METHODS
    17     u8   status     high 2 bits: HTTP version of the request (0 HTTP/0.9,
                           1 HTTP/1.0, 2 HTTP/1.1, 3 other); low 6 bits: index into
                           100 101 200 201 202 203 204 205 206 300 301 302 303 304 305
                           400 401 ... 415 500 501 ... 505 (0..36), 37 OTHER_CODES
    18     u8   type       file type from the URL: 0 HTML, 1 IMAGE, 2 AUDIO, 3 VIDEO,
                           4 JAVA, 5 FORMATTED, 6 DYNAMIC ('?' in the URL), 7 TEXT,
                           8 COMPRESSED, 9 PROGRAMS, 10 DIRECTORY (ends in '/'), 11 ICL,
                           12 OTHER_TYPES
    19     u8   server     high 3 bits: region (0 Santa Clara, 1 Plano, 2 Herndon,
                           3 Paris); low 5 bits: the server at that site

(The codes are those of the ITA tools' ``definitions.h`` and README.) A record whose
method, status code or type is outside these tables cannot come from the tools and is
skipped and counted, with its byte offset. ``wc98_fields=True`` adds ``file_type``,
``http_version``, ``region`` (strings) and ``server`` (the whole byte) to the table.

Common and Combined Log Format (Apache ``common``/``combined``, nginx ``combined``)
-------------------------------------------------------------------------------------
::

    host ident authuser [dd/Mon/yyyy:HH:MM:SS +zzzz] "request" status bytes
    ... "referer" "user-agent"                                          (combined)

``bytes`` is a count or ``-`` (Apache's ``%b`` for no body). Anything after ``bytes``
(combined's two fields, or extra fields such as a request time) is accepted and ignored.
Inside the quoted request ``\\"`` and ``\\\\`` are unescaped. A line that does not
match is skipped and counted with its line number, or with ``strict=True`` stops the read
with an :class:`~offloadlab.errors.InputError`.

Synthetic trace
---------------
:func:`synthetic` draws a web trace from :class:`SynthSpec`: Zipf object popularity,
object sizes from a lognormal body spliced to a Pareto tail (SURGE's parameters),
Poisson or bursty (Cox: a lognormal rate multiplier per interval) arrivals, and a client
population with Zipf activity. The draw is blockwise and so independent of how it is
written: ``synth_wc98`` writes, and ``read_wc98`` reads back, exactly ``synthetic``.
"""

from __future__ import annotations

import calendar
import gzip
import hashlib
import math
import os
import re
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from offloadlab.errors import InputError
from offloadlab.results import write_atomic

# ------------------------------------------------------------------ request table schema

COLUMNS = ("time_s", "client", "object", "size_bytes", "status", "method", "conn_id")
# pandas' own string dtype: pyarrow-backed "str" from pandas 3 on, object before.
_STR = pd.Series([""], dtype=str).dtype
DTYPES = {"time_s": np.dtype(np.float64), "client": np.dtype(np.int64), "object": _STR,
          "size_bytes": np.dtype(np.int64), "status": np.dtype(np.int16), "method": _STR,
          "conn_id": np.dtype(np.int64)}
WC98_EXTRA = ("file_type", "http_version", "region", "server")
MAX_EXAMPLES = 10  # errors kept in a ReadReport

# ------------------------------------------------------------------ WC98 binary format

WC98_RECORD = np.dtype([("timestamp", ">u4"), ("client", ">u4"), ("object", ">u4"),
                        ("size", ">u4"), ("method", "u1"), ("status", "u1"),
                        ("type", "u1"), ("server", "u1")])
assert WC98_RECORD.itemsize == 20
NO_SIZE = 0xFFFFFFFF
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "OPTIONS", "CONNECT", "OTHER")
STATUS_CODES = (100, 101, 200, 201, 202, 203, 204, 205, 206,
                300, 301, 302, 303, 304, 305,
                400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414,
                415, 500, 501, 502, 503, 504, 505)
OTHER_CODES = len(STATUS_CODES)  # 37
HTTP_VERSIONS = ("HTTP/0.9", "HTTP/1.0", "HTTP/1.1", "HTTP/other")
FILE_TYPES = ("HTML", "IMAGE", "AUDIO", "VIDEO", "JAVA", "FORMATTED", "DYNAMIC", "TEXT",
              "COMPRESSED", "PROGRAMS", "DIRECTORY", "ICL", "OTHER")
REGIONS = ("Santa Clara", "Plano", "Herndon", "Paris", "region4", "region5", "region6",
           "region7")
_STATUS_OF_CODE = np.array([*STATUS_CODES, -1], dtype=np.int16)
_CODE_OF_STATUS = {s: i for i, s in enumerate(STATUS_CODES)} | {-1: OTHER_CODES}
# 1998-06-10 00:00 in Paris (+0200): the first second of day 46, a busy day of the logs.
DEFAULT_EPOCH_S = 897_429_600


# ------------------------------------------------------------------ the read report


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
            yield empty_table(extra=self._extra_columns())

    def _extra_columns(self) -> tuple[str, ...]:
        return getattr(self._chunks, "extra", ())

    def table(self) -> pd.DataFrame:
        """All requests in one DataFrame, with ``attrs["epoch_s"]``."""
        frames = list(self)
        df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        df.attrs["epoch_s"] = self.report.epoch_s
        return df


def empty_table(extra: Sequence[str] = ()) -> pd.DataFrame:
    """The request table with no rows (and the WC98 ``extra`` columns if asked)."""
    cols = {c: pd.Series([], dtype=DTYPES[c]) for c in COLUMNS}
    for c in extra:
        cols[c] = pd.Series([], dtype=np.int16 if c == "server" else _STR)
    df = pd.DataFrame(cols)
    df.attrs["epoch_s"] = None
    return df


# ------------------------------------------------------------------ shared helpers


def _paths(path) -> tuple[Path, ...]:
    """One path or a sequence of them (read in the order given, e.g. wc_day46_1..8.gz)."""
    items = [path] if isinstance(path, str | os.PathLike) else list(path)
    if not items:
        raise InputError("no trace file given; pass a path or a list of paths")
    out = tuple(Path(p) for p in items)
    for p in out:
        if not p.is_file():
            what = "is a directory, not a trace file" if p.is_dir() else "no such file"
            raise InputError(f"{p}: {what}; check the path (a day of the WC98 logs is several "
                             "files: pass them as a list, e.g. wc_day46_1.gz ... wc_day46_8.gz)")
    return out


def _positive(name: str, value: int) -> int:
    if not isinstance(value, int | np.integer) or value < 1:
        raise InputError(f"{name}={value!r}: use a whole number >= 1")
    return int(value)


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _open_binary(path: Path):
    """The file's bytes, decompressed if it is a gzip stream (told by its magic bytes)."""
    return gzip.open(path, "rb") if _is_gzip(path) else open(path, "rb")


_GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def _gzip_error(path: Path, where: str, exc: Exception) -> str:
    return (f"{path}: the gzip stream is corrupt or truncated {where} ({exc}); download "
            "the file again (compare its size with the archive's)")


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


# ------------------------------------------------------------------ WC98 reader


def wc98_table(records: np.ndarray, epoch_s: float | None = None, *,
               wc98_fields: bool = False) -> pd.DataFrame:
    """The request table of WC98 records already in memory (a ``WC98_RECORD`` array, e.g.
    ``np.fromfile(path, WC98_RECORD)``). Raises InputError on a record the tools cannot
    have written; :func:`read_wc98` streams a file instead and skips such records."""
    report = ReadReport("wc98", ("<memory>",), max_examples=1)
    df = _decode_wc98(records, "<memory>", 0, report, wc98_fields, epoch_s)
    if report.skipped:
        raise InputError(report.errors[0] + "; this is not a WC98 log, or it is corrupt")
    df.attrs["epoch_s"] = report.epoch_s
    return df


def _bad_record_text(path, offset: int, rec) -> str:
    parts = []
    if rec["method"] > 8:
        parts.append(f"method {rec['method']} (valid 0-8)")
    if rec["status"] & 0x3F > OTHER_CODES:
        parts.append(f"status code {rec['status'] & 0x3F} (low 6 bits; valid 0-37)")
    if rec["type"] > 12:
        parts.append(f"type {rec['type']} (valid 0-12)")
    return f"{path}: byte offset {offset:,}: record has " + ", ".join(parts)


def _decode_wc98(rec: np.ndarray, path, offset0: int, report: ReadReport, extra: bool,
                 epoch_s: float | None = None) -> pd.DataFrame:
    """Records -> request table; invalid records are dropped and counted in ``report``."""
    method, status, ftype = rec["method"], rec["status"], rec["type"]
    code = status & 0x3F
    bad = (method > 8) | (code > OTHER_CODES) | (ftype > 12)
    if bad.any():
        idx = np.flatnonzero(bad)
        report.skip(len(idx), (_bad_record_text(path, offset0 + 20 * int(i), rec[i])
                               for i in idx[:max(report.room, 0)]))
        rec = rec[~bad]
        method, status, ftype, code = (rec["method"], rec["status"], rec["type"],
                                       rec["status"] & 0x3F)
    n = len(rec)
    if report.epoch_s is None and n:
        report.epoch_s = float(epoch_s if epoch_s is not None else rec["timestamp"][0])
    epoch = report.epoch_s or 0.0
    size = rec["size"].astype(np.int64)
    size[size == NO_SIZE] = -1
    cols = {
        "time_s": rec["timestamp"].astype(np.float64) - epoch,
        "client": rec["client"].astype(np.int64),
        "object": _strings(pc.cast(pa.array(rec["object"].astype(np.uint32)), pa.string())),
        "size_bytes": size,
        "status": _STATUS_OF_CODE[code],
        "method": _from_codes(method, METHODS),
        "conn_id": np.full(n, -1, dtype=np.int64),
    }
    if extra:
        server = rec["server"]
        cols["file_type"] = _from_codes(ftype, FILE_TYPES)
        cols["http_version"] = _from_codes(status >> 6, HTTP_VERSIONS)
        cols["region"] = _from_codes(server >> 5, REGIONS)
        cols["server"] = server.astype(np.int16)
    return _frame(cols)


def _read_full(f, view: memoryview) -> int:
    """Fill ``view`` from ``f`` (which may return short reads); bytes read, less at EOF."""
    total = 0
    while total < len(view):
        got = f.readinto(view[total:])
        if not got:
            break
        total += got
    return total


def _partial_record(path: Path, offset: int, rem: int, gz: bool) -> str:
    where = "decompressed byte offset" if gz else "byte offset"
    return (f"{path}: {where} {offset:,}: a partial record of {rem} bytes at the end; "
            "WC98 records are 20 bytes each, so the file is truncated or is not a WC98 log "
            "(download it again, or pass skip_bad=True to drop the partial record)")


class _WC98Chunks:
    def __init__(self, paths, chunk_records, skip_bad, extra):
        self.paths, self.chunk_records, self.skip_bad = paths, chunk_records, skip_bad
        self.wc98_fields = extra
        self.extra = WC98_EXTRA if extra else ()

    def __call__(self, report: ReadReport) -> Iterator[pd.DataFrame]:
        buf = np.empty(self.chunk_records, dtype=WC98_RECORD)  # reused: constant memory
        view = memoryview(buf.view(np.uint8))
        for path in self.paths:
            gz = _is_gzip(path)
            if not gz and not self.skip_bad and (size := path.stat().st_size) % 20:
                # fail before yielding anything from a file known to be truncated
                raise InputError(_partial_record(path, size - size % 20, size % 20, False))
            yield from self._file(path, gz, buf, view, report)

    def _file(self, path, gz, buf, view, report) -> Iterator[pd.DataFrame]:
        offset = 0  # of the next byte to read, in the (decompressed) stream
        with _open_binary(path) as f:
            while True:
                try:
                    got = _read_full(f, view)
                except _GZIP_ERRORS as exc:
                    text = _gzip_error(path, f"after {offset:,} decompressed bytes", exc)
                    if not self.skip_bad:
                        raise InputError(text) from None
                    report.note([text])
                    return
                whole = got // 20
                if whole:
                    yield _decode_wc98(buf[:whole], path, offset, report, self.wc98_fields)
                if got < len(view):  # end of file
                    if rem := got - 20 * whole:
                        text = _partial_record(path, offset + 20 * whole, rem, gz)
                        if not self.skip_bad:
                            raise InputError(text)
                        report.skip(1, [text])
                    return
                offset += got


def read_wc98(path, chunk_records: int = 1_000_000, *, skip_bad: bool = False,
              wc98_fields: bool = False, max_examples: int = MAX_EXAMPLES) -> TraceReader:
    """Stream World Cup 98 binary logs (plain or gzipped) as request tables.

    ``path`` is a file or a list of files read in order (``time_s`` counts from the first
    record of the first). Each chunk holds up to ``chunk_records`` records (20 bytes each
    on disk). A file whose length is not a multiple of 20 raises InputError naming the
    byte offset of the partial record, unless ``skip_bad`` (then it is counted in the
    report); records with invalid codes are always skipped and counted.
    """
    paths = _paths(path)
    chunks = _WC98Chunks(paths, _positive("chunk_records", chunk_records), skip_bad,
                         wc98_fields)
    return TraceReader("wc98", paths, chunks, max_examples)


# ------------------------------------------------------------------ CLF reader

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH = {m: i + 1 for i, m in enumerate(_MONTHS)}
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_LINE = re.compile(rf'(\S+) \S+ \S+ \[([^\]]*)\] {_QUOTED} (\d{{3}}) (\d+|-)(?: .*)?$')
_DATE = re.compile(r'(\d{2})/([A-Za-z]{3})/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})$')
CLF_EXPECTED = ('host ident authuser [dd/Mon/yyyy:HH:MM:SS +zzzz] "METHOD /path HTTP/x.y" '
                'status bytes ["referer" "user-agent"]')
_BAD_TIME = object()


def _clf_time(text: str):
    """``10/Oct/2000:13:55:36 -0700`` -> Unix seconds (UTC), or _BAD_TIME."""
    m = _DATE.match(text)
    if not m:
        return _BAD_TIME
    day, mon, year, hh, mm, ss, sign, oh, om = m.groups()
    month = _MONTH.get(mon.capitalize())
    d, h, mi, s, zh, zm = int(day), int(hh), int(mm), int(ss), int(oh), int(om)
    if (month is None or not 1 <= d <= calendar.monthrange(int(year), month)[1] or h > 23
            or mi > 59 or s > 60 or zh > 23 or zm > 59):
        return _BAD_TIME
    offset = (zh * 3600 + zm * 60) * (1 if sign == "+" else -1)
    return calendar.timegm((int(year), month, d, h, mi, s)) - offset


def client_id(host: str) -> int:
    """The ``client`` of a CLF host: an IPv4 address's 32-bit value, else 2**32 plus a
    62-bit BLAKE2b hash of the text (stable across runs and files)."""
    parts = host.split(".")
    if len(parts) == 4 and all(p.isascii() and p.isdigit() and len(p) <= 3 for p in parts):
        a, b, c, d = map(int, parts)
        if max(a, b, c, d) <= 255:
            return a << 24 | b << 16 | c << 8 | d
    digest = hashlib.blake2b(host.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return 2**32 + (int.from_bytes(digest, "big") >> 2)


def _unescape(text: str) -> str:
    return re.sub(r'\\(["\\])', r"\1", text) if "\\" in text else text


def split_request(request: str) -> tuple[str, str]:
    """``"GET /a HTTP/1.1"`` -> ("GET", "/a"); ``"GET /a"`` (HTTP/0.9) too. Anything
    else (nginx's ``-`` for no request, junk from scanners) -> ("-", the text)."""
    head, sep, proto = request.rpartition(" ")
    if sep and proto.startswith("HTTP/"):
        method, sep, target = head.partition(" ")
        if sep and method:
            return method, target
    else:
        method, sep, target = request.partition(" ")
        if sep and method and target and " " not in target:
            return method, target
    return "-", request


_DIAGNOSIS = (
    (re.compile(r"(\S+) (\S+) (\S+) "), "expected 'host ident authuser ' (three fields, "
     "single spaces) at the start"),
    (re.compile(r"\[([^\]]*)\] "), "expected the time in brackets, [dd/Mon/yyyy:HH:MM:SS "
     "+zzzz], then a space, after the authuser field"),
    (re.compile(_QUOTED + " "), 'expected the request line in double quotes ("GET /path '
     'HTTP/1.1"), then a space, after the time'),
    (re.compile(r"\d{3}(?: |$)"), "expected a 3-digit status after the request"),
    (re.compile(r"(?:\d+|-)(?: |$)"), "expected the byte count (digits or '-') after the "
     "status, then a space or the end of the line"),
)


def _diagnose(line: str) -> str:
    """What is wrong with a line that does not match, field by field."""
    if not line.strip():
        return "empty line"
    pos = 0
    for pattern, expected in _DIAGNOSIS:
        m = pattern.match(line, pos)
        if not m:
            return f"{expected}, found {line[pos:pos + 40]!r}"
        if pattern.pattern.startswith(r"\["):
            stamp = m.group(1)
            if _clf_time(stamp) is _BAD_TIME:
                return (f"time [{stamp}] is not dd/Mon/yyyy:HH:MM:SS +zzzz with an English "
                        "month abbreviation and valid ranges")
        pos = m.end()
    return "line does not match"


class _CLFChunks:
    extra = ()

    def __init__(self, paths, chunk_lines, strict):
        self.paths, self.chunk_lines, self.strict = paths, chunk_lines, strict

    def __call__(self, report: ReadReport) -> Iterator[pd.DataFrame]:
        for path in self.paths:
            yield from self._file(path, report)

    def _bad(self, report, path, lineno, line) -> None:
        if self.strict:
            raise InputError(f"{path}:{lineno}: {_diagnose(line)}; expected Common or "
                             f"Combined Log Format: {CLF_EXPECTED}. Fix the line, or read "
                             "without strict=True to skip bad lines (they are counted)")
        report.skip(1, [f"{path}:{lineno}: {_diagnose(line)}"] if report.room > 0 else [])

    def _file(self, path: Path, report: ReadReport) -> Iterator[pd.DataFrame]:
        lineno = 0
        with _open_binary(path) as f:
            lines = iter(f)
            while True:
                rows, lineno, eof = self._parse(path, lines, lineno, report)
                if rows[0]:
                    yield self._table(rows, report)
                if eof:
                    return

    def _parse(self, path, lines, lineno, report):
        times, clients, objects, sizes, statuses, methods = rows = ([], [], [], [], [], [])
        stamps: dict[str, object] = {}
        hosts: dict[str, int] = {}
        match, limit = _LINE.match, self.chunk_lines
        for _ in range(limit):
            try:
                raw = next(lines)
            except StopIteration:
                return rows, lineno, True
            except _GZIP_ERRORS as exc:
                text = _gzip_error(path, f"after line {lineno:,}", exc)
                if self.strict:
                    raise InputError(text) from None
                report.note([text])
                return rows, lineno, True
            lineno += 1
            line = raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
            m = match(line)
            if m is None:
                self._bad(report, path, lineno, line)
                continue
            host, stamp, request, status, size = m.groups()
            t = stamps.get(stamp)
            if t is None:
                t = stamps[stamp] = _clf_time(stamp)
            if t is _BAD_TIME:
                self._bad(report, path, lineno, line)
                continue
            c = hosts.get(host)
            if c is None:
                c = hosts[host] = client_id(host)
            method, target = split_request(_unescape(request))
            times.append(t)
            clients.append(c)
            objects.append(target)
            sizes.append(-1 if size == "-" else int(size))
            statuses.append(int(status))
            methods.append(method)
        return rows, lineno, False

    @staticmethod
    def _table(rows, report: ReadReport) -> pd.DataFrame:
        times, clients, objects, sizes, statuses, methods = rows
        t = np.array(times, dtype=np.float64)
        if report.epoch_s is None:
            report.epoch_s = float(t[0])
        return _frame({
            "time_s": t - report.epoch_s,
            "client": np.array(clients, dtype=np.int64),
            "object": _strings(objects),
            "size_bytes": np.array(sizes, dtype=np.int64),
            "status": np.array(statuses, dtype=np.int16),
            "method": _strings(methods),
            "conn_id": np.full(len(t), -1, dtype=np.int64),
        })


def read_clf(path, chunk_lines: int = 200_000, *, strict: bool = False,
             max_examples: int = MAX_EXAMPLES) -> TraceReader:
    """Stream Common or Combined Log Format access logs (plain or gzipped) as request
    tables, ``chunk_lines`` input lines per chunk. Lines that do not parse are skipped
    and counted (``file:line`` and what was expected for the first few, in the report);
    ``strict=True`` raises InputError at the first one instead."""
    paths = _paths(path)
    return TraceReader("clf", paths, _CLFChunks(paths, _positive("chunk_lines", chunk_lines),
                                                strict), max_examples)


_WC98_NAME = re.compile(r"wc_day\d+_\d+(\.gz)?$|\.wc98(\.gz)?$")


def sniff_format(path) -> str:
    """"wc98" or "clf": by the name (wc_dayX_Y[.gz], *.wc98[.gz]), else by the first
    bytes (WC98 records are binary and hold NUL bytes; logs are text)."""
    p = _paths(path)[0]
    if _WC98_NAME.search(p.name):
        return "wc98"
    with _open_binary(p) as f:
        try:
            head = f.read(4096)
        except _GZIP_ERRORS:
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


# ------------------------------------------------------------------ writers


def _chunks_of(table) -> Iterator[pd.DataFrame]:
    if isinstance(table, pd.DataFrame):
        yield table
    else:
        yield from table


def _epoch_of(table, epoch_s: float | None) -> tuple[float, Iterator[pd.DataFrame]]:
    """The epoch to write with, and the chunks (the first one peeked for its attrs)."""
    chunks = _chunks_of(table)
    first = next(chunks, None)
    rest = chunks if first is None else _prepend(first, chunks)
    if epoch_s is None and first is not None:
        epoch_s = first.attrs.get("epoch_s")
    if epoch_s is None:
        if first is None or len(first) == 0:
            return 0.0, rest
        raise InputError("the table has no attrs['epoch_s'] (the Unix time of its first "
                         "request); pass epoch_s=..., e.g. traces.DEFAULT_EPOCH_S")
    return float(epoch_s), rest


def _prepend(first, rest):
    yield first
    yield from rest


def _missing(df: pd.DataFrame, where: str) -> None:
    if lacking := [c for c in COLUMNS if c not in df.columns]:
        raise InputError(f"{where}: the table lacks column(s) {', '.join(lacking)}; a request "
                         f"table has {', '.join(COLUMNS)}")


def _first_bad(where: str, row_base: int, bad: np.ndarray, column: str, values, fix: str):
    i = int(np.flatnonzero(bad)[0])
    value = values[i].item() if isinstance(values[i], np.generic) else values[i]
    raise InputError(f"{where}: row {row_base + i}: {column} {value!r} {fix}")


def _encode_wc98(df: pd.DataFrame, epoch_s: float, where: str, row_base: int) -> np.ndarray:
    """Request table -> WC98 records, refusing values the format cannot hold."""
    _missing(df, where)
    n = len(df)
    out = np.empty(n, dtype=WC98_RECORD)
    ts = np.floor(epoch_s + df["time_s"].to_numpy(dtype=np.float64))
    bad = ~((ts >= 0) & (ts <= NO_SIZE))
    if bad.any():
        _first_bad(where, row_base, bad, "time", ts, "(Unix s) does not fit WC98's uint32 "
                   "timestamp; check epoch_s and time_s")
    out["timestamp"] = ts
    client = df["client"].to_numpy(dtype=np.int64)
    bad = (client < 0) | (client > NO_SIZE)
    if bad.any():
        _first_bad(where, row_base, bad, "client", client, "does not fit WC98's uint32 "
                   "clientID; renumber clients first, e.g. pd.factorize(df.client)[0]")
    out["client"] = client
    text = pa.array(df["object"].to_numpy(dtype=object), pa.string())
    digits = pc.fill_null(pc.match_substring_regex(text, r"^[0-9]{1,10}$"), False)
    bad = ~digits.to_numpy(zero_copy_only=False)
    obj = np.zeros(n, dtype=np.uint64)
    if not bad.any():
        obj = pc.cast(text, pa.uint64()).to_numpy()
        bad = obj > NO_SIZE
    if bad.any():
        _first_bad(where, row_base, bad, "object", df["object"].to_numpy(), "is not a "
                   "WC98 objectID (a decimal number < 2**32); number the objects first, "
                   "e.g. df.object = pd.factorize(df.object)[0].astype(str)")
    out["object"] = obj
    size = df["size_bytes"].to_numpy(dtype=np.int64)
    bad = (size < -1) | (size >= NO_SIZE)
    if bad.any():
        _first_bad(where, row_base, bad, "size_bytes", size, "does not fit WC98's uint32 "
                   "size (-1 for unknown is stored as 0xffffffff)")
    out["size"] = np.where(size < 0, NO_SIZE, size)
    out["method"] = _codes(df["method"], METHODS, where, row_base, "method",
                           "is not one WC98 stores; map it to 'OTHER' first")
    status = df["status"].to_numpy(dtype=np.int64)
    code = pd.Series(status).map(_CODE_OF_STATUS).to_numpy(dtype=np.float64)
    if np.isnan(code).any():
        _first_bad(where, row_base, np.isnan(code), "status", status, "is not one WC98 "
                   "stores; map it to -1 (stored as OTHER_CODES) first")
    version = (_codes(df["http_version"], HTTP_VERSIONS, where, row_base, "http_version",
                      f"is not one of {HTTP_VERSIONS}") if "http_version" in df else 1)
    out["status"] = (np.asarray(version, dtype=np.uint8) << 6) | code.astype(np.uint8)
    out["type"] = (_codes(df["file_type"], FILE_TYPES, where, row_base, "file_type",
                          f"is not one of {FILE_TYPES}") if "file_type" in df else 12)
    out["server"] = df["server"].to_numpy(dtype=np.uint8) if "server" in df else 0
    return out


def _codes(values: pd.Series, names: Sequence[str], where, row_base, column, fix):
    codes = pd.Categorical(values.to_numpy(dtype=object), categories=list(names)).codes
    if (codes < 0).any():
        _first_bad(where, row_base, codes < 0, column, values.to_numpy(), fix)
    return codes.astype(np.uint8)


@contextmanager
def _open_for_writing(tmp: Path, final: Path):
    """``tmp`` for writing; a gzip stream if ``final`` ends in .gz, with the final name
    and no time in its header, so the same table always gives the same bytes."""
    with open(tmp, "wb") as raw:
        if not final.name.endswith(".gz"):
            yield raw
            return
        with gzip.GzipFile(final.name.removesuffix(".gz"), "wb", 6, raw, mtime=0) as f:
            yield f


def write_wc98(path, table, *, epoch_s: float | None = None) -> int:
    """Write a request table (a DataFrame or an iterable of them) as a WC98 binary log,
    gzipped if ``path`` ends in .gz; atomically. Times are floored to whole seconds;
    ``file_type``, ``http_version`` and ``server`` columns are used if present (else
    OTHER, HTTP/1.0 and 0). Returns the number of records written."""
    path = Path(path)
    epoch, chunks = _epoch_of(table, epoch_s)
    count = 0

    def fill(tmp: Path) -> None:
        nonlocal count
        with _open_for_writing(tmp, path) as f:
            for df in chunks:
                f.write(_encode_wc98(df, epoch, str(path), count).tobytes())
                count += len(df)

    write_atomic(path, fill)
    return count


def _host(c: int) -> str:
    if 0 <= c < 2**32:
        return f"{c >> 24}.{c >> 16 & 255}.{c >> 8 & 255}.{c & 255}"
    return f"client-{c:x}"


def _clf_stamp(t: int, offset_s: int, zone: str) -> str:
    y, mo, d, h, mi, s, *_ = time.gmtime(t + offset_s)
    return f"{d:02d}/{_MONTHS[mo - 1]}/{y}:{h:02d}:{mi:02d}:{s:02d} {zone}"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _clf_lines(df: pd.DataFrame, epoch: float, offset_s: int, combined: bool, where: str,
               row_base: int) -> Iterator[str]:
    _missing(df, where)
    status = df["status"].to_numpy(dtype=np.int64)
    bad = (status < 0) | (status > 999)
    if bad.any():
        _first_bad(where, row_base, bad, "status", status, "cannot be written as CLF's "
                   "3-digit status; drop or map those rows first")
    for column, pattern, problem in (
            ("object", r"[\r\n]", "holds a line break, which a log line cannot"),
            ("method", r"^$|\s", "is empty or holds a space, so the request line could not "
             "be taken apart again")):
        bad = df[column].str.contains(pattern, regex=True).to_numpy(dtype=bool)
        if bad.any():
            _first_bad(where, row_base, bad, column, df[column].to_numpy(), problem)
    ts = np.floor(epoch + df["time_s"].to_numpy(dtype=np.float64)).astype(np.int64)
    sign = "+" if offset_s >= 0 else "-"
    zone = f"{sign}{abs(offset_s) // 3600:02d}{abs(offset_s) % 3600 // 60:02d}"
    stamps: dict[int, str] = {}
    hosts: dict[int, str] = {}
    tail = ' "-" "-"\n' if combined else "\n"
    for t, c, obj, size, st, method in zip(
            ts.tolist(), df["client"].tolist(), df["object"].tolist(),
            df["size_bytes"].tolist(), status.tolist(), df["method"].tolist(), strict=True):
        stamp = stamps.get(t) or stamps.setdefault(t, _clf_stamp(t, offset_s, zone))
        host = hosts.get(c) or hosts.setdefault(c, _host(c))
        nbytes = "-" if size < 0 else size
        yield (f'{host} - - [{stamp}] "{_escape(method)} {_escape(obj)} HTTP/1.0" '
               f"{st:03d} {nbytes}{tail}")


def write_clf(path, table, *, epoch_s: float | None = None, utc_offset_s: int = 0,
              combined: bool = False) -> int:
    """Write a request table (a DataFrame or an iterable of them) as a Common (or, with
    ``combined``, Combined, with "-" referer and user agent) Log Format file, gzipped if
    ``path`` ends in .gz; atomically. Times are floored to whole seconds and shown at
    ``utc_offset_s`` (7200 for the World Cup's Paris time); clients below 2**32 are
    written as IPv4 addresses, so they read back as the same ``client``. Returns the
    number of lines written."""
    path = Path(path)
    if not (isinstance(utc_offset_s, int) and abs(utc_offset_s) < 24 * 3600
            and utc_offset_s % 60 == 0):
        raise InputError(f"utc_offset_s={utc_offset_s!r}: use whole minutes within "
                         "+-24 h, e.g. 7200 for +0200")
    epoch, chunks = _epoch_of(table, epoch_s)
    count = 0

    def fill(tmp: Path) -> None:
        nonlocal count
        with _open_for_writing(tmp, path) as f:
            for df in chunks:
                text = "".join(_clf_lines(df, epoch, utc_offset_s, combined, str(path),
                                          count))
                f.write(text.encode("utf-8", "surrogateescape"))
                count += len(df)

    write_atomic(path, fill)
    return count


# ------------------------------------------------------------------ synthetic traces

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


def _zipf_cdf(n: int, alpha: float) -> np.ndarray:
    w = np.arange(1, n + 1, dtype=np.float64) ** -alpha
    cdf = np.cumsum(w)
    return cdf / cdf[-1]


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


def _synth_blocks(n_requests: int, seed: int, spec: SynthSpec) -> Iterator[dict]:
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
    for b in _synth_blocks(n_requests, seed, spec):
        yield _block_table(b, float(spec.epoch_s))


def synthetic(n_requests: int, seed: int = 0, spec: SynthSpec | None = None) -> pd.DataFrame:
    """A synthetic request table of ``n_requests`` (see :class:`SynthSpec`), reproducible
    from ``seed``; ``attrs["epoch_s"]`` is ``spec.epoch_s`` and the first request is at
    ``time_s`` 0."""
    frames = list(synthetic_chunks(n_requests, seed, spec))
    if not frames:
        df = empty_table()
        df.attrs["epoch_s"] = float((spec or SynthSpec()).epoch_s)
        return df
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    df.attrs["epoch_s"] = frames[0].attrs["epoch_s"]
    return df


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
    rec["type"] = 12
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
    path = Path(path)
    count = 0

    def fill(tmp: Path) -> None:
        nonlocal count
        with _open_for_writing(tmp, path) as f:
            for b in _synth_blocks(n_requests, seed, spec):
                f.write(_block_records(b, spec.epoch_s).tobytes())
                count += len(b["t"])

    write_atomic(path, fill)
    return count


def synth_clf(path, n_requests: int, seed: int = 0, spec: SynthSpec | None = None, *,
              utc_offset_s: int = 0, combined: bool = True) -> int:
    """Write :func:`synthetic` as a Combined (or Common) Log Format file; returns the
    number of lines. Objects are written as the request target verbatim (their decimal
    ids), so the file reads back as exactly the synthetic table."""
    spec = spec or SynthSpec()
    return write_clf(path, synthetic_chunks(n_requests, seed, spec),
                     epoch_s=float(spec.epoch_s), utc_offset_s=utc_offset_s,
                     combined=combined)
