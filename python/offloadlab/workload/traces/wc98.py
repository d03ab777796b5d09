"""World Cup 98 binary log (ITA, ita.ee.lbl.gov/html/contrib/WorldCup.html): reader and
writer.

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
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from offloadlab.errors import InputError
from offloadlab.workload.traces.files import (
    GZIP_ERRORS,
    chunk_size,
    chunks_and_epoch,
    gzip_error,
    is_gzip,
    open_binary,
    trace_paths,
    write_chunks,
)
from offloadlab.workload.traces.table import (
    MAX_EXAMPLES,
    ReadReport,
    TraceReader,
    _frame,
    _from_codes,
    _missing,
    _refuse,
    _strings,
)

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
WC98_EXTRA = ("file_type", "http_version", "region", "server")  # with wc98_fields=True
_LAST_METHOD, _LAST_TYPE = len(METHODS) - 1, len(FILE_TYPES) - 1  # 8 and 12
_STATUS_OF_CODE = np.array([*STATUS_CODES, -1], dtype=np.int16)
_CODE_OF_STATUS = {s: i for i, s in enumerate(STATUS_CODES)} | {-1: OTHER_CODES}
# 1998-06-10 00:00 in Paris (+0200): the first second of day 46, a busy day of the logs.
DEFAULT_EPOCH_S = 897_429_600


# ------------------------------------------------------------------ reading


def wc98_table(records: np.ndarray, epoch_s: float | None = None, *,
               wc98_fields: bool = False) -> pd.DataFrame:
    """The request table of WC98 records already in memory (a ``WC98_RECORD`` array, e.g.
    ``np.fromfile(path, WC98_RECORD)``). Raises InputError on a record the tools cannot
    have written; :func:`read_wc98` streams a file instead and skips such records."""
    report = ReadReport("wc98", ("<memory>",), max_examples=1)
    df = _decode(records, "<memory>", 0, report, wc98_fields, epoch_s)
    if report.skipped:
        raise InputError(report.errors[0] + "; this is not a WC98 log, or it is corrupt")
    df.attrs["epoch_s"] = report.epoch_s
    return df


def head_problem(head: bytes) -> str | None:
    """Why ``head``, a file's first bytes, is not the start of a WC98 log, or None when it
    can be: whole records whose codes are all in the tables and whose timestamps lie
    within a day (a file holds one day at most). Text fails at once: byte 16 of a record,
    its method, would have to be 0-8, which no printable character is."""
    n = len(head) // 20
    if n == 0:
        return f"{len(head)} bytes, less than one 20-byte record"
    rec = np.frombuffer(head[:20 * n], WC98_RECORD)
    bad = np.flatnonzero(_invalid(rec))
    if bad.size:
        return f"the record at byte {20 * int(bad[0]):,} has {_bad_fields(rec[bad[0]])}"
    t = rec["timestamp"]
    if int(t.max()) - int(t.min()) > 86_400:
        return f"the timestamps of its first {n} records span more than a day"
    return None


def _invalid(rec: np.ndarray) -> np.ndarray:
    """The records whose method, status code or type is outside the tools' tables."""
    return ((rec["method"] > _LAST_METHOD) | (rec["status"] & 0x3F > OTHER_CODES)
            | (rec["type"] > _LAST_TYPE))


def _bad_record_text(path, offset: int, rec) -> str:
    return f"{path}: byte offset {offset:,}: record has {_bad_fields(rec)}"


def _bad_fields(rec) -> str:
    parts = []
    if rec["method"] > _LAST_METHOD:
        parts.append(f"method {rec['method']} (valid 0-{_LAST_METHOD})")
    if rec["status"] & 0x3F > OTHER_CODES:
        parts.append(f"status code {rec['status'] & 0x3F} (low 6 bits; valid 0-{OTHER_CODES})")
    if rec["type"] > _LAST_TYPE:
        parts.append(f"type {rec['type']} (valid 0-{_LAST_TYPE})")
    return ", ".join(parts)


def _decode(rec: np.ndarray, path, offset0: int, report: ReadReport, extra: bool,
            epoch_s: float | None = None) -> pd.DataFrame:
    """Records -> request table; invalid records are dropped and counted in ``report``."""
    bad = _invalid(rec)
    if bad.any():
        idx = np.flatnonzero(bad)
        report.skip(len(idx), (_bad_record_text(path, offset0 + 20 * int(i), rec[i])
                               for i in idx[:max(report.room, 0)]))
        rec = rec[~bad]
    n = len(rec)
    if report.epoch_s is None and n:
        report.epoch_s = float(epoch_s if epoch_s is not None else rec["timestamp"][0])
    epoch = report.epoch_s or 0.0
    size = rec["size"].astype(np.int64)
    size[size == NO_SIZE] = -1
    status = rec["status"]
    cols = {
        "time_s": rec["timestamp"].astype(np.float64) - epoch,
        "client": rec["client"].astype(np.int64),
        "object": _strings(pc.cast(pa.array(rec["object"].astype(np.uint32)), pa.string())),
        "size_bytes": size,
        "status": _STATUS_OF_CODE[status & 0x3F],
        "method": _from_codes(rec["method"], METHODS),
        "conn_id": np.full(n, -1, dtype=np.int64),
    }
    if extra:
        server = rec["server"]
        cols["file_type"] = _from_codes(rec["type"], FILE_TYPES)
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


