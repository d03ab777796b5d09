"""Size and Zipf fits: each recovers known parameters and matches scipy's likelihood,
and the choice rule picks the family that generated the sample."""

import math

import numpy as np
import pytest
from scipy import optimize, stats
from workload_samples import HYBRID, hybrid_sample, within, zipf_p

from offloadlab.dist import BoundedPareto, Lognormal, Pareto
from offloadlab.errors import InputError
from offloadlab.workload import fits

N = 20_000


def samples(family, seed=1):
    rng = np.random.default_rng(seed)
    return {"lognormal": lambda: Lognormal(8.0, 1.5).sample(rng, N),
            "pareto": lambda: Pareto(1.5, 1000.0).sample(rng, N),
            "bpareto": lambda: BoundedPareto(0.5, 1e3, 1e6).sample(rng, N),
            "lognormal+pareto": lambda: hybrid_sample(rng, N, **HYBRID)}[family]()


# ---- size fits --------------------------------------------------------------------------

def test_lognormal_fit_recovers_parameters_and_matches_scipy():
    x = samples("lognormal")
    f = fits.fit_lognormal(x)
    assert within(f.params["nu"], 8.0, f.se["nu"])
    assert within(f.params["sigma"], 1.5, f.se["sigma"])
    sigma, _, scale = stats.lognorm.fit(x, floc=0)
    assert f.params["sigma"] == pytest.approx(sigma, rel=1e-6)
    assert f.params["nu"] == pytest.approx(math.log(scale), rel=1e-6)
    assert f.loglik == pytest.approx(stats.lognorm.logpdf(x, sigma, 0, scale).sum(), rel=1e-9)
    assert f.dist == Lognormal(f.params["nu"], f.params["sigma"])
    assert f.aic == pytest.approx(4 - 2 * f.loglik)


def test_pareto_fit_recovers_alpha_with_k_min_and_given_xmin():
    x = samples("pareto")
    f = fits.fit_pareto(x)
    assert within(f.params["alpha"], 1.5, f.se["alpha"])
    assert f.params["k"] == x.min()
    b, _, scale = stats.pareto.fit(x, floc=0)
    assert f.params["alpha"] == pytest.approx(b, rel=1e-6)
    assert f.params["k"] == pytest.approx(scale, rel=1e-9)
    assert isinstance(f.dist, Pareto) and f.dist.alpha == f.params["alpha"]
    tail = fits.fit_pareto(x, xmin=10_000.0)
    assert tail.n == np.count_nonzero(x >= 10_000.0) and tail.n_params == 1
    assert within(tail.params["alpha"], 1.5, tail.se["alpha"])


def test_pareto_with_alpha_below_one_has_no_dist():
    x = Pareto(1.01, 1.0).sample(np.random.default_rng(3), 2000) ** 1.5   # alpha ~ 0.67
    f = fits.fit_pareto(x)
    assert f.params["alpha"] < 1 and f.dist is None


def test_bpareto_fit_recovers_alpha_and_maximises_likelihood():
    x = samples("bpareto")
    f = fits.fit_bpareto(x)
    assert within(f.params["alpha"], 0.5, f.se["alpha"])
    assert (f.params["lo"], f.params["hi"]) == (x.min(), x.max())
    lo, hi = x.min(), x.max()

    def nll(a):   # the bounded Pareto log-likelihood, maximised numerically (independent)
        return -(x.size * (math.log(a) + a * math.log(lo) - math.log(1 - (lo / hi) ** a))
                 - (a + 1) * np.log(x).sum())
    best = optimize.minimize_scalar(nll, bounds=(0.01, 5), method="bounded",
                                    options={"xatol": 1e-10})
    assert f.params["alpha"] == pytest.approx(best.x, rel=1e-6)
    assert f.loglik == pytest.approx(-nll(f.params["alpha"]), rel=1e-9)
    assert isinstance(f.dist, BoundedPareto)
    assert f.dist.mean == pytest.approx(x.mean(), rel=0.05)


