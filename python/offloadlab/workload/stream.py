"""Request streams: the requests a load generator sends and a simulator replays.

A :class:`Stream` is a table with one row per HTTP request, written to Parquet in a
stable, versioned format (``docs/workload.md``, "Request streams"). Generators build one
from an *objects table* (at least ``path``, ``size_bytes``, ``probability``; a file
set's manifest is one) and a seed; the same seed gives the same stream, row for row::

    s = poisson(objects, rate=100, duration_s=60, keep_alive=5, seed=1)
    s = closed(objects, clients=64, think="det(0)", requests=1000)      # saturation
    s = sessions(objects, "support", clients=100, sessions=20)
    s.write("stream.parquet");  s = read("stream.parquet");  s.describe()

Columns (units in the names; rows are in the order a consumer should read them):

=============  =======  ==============================================================
time_s         float64  open loop: intended send time, seconds from the start; a
                        request is sent at max(time_s, when the previous response on
                        its connection has been read)
think_s        float64  closed loop (instead of time_s): seconds the client waits after
                        its previous response (or the start) before sending this request
object         string   path of the requested file, relative to the file-set root
size_bytes     int64    expected response body size, so a client can verify it
conn_id        int64    requests with the same conn_id share one connection, in row order
keep_alive     bool     whether the connection stays open after this request (false on
                        the last request of every connection)
client         int64    the client that sends the request (open loop: client = conn_id)
session        int64    (sessions only) the user session the request belongs to
page           string   (sessions only) the page type, e.g. "file_catalog"
dynamic        bool     (sessions only) true for a page's own request, which costs
                        application work; false for its embedded static files
app_work_s     float64  (sessions only) application work of a dynamic request, seconds
                        of server CPU; 0 for static requests
=============  =======  ==============================================================
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from offloadlab import dist
from offloadlab.errors import InputError
from offloadlab.results import jsonable, write_atomic

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


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(message)


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
    meta = _file_meta(path)
    table = _read_table(path)
    return Stream(_frame_from_arrow(table, str(path)), meta)


def iter_batches(path: str | Path, rows: int = 65_536) -> Iterator[pd.DataFrame]:
    """The rows of a stream file as DataFrames of at most ``rows`` rows, in file order,
    holding one batch in memory at a time. Columns, types and per-row values are checked
    batch by batch; the whole-stream checks (every connection ends with keep_alive false
    and stays with one client) are made only by :func:`read`."""
    path = Path(path)
    rows = _positive_int("rows", rows)
    _file_meta(path)
    try:
        pf = pq.ParquetFile(path, read_dictionary=_string_columns(path))
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: cannot read as Parquet: {exc}") from None
    _check_schema(pf.schema_arrow, str(path))
    start, last_time = 0, -math.inf
    for batch in pf.iter_batches(batch_size=rows):
        frame = _frame_from_arrow(pa.Table.from_batches([batch]), str(path), start,
                                  connections=False)
        if "time_s" in frame and len(frame):
            if frame["time_s"].iloc[0] < last_time:
                raise InputError(f"{path}: column 'time_s': row {start} goes back in time; "
                                 "sort an open-loop stream by time_s")
            last_time = frame["time_s"].iloc[-1]
        start += len(frame)
        yield frame


# ------------------------------------------------------------------ arrival processes


class Arrivals:
    """An open-loop arrival process of connection initiations (requests, for HTTP/1.0)."""

    kind: ClassVar[str]

    def times(self, rng: np.random.Generator, count: int | None,
              duration_s: float | None) -> np.ndarray:
        """Arrival times in seconds, increasing: at most ``count`` of them, all before
        ``duration_s`` (either bound may be None, not both)."""
        raise NotImplementedError

    def rate_at(self, t) -> np.ndarray:
        raise NotImplementedError

    def integrated(self, t) -> np.ndarray:
        """Expected arrivals in [0, t): the integral of the rate."""
        raise NotImplementedError


@dataclass(frozen=True)
class Poisson(Arrivals):
    """Poisson arrivals at ``rate`` per second: independent exponential gaps of mean
    1/rate, as Webstone modified in seed 000 (gaps between session initiations)."""

    rate: float
    kind: ClassVar[str] = "poisson"

    def __post_init__(self) -> None:
        _check_rate("poisson rate", self.rate)

    def times(self, rng, count, duration_s):
        limit = math.inf if duration_s is None else duration_s * self.rate
        return _unit_points(rng, count, limit) / self.rate

    def rate_at(self, t):
        return np.full(np.shape(t), self.rate)

    def integrated(self, t):
        return self.rate * np.asarray(t, dtype=float)

    def __str__(self) -> str:
        return f"poisson(rate={self.rate!r})"


@dataclass(frozen=True)
class Constant(Arrivals):
    """Evenly spaced arrivals at 0, 1/rate, 2/rate, ... (each computed as k/rate, so
    there is no drift): exactly rate x duration_s arrivals in [0, duration_s)."""

    rate: float
    kind: ClassVar[str] = "constant"

    def __post_init__(self) -> None:
        _check_rate("constant rate", self.rate)

    def times(self, rng, count, duration_s):
        n = count if duration_s is None else math.ceil(duration_s * self.rate - 1e-9)
        if count is not None:
            n = min(n, count)
        t = np.arange(n, dtype=float) / self.rate
        return t if duration_s is None else t[t < duration_s]

    def rate_at(self, t):
        return np.full(np.shape(t), self.rate)

    def integrated(self, t):
        return self.rate * np.asarray(t, dtype=float)

    def __str__(self) -> str:
        return f"constant(rate={self.rate!r})"


@dataclass(frozen=True)
class Ramp(Arrivals):
    """A non-homogeneous Poisson process whose rate is linear between breakpoints
    ``(t_s, rate)`` (the first at t = 0) and stays at the last rate after the last one.

    Generated by time rescaling: if E_1 < E_2 < ... are the points of a unit-rate Poisson
    process, then Lambda^-1(E_i) are the points of a Poisson process with rate r(t),
    where Lambda(t) is the integral of r from 0 to t (piecewise quadratic here, inverted
    exactly segment by segment). Unlike thinning, no draw is thrown away.
    """

    points: tuple[tuple[float, float], ...]
    kind: ClassVar[str] = "ramp"

    def __post_init__(self) -> None:
        pts = tuple((float(t), float(r)) for t, r in self.points)
        object.__setattr__(self, "points", pts)
        _require(len(pts) >= 1, "ramp: give at least one breakpoint (t_s, rate), e.g. "
                                "[(0, 10), (60, 100)]")
        t = np.array([p[0] for p in pts])
        r = np.array([p[1] for p in pts])
        _require(t[0] == 0, f"ramp: the first breakpoint is at t={t[0]:g}s; start at 0")
        _require(bool(np.all(np.isfinite(t)) and np.all(np.diff(t) > 0)),
                 "ramp: breakpoint times must be finite and strictly increasing")
        _require(bool(np.all(np.isfinite(r)) and np.all(r >= 0)),
                 "ramp: rates must be finite and >= 0 requests/s")
        _require(bool(np.any(r > 0)), "ramp: every rate is 0; no request would be sent")

    @property
    def _t(self) -> np.ndarray:
        return np.array([p[0] for p in self.points])

    @property
    def _r(self) -> np.ndarray:
        return np.array([p[1] for p in self.points])

    @property
    def end_s(self) -> float:
        """Time of the last breakpoint."""
        return self.points[-1][0]

    def _knots(self) -> np.ndarray:
        t, r = self._t, self._r
        return np.concatenate([[0.0], np.cumsum(np.diff(t) * (r[:-1] + r[1:]) / 2)])

    def rate_at(self, t):
        return np.interp(np.asarray(t, dtype=float), self._t, self._r)

    def integrated(self, t):
        t_arr = np.asarray(t, dtype=float)
        tk, r, knots = self._t, self._r, self._knots()
        k = np.clip(np.searchsorted(tk, t_arr, side="right") - 1, 0, len(tk) - 1)
        dt = t_arr - tk[k]
        slope = np.append(np.diff(r) / np.diff(tk), 0.0)[k]
        return knots[k] + r[k] * dt + slope * dt**2 / 2

    def _inverse(self, y: np.ndarray) -> np.ndarray:
        tk, r, knots = self._t, self._r, self._knots()
        h = np.append(np.diff(tk), math.inf)
        k = np.clip(np.searchsorted(knots, y, side="right") - 1, 0, len(tk) - 1)
        y0 = y - knots[k]
        a = np.append(np.diff(r) / np.diff(tk) / 2, 0.0)[k]   # Lambda = a x^2 + b x on a segment
        b = r[k]
        root = np.sqrt(np.maximum(b * b + 4 * a * y0, 0.0))
        den = b + root
        x = np.divide(2 * y0, den, out=np.zeros_like(y0), where=den > 0)
        return tk[k] + np.clip(x, 0.0, h[k])

    def times(self, rng, count, duration_s):
        total = math.inf if self._r[-1] > 0 else float(self._knots()[-1])
        limit = total if duration_s is None else min(total, float(self.integrated(duration_s)))
        t = self._inverse(_unit_points(rng, count, limit))
        return t if duration_s is None else t[t < duration_s]

    def __str__(self) -> str:
        inner = ", ".join(f"{dist.format_time(t)}:{r!r}" for t, r in self.points)
        return f"ramp({inner})"


def parse_arrivals(spec: str | Arrivals) -> Arrivals:
    """``poisson(rate=100)``, ``constant(100)``, ``ramp(0s:10, 60s:100, 120s:100)``
    (breakpoints ``time:rate``, time with a unit) into an :class:`Arrivals` value."""
    if isinstance(spec, Arrivals):
        return spec
    m = re.fullmatch(r"\s*(\w+)\s*\((.*)\)\s*", str(spec))
    if not m or m.group(1).lower() not in ("poisson", "constant", "ramp"):
        raise InputError(f"arrivals '{spec}': write poisson(rate=100), constant(rate=100) or "
                         "ramp(0s:10, 60s:100)")
    kind, body = m.group(1).lower(), m.group(2).strip()
    if kind == "ramp":
        return Ramp(tuple(_ramp_point(item) for item in body.split(",") if item.strip()))
    name, sep, value = body.partition("=")
    if sep and name.strip() != "rate":
        raise InputError(f"{kind}: unknown parameter '{name.strip()}'; it takes rate")
    rate = _number(f"{kind} rate", value if sep else body)
    return Poisson(rate) if kind == "poisson" else Constant(rate)


def _ramp_point(item: str) -> tuple[float, float]:
    t, sep, r = item.partition(":")
    if not sep:
        raise InputError(f"ramp breakpoint '{item.strip()}': write time:rate, e.g. 60s:100")
    return dist.parse_time(t), _number("ramp rate", r)


def _unit_points(rng: np.random.Generator, count: int | None, limit: float) -> np.ndarray:
    """Points of a unit-rate Poisson process in (0, limit): at most ``count`` of them."""
    if count is None and not math.isfinite(limit):
        raise InputError("give count= or duration_s= to bound the stream")
    guess = int(limit + 6 * math.sqrt(limit) + 16) if math.isfinite(limit) else count
    block = guess if count is None else min(count, guess)
    parts, have, last = [], 0, 0.0
    while True:
        pts = last + np.cumsum(rng.exponential(1.0, block))
        inside = pts[pts < limit]
        if count is not None:
            inside = inside[: count - have]
        parts.append(inside)
        have += len(inside)
        if len(inside) < len(pts) or (count is not None and have >= count):
            return np.concatenate(parts)
        last = pts[-1]


# --------------------------------------------------------- count distributions


class Count:
    """A distribution of whole numbers: requests per connection, embedded files per page."""

    low: int

    @property
    def mean(self) -> float:
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class Fixed(Count):
    """Always ``n``."""

    n: int

    def __post_init__(self) -> None:
        _require(isinstance(self.n, int | np.integer) and self.n >= 0,
                 f"det({self.n}): use a whole number >= 0")

    @property
    def low(self) -> int:
        return int(self.n)

    @property
    def mean(self) -> float:
        return float(self.n)

    def sample(self, rng, size):
        return np.full(size, self.n, dtype=np.int64)

    def __str__(self) -> str:
        return f"det({self.n})"


@dataclass(frozen=True)
class Geometric(Count):
    """Geometric on 1, 2, 3, ...: P[N = n] = p (1-p)^(n-1) with p = 1/mean."""

    mean_n: float

    def __post_init__(self) -> None:
        _require(math.isfinite(self.mean_n) and self.mean_n >= 1,
                 f"geom(mean={self.mean_n:g}): the mean must be >= 1")

    low: ClassVar[int] = 1

    @property
    def mean(self) -> float:
        return float(self.mean_n)

    def sample(self, rng, size):
        return rng.geometric(1.0 / self.mean_n, size).astype(np.int64)

    def __str__(self) -> str:
        return f"geom(mean={self.mean_n:g})"


@dataclass(frozen=True)
class UniformInt(Count):
    """Uniform on the whole numbers lo, lo+1, ..., hi."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        _require(0 <= self.lo <= self.hi, f"uniform(lo={self.lo}, hi={self.hi}): need "
                                          "0 <= lo <= hi")

    @property
    def low(self) -> int:
        return int(self.lo)

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2

    def sample(self, rng, size):
        return rng.integers(self.lo, self.hi, size, endpoint=True, dtype=np.int64)

    def __str__(self) -> str:
        return f"uniform(lo={self.lo}, hi={self.hi})"


