"""Arrival processes: Poisson gaps, constant spacing and ramp rates (time rescaling)
match what they claim, checked against scipy.stats through the open-loop generators;
the ramp's integral and its inverse are exact; specs round-trip."""

import math

import numpy as np
import pytest
from conftest import OBJ, P_FLOOR
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, stats

from offloadlab.workload import stream
from offloadlab.workload.arrivals import Constant, Poisson, Ramp, parse_arrivals


def test_poisson_gaps_are_exponential_and_the_rate_is_right():
    rate, duration = 200.0, 50.0
    s = stream.poisson(OBJ, rate=rate, duration_s=duration, seed=11)
    t = s.frame["time_s"].to_numpy()
    gaps = np.diff(t, prepend=0.0)
    assert stats.kstest(gaps, "expon", args=(0, 1 / rate)).pvalue > P_FLOOR
    # N ~ Poisson(rate * duration): within 4 standard deviations.
    assert abs(len(t) - rate * duration) < 4 * math.sqrt(rate * duration)
    assert t.max() < duration
    d = s.describe()
    assert d["rate"] == pytest.approx(len(t) / duration) and d["span_s"] == duration


def test_poisson_count_bound_and_mean_gap():
    rate, n = 40.0, 4000
    t = stream.poisson(OBJ, rate=rate, count=n, seed=5).frame["time_s"].to_numpy()
    assert len(t) == n
    # The mean of n exponential gaps has standard error (1/rate)/sqrt(n).
    assert abs(t[-1] / n - 1 / rate) < 4 / rate / math.sqrt(n)


def test_count_and_duration_together_stop_at_the_first():
    few = stream.poisson(OBJ, rate=100, count=50, duration_s=100, seed=1)
    short = stream.poisson(OBJ, rate=100, count=10**6, duration_s=1, seed=1)
    assert len(few) == 50
    assert short.frame["time_s"].max() < 1 and len(short) < 200


def test_constant_rate_is_exact():
    s = stream.constant(OBJ, rate=8, duration_s=10)
    np.testing.assert_array_equal(s.frame["time_s"], np.arange(80) / 8)
    assert len(stream.constant(OBJ, rate=3, duration_s=1)) == 3
    np.testing.assert_array_equal(stream.constant(OBJ, 1000, count=5).frame["time_s"],
                                  np.arange(5) / 1000)


RAMP = Ramp(((0, 50), (20, 400), (30, 400), (40, 0)))


def test_ramp_counts_per_second_follow_the_integrated_rate():
    s = stream.ramp(OBJ, RAMP.points, seed=3)      # ends at the last breakpoint, 40 s
    t = s.frame["time_s"].to_numpy()
    assert t.max() < 40 and np.all(np.diff(t) >= 0)
    edges = np.arange(0, 41.0)
    counts, _ = np.histogram(t, edges)
    expected = np.diff(RAMP.integrated(edges))
    # Counts in disjoint bins are independent Poisson(expected): chi-square, 40 d.o.f.
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert stats.chi2.sf(chi2, len(edges) - 1) > P_FLOOR
    assert abs(len(t) - RAMP.integrated(40.0)) < 4 * math.sqrt(RAMP.integrated(40.0))


def test_ramp_integral_and_its_inverse_are_exact():
    for t in (0.0, 3.3, 20.0, 25.0, 33.0, 40.0, 55.0):
        quad, _ = integrate.quad(lambda x: float(RAMP.rate_at(x)), 0, t, points=[20, 30, 40],
                                 limit=200)
        assert RAMP.integrated(t) == pytest.approx(quad, rel=1e-9, abs=1e-9)
    t = np.linspace(0, 39.9, 500)
    np.testing.assert_allclose(RAMP._inverse(RAMP.integrated(t)), t, rtol=1e-9, atol=1e-9)


@given(st.lists(st.floats(0, 500), min_size=1, max_size=6), st.floats(0.01, 100))
def test_ramp_inverse_round_trip_property(rates, step):
    if not any(r > 0 for r in rates):
        rates[0] = 1.0
    ramp = Ramp(tuple((i * step, r) for i, r in enumerate(rates)))
    t = np.linspace(0, step * (len(rates) - 1) * 1.2 + 1, 101)
    lam = ramp.integrated(t)
    assert np.all(np.diff(lam) >= -1e-9)
    back = ramp.integrated(ramp._inverse(lam))
    np.testing.assert_allclose(back, lam, rtol=1e-9, atol=1e-9 * max(1.0, lam[-1]))


def test_ramp_to_zero_ends_early_and_a_ramp_string_works():
    s = stream.ramp(OBJ, "0s:100, 2s:0", count=10**6, seed=2)
    assert len(s) < 200 and s.frame["time_s"].max() < 2
    assert parse_arrivals("ramp(0s:100, 2s:0)") == Ramp(((0, 100), (2, 0)))


@pytest.mark.parametrize("spec, value", [
    ("poisson(rate=100)", Poisson(100)), ("poisson(100)", Poisson(100)),
    ("constant(rate=2.5)", Constant(2.5)),
    ("ramp(0s:10, 1ms:20)", Ramp(((0, 10), (1e-3, 20)))),
])
def test_arrival_specs(spec, value):
    assert parse_arrivals(spec) == value
    assert parse_arrivals(str(value)) == value
