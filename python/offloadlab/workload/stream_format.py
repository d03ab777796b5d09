"""The request stream format: a :class:`Stream` is a table with one row per HTTP
request, written to Parquet in a stable, versioned form. :data:`COLUMNS` lists the
columns and their types; ``docs/workload.md`` ("Request streams") gives their meaning
and the send rule. Here a stream is built and checked, written (:meth:`Stream.write`)
and read back (:func:`read`, :func:`iter_batches`); the generators that make streams
are in :mod:`~offloadlab.workload.stream` and :mod:`~offloadlab.workload.sessions`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from offloadlab.errors import InputError
from offloadlab.results import jsonable, write_atomic
from offloadlab.workload.page_mixes import MIXES
from offloadlab.workload.stream_args import positive_int

FORMAT_VERSION = 1
VERSION_KEY = b"offloadlab.stream.format_version"
META_KEY = b"offloadlab.stream"
ROW_GROUP_ROWS = 131_072

# Column -> kind, in on-disk order. Exactly one of time_s / think_s is present; the
# session columns are present together or not at all.
COLUMNS: dict[str, str] = {
    "time_s": "float", "think_s": "float", "object": "str", "size_bytes": "int",
    "conn_id": "int", "keep_alive": "bool", "client": "int", "session": "int",
    "page": "str", "dynamic": "bool", "app_work_s": "float",
}
TIMING = ("time_s", "think_s")
COMMON = ("object", "size_bytes", "conn_id", "keep_alive", "client")
SESSION = ("session", "page", "dynamic", "app_work_s")
_ARROW = {"float": pa.float64(), "int": pa.int64(), "bool": pa.bool_(), "str": pa.string()}
_KIND_NAME = {"float": "float64", "int": "int64", "bool": "bool", "str": "string"}


# ------------------------------------------------------------------------ the stream


@dataclass(frozen=True, eq=False)
class Stream:
    """A table of requests (``frame``) and how it was made (``meta``: generator, seed,
    parameters, the ``duration_s`` bound). Building one checks the columns, their
    types and the connection bookkeeping, and raises :class:`InputError` if any is off.

    In ``frame``, ``object`` and ``page`` are pandas categoricals with sorted
    categories (a stream of millions of requests names a few thousand files).
    """

    frame: pd.DataFrame
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "frame", _checked(self.frame, "stream"))
        meta = {"format_version": FORMAT_VERSION, **self.meta}
        object.__setattr__(self, "meta", meta)

    @property
    def kind(self) -> str:
        """``"open"`` (rows carry ``time_s``) or ``"closed"`` (rows carry ``think_s``)."""
        return "open" if "time_s" in self.frame else "closed"

    @property
    def has_sessions(self) -> bool:
        return "session" in self.frame

    def __len__(self) -> int:
        return len(self.frame)

    def __repr__(self) -> str:
        what = self.meta.get("generator", self.kind)
        return (f"Stream({what}, {len(self)} requests, "
                f"{self.frame['conn_id'].nunique()} connections)")

    def equals(self, other: Stream) -> bool:
        """Same rows, same types, same meta."""
        return (isinstance(other, Stream) and self.meta == other.meta
                and self.frame.equals(other.frame))

    def write(self, path: str | Path) -> None:
        """Write the stream to a Parquet file atomically (temporary file, then rename)."""
        path = Path(path)
        if not path.parent.is_dir():
            raise InputError(f"{path}: folder {path.parent} does not exist; create it first")
        table = _to_table(self.frame, self.meta)
        write_atomic(path, lambda tmp: pq.write_table(table, tmp, row_group_size=ROW_GROUP_ROWS))

    def describe(self) -> dict:
        """A flat summary (names carry their units) for a table: counts, rates, sizes,
        connection lengths, think times and, for sessions, pages and application work."""
        f = self.frame
        n = len(f)
        conns = f["conn_id"].nunique()
        out: dict = {"generator": self.meta.get("generator", "-"), "seed": self.meta.get("seed"),
                     "kind": self.kind, "requests": n, "connections": conns,
                     "clients": f["client"].nunique(),
                     "requests_per_conn": n / conns if conns else 0.0,
                     "objects": len(f["object"].cat.categories),
                     "bytes": int(f["size_bytes"].sum()),
                     "mean_size_bytes": float(f["size_bytes"].mean()) if n else 0.0}
        if self.kind == "open":
            span = self.meta.get("duration_s") or (float(f["time_s"].iloc[-1]) if n else 0.0)
            out["span_s"] = span
            out["rate"] = n / span if span > 0 else math.nan
            out["conn_rate"] = conns / span if span > 0 else math.nan
        else:
            out["duration_s"] = self.meta.get("duration_s")
            out["mean_think_s"] = float(f["think_s"].mean()) if n else 0.0
        if self.has_sessions:
            dyn = f["dynamic"].to_numpy()
            out["sessions"] = f["session"].nunique()
            out["pages"] = int(dyn.sum())
            out["pages_per_session"] = (float(dyn.sum() / out["sessions"]) if out["sessions"]
                                        else 0.0)
            out["dynamic_share"] = float(dyn.mean()) if n else 0.0
            out["mean_app_work_s"] = float(f["app_work_s"][dyn].mean()) if dyn.any() else 0.0
        return out

    def page_mix(self) -> pd.DataFrame:
        """Pages per type, their share, and the target share of the generating mix."""
        if not self.has_sessions:
            raise InputError("page_mix: this stream has no sessions; make one with sessions()")
        pages = self.frame.loc[self.frame["dynamic"], "page"].astype(str)
        counts = pages.value_counts()
        mix = MIXES.get(str(self.meta.get("params", {}).get("workload", "")))
        names = list(mix.pages) if mix else sorted(counts.index)
        target = dict(zip(mix.pages, mix.probabilities, strict=True)) if mix else {}
        rows = [{"page": p, "pages": int(counts.get(p, 0)),
                 "share": counts.get(p, 0) / max(len(pages), 1),
                 "target": target.get(p, math.nan)} for p in names]
        return pd.DataFrame(rows)


def read(path: str | Path) -> Stream:
    """Read a stream written by :meth:`Stream.write` (or any Parquet file in the format),
    checking its columns, types and values."""
    path = Path(path)
    meta, pf = _parquet(path)
    try:
        table = pf.read()
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: cannot read as Parquet: {exc}") from None
    return Stream(_frame_from_arrow(table, str(path)), meta)


def iter_batches(path: str | Path, rows: int = 65_536) -> Iterator[pd.DataFrame]:
    """The rows of a stream file as DataFrames of at most ``rows`` rows, in file order,
    holding one batch in memory at a time. Columns, types and per-row values are checked
    batch by batch; the whole-stream checks (every connection ends with keep_alive false
    and stays with one client) are made only by :func:`read`."""
    path = Path(path)
    rows = positive_int("rows", rows)
    _, pf = _parquet(path)
    start, last_time = 0, -math.inf
    batches = pf.iter_batches(batch_size=rows)
    while True:
        try:  # a damaged page shows only when it is decoded
            batch = next(batches, None)
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{path}: cannot read as Parquet after row {start}: {exc}") from None
        if batch is None:
            return
        frame = _frame_from_arrow(pa.Table.from_batches([batch]), str(path), start,
                                  connections=False)
        if "time_s" in frame and len(frame):
            if frame["time_s"].iloc[0] < last_time:
                raise InputError(f"{path}: column 'time_s': row {start} goes back in time; "
                                 "sort an open-loop stream by time_s")
            last_time = frame["time_s"].iloc[-1]
        start += len(frame)
        yield frame


# ---------------------------------------------------- checking and the on-disk form


def _checked(frame: pd.DataFrame, where: str, row0: int = 0,
             connections: bool = True) -> pd.DataFrame:
    """The frame with canonical column order and types, after checking names, types and
    values; ``row0`` offsets row numbers in messages (for batches)."""
    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"{where}: a stream is built from a pandas DataFrame")
    cols = list(frame.columns)
    unknown = [c for c in cols if c not in COLUMNS]
    if unknown:
        raise InputError(f"{where}: unknown column {unknown[0]!r}; a stream has the columns "
                         f"{', '.join(COLUMNS)} (docs/workload.md)")
    timing = [c for c in TIMING if c in cols]
    if len(timing) != 1:
        raise InputError(f"{where}: needs exactly one of the columns time_s (open loop) and "
                         f"think_s (closed loop); it has {' and '.join(timing) or 'neither'}")
    missing = [c for c in COMMON if c not in cols]
    present = [c for c in SESSION if c in cols]
    if present:
        missing += [c for c in SESSION if c not in cols]
    if missing:
        raise InputError(f"{where}: missing column {missing[0]!r}" +
                         (" (the session columns session, page, dynamic, app_work_s go "
                          "together)" if missing[0] in SESSION else ""))
    out = {c: _column(frame[c], c, where, row0) for c in COLUMNS if c in cols}
    checked = pd.DataFrame(out)
    _check_values(checked, where, row0)
    if connections:
        _check_groups(checked, where, row0)
    return checked


def _column(col: pd.Series, name: str, where: str, row0: int = 0) -> pd.Series:
    kind = COLUMNS[name]
    values = col.reset_index(drop=True)
    bad = f"{where}: column {name!r} has type {values.dtype}; it must be {_KIND_NAME[kind]}"
    if values.isna().any():
        raise InputError(f"{where}: column {name!r} has a missing value at row "
                         f"{row0 + int(np.argmax(values.isna().to_numpy()))}; fill every row")
    if kind == "str":
        if not isinstance(values.dtype, pd.CategoricalDtype):
            if not (pd.api.types.is_string_dtype(values.dtype)
                    or pd.api.types.is_object_dtype(values.dtype)):
                raise InputError(bad)
            values = values.astype("category")
        if not all(isinstance(c, str) for c in values.cat.categories):
            raise InputError(bad)
        return pd.Series(_canonical(values.array))
    if kind == "bool":
        if not pd.api.types.is_bool_dtype(values.dtype):
            raise InputError(bad)
        return values.astype(bool)
    if pd.api.types.is_bool_dtype(values.dtype) or not pd.api.types.is_numeric_dtype(values):
        raise InputError(bad)
    if kind == "int":
        if not pd.api.types.is_integer_dtype(values.dtype):
            raise InputError(bad)
        return values.astype(np.int64)
    return values.astype(np.float64)


def _canonical(values: pd.Categorical) -> pd.Categorical:
    """The same values with only the categories in use, sorted (one form per stream)."""
    codes = np.asarray(values.codes, dtype=np.int64)
    names = np.asarray(values.categories, dtype=object)
    used = np.flatnonzero(np.bincount(codes, minlength=len(names)))
    used = used[np.argsort(names[used].astype(str), kind="stable")]
    recode = np.zeros(len(names), dtype=np.int64)
    recode[used] = np.arange(len(used))
    return pd.Categorical.from_codes(recode[codes], pd.Index(names[used], dtype=object))


def _check_values(f: pd.DataFrame, where: str, row0: int) -> None:
    def fail(name: str, mask: np.ndarray, what: str) -> None:
        if mask.any():
            raise InputError(f"{where}: column {name!r}: row {row0 + int(np.argmax(mask))} "
                             f"{what}")

    for name in ("time_s", "think_s", "app_work_s"):
        if name in f:
            x = f[name].to_numpy()
            fail(name, ~np.isfinite(x) | (x < 0), "is not a finite number of seconds >= 0")
    if "time_s" in f:
        t = f["time_s"].to_numpy()
        fail("time_s", np.append(False, np.diff(t) < 0), "goes back in time; sort an "
             "open-loop stream by time_s")
    for name in ("size_bytes", "conn_id", "client", "session"):
        if name in f:
            fail(name, f[name].to_numpy() < 0, "is negative")
    for p in f["object"].cat.categories:
        if not p or p.startswith("/") or ".." in p.split("/"):
            raise InputError(f"{where}: column 'object': '{p}' is not a path inside the file "
                             "set; write it relative to the file-set root, without '..'")
    if "page" in f:
        if "" in set(f["page"].cat.categories):
            raise InputError(f"{where}: column 'page' has an empty page name")
        fail("app_work_s", ~f["dynamic"].to_numpy() & (f["app_work_s"].to_numpy() != 0),
             "is a static request with application work; app_work_s must be 0 when dynamic "
             "is false")


def _check_groups(f: pd.DataFrame, where: str, row0: int) -> None:
    """Every connection ends with keep_alive false (and only there) and has one client;
    every session has one client."""
    conn = f["conn_id"].to_numpy()
    if not len(conn):
        return
    order = np.argsort(conn, kind="stable")
    c = conn[order]
    last = np.append(c[1:] != c[:-1], True)
    keep = f["keep_alive"].to_numpy()[order]
    wrong = keep == last
    if wrong.any():
        j = int(np.argmax(wrong))
        i = order[j]
        state = "true on its last request" if last[j] else "false before its last request"
        raise InputError(f"{where}: column 'keep_alive': connection {conn[i]} has keep_alive "
                         f"{state} (row {row0 + i}); keep_alive is true on every request of "
                         "a connection but the last")
    for name in ("conn_id", "session"):
        if name not in f:
            continue
        ids = f[name].to_numpy()
        o = np.argsort(ids, kind="stable")
        same = ids[o][1:] == ids[o][:-1]
        cl = f["client"].to_numpy()[o]
        split = same & (cl[1:] != cl[:-1])
        if split.any():
            i = o[int(np.argmax(split)) + 1]
            raise InputError(f"{where}: column {name!r}: {name} {ids[i]} is used by more than "
                             f"one client (row {row0 + i}); each belongs to one client")


def _to_table(frame: pd.DataFrame, meta: dict) -> pa.Table:
    arrays, fields = [], []
    for name in frame.columns:
        kind = COLUMNS[name]
        col = frame[name]
        if kind == "str":
            cats = pa.array(list(col.cat.categories), type=pa.string())
            arr = pa.DictionaryArray.from_arrays(
                pa.array(col.cat.codes.to_numpy(), type=pa.int32()), cats).dictionary_decode()
        else:
            arr = pa.array(col.to_numpy(), type=_ARROW[kind])
        arrays.append(arr)
        fields.append(pa.field(name, _ARROW[kind], nullable=False))
    schema = pa.schema(fields, metadata={
        VERSION_KEY: str(FORMAT_VERSION).encode(),
        META_KEY: json.dumps(jsonable(meta), sort_keys=True, allow_nan=False).encode()})
    return pa.Table.from_arrays(arrays, schema=schema)


def _parquet(path: Path) -> tuple[dict, pq.ParquetFile]:
    """The stream file's meta and the file opened for reading, its schema checked."""
    meta, strings = _open(path)
    try:
        pf = pq.ParquetFile(path, read_dictionary=strings)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: cannot read as Parquet: {exc}") from None
    _check_schema(pf.schema_arrow, str(path))
    return meta, pf