def parse_count(spec: int | str | Count, what: str = "count") -> Count:
    """``5``, ``"det(5)"``, ``"geom(mean=5)"`` or ``"uniform(lo=5, hi=15)"`` into a
    :class:`Count`. ``what`` names the field in error messages."""
    if isinstance(spec, Count):
        return spec
    if isinstance(spec, bool):
        raise InputError(f"{what}={spec}: give a number, e.g. {what}=5 or {what}='geom(mean=5)'")
    if isinstance(spec, int | np.integer):
        return _wrap(what, Fixed, int(spec))
    text = str(spec).strip()
    if re.fullmatch(r"\d+", text):
        return _wrap(what, Fixed, int(text))
    m = re.fullmatch(r"(\w+)\s*\((.*)\)", text)
    forms = "5, det(5), geom(mean=5) or uniform(lo=5, hi=15)"
    if not m or m.group(1).lower() not in ("det", "geom", "uniform"):
        raise InputError(f"{what}='{spec}' is not a count; write {forms}")
    kind = m.group(1).lower()
    names = {"det": ["n"], "geom": ["mean"], "uniform": ["lo", "hi"]}[kind]
    args: dict[str, float] = {}
    for i, item in enumerate(a.strip() for a in m.group(2).split(",") if a.strip()):
        name, sep, value = item.partition("=")
        name = name.strip() if sep else (names[i] if i < len(names) else "?")
        if name not in names or name in args:
            raise InputError(f"{what}='{spec}': {kind} takes {', '.join(names)}")
        args[name] = _number(f"{what} {kind} {name}", value if sep else item)
    if set(args) != set(names):
        raise InputError(f"{what}='{spec}': {kind} needs {', '.join(names)}; write {forms}")
    if kind == "geom":
        return _wrap(what, Geometric, args["mean"])
    ints = {k: int(v) for k, v in args.items()}
    if any(ints[k] != args[k] for k in args):
        raise InputError(f"{what}='{spec}': {kind} takes whole numbers")
    return _wrap(what, Fixed, ints["n"]) if kind == "det" else _wrap(what, UniformInt, **ints)


