"""What a trace, a request stream or a file-set manifest says about its workload.

Five questions, each answered by a small value object and gathered in an :class:`Analysis`:

- **Sizes** (:func:`fit_sizes`): lognormal, Pareto, bounded Pareto and a lognormal-body /
  Pareto-tail hybrid fitted by maximum likelihood to the object sizes, each with its
  log-likelihood, AIC and Kolmogorov-Smirnov distance; one is chosen by K-S distance and
  likelihood, and every family the data cannot tell apart from it is named (Downey's
  caution: a straight CCDF tail does not by itself prove a Pareto).
- **Popularity** (:func:`fit_zipf`): the rank-frequency curve, Zipf's alpha by maximum
  likelihood over ranks 1..N, and the share of requests held by the most popular objects.
- **Size classes**: the share of requests and of bytes in each of seed 000's classes
  (:func:`offloadlab.workload.classes.size_class`).
- **Connections** (seed 004 §3.3, Figure 4): how unevenly requests and bytes fall on
  connections: the share carried by the top 10 % and a Lorenz table.
- **Arrivals**: inter-arrival times against the exponential (Poisson arrivals; K-S with
  and without Lilliefors' correction), their coefficient of variation, and the rate over
  time with an index-of-dispersion test of the counts per bin.

:func:`analyze_requests` reads request tables chunk by chunk (memory grows with the
number of objects and connections, not with the number of requests);
:func:`analyze_manifest` reads a file-set manifest (sizes and request probabilities, no
arrivals). :meth:`Analysis.to_json`, :func:`analysis_tables` and :func:`plot_analysis`
turn the result into JSON, terminal tables and a PNG figure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from rich import box
from rich.table import Table
from scipy import optimize, special, stats

from offloadlab.dist import BoundedPareto, Dist, Lognormal, Pareto
from offloadlab.errors import InputError
from offloadlab.results import jsonable, write_atomic
from offloadlab.workload.classes import N_CLASSES, class_label, size_class

# Two fits are "indistinguishable" when their likelihood test's p-value is at least this.
VUONG_P = 0.1
# The K-S distance's sampling noise at n points is about KS_NOISE / sqrt(n) (95 % level).
KS_NOISE = 1.36
# Fractions of connections at which the Lorenz table is given.
LORENZ_AT = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
# Rate-over-time bins: widths (in ms) a bin may take, each a multiple of the one before,
# and the most bins kept; a longer trace moves to the next width (bins are merged).
BIN_WIDTHS_MS = (1, 10, 100, 1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000)
MAX_BINS = 2_000
# Inter-arrival times kept for the K-S test, and how many the Lilliefors test uses.
RESERVOIR = 1_000_000
LILLIEFORS_N = 5_000


# ---------------------------------------------------------------------------------------
# Size fits

@dataclass(frozen=True)
class SizeFit:
    """One maximum-likelihood fit of a sample of sizes in bytes.

    ``params`` are the family's parameters (sizes in bytes), ``se`` their asymptotic
    standard errors from the Fisher information (NaN where none is defined: a bound set
    to the sample minimum or maximum converges faster than 1/sqrt(n)). ``loglik`` is ln L
    at the estimate, ``aic`` = 2 n_params - 2 ln L. ``ks_D``/``ks_p``: one-sample K-S
    distance to the fitted CDF and its p-value, which is optimistic because the
    parameters came from the same data. ``dist`` is the fit as an :mod:`offloadlab.dist`
    value where that family exists (lognormal, pareto with alpha > 1, bpareto).

    Families (``family``) and their densities:

    - ``lognormal`` (nu, sigma): ln X ~ Normal(nu, sigma^2).
    - ``pareto`` (alpha, k): alpha k^alpha / x^(alpha+1), x >= k.
    - ``bpareto`` (alpha, lo, hi): the Pareto density on [lo, hi] / (1 - (lo/hi)^alpha).
    - ``lognormal+pareto`` (nu, sigma, xmin, alpha, tail): with probability 1 - tail a
      lognormal(nu, sigma) truncated to x < xmin, with probability tail a
      Pareto(alpha, k = xmin).
    """

    family: str
    params: dict[str, float]
    se: dict[str, float]
    n: int
    n_params: int
    loglik: float
    ks_D: float
    ks_p: float
    dist: Dist | None = None

    @property
    def aic(self) -> float:
        return 2 * self.n_params - 2 * self.loglik

    def logpdf(self, x) -> np.ndarray:
        return _FAMILIES[self.family][0](np.asarray(x, dtype=float), **self.params)

    def cdf(self, x) -> np.ndarray:
        return _FAMILIES[self.family][1](np.asarray(x, dtype=float), **self.params)

    def ccdf(self, x) -> np.ndarray:
        """P[X > x]."""
        return _FAMILIES[self.family][2](np.asarray(x, dtype=float), **self.params)

    def to_json(self) -> dict:
        return {"family": self.family, "params": self.params, "se": self.se, "n": self.n,
                "n_params": self.n_params, "loglik": self.loglik, "aic": self.aic,
                "ks_D": self.ks_D, "ks_p": self.ks_p,
                "dist": None if self.dist is None else self.dist.kind}


@dataclass(frozen=True)
class Comparison:
    """A likelihood test of fit ``a`` against fit ``b`` on the same sample.

    ``lr`` = ln L_a - ln L_b; ``favours`` is a, b, or None when the data cannot tell
    them apart (p >= VUONG_P). Two tests (``test``):

    - ``vuong`` (non-nested fits): z = (lr - (k_a - k_b)) / (s sqrt(n)), the likelihood
      ratio less the difference in parameter counts (the AIC correction) over the
      standard deviation s of the pointwise log-density differences; p = 2 Phi(-|z|).
      Fits within 2 of each other in AIC (|lr - (k_a - k_b)| < 1, Burnham & Anderson)
      are also called indistinguishable: for nearly identical fits s is tiny and z
      would be large for a fraction of a unit of likelihood.
    - ``nested`` (pareto inside bpareto, hi -> infinity): with hi at the sample maximum
      and Pareto data, n (lo/max)^alpha is Exp(1), and so, asymptotically, is the gain
      g = ln L_bpareto - ln L_pareto; p = e^-g (z is NaN). Only the bounded fit can be
      favoured: a small gain keeps the simpler Pareto.
    """

    a: str
    b: str
    lr: float
    z: float
    p: float
    favours: str | None
    test: str = "vuong"

    def to_json(self) -> dict:
        return {"a": self.a, "b": self.b, "test": self.test, "lr": self.lr, "z": self.z,
                "p": self.p, "favours": self.favours}


@dataclass(frozen=True)
class SizeFits:
    """All fits of one size sample, the chosen family and why (see :func:`fit_sizes`)."""

    n: int
    zeros: int
    fits: tuple[SizeFit, ...]
    chosen: str | None
    verdict: str
    comparisons: tuple[Comparison, ...]
    sample: np.ndarray = field(repr=False, compare=False)

    def fit(self, family: str) -> SizeFit | None:
        return next((f for f in self.fits if f.family == family), None)

    @property
    def best(self) -> SizeFit | None:
        return None if self.chosen is None else self.fit(self.chosen)

    def to_json(self) -> dict:
        x = self.sample
        summary = ({"min": float(x[0]), "median": float(np.median(x)), "mean": float(x.mean()),
                    "max": float(x[-1])} if x.size else {})
        return {"n": self.n, "zeros": self.zeros, **summary, "chosen": self.chosen,
                "verdict": self.verdict, "fits": [f.to_json() for f in self.fits],
                "comparisons": [c.to_json() for c in self.comparisons],
                "ccdf": _ccdf_points(x)}


def fit_lognormal(x) -> SizeFit:
    """Closed-form MLE on the logs: nu = mean(ln x), sigma^2 = mean((ln x - nu)^2);
    se(nu) = sigma/sqrt(n), se(sigma) = sigma/sqrt(2n)."""
    x = _positive(x)
    y = np.log(x)
    nu, sigma = float(y.mean()), float(y.std())
    _need(sigma > 0, "lognormal fit needs at least two different sizes")
    n = x.size
    params = {"nu": nu, "sigma": sigma}
    return _finish("lognormal", x, params, {"nu": sigma / math.sqrt(n),
                                            "sigma": sigma / math.sqrt(2 * n)},
                   2, Lognormal(nu, sigma))


def fit_pareto(x, xmin: float | None = None) -> SizeFit:
    """MLE alpha = n / sum ln(x/k) over the n sizes x >= k, with k = ``xmin`` or, by
    default, the smallest size (then k is a fitted parameter too); se(alpha) =
    alpha/sqrt(n). ``dist`` is None for alpha <= 1 (no finite mean)."""
    x = _positive(x)
    k = float(x.min()) if xmin is None else float(xmin)
    _need(k > 0, f"pareto xmin={k:g} must be > 0")
    tail = x[x >= k]
    s = float(np.log(tail / k).sum())
    _need(tail.size >= 2 and s > 0, f"pareto fit needs at least two different sizes >= {k:g}")
    alpha = tail.size / s
    dist = Pareto(alpha, k) if alpha > 1 else None
    return _finish("pareto", tail, {"alpha": alpha, "k": k},
                   {"alpha": alpha / math.sqrt(tail.size), "k": math.nan},
                   2 if xmin is None else 1, dist)


def fit_bpareto(x) -> SizeFit:
    """MLE of alpha for a Pareto bounded to [lo, hi] = [min, max] of the sample.

    With L = ln(hi/lo) and u = alpha L, the score equation is
    1/u - 1/(e^u - 1) = mean(ln(x/lo)) / L; its left side falls from 1/2 (u -> 0, the
    log-uniform) to 0, so a root with alpha > 0 exists when the sizes' mean log-distance
    from lo is under half the range, and is found by Brent's method. Fisher information:
    n (1/alpha^2 - L^2 e^u / (e^u - 1)^2).
    """
    x = _positive(x)
    lo, hi = float(x.min()), float(x.max())
    _need(hi > lo, "bounded Pareto fit needs at least two different sizes")
    L = math.log(hi / lo)
    target = float(np.log(x / lo).mean()) / L
    _need(target < 0.5 - 1e-9, "bounded Pareto fit: the sizes lean towards the upper bound "
          "(alpha <= 0, a density rising with size); bpareto needs alpha > 0")

    def score(u: float) -> float:
        return 1 / u - math.exp(-u) / -math.expm1(-u) - target

    u = optimize.brentq(score, 1e-6, max(2 / target, 10.0), xtol=1e-14, rtol=1e-14)
    alpha = u / L
    info = x.size * (1 / alpha**2 - L**2 * math.exp(-u) / math.expm1(-u) ** 2)
    se = 1 / math.sqrt(info) if info > 0 else math.nan
    return _finish("bpareto", x, {"alpha": alpha, "lo": lo, "hi": hi},
                   {"alpha": se, "lo": math.nan, "hi": math.nan}, 3,
                   BoundedPareto(alpha, lo, hi))


def fit_hybrid(x, min_tail: int = 50, min_body: int = 50, candidates: int = 100) -> SizeFit:
    """Lognormal body and Pareto tail, with the cut chosen as Clauset, Shalizi & Newman do.

    For each candidate cut xmin (up to ``candidates`` sample values, evenly spaced in
    rank, leaving at least ``min_tail`` sizes >= xmin and ``min_body`` below), the tail's
    MLE alpha = n_t / sum ln(x/xmin) is fitted and the cut with the smallest K-S distance
    between the tail and its Pareto fit is kept. Then the body (sizes < xmin) gets the MLE
    of a lognormal truncated to (0, xmin) (numerical), and the tail weight is n_t / n.
    ``se`` gives alpha's alpha/sqrt(n_t) and the tail weight's binomial error; the body's
    are not computed (NaN).
    """
    x = np.sort(_positive(x))
    n = x.size
    firsts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])   # first index of each value
    ok = firsts[(firsts >= min_body) & (n - firsts >= min_tail)]
    _need(ok.size > 0, f"lognormal+pareto fit needs at least {min_body + min_tail} sizes "
          f"with {min_body} below and {min_tail} at or above some cut")
    if ok.size > candidates:
        ok = ok[np.unique(np.linspace(0, ok.size - 1, candidates).round().astype(int))]
    logs = np.log(x)
    tail_log_sum = np.cumsum(logs[::-1])[::-1]               # sum of ln x[i:]
    best_d, i, alpha = math.inf, 0, 0.0
    for cut in ok:
        m = n - cut
        s = tail_log_sum[cut] - m * logs[cut]
        if s <= 0:
            continue
        a = m / s
        cdf = -np.expm1(a * (logs[cut] - logs[cut:]))        # 1 - (xmin/x)^alpha
        j = np.arange(1, m + 1)
        d = max(float(np.max(j / m - cdf)), float(np.max(cdf - (j - 1) / m)))
        if d < best_d:
            best_d, i, alpha = d, int(cut), a
    _need(i > 0, "lognormal+pareto fit: no cut leaves a tail with two different sizes")
    xmin, body, m = float(x[i]), logs[:i], n - i
    _need(body.std() > 0, "lognormal+pareto fit needs at least two different body sizes")
    nu, sigma = _truncated_normal_mle(body, math.log(xmin))
    w = m / n
    params = {"nu": nu, "sigma": sigma, "xmin": xmin, "alpha": float(alpha), "tail": w}
    se = {"nu": math.nan, "sigma": math.nan, "xmin": math.nan,
          "alpha": alpha / math.sqrt(m), "tail": math.sqrt(w * (1 - w) / n)}
    return _finish("lognormal+pareto", x, params, se, 5, None)


def fit_sizes(sizes, *, hybrid: bool = True) -> SizeFits:
    """Fit every family to the sizes > 0 and choose one.

    The rule: order the fits by K-S distance D. Start from the smallest; a family with
    fewer parameters takes its place when its D is within the K-S noise of the smallest
    (D - D_min <= 1.36/sqrt(n)) *and* the likelihood does not favour the larger family
    (:class:`Comparison`): a family with more parameters has to earn them on both counts.
    The verdict names every family the test cannot tell apart from the chosen one
    (Downey's caution: report both fits then, do not claim a heavy tail on the fit alone)
    and says when AIC prefers another family. Zero sizes are counted in ``zeros`` and left
    out (no family here has mass at 0). Families that cannot be fitted (e.g. a bounded
    Pareto to sizes crowding the upper bound) are left out, and the verdict says why.
    """
    x = np.asarray(sizes, dtype=float)
    x = x[np.isfinite(x)]
    zeros = int(np.count_nonzero(x == 0))
    x = np.sort(x[x > 0])
    fits, skipped = [], []
    fitters = [fit_lognormal, fit_pareto, fit_bpareto] + ([fit_hybrid] if hybrid else [])
    if x.size >= 2 and x[0] != x[-1]:
        for fitter in fitters:
            try:
                fits.append(fitter(x))
            except InputError as exc:
                skipped.append(str(exc))
    if not fits:
        why = "; ".join(skipped) or "fewer than two different sizes > 0"
        return SizeFits(x.size, zeros, (), None, f"no fit: {why}", (), x)
    by_D = sorted(fits, key=lambda f: f.ks_D)
    logpdfs = {f.family: f.logpdf(x) for f in fits}
    chosen, noise = by_D[0], KS_NOISE / math.sqrt(x.size)
    simpler = [f for f in by_D[1:] if f.n_params < chosen.n_params
               and f.ks_D - by_D[0].ks_D <= noise
               and _compare(by_D[0], f, logpdfs).favours != by_D[0].family]
    if simpler:
        chosen = min(simpler, key=lambda f: (f.n_params, f.ks_D))
    comparisons = tuple(_compare(chosen, f, logpdfs) for f in fits if f is not chosen)
    return SizeFits(x.size, zeros, tuple(fits), chosen.family,
                    _verdict(chosen, fits, comparisons, skipped), comparisons, x)


def _verdict(chosen: SizeFit, fits: list[SizeFit], comparisons: tuple[Comparison, ...],
             skipped: list[str]) -> str:
    parts = [f"{chosen.family} fits best (K-S D={chosen.ks_D:.4f}, AIC={chosen.aic:.1f})"]
    same = [c for c in comparisons if c.favours is None]
    if same:
        names = ", ".join(f"{c.b} ({c.test} p={c.p:.2g})" for c in same)
        parts.append(f"the likelihood cannot tell it from {names}: report both")
    beaten = [c for c in comparisons if c.favours == c.a]
    if beaten:
        parts.append("better than " + ", ".join(f"{c.b} (p={c.p:.1e})" for c in beaten))
    wins = [c for c in comparisons if c.favours == c.b]
    if wins:
        parts.append("but the likelihood favours " + ", ".join(
            f"{c.b} (p={c.p:.1e})" for c in wins) + " although its K-S distance is larger")
    by_aic = min(fits, key=lambda f: f.aic)
    if by_aic is not chosen:
        parts.append(f"lowest AIC: {by_aic.family} ({by_aic.aic:.1f})")
    parts += [f"not fitted: {s}" for s in skipped]
    return "; ".join(parts)


def _compare(a: SizeFit, b: SizeFit, logpdfs: dict[str, np.ndarray]) -> Comparison:
    """:class:`Comparison` of two fits to the same sample."""
    lr = a.loglik - b.loglik
    if {a.family, b.family} == {"pareto", "bpareto"}:
        gain = lr if a.family == "bpareto" else -lr
        p = math.exp(-max(gain, 0.0))
        return Comparison(a.family, b.family, lr, math.nan, p,
                          "bpareto" if p < VUONG_P else None, "nested")
    d = logpdfs[a.family] - logpdfs[b.family]
    corrected = lr - (a.n_params - b.n_params)
    s = float(d.std())
    z = corrected / (s * math.sqrt(d.size)) if s > 0 else 0.0
    p = float(2 * special.ndtr(-abs(z)))
    favours = None if p >= VUONG_P or abs(corrected) < 1 else a.family if z > 0 else b.family
    return Comparison(a.family, b.family, lr, z, p, favours)


def _finish(family: str, x: np.ndarray, params: dict[str, float], se: dict[str, float],
            n_params: int, dist: Dist | None) -> SizeFit:
    """Log-likelihood and K-S test of a fit to ``x``."""
    logpdf, cdf, _ = _FAMILIES[family]
    loglik = float(logpdf(x, **params).sum())
    ks = stats.kstest(x, lambda v: cdf(v, **params))
    return SizeFit(family, params, se, int(x.size), n_params, loglik, float(ks.statistic),
                   float(ks.pvalue), dist)


def _truncated_normal_mle(y: np.ndarray, upper: float) -> tuple[float, float]:
    """MLE (nu, sigma) of a normal truncated to y < upper: minimise
    n ln sigma + sum (y - nu)^2 / (2 sigma^2) + n ln Phi((upper - nu)/sigma)."""
    m, s = float(y.mean()), float(y.std())
    n = y.size

    def nll(theta: np.ndarray) -> float:
        nu, log_sigma = theta
        sigma = math.exp(log_sigma)
        return (n * log_sigma + float(((y - nu) ** 2).sum()) / (2 * sigma**2)
                + n * float(special.log_ndtr((upper - nu) / sigma)))

    span = upper - float(y.min()) + s
    res = optimize.minimize(nll, np.array([m, math.log(s)]), method="L-BFGS-B",
                            bounds=[(m - 10 * span, m + 10 * span),
                                    (math.log(s) - 5, math.log(s) + 5)])
    return float(res.x[0]), float(math.exp(res.x[1]))


# Each family's (logpdf, cdf, ccdf), with the math in closed form.

def _ln_logpdf(x, nu, sigma):
    y = np.log(x)
    return -y - math.log(sigma) - 0.5 * math.log(2 * math.pi) - (y - nu) ** 2 / (2 * sigma**2)


def _ln_cdf(x, nu, sigma):
    return special.ndtr((_safe_log(x) - nu) / sigma)


def _ln_ccdf(x, nu, sigma):
    return special.ndtr((nu - _safe_log(x)) / sigma)


def _p_logpdf(x, alpha, k):
    return np.where(x >= k, math.log(alpha) + alpha * math.log(k) - (alpha + 1)
                    * np.log(np.maximum(x, k)), -np.inf)


def _p_ccdf(x, alpha, k):
    return np.where(x >= k, (k / np.maximum(x, k)) ** alpha, 1.0)


def _p_cdf(x, alpha, k):
    return 1.0 - _p_ccdf(x, alpha, k)


def _bp_logpdf(x, alpha, lo, hi):
    norm = math.log(-math.expm1(-alpha * math.log(hi / lo)))          # ln(1 - (lo/hi)^alpha)
    inside = (x >= lo) & (x <= hi)
    return np.where(inside, math.log(alpha) + alpha * math.log(lo) - (alpha + 1)
                    * np.log(np.clip(x, lo, hi)) - norm, -np.inf)


def _bp_ccdf(x, alpha, lo, hi):
    top = (lo / hi) ** alpha
    return ((lo / np.clip(x, lo, hi)) ** alpha - top) / (1 - top)


def _bp_cdf(x, alpha, lo, hi):
    return 1.0 - _bp_ccdf(x, alpha, lo, hi)


def _hy_logpdf(x, nu, sigma, xmin, alpha, tail):
    body = (math.log1p(-tail) + _ln_logpdf(np.minimum(x, xmin), nu, sigma)
            - float(special.log_ndtr((math.log(xmin) - nu) / sigma)))
    return np.where(x < xmin, body, math.log(tail) + _p_logpdf(x, alpha, xmin))


def _hy_ccdf(x, nu, sigma, xmin, alpha, tail):
    body = 1 - (1 - tail) * _ln_cdf(x, nu, sigma) / special.ndtr((math.log(xmin) - nu) / sigma)
    return np.where(x < xmin, body, tail * _p_ccdf(x, alpha, xmin))


def _hy_cdf(x, nu, sigma, xmin, alpha, tail):
    return 1.0 - _hy_ccdf(x, nu, sigma, xmin, alpha, tail)


_FAMILIES = {
    "lognormal": (_ln_logpdf, _ln_cdf, _ln_ccdf),
    "pareto": (_p_logpdf, _p_cdf, _p_ccdf),
    "bpareto": (_bp_logpdf, _bp_cdf, _bp_ccdf),
    "lognormal+pareto": (_hy_logpdf, _hy_cdf, _hy_ccdf),
}


def _safe_log(x: np.ndarray) -> np.ndarray:
    """ln x, with -inf (and no warning) at x <= 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, np.log(np.maximum(x, 0)), -np.inf)