def test_hybrid_fit_recovers_the_tail_and_body():
    x = samples("lognormal+pareto")
    f = fits.fit_hybrid(x)
    p, se = f.params, f.se
    assert within(p["alpha"], HYBRID["alpha"], se["alpha"])
    # The cut is estimated: the fitted tail weight is P[X >= xmin] of the true mixture.
    true_tail = HYBRID["tail"] * (HYBRID["xmin"] / p["xmin"]) ** HYBRID["alpha"]
    assert p["xmin"] >= HYBRID["xmin"] * 0.8
    assert within(p["tail"], min(true_tail, HYBRID["tail"]), se["tail"])
    # Body: se(nu), se(sigma) ~ sigma/sqrt(n_body) ~ 0.01 untruncated; allow a few times it.
    assert abs(p["nu"] - HYBRID["nu"]) < 0.06
    assert abs(p["sigma"] - HYBRID["sigma"]) < 0.06
    assert f.dist is None and f.n_params == 5
    grid = np.geomspace(x.min(), x.max(), 50)
    np.testing.assert_allclose(f.cdf(grid) + f.ccdf(grid), 1.0)
    assert np.all(np.diff(f.cdf(grid)) >= 0)


@pytest.mark.parametrize("family", ["lognormal", "pareto", "bpareto", "lognormal+pareto"])
@pytest.mark.parametrize("seed", [0, 1])
def test_choice_rule_picks_the_generating_family(family, seed):
    sizes = fits.fit_sizes(samples(family, seed))
    assert sizes.chosen == family, sizes.verdict
    assert sizes.best.family == family and sizes.n == N
    if family in ("pareto", "bpareto"):
        # Pareto against bounded Pareto is a nested likelihood-ratio test, reported as such.
        other = "bpareto" if family == "pareto" else "pareto"
        assert next(c for c in sizes.comparisons if c.b == other).test == "nested"
        assert other in sizes.verdict


def test_pareto_inside_bpareto_test_is_calibrated():
    """On Pareto samples the nested test's p-value is uniform: about 10 % fall below 0.1
    (binomial sd 3 of 100 samples); on a bounded sample it favours the bounded fit."""
    rng = np.random.default_rng(12)
    p = []
    for _ in range(100):
        x = Pareto(1.3, 500.0).sample(rng, 2000)
        p.append(fits.fit_sizes(x, hybrid=False).comparisons[-1].p)
    assert 10 - 4 * 3 <= np.count_nonzero(np.array(p) < 0.1) <= 10 + 4 * 3
    sizes = fits.fit_sizes(samples("bpareto"), hybrid=False)
    nested = next(c for c in sizes.comparisons if c.test == "nested")
    assert nested.favours == "bpareto" and nested.p < 1e-6


def test_fit_sizes_leaves_out_zeros_and_needs_two_sizes():
    sizes = fits.fit_sizes(np.r_[np.zeros(5), samples("lognormal")[:500]])
    assert sizes.zeros == 5 and sizes.n == 500 and sizes.chosen is not None
    same = fits.fit_sizes(np.full(10, 512.0))
    assert same.fits == () and same.chosen is None and same.verdict.startswith("no fit")
    with pytest.raises(InputError, match="at least two"):
        fits.fit_lognormal([5.0])


# ---- Zipf --------------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "alpha", "seed"), [(1000, 0.9, 0), (200, 0.7, 1), (5000, 1.0, 2)])
def test_zipf_alpha_recovered_from_sampled_requests(n, alpha, seed):
    counts = np.random.default_rng(seed).multinomial(200_000, zipf_p(n, alpha))
    z = fits.fit_zipf(np.random.default_rng(9).permutation(counts))     # any order
    assert within(z.alpha, alpha, z.se)
    # peer: scipy's finite Zipf gives the same log-likelihood at the estimate
    logpmf = stats.zipfian.logpmf(np.arange(1, n + 1), z.alpha, n)
    assert z.loglik == pytest.approx((np.sort(counts)[::-1] * logpmf).sum(), rel=1e-9)


def test_zipf_from_probabilities_is_exact_and_has_no_se():
    z = fits.fit_zipf(zipf_p(1000, 0.9), sampled=False)
    assert z.alpha == pytest.approx(0.9, abs=1e-9)
    assert math.isnan(z.se)