def _wrap(what: str, cls, *args, **kwargs):
    try:
        return cls(*args, **kwargs)
    except InputError as exc:
        raise InputError(f"{what}: {exc}") from None


# ----------------------------------------------------------------------- page mixes


@dataclass(frozen=True)
class PageMix:
    """A SPECweb2005-like workload: page types and their long-run shares (percent).

    Sessions start at ``entry`` and never return to it; after every page the session
    ends with probability p_entry (the entry page's share), otherwise the next page is
    drawn from the other pages in proportion to their shares. Session length is then
    geometric with mean 1/p_entry pages, every page of the concatenated walk is an
    entry page with probability p_entry, and the long-run page shares equal the table.
    """

    name: str
    pages: tuple[str, ...]
    percent: tuple[float, ...]
    entry: str

    def __post_init__(self) -> None:
        _require(len(self.pages) == len(self.percent) and len(set(self.pages)) == len(self.pages),
                 f"page mix {self.name}: one share per distinct page")
        _require(all(p > 0 and math.isfinite(p) for p in self.percent),
                 f"page mix {self.name}: shares must be > 0")
        _require(self.entry in self.pages, f"page mix {self.name}: entry page '{self.entry}' "
                                           "is not one of its pages")
        _require(self.probabilities[self.pages.index(self.entry)] < 1,
                 f"page mix {self.name}: needs a page other than the entry page")

    @property
    def probabilities(self) -> np.ndarray:
        p = np.asarray(self.percent, dtype=float)
        return p / p.sum()

    @property
    def p_entry(self) -> float:
        return float(self.probabilities[self.pages.index(self.entry)])

    @property
    def mean_pages(self) -> float:
        """Mean pages per session, 1/p_entry."""
        return 1.0 / self.p_entry