def _open(path: Path) -> tuple[dict, list[str]]:
    """The file's meta, after checking its format version, and the string columns it
    has (read as dictionaries, so they become pandas categoricals)."""
    if not path.is_file():
        raise InputError(f"{path}: no such stream file")
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: not a Parquet stream file ({exc})") from None
    raw = schema.metadata or {}
    version = raw.get(VERSION_KEY, str(FORMAT_VERSION).encode()).decode()
    if not version.isdigit() or int(version) > FORMAT_VERSION:
        raise InputError(f"{path}: stream format version {version}; this offloadlab reads "
                         f"version {FORMAT_VERSION} and older; upgrade offloadlab")
    try:
        meta = json.loads(raw.get(META_KEY, b"{}"))
    except ValueError:
        raise InputError(f"{path}: the {META_KEY.decode()} metadata is not JSON") from None
    strings = [c for c in COLUMNS if COLUMNS[c] == "str" and c in schema.names]
    return {**meta, "format_version": int(version)}, strings


def _check_schema(schema: pa.Schema, where: str) -> None:
    ok = {"float": pa.types.is_floating, "int": pa.types.is_integer,
          "bool": pa.types.is_boolean,
          "str": lambda t: (pa.types.is_string(t) or pa.types.is_large_string(t)
                            or (pa.types.is_dictionary(t) and (pa.types.is_string(t.value_type)
                                or pa.types.is_large_string(t.value_type))))}
    for f in schema:
        kind = COLUMNS.get(f.name)
        if kind is not None and not ok[kind](f.type):
            raise InputError(f"{where}: column {f.name!r} is stored as {f.type}; it must be "
                             f"{_KIND_NAME[kind]}")


def _frame_from_arrow(table: pa.Table, where: str, row0: int = 0,
                      connections: bool = True) -> pd.DataFrame:
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if COLUMNS.get(name) == "str" and not pa.types.is_dictionary(col.type):
            col = col.dictionary_encode()
        cols[name] = col.to_pandas()
    return _checked(pd.DataFrame(cols), where, row0, connections)
