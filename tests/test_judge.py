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


# A row's judge: five stable points below 80% busy, measured on a line.
MEASURED = np.array([0.10, 0.20, 0.30, 0.40, 0.50, 0.85])
SCORED = np.array([True, True, True, True, True, False])  # the last ran above 80% busy


def judged(predicted, measured=MEASURED, scored=SCORED, floor=0.01,
           source=judge.REPLICATES) -> judge.Judged:
    return judge.judge_row(np.asarray(predicted, float), measured, scored, 0.05, 0.2, floor,
                           source)


def test_a_model_on_the_measurements_is_met():
    j = judged(MEASURED * 1.02)
    assert (j.status, j.n, j.ks_n, j.ks_m) == (judge.MET, 5, 6, 6)
    assert j.mape == pytest.approx(0.02) and j.ks_p > 0.2
    assert "MAPE 2.0% within 5% on 5 points" in j.why


def test_an_infinite_prediction_at_a_stable_point_is_a_miss_not_a_point_dropped():
    predicted = MEASURED.copy()
    predicted[2] = math.inf  # the model saturates where the testbed kept up
    j = judged(predicted)
    assert j.status == judge.MISSED and j.n == 5 and j.mape == math.inf
    assert "no finite prediction at 1 of the 5 scored points" in j.why
    assert "MAPE 0.0% over the other 4" in j.why
    # So is a simulator that did not run there (NaN), and it misses however few points
    # and whatever the floor: no noise makes a server below 80% busy look saturated.
    predicted[2] = math.nan
    assert judged(predicted).status == judge.MISSED
    one = judged(predicted, scored=np.arange(6) == 2, floor=0.5)
    assert (one.status, one.n) == (judge.MISSED, 1)
    # Past the scored points (above 80% busy) a saturated prediction is no miss.
    predicted = MEASURED.copy()
    predicted[5] = math.inf
    assert judged(predicted).status == judge.MET


def test_one_point_is_undecidable():
    j = judged(MEASURED, scored=np.arange(6) == 0)
    assert (j.status, j.n) == (judge.UNDECIDABLE, 1)
    assert j.why == "only 1 scored point, fewer than the 4 a row needs"


def test_three_points_are_undecidable_and_four_can_be_met():
    three = judged(MEASURED, scored=np.arange(6) < 3)
    assert (three.status, three.n) == (judge.UNDECIDABLE, 3)
    assert "only 3 scored points" in three.why
    four = judged(MEASURED, scored=np.arange(6) < 4)
    assert (four.status, four.n) == (judge.MET, judge.MIN_POINTS)
    # A measurement that is missing or 0 cannot be scored, so it does not count.
    gaps = np.array([0.10, math.nan, 0.0, 0.40, 0.50, 0.85])
    assert judged(MEASURED, measured=gaps).n == 3


def test_a_floor_above_the_target_is_undecidable_even_for_a_good_mape():
    j = judged(MEASURED * 1.02, floor=0.06, source=judge.REPLICATES)
    assert j.status == judge.UNDECIDABLE
    assert j.why == "the testbed's floor 6.0% (from replicates) is above the target 5%"
    # Both reasons, when both hold; an unmeasured (NaN) floor decides nothing.
    both = judged(MEASURED * 1.02, scored=np.arange(6) < 2, floor=0.06)
    assert both.why.count(";") == 1 and "only 2 scored points" in both.why
    assert judged(MEASURED * 1.02, floor=math.nan, source=judge.UNMEASURED).status == judge.MET


def test_a_miss_without_a_measured_floor_is_undecidable_but_a_saturated_one_is_not():
    # A study of single runs cannot tell the model's error from the testbed's noise.
    far = judged(MEASURED * 1.08, floor=math.nan, source=judge.UNMEASURED)
    assert far.status == judge.UNDECIDABLE and far.mape == pytest.approx(0.08)
    assert far.why.startswith("MAPE 8.0% above the target 5%") and "unmeasured" in far.why
    # No noise makes a server that kept up below 80% busy look saturated.
    predicted = MEASURED.copy()
    predicted[1] = math.inf
    assert judged(predicted, floor=math.nan, source=judge.UNMEASURED).status == judge.MISSED


def test_a_mape_past_the_target_or_a_failed_ks_is_missed():
    far = judged(MEASURED * 1.08)
    assert far.status == judge.MISSED and far.why.startswith("MAPE 8.0% above the target 5%")
    # Within the MAPE target but shaped unlike the measurements: K-S says so.
    measured = np.linspace(0.10, 0.20, 12)
    shifted = measured + 0.048
    ks = judge.judge_row(shifted, measured, np.ones(12, bool), 0.5, 0.2, 0.01,
                         judge.REPLICATES)
    assert ks.status == judge.MISSED and ks.mape < 0.5 and ks.ks_p <= 0.2
    assert "K-S p" in ks.why and "<= 0.2" in ks.why