# Reference 001 §4.6 (the thesis's Tables 4.1-4.3), page names in snake_case.
MIXES: dict[str, PageMix] = {
    "banking": PageMix("banking", (
        "summary", "add_payee", "bill_pay", "bill_pay_status", "check_detail_html",
        "check_image", "change_profile", "login", "logout", "payee_info", "post_check_order",
        "post_fund_transfer", "post_profile", "quick_pay", "request_checks", "req_xfer_form"),
        (15.11, 1.12, 13.89, 2.23, 8.45, 16.89, 1.22, 21.53, 6.16, 0.80, 0.88, 1.24, 0.88,
         6.67, 1.22, 1.71), entry="login"),
    "ecommerce": PageMix("ecommerce", (
        "billing", "browse", "browse_product", "cart", "confirm", "customize1", "customize2",
        "customize3", "index", "login", "product_detail", "search", "shipping"),
        (3.37, 11.75, 10.03, 5.30, 2.53, 16.93, 8.95, 6.16, 13.08, 3.78, 8.02, 6.55, 3.55),
        entry="index"),
    "support": PageMix("support", (
        "catalog", "download", "file", "file_catalog", "home", "product", "search"),
        (11.71, 6.76, 13.51, 22.52, 8.11, 24.78, 12.61), entry="home"),
}

# Choices where reference 001 is silent (documented in docs/workload.md).
SESSION_THINK = "exp(mean=10s)"
SESSION_EMBEDDED = 19            # ~5% dynamic requests, reference 001 §7.2 (miss floor)
SESSION_APP_WORK = "exp(mean=1ms)"


# ----------------------------------------------------------------------- generators


def open_loop(objects, arrivals: Arrivals | str, *, count: int | None = None,
              duration_s: float | str | None = None, keep_alive=False,
              size_class: int | None = None, seed: int | np.random.Generator = 1,
              generator: str | None = None) -> Stream:
    """Requests from an open-loop arrival process of *connection initiations*.

    ``keep_alive`` False is HTTP/1.0 (one request per connection); otherwise it gives the
    requests per HTTP/1.1 connection (a number or a count spec such as ``"geom(mean=5)"``),
    sent back to back on the connection (all with the connection's ``time_s``). The
    stream stops after ``count`` requests (the last connection may be cut short) and/or
    before ``duration_s`` seconds (connections starting before it are kept whole).
    Objects are drawn independently by their ``probability``, from one ``size_class``
    if given. Every connection is its own client (client = conn_id).
    """
    arr = parse_arrivals(arrivals)
    table = ObjectTable.of(objects, size_class)
    count = _optional_positive_int("count", count)
    duration = _optional_seconds("duration_s", duration_s)
    if isinstance(arr, Ramp) and count is None and duration is None:
        duration = arr.end_s
    if count is None and duration is None:
        raise InputError(f"{arr.kind}: give count= (requests) and/or duration_s= to bound "
                         "the stream")
    per_conn = _conn_lengths(keep_alive)
    rng_time, rng_conn, rng_obj = _rngs(seed, 3)
    starts = arr.times(rng_time, count, duration)
    lengths = (np.ones(len(starts), dtype=np.int64) if per_conn is None
               else per_conn.sample(rng_conn, len(starts)))
    if count is not None:
        lengths = _cut(lengths, count)
    conn = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    obj, size = table.draw(rng_obj, len(conn))
    frame = pd.DataFrame({"time_s": np.repeat(starts[: len(lengths)], lengths), "object": obj,
                          "size_bytes": size, "conn_id": conn,
                          "keep_alive": _keep_alive(_starts_of(lengths)), "client": conn})
    params = {"arrivals": str(arr), "count": count, "duration_s": duration,
              "keep_alive": _spec_str(per_conn), "size_class": table.size_class, **table.params}
    return Stream(frame, _meta(generator or arr.kind, seed, params, duration))


def poisson(objects, rate: float, **kwargs) -> Stream:
    """Poisson arrivals at ``rate`` connections/s (requests/s for HTTP/1.0); see
    :func:`open_loop` for ``count``, ``duration_s``, ``keep_alive``, ``size_class``, ``seed``."""
    return open_loop(objects, Poisson(_number("rate", rate)), **kwargs)


def constant(objects, rate: float, **kwargs) -> Stream:
    """Evenly spaced arrivals at ``rate`` per second; see :func:`open_loop`."""
    return open_loop(objects, Constant(_number("rate", rate)), **kwargs)


