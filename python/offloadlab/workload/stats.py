"""The workload statistics an analysis reports besides the size fits.

- **Popularity**: the rank-frequency curve, its Zipf fit and the share of requests held
  by the most popular objects (:func:`popularity`, on :func:`lorenz` and :func:`top_share`).
- **Size classes**: the share of requests and of bytes in each of seed 000's classes
  (:func:`class_shares`).
- **Connections** (seed 004 §3.3, Figure 4): how unevenly requests and bytes fall on
  connections (:func:`connection_skew`).
- **Arrivals**: inter-arrival times against the exponential and the rate over time
  (:class:`ArrivalCounter`, read chunk by chunk, gives :class:`Arrivals`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np
from scipy import stats

from offloadlab.errors import InputError
from offloadlab.workload.classes import N_CLASSES, class_label, size_class
from offloadlab.workload.fits import ZipfFit, fit_zipf

# Popularity's top shares: of the most requested 1, 10, 100 objects, and 1 %, 10 % of them.
TOP_COUNTS = (1, 10, 100)
TOP_FRACTIONS = (0.01, 0.1)
# Fractions of connections at which the Lorenz table is given.
LORENZ_AT = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
# Rate-over-time bins: widths (in ms) a bin may take, each a multiple of the one before,
# and the most bins kept; a longer trace moves to the next width (bins are merged).
BIN_WIDTHS_MS = (1, 10, 100, 1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000)
MAX_BINS = 2_000
# Inter-arrival times the Lilliefors test uses at most.
LILLIEFORS_N = 5_000
# How far back in time a request may be listed and still be put in order before its gap
# is taken. Logs written at completion, or merged from several workers, are out of order
# by up to a request's duration or a flush interval; the times within this window are
# held, so memory grows with the requests of 5 minutes, not of the whole log.
REORDER_S = 300.0


# ---------------------------------------------------------------------------------------
# Popularity and the Lorenz curve

@dataclass(frozen=True)
class Popularity:
    """Rank-frequency of requests per object: the Zipf fit and the top shares.

    ``top`` maps "1", "10", "100" (objects) and "1%", "10%" (of the objects) to the share
    of requests they hold; fractional counts interpolate (see :func:`top_share`).
    """

    zipf: ZipfFit | None
    top: dict[str, float]
    frequency: np.ndarray = field(repr=False, compare=False)   # sorted, most requested first

    def to_json(self) -> dict:
        return {"zipf": None if self.zipf is None else self.zipf.to_json(), "top": self.top,
                "rank_frequency": _rank_points(self.frequency)}


def popularity(counts, *, sampled: bool = True) -> Popularity:
    """:class:`Popularity` from requests (or probabilities) per object."""
    c = np.sort(np.asarray(counts, dtype=float))[::-1]
    top = {str(k): top_share(c, k / c.size) for k in TOP_COUNTS if k <= c.size}
    top.update({f"{q:.0%}": top_share(c, q) for q in TOP_FRACTIONS})
    try:
        zipf = fit_zipf(c, sampled=sampled)
    except InputError:
        zipf = None
    return Popularity(zipf, top, c)


def top_share(values, q: float) -> float:
    """Share of the total held by the largest fraction ``q`` of the values: 1 - L(1 - q)
    on the Lorenz curve, interpolated linearly when q n is not a whole number."""
    return 1.0 - lorenz(values, [1.0 - q])[0]


def lorenz(values, at) -> np.ndarray:
    """The Lorenz curve L(p): the share of the total held by the smallest fraction p of
    the values, linear between the points (i/n, sum of the i smallest / total)."""
    cum = _lorenz_points(values)
    if cum is None:
        return np.full(len(at), math.nan)
    return np.interp(np.asarray(at, dtype=float), np.arange(cum.size) / (cum.size - 1), cum)


def gini(values) -> float:
    """Gini coefficient 1 - 2 * (area under the Lorenz curve): 0 when all are equal."""
    cum = _lorenz_points(values)
    return math.nan if cum is None else float(1 - (cum[1:] + cum[:-1]).sum() / (cum.size - 1))


def _lorenz_points(values) -> np.ndarray | None:
    """Sums of the i smallest values over the total, i = 0..n; None without a total."""
    v = np.sort(np.asarray(values, dtype=float))
    total = v.sum()
    if v.size == 0 or total <= 0:
        return None
    return np.r_[0.0, np.cumsum(v)] / total


def _rank_points(freq: np.ndarray, n_points: int = 60) -> list[list[float]]:
    if freq.size == 0:
        return []
    pick = np.unique(np.geomspace(1, freq.size, n_points).round().astype(int))
    return [[int(r), float(freq[r - 1])] for r in pick]


# ---------------------------------------------------------------------------------------
# Size classes and connections

@dataclass(frozen=True)
class ClassShare:
    """One size class: its objects, and its shares of requests and of bytes. ``klass``
    is 0..4, or -1 for objects whose size is unknown."""

    klass: int
    objects: int
    requests: float
    bytes: float

    @property
    def label(self) -> str:
        return "unknown" if self.klass < 0 else class_label(self.klass)

    def to_json(self) -> dict:
        return {"class": self.klass, "label": self.label, "objects": self.objects,
                "requests": self.requests, "bytes": self.bytes}


def class_shares(sizes, requests, bytes_) -> tuple[ClassShare, ...]:
    """Per-class totals from per-object sizes (-1: unknown), requests and bytes. Shares
    are of the totals over all objects (unknown ones included); classes with no object
    are listed with zeros, the unknown class only when it has objects."""
    sizes = np.asarray(sizes)
    requests = np.asarray(requests, dtype=float)
    bytes_ = np.asarray(bytes_, dtype=float)
    klass = np.full(sizes.shape, -1, dtype=np.int64)
    known = sizes >= 0
    klass[known] = size_class(sizes[known])
    r_total, b_total = requests.sum(), bytes_.sum()
    out = []
    for c in [*range(N_CLASSES), -1]:
        m = klass == c
        if c < 0 and not m.any():
            continue
        out.append(ClassShare(c, int(m.sum()), _share(requests[m].sum(), r_total),
                              _share(bytes_[m].sum(), b_total)))
    return tuple(out)


def _share(part: float, total: float) -> float:
    return float(part / total) if total > 0 else math.nan


@dataclass(frozen=True)
class ConnectionSkew:
    """How unevenly requests and bytes fall on connections (seed 004 §3.3, Figure 4).

    ``top_requests``/``top_bytes``: share carried by the ``top_fraction`` of connections
    with the most requests / bytes (the paper's statistic, on packets: fewer than 10 %
    of connections carry more than 45 % of the traffic). ``lorenz`` rows are
    (p, L_requests(p), L_bytes(p)): the share carried by the fraction p of connections
    that carry least (the paper: half the connections carry under 10 %).
    """

    connections: int
    top_fraction: float
    top_requests: float
    top_bytes: float
    gini_requests: float
    gini_bytes: float
    lorenz: tuple[tuple[float, float, float], ...]
    requests_per_conn: float
    curve: np.ndarray = field(repr=False, compare=False)    # (3, 201): p, L_req, L_bytes

    def to_json(self) -> dict:
        return {"connections": self.connections, "top_fraction": self.top_fraction,
                "top_requests": self.top_requests, "top_bytes": self.top_bytes,
                "gini_requests": self.gini_requests, "gini_bytes": self.gini_bytes,
                "requests_per_connection": self.requests_per_conn,
                "lorenz": [{"fraction": p, "requests": r, "bytes": b}
                           for p, r, b in self.lorenz]}


def connection_skew(requests, bytes_, top_fraction: float = 0.1) -> ConnectionSkew:
    """:class:`ConnectionSkew` from requests and bytes per connection."""
    requests = np.asarray(requests, dtype=float)
    bytes_ = np.asarray(bytes_, dtype=float)
    lr, lb = lorenz(requests, LORENZ_AT), lorenz(bytes_, LORENZ_AT)
    grid = np.linspace(0, 1, 201)
    return ConnectionSkew(
        int(requests.size), top_fraction, top_share(requests, top_fraction),
        top_share(bytes_, top_fraction), gini(requests), gini(bytes_),
        tuple((p, float(r), float(b)) for p, r, b in zip(LORENZ_AT, lr, lb, strict=True)),
        float(requests.mean()), np.vstack([grid, lorenz(requests, grid), lorenz(bytes_, grid)]))



# ---------------------------------------------------------------------------------------
# Arrivals

@dataclass(frozen=True)
class Arrivals:
    """Is the arrival process Poisson? Inter-arrival times against the exponential.

    ``of`` says what arrives: "requests", or "connections" (their first requests);
    ``count`` how many arrived. ``rate`` = 1 / mean gap over all gaps; ``cv`` their
    coefficient of variation (1 for the exponential, 0 for a constant rate, > 1 for
    bursts). ``ks_D``/``ks_p``: K-S test of the ``sampled`` gaps (a reservoir sample)
    against the exponential with the fitted rate; that p-value is optimistic because the
    rate came from the same gaps, so ``lilliefors_p`` repeats the test with the null
    distribution of D simulated with the rate re-fitted each time (Lilliefors'
    correction; on a sample of at most LILLIEFORS_N gaps).

    The gaps are those between the times in time order, so for a log out of order by
    REORDER_S at most, ``rate`` = (count - 1) / (last time - first time). ``out_of_order``
    counts arrivals listed after a later one (a log written at completion, or merged from
    several workers); they are put in order. ``late`` counts those listed more than
    REORDER_S after a later one: their gaps are left out. ``ties`` is the share of zero
    gaps: timestamps rounded to seconds make many, and then both tests reject on ties
    alone. ``early`` counts arrivals stamped before the first (time_s < 0), binned in the
    first bin.
    ``resolution_s`` is 1 when every time is a whole second (as in WC98 and Common Log
    Format traces), else 0.

    ``counts`` are arrivals per bin of width ``bin_s`` (never finer than the resolution)
    from t = 0. ``dispersion`` = Var/mean of the counts in the m complete bins (1 for
    Poisson arrivals, 0 for a constant rate, > 1 for bursts or a trend); ``dispersion_p``
    is the two-sided p-value of the index-of-dispersion test, m Var/mean ~ chi-squared
    with m - 1 degrees of freedom for Poisson counts. It needs no inter-arrival times, so
    it still works on timestamps rounded to seconds; a daily cycle fails it, rightly (the
    arrivals are then not a homogeneous Poisson process).
    """

    of: str
    count: int
    gaps: int
    sampled: int
    rate: float
    mean_gap_s: float
    cv: float
    ks_D: float
    ks_p: float
    lilliefors_p: float
    ties: float
    out_of_order: int
    late: int
    early: int
    resolution_s: float
    bin_s: float
    counts: np.ndarray = field(repr=False, compare=False)
    dispersion: float = math.nan
    dispersion_p: float = math.nan

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["counts"] = out.pop("counts").tolist()                 # last, after the scalars
        return out


class ArrivalCounter:
    """Streaming inter-arrival statistics: exact count, mean and variance of the gaps
    (Chan's pairwise update), a seeded reservoir sample of them (Vitter's algorithm R,
    one uniform per gap past the reservoir's size, so chunking does not change it), and
    counts per time bin on the finest of BIN_WIDTHS_MS that keeps at most MAX_BINS.

    Times are held until the latest time seen is REORDER_S past them, then taken in
    order. A time is late when it is more than REORDER_S before one listed above it;
    whether a time is late depends only on the times above it, so the gaps taken are
    those of the sorted times that are not late, however the input is chunked."""

    def __init__(self, reservoir: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.cap = reservoir
        self.sample = np.empty(0)
        self.seen = 0
        self.last: float | None = None              # the last time taken in order
        self.latest = -math.inf                      # the latest time seen
        self.held = np.empty(0)                      # times not yet taken, sorted
        self.count = self.n = self.zeros = self.out_of_order = self.late = 0
        self.mean = self.m2 = 0.0
        self.level = 0
        self.counts = np.zeros(0, dtype=np.int64)
        self.whole_seconds = True
        self.early = 0

    def add(self, t: np.ndarray) -> None:
        if t.size == 0:
            return
        self.count += t.size
        self.whole_seconds = self.whole_seconds and bool(np.all(t == np.floor(t)))
        self._bin(t)
        before = np.maximum.accumulate(np.r_[self.latest, t])[:-1]  # latest above each
        self.out_of_order += int(np.count_nonzero(t < before))
        late = t < before - REORDER_S
        self.late += int(np.count_nonzero(late))
        self.latest = max(self.latest, float(t.max()))
        held = np.sort(np.r_[self.held, t[~late]])
        ready = int(np.searchsorted(held, self.latest - REORDER_S, side="right"))
        self.held = held[ready:]
        self._gaps(held[:ready])

    def _gaps(self, t: np.ndarray) -> None:
        """Take the times ``t`` (in order, none before the last taken) into the gaps."""
        if t.size == 0:
            return
        gaps = np.diff(t) if self.last is None else np.diff(np.r_[self.last, t])
        self.last = float(t[-1])
        if gaps.size == 0:
            return
        self.zeros += int(np.count_nonzero(gaps == 0))
        n, mean = gaps.size, float(gaps.mean())
        m2 = float(((gaps - mean) ** 2).sum())
        total = self.n + n
        delta = mean - self.mean
        self.m2 += m2 + delta**2 * self.n * n / total
        self.mean += delta * n / total
        self.n = total
        self._reservoir(gaps)

    def _reservoir(self, gaps: np.ndarray) -> None:
        room = min(max(self.cap - self.sample.size, 0), gaps.size)
        if room:
            self.sample = np.r_[self.sample, gaps[:room]]
        rest = gaps[room:]
        if rest.size:
            index = self.seen + room + np.arange(rest.size)      # 0-based position of each gap
            j = np.floor(self.rng.random(rest.size) * (index + 1)).astype(np.int64)
            keep = j < self.cap
            j, rest = j[keep][::-1], rest[keep][::-1]
            j, first = np.unique(j, return_index=True)           # the last gap to draw j wins
            self.sample[j] = rest[first]
        self.seen += gaps.size

    def _bin(self, t: np.ndarray) -> None:
        self.early += int(np.count_nonzero(t < 0))
        ms = np.floor(np.maximum(t, 0.0) * 1e3).astype(np.int64)
        top, level = int(ms.max()), self.level
        while top // BIN_WIDTHS_MS[level] >= MAX_BINS and level + 1 < len(BIN_WIDTHS_MS):
            level += 1
        self._merge(level)
        b = np.bincount(ms // BIN_WIDTHS_MS[level])
        if b.size > self.counts.size:
            self.counts = np.r_[self.counts, np.zeros(b.size - self.counts.size, np.int64)]
        self.counts[: b.size] += b

    def _merge(self, level: int) -> None:
        """Move the counts to the coarser width ``level``, merging whole groups of bins."""
        if level > self.level:
            f = BIN_WIDTHS_MS[level] // BIN_WIDTHS_MS[self.level]
            c = np.r_[self.counts, np.zeros(-self.counts.size % f, dtype=np.int64)]
            self.counts = c.reshape(-1, f).sum(axis=1)
            self.level = level

    def result(self, seed: int, of: str) -> Arrivals | None:
        self._gaps(self.held)
        self.held = np.empty(0)
        if self.n < 2:
            return None
        if self.whole_seconds:                     # bins finer than the timestamps are empty
            self._merge(max(self.level, BIN_WIDTHS_MS.index(1_000)))
        mean = self.mean
        cv = math.sqrt(self.m2 / self.n) / mean if mean > 0 else math.nan
        bin_s = BIN_WIDTHS_MS[self.level] / 1e3
        full = self.counts[:-1]
        dispersion = dispersion_p = math.nan
        if full.size >= 3 and full.mean() > 0:
            dispersion = float(full.var() / full.mean())
            chi2 = stats.chi2(full.size - 1)
            x = full.size * dispersion
            dispersion_p = float(min(1.0, 2 * min(chi2.sf(x), chi2.cdf(x))))
        ks_D = ks_p = lf_p = math.nan
        if mean > 0:
            ks = stats.kstest(self.sample, stats.expon(scale=mean).cdf)
            ks_D, ks_p = float(ks.statistic), float(ks.pvalue)
            lf_p = _lilliefors_exp(self.sample, seed)
        return Arrivals(of, self.count, self.n, int(self.sample.size), 1 / mean if mean > 0
                        else math.inf, mean, cv, ks_D, ks_p, lf_p, self.zeros / self.n,
                        self.out_of_order, self.late, self.early,
                        1.0 if self.whole_seconds else 0.0, bin_s, self.counts.copy(),
                        dispersion, dispersion_p)


def _lilliefors_exp(gaps: np.ndarray, seed: int) -> float:
    """K-S p-value against the exponential with the rate estimated from the same gaps,
    the null distribution simulated (scipy.stats.goodness_of_fit, 999 samples)."""
    rng = np.random.default_rng(seed)
    x = gaps if gaps.size <= LILLIEFORS_N else rng.choice(gaps, LILLIEFORS_N, replace=False)
    if x.size < 3 or not np.any(x > 0):
        return math.nan
    res = stats.goodness_of_fit(stats.expon, x, known_params={"loc": 0.0}, statistic="ks",
                                n_mc_samples=999, rng=rng)
    return float(res.pvalue)

