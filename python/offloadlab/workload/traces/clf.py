"""Common and Combined Log Format (Apache ``common``/``combined``, nginx ``combined``):
parser and writer.

::

    host ident authuser [dd/Mon/yyyy:HH:MM:SS +zzzz] "request" status bytes
    ... "referer" "user-agent"                                          (combined)

``bytes`` is a count or ``-`` (Apache's ``%b`` for no body). Anything after ``bytes``
(combined's two fields, or extra fields such as a request time) is accepted and ignored.
Inside the quoted request ``\\"`` and ``\\\\`` are unescaped. A line that does not
match is skipped and counted with its line number, or with ``strict=True`` stops the read
with an :class:`~offloadlab.errors.InputError`.
"""

from __future__ import annotations

import calendar
import hashlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.errors import InputError
from offloadlab.workload.traces.files import (
    GZIP_ERRORS,
    chunk_size,
    chunks_and_epoch,
    gzip_error,
    open_binary,
    trace_paths,
    write_chunks,
)
from offloadlab.workload.traces.table import (
    MAX_EXAMPLES,
    ReadReport,
    TraceReader,
    _frame,
    _missing,
    _refuse,
    _strings,
)

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH = {m: i + 1 for i, m in enumerate(_MONTHS)}
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_LINE = re.compile(rf'(\S+) \S+ \S+ \[([^\]]*)\] {_QUOTED} (\d{{3}}) (\d+|-)(?: .*)?$')
_DATE = re.compile(r'(\d{2})/([A-Za-z]{3})/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})$')
CLF_EXPECTED = ('host ident authuser [dd/Mon/yyyy:HH:MM:SS +zzzz] "METHOD /path HTTP/x.y" '
                'status bytes ["referer" "user-agent"]')
_BAD_TIME = object()


# ------------------------------------------------------------------ parsing a line


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


_STAMP = re.compile(r"\[([^\]]*)\] ")
_DIAGNOSIS = (
    (re.compile(r"(\S+) (\S+) (\S+) "), "expected 'host ident authuser ' (three fields, "
     "single spaces) at the start"),
    (_STAMP, "expected the time in brackets, [dd/Mon/yyyy:HH:MM:SS +zzzz], then a space, "
     "after the authuser field"),
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
        if pattern is _STAMP and _clf_time(stamp := m.group(1)) is _BAD_TIME:
            return (f"time [{stamp}] is not dd/Mon/yyyy:HH:MM:SS +zzzz with an English "
                    "month abbreviation and valid ranges")
        pos = m.end()
    return "line does not match"


# ------------------------------------------------------------------ reading


class _Chunks:
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
        with open_binary(path) as f:
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
            except GZIP_ERRORS as exc:
                text = gzip_error(path, f"after line {lineno:,}", exc)
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
    paths = trace_paths(path)
    chunks = _Chunks(paths, chunk_size("chunk_lines", chunk_lines), strict)
    return TraceReader("clf", paths, chunks, max_examples)


# ------------------------------------------------------------------ writing


def _host(c: int) -> str:
    if 0 <= c < 2**32:
        return f"{c >> 24}.{c >> 16 & 255}.{c >> 8 & 255}.{c & 255}"
    return f"client-{c:x}"


def _clf_stamp(t: int, offset_s: int, zone: str) -> str:
    y, mo, d, h, mi, s, *_ = time.gmtime(t + offset_s)
    return f"{d:02d}/{_MONTHS[mo - 1]}/{y}:{h:02d}:{mi:02d}:{s:02d} {zone}"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _lines(df: pd.DataFrame, epoch: float, offset_s: int, combined: bool, where: str,
           row_base: int) -> Iterator[str]:
    _missing(df, where)
    status = df["status"].to_numpy(dtype=np.int64)
    _refuse(where, row_base, (status < 0) | (status > 999), "status", status, "cannot be "
            "written as CLF's 3-digit status; drop or map those rows first")
    for column, pattern, problem in (
            ("object", r"[\r\n]", "holds a line break, which a log line cannot"),
            ("method", r"^$|\s", "is empty or holds a space, so the request line could not "
             "be taken apart again")):
        bad = df[column].str.contains(pattern, regex=True).to_numpy(dtype=bool)
        _refuse(where, row_base, bad, column, df[column].to_numpy(), problem)
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
    epoch, chunks = chunks_and_epoch(table, epoch_s)

    def encode(df: pd.DataFrame, row_base: int) -> bytes:
        text = "".join(_lines(df, epoch, utc_offset_s, combined, str(path), row_base))
        return text.encode("utf-8", "surrogateescape")

    return write_chunks(path, chunks, encode)