def ramp(objects, points: Sequence[tuple[float, float]] | str, **kwargs) -> Stream:
    """Poisson arrivals whose rate ramps linearly between breakpoints ``[(t_s, rate),
    ...]`` (or ``"0s:10, 60s:100"``); without ``count``/``duration_s`` the stream ends at
    the last breakpoint. See :class:`Ramp` and :func:`open_loop`."""
    arr = parse_arrivals(f"ramp({points})") if isinstance(points, str) else Ramp(tuple(points))
    return open_loop(objects, arr, **kwargs)


def closed(objects, clients: int, *, think: str | dist.Dist = "det(0)",
           requests: int | None = None, duration_s: float | str | None = None,
           keep_alive=False, size_class: int | None = None,
           seed: int | np.random.Generator = 1) -> Stream:
    """``clients`` closed-loop clients: each waits ``think`` (a distribution spec;
    ``det(0)`` is saturation mode, back to back) after each response, then sends its
    next request. Each client has ``requests`` rows and/or the rows it could send before
    ``duration_s`` if responses were instant (the think times alone fit in it); a
    consumer stops at ``duration_s`` (kept in ``meta``). ``keep_alive`` groups each
    client's consecutive requests into connections as in :func:`open_loop`.

    Rows are interleaved: every client's first request, then every client's second, ...
    so a consumer reading in order finds every client's next request nearby.
    """
    table = ObjectTable.of(objects, size_class)
    n_clients = _positive_int("clients", clients)
    think_d = _dist(think, "think")
    requests = _optional_positive_int("requests", requests)
    duration = _optional_seconds("duration_s", duration_s)
    _closed_bound("requests", requests, duration, think_d)
    per_conn = _conn_lengths(keep_alive)
    rng_think, rng_conn, rng_obj = _rngs(seed, 3)
    thinks = [_thinks(think_d, rng_think, requests, duration) for _ in range(n_clients)]
    n = np.array([len(t) for t in thinks], dtype=np.int64)
    client = np.repeat(np.arange(n_clients, dtype=np.int64), n)
    starts = np.concatenate([_conn_starts(k, per_conn, rng_conn) for k in n])
    cols = {"think_s": np.concatenate(thinks)}
    frame = _closed_frame(cols, client, n, starts, table, rng_obj)
    params = {"clients": n_clients, "think": str(think_d), "requests": requests,
              "duration_s": duration, "keep_alive": _spec_str(per_conn),
              "size_class": table.size_class, **table.params}
    return Stream(frame, _meta("closed", seed, params, duration))


def sessions(objects, workload: str | PageMix = "support", *, clients: int,
             sessions: int | None = None, duration_s: float | str | None = None,
             think: str | dist.Dist = SESSION_THINK,
             embedded: int | str | Count | Mapping[str, int | str | Count] = SESSION_EMBEDDED,
             app_work: str | dist.Dist | Mapping[str, str | dist.Dist] = SESSION_APP_WORK,
             keep_alive: bool | str | int | Count = "page", size_class: int | None = None,
             seed: int | np.random.Generator = 1) -> Stream:
    """SPECweb2005-like sessions of a ``workload`` (``"banking"``, ``"ecommerce"``,
    ``"support"`` or a :class:`PageMix`) for ``clients`` simultaneous session threads
    (closed loop), each running ``sessions`` sessions back to back and/or as many as fit
    in ``duration_s`` of think time.

    A page is one dynamic request (``dynamic`` true, ``app_work_s`` drawn from
    ``app_work``, a spec or a {page: spec} mapping; pages not named get the default)
    preceded by a ``think`` time, then ``embedded`` static files (a count or {page:
    count}) with no think time. The page walk is described at :class:`PageMix`.
    ``keep_alive``: ``"page"`` (one connection per page, the default), ``"session"``,
    False (HTTP/1.0) or requests per connection as in :func:`open_loop`. Every request's
    object, dynamic ones included, is drawn from the objects table by popularity; the
    server emulates a dynamic page by spending ``app_work_s`` of CPU before sending it.
    """
    mix = _mix(workload)
    table = ObjectTable.of(objects, size_class)
    n_clients = _positive_int("clients", clients)
    n_sessions = _optional_positive_int("sessions", sessions)
    duration = _optional_seconds("duration_s", duration_s)
    think_d = _dist(think, "think")
    _closed_bound("sessions", n_sessions, duration, think_d)
    emb = _per_page("embedded", embedded, mix, lambda v, w: parse_count(v, w))
    work = _per_page("app_work", app_work, mix, _dist)
    group, per_conn = _session_grouping(keep_alive)
    rng_walk, rng_think, rng_emb, rng_work, rng_conn, rng_obj = _rngs(seed, 6)

    pages, sess, thinks, page_client, offset = [], [], [], [], 0
    for c in range(n_clients):
        p, s, t = _walk(mix, think_d, rng_walk, rng_think, n_sessions, duration)
        pages.append(p)
        sess.append(s + offset)
        offset += int(s.max()) + 1 if len(s) else 0
        thinks.append(t)
        page_client.append(np.full(len(p), c, dtype=np.int64))
    page = np.concatenate(pages).astype(np.int64)
    page_sess = np.concatenate(sess).astype(np.int64)
    page_think = np.concatenate(thinks)
    page_client = np.concatenate(page_client)
    n_emb = _sample_per_page(emb, page, rng_emb)
    work_s = np.zeros(len(page))
    for i, d in enumerate(work):
        mask = page == i
        work_s[mask] = d.sample(rng_work, int(mask.sum()))

    reps = 1 + n_emb
    first = _starts_of(reps)
    client = np.repeat(page_client, reps)
    session = np.repeat(page_sess, reps)
    n = np.bincount(client, minlength=n_clients)
    if group == "page":
        starts = first
    elif group == "session":
        starts = first & np.concatenate([[True], session[1:] != session[:-1]])
    else:
        starts = np.concatenate([_conn_starts(k, per_conn, rng_conn) for k in n]).astype(bool)
    cols = {"think_s": np.where(first, np.repeat(page_think, reps), 0.0),
            "session": session,
            "page": pd.Categorical.from_codes(np.repeat(page, reps), list(mix.pages)),
            "dynamic": first, "app_work_s": np.where(first, np.repeat(work_s, reps), 0.0)}
    frame = _closed_frame(cols, client, n, starts, table, rng_obj)
    params = {"workload": mix.name, "clients": n_clients, "sessions": n_sessions,
              "duration_s": duration, "think": str(think_d),
              "embedded": {p: str(e) for p, e in zip(mix.pages, emb, strict=True)},
              "app_work": {p: str(w) for p, w in zip(mix.pages, work, strict=True)},
              "keep_alive": group or _spec_str(per_conn), "size_class": table.size_class,
              **table.params}
    return Stream(frame, _meta("sessions", seed, params, duration))