class _Chunks:
    def __init__(self, paths, chunk_records, skip_bad, wc98_fields):
        self.paths, self.chunk_records, self.skip_bad = paths, chunk_records, skip_bad
        self.wc98_fields = wc98_fields
        self.extra = WC98_EXTRA if wc98_fields else ()

    def __call__(self, report: ReadReport) -> Iterator[pd.DataFrame]:
        buf = np.empty(self.chunk_records, dtype=WC98_RECORD)  # reused: constant memory
        view = memoryview(buf.view(np.uint8))
        for path in self.paths:
            gz = is_gzip(path)
            if not gz and not self.skip_bad and (size := path.stat().st_size) % 20:
                # fail before yielding anything from a file known to be truncated
                raise InputError(_partial_record(path, size - size % 20, size % 20, False))
            yield from self._file(path, gz, buf, view, report)

    def _file(self, path, gz, buf, view, report) -> Iterator[pd.DataFrame]:
        offset = 0  # of the next byte to read, in the (decompressed) stream
        with open_binary(path) as f:
            while True:
                try:
                    got = _read_full(f, view)
                except GZIP_ERRORS as exc:
                    text = gzip_error(path, f"after {offset:,} decompressed bytes", exc)
                    if not self.skip_bad:
                        raise InputError(text) from None
                    report.note([text])
                    return
                whole = got // 20
                if whole:
                    yield _decode(buf[:whole], path, offset, report, self.wc98_fields)
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
    paths = trace_paths(path)
    chunks = _Chunks(paths, chunk_size("chunk_records", chunk_records), skip_bad, wc98_fields)
    return TraceReader("wc98", paths, chunks, max_examples)


# ------------------------------------------------------------------ writing


def _encode(df: pd.DataFrame, epoch_s: float, where: str, row_base: int) -> np.ndarray:
    """Request table -> WC98 records, refusing values the format cannot hold."""
    _missing(df, where)
    out = np.empty(len(df), dtype=WC98_RECORD)
    ts = np.floor(epoch_s + df["time_s"].to_numpy(dtype=np.float64))
    _refuse(where, row_base, ~((ts >= 0) & (ts <= NO_SIZE)), "time", ts, "(Unix s) does not "
            "fit WC98's uint32 timestamp; check epoch_s and time_s")
    out["timestamp"] = ts
    client = df["client"].to_numpy(dtype=np.int64)
    _refuse(where, row_base, (client < 0) | (client > NO_SIZE), "client", client, "does not "
            "fit WC98's uint32 clientID; renumber clients first, e.g. pd.factorize(df.client)[0]")
    out["client"] = client
    text = pa.array(df["object"].to_numpy(dtype=object), pa.string())
    digits = pc.fill_null(pc.match_substring_regex(text, r"^[0-9]{1,10}$"), False)
    bad = ~digits.to_numpy(zero_copy_only=False)
    if not bad.any():  # all decimal: now the range
        obj = pc.cast(text, pa.uint64()).to_numpy()
        bad = obj > NO_SIZE
    _refuse(where, row_base, bad, "object", df["object"].to_numpy(), "is not a WC98 objectID "
            "(a decimal number < 2**32); number the objects first, e.g. "
            "df.object = pd.factorize(df.object)[0].astype(str)")
    out["object"] = obj
    size = df["size_bytes"].to_numpy(dtype=np.int64)
    _refuse(where, row_base, (size < -1) | (size >= NO_SIZE), "size_bytes", size, "does not "
            "fit WC98's uint32 size (-1 for unknown is stored as 0xffffffff)")
    out["size"] = np.where(size < 0, NO_SIZE, size)
    out["method"] = _codes(df["method"], METHODS, where, row_base, "method",
                           "is not one WC98 stores; map it to 'OTHER' first")
    status = df["status"].to_numpy(dtype=np.int64)
    code = pd.Series(status).map(_CODE_OF_STATUS).to_numpy(dtype=np.float64)
    _refuse(where, row_base, np.isnan(code), "status", status, "is not one WC98 stores; map "
            "it to -1 (stored as OTHER_CODES) first")
    version = (_codes(df["http_version"], HTTP_VERSIONS, where, row_base, "http_version",
                      f"is not one of {HTTP_VERSIONS}") if "http_version" in df else 1)
    out["status"] = (np.asarray(version, dtype=np.uint8) << 6) | code.astype(np.uint8)
    out["type"] = (_codes(df["file_type"], FILE_TYPES, where, row_base, "file_type",
                          f"is not one of {FILE_TYPES}") if "file_type" in df else _LAST_TYPE)
    out["server"] = df["server"].to_numpy(dtype=np.uint8) if "server" in df else 0
    return out


def _codes(values: pd.Series, names: Sequence[str], where, row_base, column, fix):
    codes = pd.Categorical(values.to_numpy(dtype=object), categories=list(names)).codes
    _refuse(where, row_base, codes < 0, column, values.to_numpy(), fix)
    return codes.astype(np.uint8)


def write_wc98(path, table, *, epoch_s: float | None = None) -> int:
    """Write a request table (a DataFrame or an iterable of them) as a WC98 binary log,
    gzipped if ``path`` ends in .gz; atomically. Times are floored to whole seconds;
    ``file_type``, ``http_version`` and ``server`` columns are used if present (else
    OTHER, HTTP/1.0 and 0). Returns the number of records written."""
    path = Path(path)
    epoch, chunks = chunks_and_epoch(table, epoch_s)
    return write_chunks(path, chunks,
                        lambda df, row_base: _encode(df, epoch, str(path), row_base).tobytes())
