"""Maximum-likelihood fits of what a workload is made of: object sizes and Zipf popularity.

Sizes (:func:`fit_sizes`): lognormal, Pareto, bounded Pareto and a lognormal-body /
Pareto-tail hybrid, each with its log-likelihood, AIC and Kolmogorov-Smirnov distance;
one is chosen by K-S distance and likelihood, and every family the data cannot tell apart
from it is named (Downey's caution: a straight CCDF tail does not by itself prove a
Pareto). Popularity (:func:`fit_zipf`): Zipf's alpha over ranks 1..N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

from offloadlab.dist import BoundedPareto, Dist, Lognormal, Pareto
from offloadlab.errors import InputError, require

# Two fits are "indistinguishable" when their likelihood test's p-value is at least this.
VUONG_P = 0.1
# The K-S distance's sampling noise at n points is about KS_NOISE / sqrt(n) (95 % level).
KS_NOISE = 1.36


# ---------------------------------------------------------------------------------------
# Sizes

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
    require(sigma > 0, "lognormal fit needs at least two different sizes")
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
    require(k > 0, f"pareto xmin={k:g} must be > 0")
    tail = x[x >= k]
    s = float(np.log(tail / k).sum())
    require(tail.size >= 2 and s > 0, f"pareto fit needs at least two different sizes >= {k:g}")
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
    require(hi > lo, "bounded Pareto fit needs at least two different sizes")
    L = math.log(hi / lo)
    target = float(np.log(x / lo).mean()) / L
    require(target < 0.5 - 1e-9, "bounded Pareto fit: the sizes lean towards the upper bound "
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
    require(ok.size > 0, f"lognormal+pareto fit needs at least {min_body + min_tail} sizes "
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
    require(i > 0, "lognormal+pareto fit: no cut leaves a tail with two different sizes")
    xmin, body, m = float(x[i]), logs[:i], n - i
    require(body.std() > 0, "lognormal+pareto fit needs at least two different body sizes")
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


def _bp_logpdf(x, alpha, lo, hi):
    norm = math.log(-math.expm1(-alpha * math.log(hi / lo)))          # ln(1 - (lo/hi)^alpha)
    inside = (x >= lo) & (x <= hi)
    return np.where(inside, math.log(alpha) + alpha * math.log(lo) - (alpha + 1)
                    * np.log(np.clip(x, lo, hi)) - norm, -np.inf)


def _bp_ccdf(x, alpha, lo, hi):
    top = (lo / hi) ** alpha
    return ((lo / np.clip(x, lo, hi)) ** alpha - top) / (1 - top)


def _hy_logpdf(x, nu, sigma, xmin, alpha, tail):
    body = (math.log1p(-tail) + _ln_logpdf(np.minimum(x, xmin), nu, sigma)
            - float(special.log_ndtr((math.log(xmin) - nu) / sigma)))
    return np.where(x < xmin, body, math.log(tail) + _p_logpdf(x, alpha, xmin))


def _hy_ccdf(x, nu, sigma, xmin, alpha, tail):
    body = 1 - (1 - tail) * _ln_cdf(x, nu, sigma) / special.ndtr((math.log(xmin) - nu) / sigma)
    return np.where(x < xmin, body, tail * _p_ccdf(x, alpha, xmin))


def _one_minus(ccdf):
    return lambda x, **params: 1.0 - ccdf(x, **params)


# The lognormal keeps its own CDF: accurate in the lower tail, where 1 - CCDF loses digits.
_FAMILIES = {
    "lognormal": (_ln_logpdf, _ln_cdf, _ln_ccdf),
    "pareto": (_p_logpdf, _one_minus(_p_ccdf), _p_ccdf),
    "bpareto": (_bp_logpdf, _one_minus(_bp_ccdf), _bp_ccdf),
    "lognormal+pareto": (_hy_logpdf, _one_minus(_hy_ccdf), _hy_ccdf),
}


def _safe_log(x: np.ndarray) -> np.ndarray:
    """ln x, with -inf (and no warning) at x <= 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, np.log(np.maximum(x, 0)), -np.inf)


def _positive(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    require(x.ndim == 1 and x.size >= 2, "a size fit needs at least two sizes")
    require(bool(np.all(np.isfinite(x) & (x > 0))), "sizes to fit must be finite and > 0")
    return x


def empirical_ccdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct sizes and P[X > size], without the last point (P = 0 has no log)."""
    values, counts = np.unique(x, return_counts=True)
    ccdf = 1.0 - np.cumsum(counts) / x.size
    return values[:-1], ccdf[:-1]


def _ccdf_points(x: np.ndarray, n_points: int = 60) -> list[list[float]]:
    """About ``n_points`` points (size, P[X > size]) of the empirical CCDF, log-spaced."""
    xs, ccdf = empirical_ccdf(x)
    if xs.size == 0:
        return []
    pick = np.unique(np.geomspace(1, xs.size, n_points).round().astype(int) - 1)
    return [[float(xs[i]), float(ccdf[i])] for i in pick]


# ---------------------------------------------------------------------------------------
# Popularity

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
    require(c.size >= 2 and bool(np.all(np.isfinite(c) & (c >= 0))) and c[1] > 0,
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