def _walk(mix: PageMix, think: dist.Dist, rng_walk, rng_think, n_sessions, duration):
    """One client's pages (codes into mix.pages), session index of each (from 0) and the
    think time before each, for ``n_sessions`` sessions and/or ``duration`` of think."""
    probs = mix.probabilities
    entry = mix.pages.index(mix.entry)
    others = probs.copy()
    others[entry] = 0.0
    cdf = np.cumsum(others / others.sum())
    pages, sess, thinks, done, clock = [], [], [], 0, 0.0
    while True:
        if n_sessions is not None:
            block = n_sessions - done
        else:
            block = int(duration / (think.mean * mix.mean_pages) * 1.2) + 16
        lengths = rng_walk.geometric(mix.p_entry, block)
        p = np.minimum(np.searchsorted(cdf, rng_walk.random(int(lengths.sum())), side="right"),
                       len(probs) - 1)
        p[_starts_at(lengths)] = entry
        s = np.repeat(np.arange(done, done + block), lengths)
        t = think.sample(rng_think, len(p))
        keep = len(p)
        if duration is not None:   # the pages whose think times fit before duration
            keep = int(np.searchsorted(clock + np.cumsum(t), duration, side="left"))
            clock += float(t.sum())
        pages.append(p[:keep])
        sess.append(s[:keep])
        thinks.append(t[:keep])
        done += block
        if keep < len(p) or (n_sessions is not None and done >= n_sessions):
            break
    sessions_idx = np.concatenate(sess)
    _, dense = np.unique(sessions_idx, return_inverse=True)
    return np.concatenate(pages), dense.astype(np.int64), np.concatenate(thinks)


# -------------------------------------------------------------------- objects table


@dataclass(frozen=True, eq=False)
class ObjectTable:
    """The objects requests are drawn from: paths, sizes and the popularity CDF."""

    paths: pd.Index            # sorted unique paths (the categories of the object column)
    codes: np.ndarray          # per object, its position in ``paths``
    sizes: np.ndarray
    cdf: np.ndarray
    params: dict
    size_class: int | None = None

    @classmethod
    def of(cls, objects, size_class: int | None = None) -> ObjectTable:
        """From a DataFrame with columns ``path``, ``size_bytes``, ``probability`` (any
        scale, normalised here) and optionally ``class`` (else computed from the size by
        :func:`offloadlab.workload.classes.size_class`); or from a file set (anything with
        a ``frame()`` manifest), a manifest file (.parquet, .csv) or a materialised set's
        folder. ``size_class`` keeps only the objects of that class."""
        where = "objects"
        if isinstance(objects, str | Path):
            where = str(objects)
            frame = _read_objects(Path(objects))
        elif isinstance(objects, pd.DataFrame):
            frame = objects
        elif callable(getattr(objects, "frame", None)):
            frame = objects.frame()
        else:
            raise InputError("objects: give a DataFrame (a file-set manifest), a file set, or "
                             "the path of a manifest with columns path, size_bytes, "
                             "probability")
        missing = [c for c in ("path", "size_bytes", "probability") if c not in frame]
        if missing:
            raise InputError(f"{where}: no column {', '.join(map(repr, missing))}; an objects "
                             "table needs path, size_bytes and probability (e.g. a file-set "
                             "manifest)")
        if size_class is not None:
            if isinstance(size_class, bool) or not isinstance(size_class, int | np.integer):
                raise InputError(f"size_class={size_class!r}: use a class number 0-4")
            if "class" in frame:
                klass = frame["class"].to_numpy()
            else:
                from offloadlab.workload.classes import size_class as class_of
                klass = class_of(frame["size_bytes"].to_numpy())
            frame = frame[klass == size_class]
            if frame.empty:
                raise InputError(f"{where}: no object of class {size_class}; choose a class "
                                 "the file set has")
        paths = frame["path"]
        if not len(frame):
            raise InputError(f"{where}: the objects table is empty")
        if not all(isinstance(p, str) and p for p in paths):
            raise InputError(f"{where}: column 'path' must hold non-empty strings")
        sizes = frame["size_bytes"].to_numpy()
        if not (np.issubdtype(sizes.dtype, np.integer) and np.all(sizes >= 0)):
            raise InputError(f"{where}: column 'size_bytes' must hold whole numbers >= 0")
        prob = pd.to_numeric(frame["probability"], errors="coerce").to_numpy(dtype=float)
        if not (np.all(np.isfinite(prob)) and np.all(prob >= 0) and prob.sum() > 0):
            raise InputError(f"{where}: column 'probability' must be finite, >= 0 and not all "
                             "0 (popularity weights; they are normalised)")
        uniq, codes = np.unique(paths.to_numpy(dtype=object).astype(str), return_inverse=True)
        if len(uniq) < len(frame):
            dup = pd.Series(paths).value_counts().index[0]
            raise InputError(f"{where}: path '{dup}' appears more than once; list each object "
                             "once")
        cdf = np.cumsum(prob)
        cdf /= cdf[-1]
        digest = hashlib.sha256()
        for part in (uniq[codes].astype("U"), sizes.astype(np.int64), prob):
            digest.update(np.ascontiguousarray(part).tobytes())
        return cls(pd.Index(list(uniq)), codes, sizes.astype(np.int64), cdf,
                   {"objects": len(frame), "objects_sha256": digest.hexdigest()[:16]},
                   None if size_class is None else int(size_class))

    def draw(self, rng: np.random.Generator, n: int) -> tuple[pd.Categorical, np.ndarray]:
        """``n`` independent draws by popularity: the object column and the sizes."""
        i = np.minimum(np.searchsorted(self.cdf, rng.random(n), side="right"),
                       len(self.cdf) - 1)
        return pd.Categorical.from_codes(self.codes[i], self.paths), self.sizes[i]