def _positive(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    _need(x.ndim == 1 and x.size >= 2, "a size fit needs at least two sizes")
    _need(bool(np.all(np.isfinite(x) & (x > 0))), "sizes to fit must be finite and > 0")
    return x


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(message)


# ---------------------------------------------------------------------------------------
# Popularity

TOP_COUNTS = (1, 10, 100)
TOP_FRACTIONS = (0.01, 0.1)


@dataclass(frozen=True)
class ZipfFit:
    """Zipf's law over ranks 1..N: P(r) = r^-alpha / H(N, alpha), H = sum_r r^-alpha.

    The MLE solves E_alpha[ln r] = (sum_r c_r ln r) / (sum_r c_r), whose left side falls
    with alpha, by Brent's method; se(alpha) = 1 / sqrt(C Var_alpha[ln r]) for C sampled
    requests (NaN when the weights are probabilities rather than counts). Ranks come from
    the data's own order (most requested first); ranking by observed counts flattens the
    noisy tail slightly, and objects never requested are not in a trace at all.
    """

    alpha: float
    se: float
    n_objects: int
    requests: float
    loglik: float

    def pmf(self, ranks) -> np.ndarray:
        r = np.arange(1, self.n_objects + 1)
        h = float(np.exp(-self.alpha * np.log(r)).sum())
        return np.asarray(ranks, dtype=float) ** -self.alpha / h

    def to_json(self) -> dict:
        return {"alpha": self.alpha, "se": self.se, "objects": self.n_objects,
                "requests": self.requests, "loglik": self.loglik}


def fit_zipf(counts, *, sampled: bool = True) -> ZipfFit:
    """Zipf alpha by maximum likelihood from requests per object (any order; sorted here,
    most requested first). ``sampled=False`` for probabilities (no standard error)."""
    c = np.sort(np.asarray(counts, dtype=float))[::-1]
    _need(c.size >= 2 and bool(np.all(np.isfinite(c) & (c >= 0))) and c[1] > 0,
          "a Zipf fit needs at least two objects with requests (counts >= 0)")
    y = np.log(np.arange(1, c.size + 1))
    total = float(c.sum())
    target = float((c * y).sum()) / total

    def mean_log_rank(alpha: float) -> tuple[float, float]:
        w = np.exp(-alpha * y)
        w /= w.sum()
        m = float((w * y).sum())
        return m, float((w * (y - m) ** 2).sum())

    if mean_log_rank(0.0)[0] <= target:
        alpha = 0.0
    else:
        hi = 1.0
        while mean_log_rank(hi)[0] > target:
            hi *= 2
        alpha = optimize.brentq(lambda a: mean_log_rank(a)[0] - target, 0.0, hi,
                                xtol=1e-12, rtol=1e-12)
    var = mean_log_rank(alpha)[1]
    se = 1 / math.sqrt(total * var) if sampled and var > 0 else math.nan
    log_h = float(special.logsumexp(-alpha * y))
    loglik = float(-alpha * (c * y).sum() - total * log_h)
    return ZipfFit(float(alpha), se, int(c.size), total if sampled else math.nan, loglik)


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
    v = np.sort(np.asarray(values, dtype=float))
    total = v.sum()
    if v.size == 0 or total <= 0:
        return np.full(len(at), math.nan)
    cum = np.r_[0.0, np.cumsum(v)] / total
    return np.interp(np.asarray(at, dtype=float), np.arange(v.size + 1) / v.size, cum)


def gini(values) -> float:
    """Gini coefficient 1 - 2 * (area under the Lorenz curve): 0 when all are equal."""
    v = np.sort(np.asarray(values, dtype=float))
    total = v.sum()
    if v.size == 0 or total <= 0:
        return math.nan
    cum = np.r_[0.0, np.cumsum(v)] / total
    return float(1 - (cum[1:] + cum[:-1]).sum() / v.size)


# ---------------------------------------------------------------------------------------
# Size classes, connections, arrivals

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


@dataclass(frozen=True)
class Arrivals:
    """Is the arrival process Poisson? Inter-arrival times against the exponential.

    ``of`` says what arrives: "requests", or "connections" (their first requests);
    ``count`` how many arrived. ``rate`` = 1 / mean gap over all gaps; ``cv`` their
    coefficient of variation (1 for the exponential, 0 for a constant rate, > 1 for
    bursts). ``ks_D``/``ks_p``: K-S test of the (sampled, at most RESERVOIR) gaps against
    the exponential with the fitted rate; that p-value is optimistic because the rate
    came from the same gaps, so ``lilliefors_p`` repeats the test with the null
    distribution of D simulated with the rate re-fitted each time (Lilliefors'
    correction; on a sample of at most LILLIEFORS_N gaps).

    ``ties`` is the share of zero gaps: timestamps rounded to seconds make many, and then
    both tests reject on ties alone. ``out_of_order`` counts negative gaps (a log written
    at completion is not quite in time order): they are left out. ``early`` counts
    arrivals stamped before the first (time_s < 0), binned in the first bin.
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
    early: int
    resolution_s: float
    bin_s: float
    counts: np.ndarray = field(repr=False, compare=False)
    dispersion: float = math.nan
    dispersion_p: float = math.nan

    def to_json(self) -> dict:
        return {"of": self.of, "count": self.count, "gaps": self.gaps, "sampled": self.sampled,
                "rate": self.rate, "mean_gap_s": self.mean_gap_s, "cv": self.cv,
                "ks_D": self.ks_D, "ks_p": self.ks_p, "lilliefors_p": self.lilliefors_p,
                "ties": self.ties, "out_of_order": self.out_of_order, "early": self.early,
                "resolution_s": self.resolution_s, "bin_s": self.bin_s,
                "dispersion": self.dispersion, "dispersion_p": self.dispersion_p,
                "counts": self.counts.tolist()}


class _ArrivalCounter:
    """Streaming inter-arrival statistics: exact count, mean and variance of the gaps
    (Chan's pairwise update), a seeded reservoir sample of them (Vitter's algorithm R,
    one uniform per gap past the reservoir's size, so chunking does not change it), and
    counts per time bin on the coarsest of BIN_WIDTHS_MS that keeps at most MAX_BINS."""

    def __init__(self, reservoir: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.cap = reservoir
        self.sample = np.empty(0)
        self.seen = 0
        self.last: float | None = None
        self.count = self.n = self.zeros = self.negative = 0
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
        gaps = np.diff(t) if self.last is None else np.diff(np.r_[self.last, t])
        self.last = float(t[-1])
        self.negative += int(np.count_nonzero(gaps < 0))
        gaps = gaps[gaps >= 0]
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
                        self.negative, self.early, 1.0 if self.whole_seconds else 0.0, bin_s,
                        self.counts.copy(), dispersion, dispersion_p)


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


# ---------------------------------------------------------------------------------------
# The analysis of a request table or a manifest

@dataclass(frozen=True)
class Analysis:
    """Everything :func:`analyze_requests` or :func:`analyze_manifest` found.

    ``sizes`` are fitted to one size per object; ``popularity`` ranks objects by requests
    (or by manifest probability); ``classes`` per size class; ``connections`` only when
    the input has connection ids; ``arrivals`` only for requests with ``time_s``.
    ``summary`` holds the totals (requests, objects, bytes, ...); ``notes`` what the
    reader should know (left-out rows, caveats).
    """

    source: str
    summary: dict
    sizes: SizeFits
    popularity: Popularity | None
    classes: tuple[ClassShare, ...]
    connections: ConnectionSkew | None = None
    arrivals: Arrivals | None = None
    notes: tuple[str, ...] = ()
    top_objects: tuple[tuple[str, float, int], ...] = ()

    def to_json(self) -> dict:
        """Plain JSON types (NaN -> null, inf -> "inf"); ``json.dumps(...,
        allow_nan=False)`` accepts it."""
        return jsonable({
            "source": self.source, **self.summary,
            "sizes": self.sizes.to_json(),
            "popularity": None if self.popularity is None else self.popularity.to_json(),
            "top_objects": [{"object": o, "requests": r, "size_bytes": s}
                            for o, r, s in self.top_objects],
            "classes": [c.to_json() for c in self.classes],
            "connections": None if self.connections is None else self.connections.to_json(),
            "arrivals": None if self.arrivals is None else self.arrivals.to_json(),
            "notes": list(self.notes),
        })


class _Codes:
    """Dense integer codes for keys (objects, connections) and per-code totals, grown as
    new keys appear: requests, known bytes and the largest known size."""

    def __init__(self) -> None:
        self.index: dict = {}
        self.requests = np.zeros(0, dtype=np.int64)
        self.bytes = np.zeros(0, dtype=np.int64)
        self.size = np.zeros(0, dtype=np.int64)

    def add(self, keys: pd.Series, sizes: np.ndarray) -> np.ndarray:
        """Count the rows; return the positions of the rows whose key is new (its first
        row, in row order)."""
        codes, uniques = pd.factorize(keys, sort=False)
        index = self.index
        before = len(index)
        remap = np.fromiter((index.setdefault(u, len(index)) for u in uniques),
                            dtype=np.int64, count=len(uniques))
        code = remap[codes]
        grow = len(index) - self.requests.size
        if grow > 0:
            self.requests = np.r_[self.requests, np.zeros(grow, np.int64)]
            self.bytes = np.r_[self.bytes, np.zeros(grow, np.int64)]
            self.size = np.r_[self.size, np.full(grow, -1, np.int64)]
        np.add.at(self.requests, code, 1)
        known = sizes >= 0
        np.add.at(self.bytes, code[known], sizes[known])
        np.maximum.at(self.size, code[known], sizes[known])
        _, first = np.unique(codes, return_index=True)         # uniques are in code order
        return first[remap >= before]

    def keys(self) -> list:
        return list(self.index)


def analyze_requests(chunks: Iterable[pd.DataFrame] | pd.DataFrame, *,
                     reservoir: int = RESERVOIR, seed: int = 0, top_fraction: float = 0.1,
                     hybrid: bool = True, arrivals: str = "requests",
                     name: str = "requests") -> Analysis:
    """Analyse request tables (a trace reader's chunks, or a stream), one chunk at a time.

    Columns used: ``object`` and ``size_bytes`` (required; -1 = unknown size),
    ``conn_id`` (>= 0; -1 = none) for connection skew, ``time_s`` (seconds, in order)
    for arrivals. Memory grows with the distinct objects and connections (plus at most
    ``reservoir`` inter-arrival times), not with the number of requests; the result does
    not depend on how the requests are cut into chunks.

    An object's size is the largest size_bytes seen for it (a 304 or a partial response
    moves fewer bytes than the object holds); sizes are fitted to one size per object,
    and each request counts in its object's size class, with the bytes it moved.

    ``arrivals="connections"`` checks the times at which connections open (a connection's
    first request; a request without a connection id opens its own) instead of every
    request's: with keep-alive, seed 000's Poisson process is one of connection (session)
    initiations, and the requests that follow on a connection are not Poisson.
    ``name`` labels the input in error messages.
    """
    _need(arrivals in ("requests", "connections"),
          f"arrivals={arrivals!r}: use 'requests' or 'connections'")
    _need(reservoir >= 2, f"reservoir={reservoir!r}: keep at least 2 inter-arrival times")
    _need(0 < top_fraction < 1, f"top_fraction={top_fraction!r}: use a fraction in (0, 1), "
          "e.g. 0.1 for seed 004's top 10 %")
    if isinstance(chunks, pd.DataFrame):
        chunks = [chunks]
    objects, conns = _Codes(), _Codes()
    counter = _ArrivalCounter(reservoir, seed)
    has_conn = has_time = False
    rows = unknown = 0
    for n, chunk in enumerate(chunks):
        _check_columns(chunk, n, name)
        if chunk.empty:
            continue
        sizes = _int_column(chunk, "size_bytes", n, name)
        if chunk["object"].isna().any():
            raise InputError(f"{name}: chunk {n}: {int(chunk['object'].isna().sum())} "
                             "requests have no object; every request needs one")
        rows += len(chunk)
        unknown += int(np.count_nonzero(sizes < 0))
        objects.add(chunk["object"], sizes)
        opens = np.ones(len(chunk), dtype=bool)          # the rows that open a connection
        if "conn_id" in chunk:
            cid = _int_column(chunk, "conn_id", n, name)
            on = np.flatnonzero(cid >= 0)
            if on.size:
                has_conn = True
                opens[on] = False
                opens[on[conns.add(pd.Series(cid[on]), sizes[on])]] = True
        if "time_s" in chunk:
            has_time = True
            t = _time_column(chunk, n, name)
            counter.add(t if arrivals == "requests" else t[opens])
    _need(rows > 0, f"{name}: no requests to analyse (the input has no rows)")
    _need(unknown < rows, f"{name}: all {rows:,} requests have an unknown size "
          "(size_bytes = -1); sizes are needed for every part of the analysis")
    notes = []
    if unknown:
        notes.append(f"{unknown:,} of {rows:,} requests have an unknown size (size_bytes = "
                     "-1): counted in requests and popularity, not in bytes")
    sizes = objects.size
    sizes_fit = fit_sizes(sizes[sizes >= 0], hybrid=hybrid)
    notes += _size_notes(sizes_fit, "objects")
    keys = objects.keys()
    top = np.argsort(-objects.requests, kind="stable")[:10]
    summary = {"requests": rows, "objects": len(keys), "bytes": int(objects.bytes.sum()),
               "unknown_size": unknown}
    connections = None
    if has_conn:
        connections = connection_skew(conns.requests, conns.bytes, top_fraction)
    arr = counter.result(seed, arrivals) if has_time else None
    if arr is not None:
        notes += _arrival_notes(arr)
    return Analysis(
        "requests", summary, sizes_fit, popularity(objects.requests),
        class_shares(sizes, objects.requests, objects.bytes), connections, arr, tuple(notes),
        tuple((str(keys[i]), int(objects.requests[i]), int(sizes[i])) for i in top))


def analyze_manifest(manifest: pd.DataFrame, *, hybrid: bool = True,
                     name: str = "manifest") -> Analysis:
    """Analyse a file-set manifest: sizes per file, popularity from ``probability``.

    The request share of a class is the sum of its files' probabilities, its byte share
    sum(p size) / sum over all files. With no ``probability`` column the popularity is
    left out and every file counts once. No connections, no arrivals.
    """
    if not isinstance(manifest, pd.DataFrame) or "size_bytes" not in manifest:
        cols = list(manifest.columns) if isinstance(manifest, pd.DataFrame) else "not a table"
        raise InputError(f"{name}: no 'size_bytes' column (columns: {cols}); a manifest "
                         "needs size_bytes per file (and probability for popularity)")
    _need(len(manifest) > 0, f"{name}: the manifest has no files")
    sizes = _int_column(manifest, "size_bytes", None, name)
    _need(bool(np.all(sizes >= 0)), f"{name}: size_bytes must be >= 0 for every file "
          f"(row {int(np.argmax(sizes < 0))} is {int(sizes.min())})")
    notes = []
    if "probability" in manifest:
        p = pd.to_numeric(manifest["probability"], errors="coerce").to_numpy(dtype=float)
        _need(bool(np.all(np.isfinite(p) & (p >= 0))) and p.sum() > 0,
              f"{name}: probability must be a number >= 0 for every file, not all 0")
        p = p / p.sum()
        pop = popularity(p, sampled=False)
    else:
        p = np.full(sizes.size, 1.0 / sizes.size)
        pop = None
        notes.append("no probability column: popularity left out, every file counts once")
    sizes_fit = fit_sizes(sizes, hybrid=hybrid)
    notes += _size_notes(sizes_fit, "files")
    paths = (manifest["path"].astype(str).tolist() if "path" in manifest
             else [str(i) for i in range(sizes.size)])
    top = np.argsort(-p, kind="stable")[:10] if pop is not None else []
    summary = {"requests": None, "objects": int(sizes.size), "bytes": int(sizes.sum()),
               "unknown_size": 0, "mean_request_bytes": float((p * sizes).sum())}
    return Analysis("manifest", summary, sizes_fit, pop, class_shares(sizes, p, p * sizes),
                    notes=tuple(notes),
                    top_objects=tuple((paths[i], float(p[i]), int(sizes[i])) for i in top))


def _check_columns(chunk, n: int, name: str) -> None:
    if not isinstance(chunk, pd.DataFrame):
        raise InputError(f"{name}: chunk {n} is a {type(chunk).__name__}, not a DataFrame")
    missing = [c for c in ("object", "size_bytes") if c not in chunk]
    if missing:
        raise InputError(f"{name}: chunk {n}: no {' or '.join(repr(c) for c in missing)} "
                         f"column (columns: {list(chunk.columns)}); the analysis needs "
                         "object and size_bytes per request (-1 for an unknown size)")


def _int_column(df: pd.DataFrame, col: str, n: int | None, name: str) -> np.ndarray:
    where = f"{name}: " + ("" if n is None else f"chunk {n}: ")
    values = pd.to_numeric(df[col], errors="coerce")
    bad = values.isna() | ~np.isfinite(values.astype(float))
    if bad.any():
        row = int(np.argmax(bad.to_numpy()))
        raise InputError(f"{where}{col} in row {row} is {df[col].iloc[row]!r}, not a whole "
                         f"number{' (-1 for unknown)' if col != 'size_bytes' else ''}")
    return values.to_numpy().astype(np.int64)


def _time_column(chunk: pd.DataFrame, n: int, name: str) -> np.ndarray:
    t = pd.to_numeric(chunk["time_s"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(t)
    if bad.any():
        row = int(np.argmax(bad))
        raise InputError(f"{name}: chunk {n}: time_s in row {row} is "
                         f"{chunk['time_s'].iloc[row]!r}; use seconds from the first request")
    return t


def _size_notes(fits: SizeFits, what: str) -> list[str]:
    notes = []
    if fits.zeros:
        notes.append(f"{fits.zeros:,} {what} of 0 bytes are left out of the size fits")
    best = fits.best
    if best is not None and best.family == "pareto" and best.dist is None:
        notes.append(f"pareto alpha={best.params['alpha']:.3g} <= 1 has no finite mean: no "
                     "offloadlab.dist.Pareto for it; a bpareto (bounded) fit has one")
    return notes


def _arrival_notes(a: Arrivals) -> list[str]:
    notes = []
    if a.out_of_order:
        notes.append(f"{a.out_of_order:,} {a.of} arrive before the one listed above them "
                     "(time_s not in order): those gaps are left out")
    if a.early:
        notes.append(f"{a.early:,} {a.of} are stamped before the first one (time_s < 0): "
                     "counted in the first bin of the rate over time")
    if a.ties > 0.01:
        why = ("the timestamps are whole seconds: judge by the dispersion test of counts "
               f"per {a.bin_s:g} s bin instead" if a.resolution_s else
               "arrivals come in batches, e.g. requests on one keep-alive connection; "
               "arrivals='connections' checks the connection openings")
        notes.append(f"{a.ties:.0%} of the inter-arrival times are 0, so the K-S tests "
                     f"reject on ties alone; {why}")
    if a.gaps > a.sampled:
        notes.append(f"K-S test on a random sample of {a.sampled:,} of {a.gaps:,} "
                     "inter-arrival times")
    return notes


# ---------------------------------------------------------------------------------------
# Presentation: points for JSON, tables, figures

def _ccdf_points(x: np.ndarray, n_points: int = 60) -> list[list[float]]:
    """About ``n_points`` points (size, P[X > size]) of the empirical CCDF, log-spaced."""
    xs, ccdf = _empirical_ccdf(x)
    if xs.size == 0:
        return []
    pick = np.unique(np.geomspace(1, xs.size, n_points).round().astype(int) - 1)
    return [[float(xs[i]), float(ccdf[i])] for i in pick]


def _empirical_ccdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct sizes and P[X > size], without the last point (P = 0 has no log)."""
    values, counts = np.unique(x, return_counts=True)
    ccdf = 1.0 - np.cumsum(counts) / x.size
    return values[:-1], ccdf[:-1]


def _rank_points(freq: np.ndarray, n_points: int = 60) -> list[list[float]]:
    if freq.size == 0:
        return []
    pick = np.unique(np.geomspace(1, freq.size, n_points).round().astype(int))
    return [[int(r), float(freq[r - 1])] for r in pick]


def analysis_tables(a: Analysis) -> list[Table]:
    """Rich tables: sizes and fits, popularity, size classes, connections, arrivals."""
    tables = [_sizes_table(a)]
    if a.popularity is not None:
        tables.append(_popularity_table(a))
    tables.append(_classes_table(a))
    if a.connections is not None:
        tables.append(_connections_table(a.connections))
    if a.arrivals is not None:
        tables.append(_arrivals_table(a.arrivals))
    if a.notes:
        tables[-1].caption = "\n".join(filter(None, [tables[-1].caption, *a.notes]))
    return tables


def _sizes_table(a: Analysis) -> Table:
    s = a.sizes
    what = "objects" if a.source == "requests" else "files"
    title = f"[bold]sizes[/] of {s.n:,} {what}"
    if s.n:
        x = s.sample
        title += (f": min {_bytes(x[0])}, median {_bytes(np.median(x))}, mean "
                  f"{_bytes(x.mean())}, max {_bytes(x[-1])}")
    table = _table(title, ("family", "parameters", "ln L", "AIC", "K-S D", "p", ""))
    for f in s.fits:
        mark = "[green]chosen[/]" if f.family == s.chosen else ""
        table.add_row(f.family, _params(f), f"{f.loglik:.1f}", f"{f.aic:.1f}",
                      f"{f.ks_D:.4f}", f"{f.ks_p:.2g}", mark,
                      style="bold" if f.family == s.chosen else None)
    table.caption = s.verdict + ("\nK-S p-values are optimistic: the parameters were fitted "
                                 "to the same sizes." if s.fits else "")
    return table


def _params(f: SizeFit) -> str:
    def one(k: str, v: float) -> str:
        text = _bytes(v) if k in ("k", "lo", "hi", "xmin") else f"{v:.4g}"
        se = f.se.get(k, math.nan)
        return f"{k}={text}" + (f"±{se:.2g}" if math.isfinite(se) else "")
    return ", ".join(one(k, v) for k, v in f.params.items())


def _popularity_table(a: Analysis) -> Table:
    p = a.popularity
    z = p.zipf
    table = _table("[bold]popularity[/]", ("top", "share of requests"))
    for k, v in p.top.items():
        table.add_row(f"{k} of objects" if k.endswith("%") else
                      f"{k} object" + ("s" if k != "1" else ""), f"{v:.1%}")
    lines = []
    if z is not None:
        se = f" ± {z.se:.3f}" if math.isfinite(z.se) else ""
        lines.append(f"Zipf alpha = {z.alpha:.3f}{se} over {z.n_objects:,} objects")
    if a.top_objects:
        lines.append("most requested: " + ", ".join(o for o, _, _ in a.top_objects[:3]))
    table.caption = "\n".join(lines)
    return table


def _classes_table(a: Analysis) -> Table:
    table = _table("[bold]size classes[/] (seed 000)",
                   ("class", "sizes", "objects", "requests", "bytes"))
    for c in a.classes:
        table.add_row("?" if c.klass < 0 else str(c.klass), c.label, f"{c.objects:,}",
                      _pct(c.requests), _pct(c.bytes))
    return table


def _connections_table(c: ConnectionSkew) -> Table:
    table = _table(f"[bold]connections[/] ({c.connections:,})",
                   ("least-loaded", "share of requests", "share of bytes"))
    for p, r, b in c.lorenz:
        table.add_row(f"{p:.0%}", _pct(r), _pct(b))
    table.caption = (f"{c.requests_per_conn:.2f} requests per connection on average; "
                     f"the top {c.top_fraction:.0%} of connections carry {_pct(c.top_requests)} "
                     f"of requests and {_pct(c.top_bytes)} of bytes (seed 004 Figure 4, on "
                     "packets: < 10 % of connections carry > 45 %; the least-loaded half "
                     f"carries < 10 %); Gini {c.gini_requests:.2f} (requests), "
                     f"{c.gini_bytes:.2f} (bytes)")
    return table


def _arrivals_table(r: Arrivals) -> Table:
    table = _table(f"[bold]arrivals[/] of {r.of} ({r.gaps:,} gaps)",
                   ("rate/s", "mean gap", "CV", "K-S D", "p", "Lilliefors p", "dispersion",
                    "p"))
    table.add_row(f"{r.rate:.4g}", f"{r.mean_gap_s:.3g} s", f"{r.cv:.3f}", f"{r.ks_D:.4f}",
                  f"{r.ks_p:.2g}", f"{r.lilliefors_p:.2g}", f"{r.dispersion:.3g}",
                  f"{r.dispersion_p:.2g}")
    table.caption = ("Poisson arrivals: CV ≈ 1, large p-values, dispersion ≈ 1 (Var/mean of "
                     f"requests per {r.bin_s:g} s bin). The plain K-S p is optimistic (rate "
                     "fitted to the same gaps); the Lilliefors p corrects for it.")
    return table


def _table(title: str, headers: tuple[str, ...]) -> Table:
    """A compact table that fits 80 columns: numbers right-aligned, names left."""
    table = Table(title=title, box=box.SIMPLE_HEAD, caption_justify="left", pad_edge=False,
                  collapse_padding=True)
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 or header in ("parameters", "sizes")
                         else "right", no_wrap=header != "parameters")
    return table


def _pct(v: float) -> str:
    return "–" if math.isnan(v) else f"{v:.1%}"


def _bytes(v: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.4g} B"


_FIT_STYLE = {"lognormal": "tab:blue", "pareto": "tab:red", "bpareto": "tab:orange",
              "lognormal+pareto": "tab:green"}


def plot_analysis(a: Analysis, path: str | Path) -> None:
    """One figure: the size CCDF on log-log axes with every fitted CCDF (the chosen one
    bold), the rank-frequency curve on log-log axes with the Zipf fit, and, when the
    input has them, the connections' Lorenz curves and the request rate over time."""
    panels = ["sizes", "ranks"] + (["conns"] if a.connections else []) + (
        ["rate"] if a.arrivals else [])
    rows = 1 if len(panels) <= 2 else 2
    fig = Figure(figsize=(11, 4.3 * rows))
    axes = fig.subplots(rows, 2, squeeze=False).ravel()
    draw = {"sizes": _plot_sizes, "ranks": _plot_ranks, "conns": _plot_conns,
            "rate": _plot_rate}
    for ax, panel in zip(axes, panels, strict=False):
        draw[panel](ax, a)
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    fmt = Path(path).suffix.lstrip(".") or "png"
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, format=fmt))