def test_tally_counts_every_row_and_the_shares_of_the_decidable():
    t = judge.tally(["met"] * 6 + ["missed"] * 2 + ["undecidable"] * 2)
    assert (t.met, t.missed, t.undecidable, t.total, t.decidable) == (6, 2, 2, 10, 8)
    assert (t.decidable_share, t.met_share) == (0.8, 0.75)
    assert math.isnan(judge.tally([]).decidable_share)
    assert math.isnan(judge.tally(["undecidable"]).met_share)
    with pytest.raises(ValueError, match="unknown row status"):
        judge.tally(["met", True])


def test_neutral_at_x091_is_never_confirmed_whatever_its_interval():
    for low, high in ((0.90, 0.92), (0.80, 1.04), (0.85, 0.97), (0.0, math.inf)):
        agree, _ = judge.agreement("neutral", 0.91, low, high, 1.0, 1.0)
        assert agree != judge.YES, (low, high)
    # Wholly inside the band it is.
    assert judge.agreement("neutral", 1.01, 0.97, 1.04, 1.0, 1.0)[0] == judge.YES


def test_a_nan_saturation_ratio_is_not_agreement():
    for verdict, low, high in (("helps", 0.7, 0.8), ("hurts", 1.3, 1.5),
                               ("neutral", 0.98, 1.02)):
        agree, why = judge.agreement(verdict, (low + high) / 2, low, high, 1.0, math.nan)
        assert agree == judge.INCONCLUSIVE and "saturation ratio is unknown" in why
    assert judge.agreement("helps", 0.75, 0.7, 0.8, math.nan, 1.2)[0] == judge.INCONCLUSIVE


def test_a_clear_hurts_is_confirmed_however_wide_its_interval():
    """29 Nov 2026: a hurts at ×2.15 ±38%, saturation ×0.63, read inconclusive only
    because its margin was above 15%."""
    ratio = 2.15
    agree, why = judge.agreement("hurts", ratio, ratio * (1 - 0.38), ratio * (1 + 0.38),
                                 0.7, 0.63)
    assert agree == judge.YES and "shows hurts" in why
    # Capacity measured the other way contradicts it, however clear the delay.
    assert judge.agreement("hurts", ratio, 1.33, 2.97, 0.7, 1.2)[0] == judge.NO


def test_a_client_bound_saturation_ratio_neither_contradicts_nor_decides():
    # 7 Dec 2026 (stab12): uring's c3 `hurts` was contradicted by capacity, measured
    # ×1.14 against the model's ×0.87, where the uring saturation run was the load
    # generator's and the delay interval (×1.05-1.94) showed hurts.
    agree, why = judge.agreement("hurts", 1.43, 1.06, 1.94, 0.87, 1.14, client_bound=True)
    assert agree == judge.YES and "shows hurts" in why
    assert judge.agreement("hurts", 1.43, 1.06, 1.94, 0.87, 1.14)[0] == judge.NO
    # The delay still contradicts, and without it nothing is decided.
    assert judge.agreement("helps", 1.43, 1.06, 1.94, 1.2, 1.14, client_bound=True)[0] == \
        judge.NO
    agree, why = judge.agreement("hurts", math.nan, math.nan, math.nan, 0.6, 0.7,
                                 client_bound=True)
    assert agree == judge.INCONCLUSIVE and "load generator" in why
    assert judge.agreement("hurts", 1.43, 1.06, 1.94, 0.87, math.nan,
                           client_bound=True)[0] == judge.INCONCLUSIVE


def test_a_sweep_saturated_below_the_operating_rate_decides_by_the_saturation_ratios():
    nan = math.nan
    # Both capacities down beyond the band (or both up, or both inside it): confirmed.
    assert judge.agreement("hurts", nan, nan, nan, 0.6, 0.7)[0] == judge.YES
    assert judge.agreement("helps", nan, nan, nan, 1.3, 1.2)[0] == judge.YES
    assert judge.agreement("neutral", nan, nan, nan, 1.02, 0.98)[0] == judge.YES
    # Opposite: contradicted; one beyond the band and one inside: undecided.
    assert judge.agreement("hurts", nan, nan, nan, 0.6, 1.3)[0] == judge.NO
    agree, why = judge.agreement("hurts", nan, nan, nan, 0.6, 0.99)
    assert agree == judge.INCONCLUSIVE and "saturated below the rate" in why