def _read_objects(path: Path) -> pd.DataFrame:
    """A materialised file set's folder (its manifest), or a .parquet / .csv table."""
    if path.is_dir():
        from offloadlab.workload import fileset

        return fileset.read_manifest(path)
    if not path.is_file():
        raise InputError(f"{path}: no such objects table or file-set folder")
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix == ".csv":
            return pd.read_csv(path, dtype={"path": str}, keep_default_na=False)
    except Exception as exc:  # pyarrow and pandas raise many types for a corrupt file
        raise InputError(f"{path}: cannot read the objects table: {exc}") from None
    raise InputError(f"{path}: an objects table is a .parquet or .csv file (or a file-set "
                     "folder)")


# ------------------------------------------------------------------------- helpers


def _rngs(seed, n: int) -> list[np.random.Generator]:
    """Independent generators, one per aspect (times, connections, objects, ...), so that
    changing one aspect (say keep-alive) leaves the others' draws unchanged."""
    if isinstance(seed, np.random.Generator):
        return seed.spawn(n)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < 2**64:
        raise InputError(f"seed={seed!r}: use an integer in [0, 2^64)")
    return [np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(n)]


def _meta(generator: str, seed, params: dict, duration: float | None) -> dict:
    return {"format_version": FORMAT_VERSION, "generator": generator,
            "seed": int(seed) if isinstance(seed, int | np.integer) else None,
            "duration_s": duration, "params": params}


def _closed_frame(cols: dict, client: np.ndarray, n: np.ndarray, starts: np.ndarray,
                  table: ObjectTable, rng_obj) -> pd.DataFrame:
    """Rows given client by client -> interleaved rows (by position in the client's
    sequence, then client) with connection ids and keep-alive flags."""
    seq = np.arange(len(client)) - np.repeat(np.cumsum(n) - n, n)
    order = np.lexsort((client, seq))
    keep = _keep_alive(starts)
    conn = np.cumsum(starts) - 1
    out = {k: (v[order] if isinstance(v, np.ndarray) else v.take(order)) for k, v in cols.items()}
    obj, size = table.draw(rng_obj, len(order))
    frame = pd.DataFrame({"think_s": out.pop("think_s"), "object": obj, "size_bytes": size,
                          "conn_id": _first_seen(conn[order]), "keep_alive": keep[order],
                          "client": client[order], **out})
    if "session" in frame:
        frame["session"] = _first_seen(frame["session"].to_numpy())
    return frame


def _first_seen(ids: np.ndarray) -> np.ndarray:
    """Renumber ids 0, 1, 2, ... in order of first appearance."""
    if not len(ids):
        return ids.astype(np.int64)
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse]


def _starts_at(lengths: np.ndarray) -> np.ndarray:
    """Positions where each group of ``lengths`` begins."""
    return (np.cumsum(lengths) - lengths).astype(np.int64)


def _starts_of(lengths: np.ndarray) -> np.ndarray:
    starts = np.zeros(int(lengths.sum()), dtype=bool)
    starts[_starts_at(lengths)[lengths > 0]] = True
    return starts


def _keep_alive(starts: np.ndarray) -> np.ndarray:
    """A request keeps its connection open unless the next one starts a new one (or it
    is the last)."""
    return np.append(~starts[1:], False) if len(starts) else starts.copy()


def _cut(lengths: np.ndarray, total: int) -> np.ndarray:
    """Connection lengths that add up to at most ``total`` requests (the last cut short)."""
    ends = np.cumsum(lengths)
    k = int(np.searchsorted(ends, total, side="left"))
    if k >= len(lengths):
        return lengths
    out = lengths[: k + 1].copy()
    out[-1] -= ends[k] - total
    return out


def _conn_starts(n: int, per_conn: Count | None, rng) -> np.ndarray:
    """Connection starts for one client's ``n`` consecutive requests."""
    if per_conn is None:
        return np.ones(n, dtype=bool)
    parts, have = [], 0
    while have < n:
        lengths = per_conn.sample(rng, max(16, int((n - have) / per_conn.mean) + 16))
        parts.append(lengths)
        have += int(lengths.sum())
    return _starts_of(_cut(np.concatenate(parts), n)) if n else np.zeros(0, dtype=bool)