def _plot_sizes(ax, a: Analysis) -> None:
    s = a.sizes
    xs, ccdf = _empirical_ccdf(s.sample)
    if xs.size:
        # at most ~3000 points: evenly through the body, every one of the largest sizes
        tail = xs.size - np.unique(np.geomspace(1, xs.size, 1500).astype(int))
        pick = np.unique(np.r_[np.arange(0, xs.size, max(1, xs.size // 1500)), tail])
        ax.loglog(xs[pick], ccdf[pick], ".", color="black", markersize=3, label="data")
        grid = np.geomspace(xs[0], s.sample[-1], 200)
        for f in s.fits:
            y = f.ccdf(grid)
            y = np.where(y > 0, y, np.nan)
            chosen = f.family == s.chosen
            ax.loglog(grid, y, color=_FIT_STYLE[f.family], linewidth=2.2 if chosen else 1,
                      linestyle="-" if chosen else "--",
                      label=f.family + (" (chosen)" if chosen else ""))
        ax.legend(fontsize="small", loc="lower left")
        ax.set_ylim(0.3 / s.n, 1.5)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("P[size > x]")
    ax.set_title(f"size CCDF, {s.n:,} " + ("objects" if a.source == "requests" else "files"))


def _plot_ranks(ax, a: Analysis) -> None:
    p = a.popularity
    ax.set_xlabel("rank")
    ax.set_title("rank-frequency")
    if p is None or p.frequency.size == 0:
        ax.text(0.5, 0.5, "no popularity data", ha="center", transform=ax.transAxes)
        return
    freq = p.frequency / p.frequency.sum()
    ranks = np.arange(1, freq.size + 1)
    pick = np.unique(np.geomspace(1, freq.size, 3000).round().astype(int)) - 1
    keep = freq[pick] > 0
    ax.loglog(ranks[pick][keep], freq[pick][keep], ".", color="black", markersize=3,
              label="data")
    if p.zipf is not None:
        ax.loglog(ranks[pick], p.zipf.pmf(ranks[pick]), color="tab:red",
                  label=f"Zipf alpha={p.zipf.alpha:.3f}")
    ax.set_ylabel("share of requests")
    ax.legend(fontsize="small", loc="lower left")


def _plot_conns(ax, a: Analysis) -> None:
    c = a.connections
    for i, (label, color) in enumerate((("requests", "tab:blue"), ("bytes", "tab:orange"))):
        ax.plot(c.curve[0], c.curve[i + 1], color=color, label=label)
    ax.plot([0, 1], [0, 1], color="gray", linewidth=0.8, linestyle=":")
    ax.axvline(1 - c.top_fraction, color="gray", linewidth=0.8, linestyle="--")
    ax.set_xlabel("fraction of connections, least-loaded first")
    ax.set_ylabel("share carried")
    ax.set_title(f"connection lifetimes (Lorenz), {c.connections:,} connections")
    ax.legend(fontsize="small", loc="upper left")


def _plot_rate(ax, a: Analysis) -> None:
    r = a.arrivals
    counts = r.counts[:-1] if r.counts.size > 1 else r.counts     # the last bin is partial
    t = np.arange(counts.size) * r.bin_s
    ax.step(t, counts / r.bin_s, where="post", color="tab:blue", linewidth=0.8)
    ax.axhline(r.rate, color="tab:red", linewidth=0.8, linestyle="--", label="mean rate")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("requests/s")
    ax.set_title(f"arrival rate per {r.bin_s:g} s bin")
    ax.legend(fontsize="small", loc="lower left")

