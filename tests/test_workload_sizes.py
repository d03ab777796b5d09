"""Size models: SURGE's spliced distribution against scipy, its quantiles, and the
conditional means of every model against numeric integration."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, stats

from offloadlab.errors import InputError
from offloadlab.workload.classes import KiB, MiB
from offloadlab.workload.sizes import LogUniform, Surge, Uniform


def test_surge_defaults_are_the_published_ones():
    s = Surge()
    assert (s.mu, s.sigma, s.alpha, s.k, s.tail) == (9.357, 1.318, 1.1, 133_000.0, 0.07)


@pytest.mark.parametrize("model", [Surge(), Surge(tail=0), Surge(tail=1)], ids=str)
@given(x=st.floats(1.0, 1e12))
def test_surge_quantiles_invert_the_distribution(model, x):
    f, s = model.cdf([x]), model.sf([x])
    assert f[0] + s[0] == pytest.approx(1, abs=1e-15)
    if model.tail == 1 and x <= model.k:
        return  # no mass below k
    # Each side inverts exactly where it is computed exactly (sampling uses both).
    back = model.ppf(f)[0] if f[0] < 0.5 else model.isf(s)[0]
    assert back == pytest.approx(x, rel=1e-7)


def test_surge_sf_is_the_spliced_distribution():
    s = Surge()
    # Continuous at the split, with a fraction `tail` above it.
    assert s.sf([s.k])[0] == pytest.approx(0.07, rel=1e-12)
    assert s.sf([s.k * (1 + 1e-12)])[0] == pytest.approx(0.07, rel=1e-9)
    # Below k: the lognormal conditioned on <= k, scaled to 1 - tail (scipy as the peer).
    body = stats.lognorm(s.sigma, scale=math.exp(s.mu))
    x = np.array([50.0, 2e3, 3e4, 1e5])
    np.testing.assert_allclose(1 - s.sf(x), 0.93 * body.cdf(x) / body.cdf(s.k), rtol=1e-12)
    # Above k: Pareto.
    x = np.array([2e5, 1e7, 1e11])
    np.testing.assert_allclose(s.sf(x), 0.07 * stats.pareto(1.1, scale=s.k).sf(x), rtol=1e-12)
    # The two ends: a plain lognormal and a plain Pareto.
    np.testing.assert_allclose(Surge(tail=0).sf(x), body.sf(x), rtol=1e-9)
    np.testing.assert_allclose(Surge(tail=1).sf(x), stats.pareto(1.1, scale=s.k).sf(x))


@pytest.mark.parametrize("model, lo, hi", [
    (Surge(), 1, 64 * MiB), (Surge(), 10 * KiB, 100 * KiB), (Surge(), 100 * KiB, MiB),
    (Surge(), MiB, 5 * MiB), (Surge(tail=0), 100 * KiB, MiB), (Surge(tail=1), 1, 2**30),
    (LogUniform(), KiB, MiB), (Uniform(), 10, 1000),
])
def test_conditional_mean_matches_numeric_integration(model, lo, hi):
    if isinstance(model, Surge):
        # E[X | lo <= X <= hi] = (lo S(lo) - hi S(hi) + int_lo^hi S(x) dx) / (S(lo) - S(hi))
        sf = lambda x: float(model.sf([x])[0])  # noqa: E731
        points = [p for p in (model.k,) if lo < p < hi]
        area = integrate.quad(sf, lo, hi, points=points or None, limit=400)[0]
        expected = (lo * sf(lo) - hi * sf(hi) + area) / (sf(lo) - sf(hi))
    else:
        u = (np.arange(200_000) + 0.5) / 200_000  # midpoint rule on the quantile scale
        expected = model.sample(u, lo, hi).mean()
    assert model.mean(lo, hi) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("kwargs, field", [
    (dict(sigma=0.0), "sizes.sigma"), (dict(alpha=-1.0), "sizes.alpha"),
    (dict(k=0.0), "sizes.k"), (dict(tail=1.5), "sizes.tail"), (dict(mu=math.inf), "sizes.mu"),
])
def test_bad_surge_parameters_name_the_field(kwargs, field):
    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        Surge(**kwargs)