def _conn_lengths(keep_alive) -> Count | None:
    """None for HTTP/1.0 (keep_alive False), else requests per connection."""
    if keep_alive is False or keep_alive is None:
        return None
    if keep_alive is True:
        raise InputError("keep_alive=True: give the requests per connection instead, e.g. "
                         "keep_alive=5 or keep_alive='geom(mean=5)'")
    count = parse_count(keep_alive, "keep_alive")
    if count.low < 1:
        raise InputError(f"keep_alive={keep_alive!r}: a connection carries at least 1 request")
    return count


def _session_grouping(keep_alive) -> tuple[str | None, Count | None]:
    """("page" | "session", None), or (None, requests per connection or None)."""
    if isinstance(keep_alive, str) and keep_alive.strip().lower() in ("page", "session"):
        return keep_alive.strip().lower(), None
    try:
        return None, _conn_lengths(keep_alive)
    except InputError as exc:
        raise InputError(f"{exc}; for sessions also keep_alive='page' (one connection per "
                         "page) or 'session'") from None


def _spec_str(count: Count | None) -> str | bool:
    return False if count is None else str(count)


def _thinks(think: dist.Dist, rng, requests: int | None, duration: float | None) -> np.ndarray:
    """One client's think times: ``requests`` of them and/or those whose running sum
    stays below ``duration``."""
    if duration is None:
        return think.sample(rng, requests)
    parts, clock, have = [], 0.0, 0
    while True:
        want = int(duration / think.mean * 1.1) + 16
        block = want if requests is None else min(want, requests - have)
        t = think.sample(rng, block)
        keep = int(np.searchsorted(clock + np.cumsum(t), duration, side="left"))
        parts.append(t[:keep])
        have += keep
        clock += float(t.sum())
        if keep < block or (requests is not None and have >= requests):
            return np.concatenate(parts)


def _closed_bound(name: str, n: int | None, duration: float | None, think: dist.Dist) -> None:
    if n is None and duration is None:
        raise InputError(f"give {name}= (per client) and/or duration_s= to bound the stream")
    if n is None and think.mean == 0:
        raise InputError(f"think={think} with only duration_s= has no end (zero think time); "
                         f"also give {name}= per client (the consumer stops at duration_s)")


def _mix(workload) -> PageMix:
    if isinstance(workload, PageMix):
        return workload
    mix = MIXES.get(str(workload).strip().lower())
    if mix is None:
        raise InputError(f"workload '{workload}': choose one of {', '.join(MIXES)}")
    return mix


def _per_page(what: str, value, mix: PageMix, parse) -> list:
    """One parsed value per page of ``mix`` from a value or a {page: value} mapping."""
    if isinstance(value, Mapping):
        unknown = [p for p in value if p not in mix.pages]
        if unknown:
            raise InputError(f"{what}: '{unknown[0]}' is not a {mix.name} page; its pages are "
                             f"{', '.join(mix.pages)}")
        default = {"embedded": SESSION_EMBEDDED, "app_work": SESSION_APP_WORK}[what]
        return [parse(value.get(p, default), f"{what}[{p}]") for p in mix.pages]
    one = parse(value, what)
    return [one] * len(mix.pages)


def _sample_per_page(counts: list[Count], page: np.ndarray, rng) -> np.ndarray:
    out = np.zeros(len(page), dtype=np.int64)
    if len(set(map(str, counts))) == 1:
        return counts[0].sample(rng, len(page))
    for i, c in enumerate(counts):
        mask = page == i
        out[mask] = c.sample(rng, int(mask.sum()))
    return out


def _dist(value, what: str = "dist") -> dist.Dist:
    if isinstance(value, dist.Dist):
        return value
    try:
        return dist.parse(value)
    except InputError as exc:
        raise InputError(f"{what}: {exc}") from None


def _number(what: str, value) -> float:
    if isinstance(value, bool):
        raise InputError(f"{what}={value!r}: give a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}='{value}' is not a number") from None
    if not math.isfinite(x):
        raise InputError(f"{what}={value!r} must be finite")
    return x


def _check_rate(what: str, rate: float) -> None:
    _require(isinstance(rate, int | float) and math.isfinite(rate) and rate > 0,
             f"{what}={rate!r}: use a finite rate > 0 per second, e.g. rate=100")


def _positive_int(what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InputError(f"{what}={value!r}: use a whole number >= 1")
    return int(value)


def _optional_positive_int(what: str, value) -> int | None:
    return None if value is None else _positive_int(what, value)


def _optional_seconds(what: str, value) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            seconds = dist.parse_time(value)
        except InputError as exc:
            raise InputError(f"{what}: {exc}") from None
    else:
        seconds = _number(what, value)
    if not seconds > 0:
        raise InputError(f"{what}={value!r}: use a duration > 0, e.g. {what}=60 or '60s'")
    return seconds


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


def _file_meta(path: Path) -> dict:
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
    return {**meta, "format_version": int(version)}


def _read_table(path: Path) -> pa.Table:
    try:
        table = pq.read_table(path, read_dictionary=_string_columns(path))
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: cannot read as Parquet: {exc}") from None
    _check_schema(table.schema, str(path))
    return table


def _string_columns(path: Path) -> list[str]:
    """The string columns the file has, read as dictionaries (pandas categoricals)."""
    names = pq.read_schema(path).names
    return [c for c in COLUMNS if COLUMNS[c] == "str" and c in names]


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
