"""The study's judge (study/judge.py) on synthetic replicates with known noise."""

import math

import numpy as np
import pytest

from offloadlab.study import judge


@pytest.mark.parametrize(("cv", "r"), [(0.03, 3), (0.08, 3), (0.05, 5)])
def test_floor_recovers_a_known_noise_level(cv, r):
    rng = np.random.default_rng(7)
    truth = np.linspace(0.1, 0.9, 40)[:, None]
    values = truth * (1 + cv * rng.standard_normal((40, r)))
    floor = judge.replicate_floor(values)
    # A model exactly on the truth scores this MAPE against the replicates' means.
    expected = math.sqrt(2 / math.pi) * cv / math.sqrt(r)
    assert floor == pytest.approx(expected, rel=0.2)
    scored = np.mean(np.abs(truth[:, 0] / values.mean(axis=1) - 1))
    assert floor == pytest.approx(scored, rel=0.2)


def test_floor_counts_each_points_own_replicates_and_needs_two():
    values = np.array([[1.0, 1.1, np.nan], [2.0, np.nan, np.nan]])
    # Only the first point has two replicates: its relative variance over 2.
    rel_var = np.var([1.0, 1.1], ddof=1) / 1.05**2
    assert judge.replicate_floor(values) == pytest.approx(math.sqrt(2 / math.pi * rel_var / 2))
    assert math.isnan(judge.replicate_floor(np.array([[1.0], [2.0]])))
    with pytest.raises(ValueError, match="points x replicates"):
        judge.replicate_floor(np.ones(3))


def test_paired_ratio_is_the_geometric_mean_with_a_t_interval():
    base = np.array([1.0, 2.0, 4.0, 1.5])
    ratio, lo, hi = judge.paired_ratio(base * np.array([0.8, 0.82, 0.78, 0.8]), base)
    d = np.log([0.8, 0.82, 0.78, 0.8])
    half = 3.182446 * d.std(ddof=1) / 2  # t(0.975, 3) s / sqrt(4)
    assert ratio == pytest.approx(math.exp(d.mean()))
    assert (lo, hi) == pytest.approx((math.exp(d.mean() - half), math.exp(d.mean() + half)))
    # The pairs' shared spell cancels: the baselines' own spread does not widen it.
    assert hi / lo < 1.08
    assert judge.paired_ratio([2.0], [1.0]) == (2.0, 0.0, math.inf)
    ratio, lo, hi = judge.paired_ratio([], [])
    assert math.isnan(ratio) and (lo, hi) == (0.0, math.inf)


@pytest.mark.parametrize(("low", "high", "shown"), [
    (0.80, 0.90, "helps"), (1.06, 2.5, "hurts"), (0.96, 1.04, "neutral"),
    (0.90, 0.97, None), (0.97, 1.10, None), (0.5, 1.5, None), (0.0, math.inf, None),
    (math.nan, 1.0, None),
])
def test_direction_needs_the_whole_interval_on_one_side_of_the_band(low, high, shown):
    assert judge.direction(low, high) == shown
