"""Calibration: the fits recover known costs, the K-S test reproduces seed 000's
Table 4-2, the error measures are what they say."""

import math
from dataclasses import replace

import numpy as np
import pytest
from document_samples import core, stats_document, thread
from scipy import stats

from offloadlab import dist
from offloadlab.calibrate import fit
from offloadlab.documents import ServerStats

MSS = 1448


@pytest.mark.parametrize("n, k, p", [
    (11, 3, 0.8326),  # TOE class 4
    (11, 2, 0.9970),  # TOE class 1
    (14, 2, 0.9996),  # Non-TOE class 0
    (14, 3, 0.9205),  # Non-TOE class 3
    (12, 2, 0.9985),  # Non-TOE and TOE class 2
    (12, 3, 0.8690),  # Non-TOE class 4
    (13, 3, 0.8978),  # TOE class 3
])
def test_ks_reproduces_table_4_2_with_the_exact_distribution(n, k, p):
    # Two curves of n points whose empirical CDFs differ by at most k/n.
    a = np.arange(n, dtype=float)
    D, pvalue = fit.ks(a, a + k - 0.5)
    assert pytest.approx(k / n) == D
    assert pvalue == pytest.approx(p, abs=1.5e-4)  # the table has 4 decimals


def test_ks_falls_back_to_the_asymptotic_p_where_scipy_cannot_compute_the_exact_one():
    # Two 5-point samples on which scipy's exact recursion gives up (a RuntimeWarning,
    # an error in a study run under -W error).
    a = [0.8009643834531339, 0.08237984529913911, 0.5377307648429477, 0.2700115055523207,
         0.3244284353768756]
    b = [0.36778799463457446, 0.1981194211736207, 0.42293438508470205, 0.28406055690426213,
         0.9964509826928074]
    D, p = fit.ks(a, b)
    asymptotic = stats.ks_2samp(a, b, method="asymp")
    assert (D, p) == (asymptotic.statistic, asymptotic.pvalue)


def test_ks_ignores_points_a_curve_does_not_have_and_keeps_saturated_ones():
    D, p = fit.ks([1.0, 2.0, math.nan], [1.0, 2.0])
    assert (D, p) == (0.0, 1.0)
    assert all(math.isnan(x) for x in fit.ks([], [1.0]))
    # A saturated prediction (inf) is a point above every finite one, not a gap.
    assert fit.ks([1.0, 2.0, math.inf], [1.0, 2.0, 3.0]) == fit.ks([1.0, 2.0, 9.0],
                                                                    [1.0, 2.0, 3.0])


def test_mape_scores_measured_points_and_a_saturated_prediction_is_an_infinite_error():
    assert fit.mape([1.1, 1.8, 5.0, math.nan], [1.0, 2.0, 0.0, math.nan]) == pytest.approx(0.1)
    assert math.isnan(fit.mape([1.0], [math.nan]))
    assert fit.mape([1.1, 1.8, math.inf], [1.0, 2.0, 3.0]) == math.inf
    assert fit.mape([1.1, 1.8, math.nan], [1.0, 2.0, 3.0]) == math.inf


def _sizes(mean: float, n: int = 2000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(mean) - 0.125, 0.5, n)


def test_cost_model_recovers_per_request_packet_and_byte_costs():
    c0, c_pkt, c_byte = 20e-6, 1.5e-6, 0.4e-9
    sizes = [_sizes(m, seed=i) for i, m in enumerate((500, 5e3, 50e3, 500e3))]
    means = [np.mean(c0 + c_pkt * fit.packets(s, MSS) + c_byte * s) for s in sizes]
    m = fit.fit_cost_model("inline", "host_proto", ["c0", "c1", "c2", "c3"], means, sizes, MSS)
    assert (m.c0, m.c_pkt, m.c_byte) == pytest.approx((c0, c_pkt, c_byte), rel=0.02)
    assert m.r2 == pytest.approx(1.0) and m.note == ""


def test_cost_model_with_two_classes_leaves_packets_out_and_says_so():
    sizes = [_sizes(500), _sizes(200e3)]
    means = [30e-6, 30e-6 + 0.5e-9 * np.mean(sizes[1]) - 0.5e-9 * np.mean(sizes[0])]
    m = fit.fit_cost_model("engine", "engine", ["c0", "c3"], means, sizes, MSS)
    assert m.c_pkt == 0 and "three or more" in m.note
    assert m.c_byte == pytest.approx(0.5e-9, rel=1e-6)
    assert math.isnan(m.r2)  # two points, two parameters: nothing left to score


def test_shaped_costs_keep_the_mean_and_follow_the_sizes():
    sizes = _sizes(100e3)
    model = fit.CostModel("inline", "host_proto", 10e-6, 0.0, 1e-9, 1.0, ("c3",))
    costs = fit.shaped(50e-6, sizes, model, MSS)
    assert costs.mean() == pytest.approx(50e-6)
    assert np.corrcoef(costs, sizes)[0, 1] == pytest.approx(1.0)
    assert np.all(fit.shaped(50e-6, sizes, None, MSS) == 50e-6)


def test_with_moments_keeps_both_moments():
    assert dist.with_moments(40e-6, 40e-6**2) == dist.Deterministic(40e-6)
    d = dist.with_moments(40e-6, 3 * 40e-6**2)
    assert (d.mean, d.m2) == pytest.approx((40e-6, 3 * 40e-6**2))


def test_fits_recover_a_lognormal_and_a_pareto():
    rng = np.random.default_rng(1)
    lognormal, _ = fit.fits(rng.lognormal(-10, 0.3, 20_000))
    d = dist.parse(lognormal)
    assert (d.nu, d.sigma) == pytest.approx((-10, 0.3), rel=0.02)
    _, pareto = fit.fits(5e-6 * (1 + rng.pareto(3.0, 20_000)))
    p = dist.parse(pareto)
    assert (p.alpha, p.k) == pytest.approx((3.0, 5e-6), rel=0.03)
    assert fit.fits(np.full(10, 1e-5)) == ("", "")


def _run(mode, host_s, app_s, engine_s=math.nan, requests=1000, mean_size=1000.0):
    return fit.Run("c1", mode, 100.0, 100.0, requests, host_s, app_s, engine_s, 1e-3,
                   _sizes(mean_size, 500))


def test_fit_class_splits_host_and_engine_demand():
    inline = fit.fit_class([_run("inline", 150e-6, 100e-6, requests=1000),
                            _run("inline", 130e-6, 100e-6, requests=3000)], MSS)
    # Utilisation law over both runs: (1000 * 150 + 3000 * 130) / 4000 = 135 us.
    assert (inline.EXa, inline.EXp) == pytest.approx((100e-6, 35e-6))
    assert inline.saturation == pytest.approx(1 / 135e-6)
    engine_model = fit.CostModel("engine", "engine", 12e-6, 0.0, 1e-9, 1.0, ("c1",))
    off = fit.fit_class([_run("engine", 108e-6, 100e-6, engine_s=30e-6)], MSS,
                        engine_model=engine_model)
    assert (off.EXo, off.EXc, off.EXq) == pytest.approx((8e-6, 12e-6, 18e-6))
    assert off.EXq_m2 > off.EXq**2  # the sizes spread X_q
    assert off.bottleneck == "host" and off.saturation == pytest.approx(1 / 108e-6)


def test_a_fit_with_the_client_elsewhere_frees_the_engines_core_only():
    # The engine's core also runs the load generator: 60 us per request and 10% of the
    # core, so the engine (40 us) saturates at 0.9 / 100 us; without the generator at
    # 1 / 40 us, and the host (50 us of which 10 us other work) is then the bottleneck.
    f = fit.ClassFit("c0", "engine", EXa=30e-6, EXo=10e-6, EXc=40e-6, EXq=0.0,
                     host_bg=10e-6, engine_bg=60e-6, engine_share=0.1)
    assert f.bottleneck == "engine" and f.saturation == pytest.approx(0.9 / 100e-6)
    away = f.client_elsewhere
    assert away.capacities == pytest.approx({"host": 1 / 50e-6, "engine": 1 / 40e-6})
    assert away.bottleneck == "host" and away.saturation == pytest.approx(1 / 50e-6)


def test_combine_weighs_estimates_by_their_precision():
    d0, hw = fit.combine(np.array([100e-6, 300e-6]), np.array([10e-6, 30e-6]))
    # Weights 1/10² and 1/30²: 9:1.
    assert d0 == pytest.approx((9 * 100e-6 + 300e-6) / 10)
    # They disagree far beyond their intervals: in standard errors (half-width / 1.96)
    # chi-square is 1.96² ((20/10)² + (180/30)²) = 1.96² · 40 on one degree of freedom,
    # which scales the half-width by 1.96 √40.
    plain = 1 / math.sqrt(1 / 10e-6**2 + 1 / 30e-6**2)
    assert hw == pytest.approx(1.959964 * math.sqrt(40) * plain)
    # Estimates that agree within their intervals keep the plain half-width.
    d0, hw = fit.combine(np.array([100e-6, 110e-6]), np.array([10e-6, 30e-6]))
    assert hw == pytest.approx(plain)
    d0, hw = fit.combine(np.array([1.0, 3.0]), np.array([math.nan, math.nan]))
    assert d0 == 2.0 and math.isnan(hw)


def test_a_wakeup_cost_and_cooling_time_are_recovered_from_cpu_per_request():
    # Two classes with per-request costs 90 and 300 us and one queue whose wake-up costs
    # 50 us after a long idle period and cools down over about 0.3 ms (a grid value).
    cost, cooling = 50e-6, fit.COOLING_GRID[15]

    def run(cls, s, lam):
        # CPU per request y = s + D (1 - U) / (1 + lam c) with U = lam y, solved for y.
        warm = cost / (1 + lam * cooling)
        y = (s + warm) / (1 + lam * warm)
        return fit.Run(cls, "inline", lam, lam, 1000, y, 50e-6, math.nan, 1e-3,
                       _sizes(1e3, 10), host_wakeups=2 * (1 - lam * y))

    runs = [[run(c, s, lam) for lam in (300.0, 1000.0, 2000.0)]
            for c, s in (("c0", 90e-6), ("c3", 300e-6))]
    w = fit.fit_wakeup(runs, "host")
    assert (w.cost, w.cooling) == pytest.approx((cost, cooling), rel=1e-6)
    assert w.r2 == pytest.approx(1.0) and w.counted == pytest.approx(2.0)
    # The class's per-request cost is what is left: 90 us of which 50 us application work.
    inline = fit.fit_class(runs[0], MSS, host_wakeup=w)
    assert (inline.EXa, inline.EXp) == pytest.approx((50e-6, 40e-6))
    # Without a spread of wake-ups there is nothing to fit.
    flat = [[run("c0", 90e-6, 1000.0)] * 3, [run("c3", 300e-6, 1000.0)] * 3]
    assert fit.fit_wakeup(flat, "host").cost == 0.0


def test_an_engine_the_host_answers_wake_is_fitted_on_both_wakeups():
    # Engine mode's engine wakes for each request it reads and each batch of answers the
    # host hands back: P0_e (1 + P0_host) wake-ups per request; uring's SQPOLL thread
    # only for the host's submissions, P0_e. CPU per request y = s + D x with x those
    # wake-ups, U_e = lam y, solved for y; the host's busy share is lam 100 us.
    cost, host = 20e-6, 100e-6

    def run(mode, cls, s, lam):
        extra = 2 - lam * host if mode == "engine" else 1.0
        y = (s + cost * extra) / (1 + lam * cost * extra)
        return fit.Run(cls, mode, lam, lam, 1000, host, 0.0, y, 1e-3, _sizes(1e3, 10))

    for mode in ("engine", "uring"):
        runs = [[run(mode, c, s, lam) for lam in (500.0, 2000.0, 4000.0)]
                for c, s in (("c0", 30e-6), ("c3", 90e-6))]
        lam = 2000.0
        assert fit.woken(runs[0][1], "engine") == pytest.approx(
            (1 - lam * runs[0][1].engine_s) * ((2 - lam * host) if mode == "engine" else 1))
        assert fit.fit_wakeup(runs, "engine").cost == pytest.approx(cost, rel=1e-6), mode


def test_the_engine_wakeup_fit_reads_back_the_models_own_cooled_wakeups():
    # Runs made by the model itself: an engine woken by each request and each batch of
    # the host's answers (answers_wake), its wake-ups cooled over 2 ms at the rate of
    # those epochs. The fit must give back the model's D and c exactly; cooled at the
    # request rate alone it found a longer cooling time and a smaller engine cost.
    from conftest import klass, make_scenario

    from offloadlab import model

    cost, cooling = 60e-6, fit.COOLING_GRID[27]
    costs = {"c0": "det(60us)", "c3": "det(150us)"}
    sc = make_scenario([klass(c, 100.0, 1.0, app="det(40us)", host_proto="det(30us)",
                              host_overhead="det(20us)", engine_overhead=e,
                              engine_proto="det(0s)") for c, e in costs.items()],
                       system_delay="sum", cpu_queue="mg1")
    sc = replace(sc, engine=replace(sc.engine, wakeup=dist.Deterministic(cost),
                                    cooling=cooling, answers_wake=True))
    runs = []
    for i, c in enumerate(costs):
        alone = replace(sc, classes=(sc.classes[i],))
        lam = np.array([300.0, 1500.0, 4000.0])
        r = model.evaluate(alone, lam).overall
        runs.append([fit.Run(c, "engine", x, x, 1000, u / x, 40e-6, e / x, 1e-3,
                             _sizes(1e3, 10))
                     for x, u, e in zip(lam, r["U_cpu"], r["U_oe"], strict=True)])
    w = fit.fit_wakeup(runs, "engine")
    assert (w.cost, w.cooling) == pytest.approx((cost, cooling), rel=1e-6)
    # Each run's wake-up CPU per request is then the model's: what is left is the
    # class's engine cost.
    for per_class, engine in zip(runs, (60e-6, 150e-6), strict=True):
        for run in per_class:
            assert run.engine_s - w.per_run(run, "engine") == pytest.approx(engine, rel=1e-6)


def test_chi_square_counts_disagreement_in_standard_errors():
    # Two estimates 20 apart, each with a 95% half-width of 10: each is 10 from their
    # mean, 1.96 standard errors, so chi-square is 2 x 1.96^2.
    assert fit.chi_square(np.array([0.0, 20.0]), np.array([10.0, 10.0])) == pytest.approx(
        2 * fit.Z95**2)
    assert fit.chi_square(np.array([5.0, 5.0]), np.array([1.0, 3.0])) == 0.0
    # A model saturated at a served rate leaves an infinite gap: infinitely wrong.
    assert fit.chi_square(np.array([1.0, -math.inf]), np.array([1.0, 1.0])) == math.inf
    # Estimates without an interval carry no weight.
    assert fit.chi_square(np.array([1.0, 9.0]), np.array([math.nan, math.nan])) == 0.0


def test_the_engine_cores_bursts_are_read_back_from_the_delays_they_cause():
    # The engine shares its core with other work of 80 us per request (c0) and 150 us
    # (c3), preempting it in bursts of squared coefficient of variation 4. Delays made
    # by the model itself at three rates per class, with d0s of 100 and 300 us; each
    # candidate shape gets its own d0s, as the study fits them, and the true one
    # explains the delays exactly.
    from conftest import klass, make_scenario

    from offloadlab import model

    def shaped(scv: float):
        sc = make_scenario([klass(c, 100.0, 1.0, app="det(40us)", host_proto="det(30us)",
                                  host_overhead="det(20us)", engine_overhead=e,
                                  engine_proto="det(0s)", d0_offload="0s")
                            for c, e in (("c0", "det(60us)"), ("c3", "det(150us)"))],
                           system_delay="sum", cpu_queue="mg1")
        background = tuple((c, fit.burst(b, scv)) for c, b in (("c0", 80e-6), ("c3", 150e-6)))
        return replace(sc, engine=replace(sc.engine, per_class=background))

    def delay(sc, i, rates):
        alone = replace(sc, classes=(replace(sc.classes[i], offload=1.0),))
        return model.evaluate(alone, rates).overall["T"]

    rates = [np.array([500.0, 2000.0, 3500.0]), np.array([300.0, 1200.0, 2000.0])]
    measured = [delay(shaped(4.0), i, r) + d0 for i, (r, d0) in
                enumerate(zip(rates, (100e-6, 300e-6), strict=True))]
    widths = np.full(3, 20e-6)

    def gaps(scv: float) -> list:
        return [(measured[i] - delay(shaped(scv), i, rates[i]), widths) for i in range(2)]

    assert sum(fit.chi_square(*g) for g in gaps(4.0)) == pytest.approx(0.0, abs=1e-12)
    assert fit.burst_scv(gaps) == 4.0
    # Regular background (the grid's 0) is chosen when nothing tells the shapes apart.
    assert fit.burst_scv(lambda scv: [(np.full(3, 1e-4), widths)]) == 0.0


def test_the_wakeup_fit_leaves_the_applications_measured_work_alone():
    # The application burned more per request in the lighter runs (its own draws), so
    # total host CPU per request falls with load faster than wake-ups explain. Fitted
    # on the total, that fall would read as a larger D, leaving c0 less protocol work
    # than the application's account allows; fitted on host CPU less the
    # application's work, D and the protocol work come back exactly.
    cost = 30e-6

    def run(cls, proto, app, lam):
        # Protocol part y = p + D (1 - U), U = lam (app + y), solved for y.
        y = (proto + cost * (1 - lam * app)) / (1 + lam * cost)
        return fit.Run(cls, "inline", lam, lam, 1000, app + y, app, math.nan, 1e-3,
                       _sizes(1e3, 10))

    runs = [[run(c, p, app, lam) for lam, app in ((300.0, 140e-6), (1000.0, 100e-6),
                                                  (2000.0, 60e-6))]
            for c, p in (("c0", 5e-6), ("c3", 200e-6))]
    w = fit.fit_wakeup(runs, "host")
    assert (w.cost, w.cooling) == pytest.approx((cost, 0.0), abs=1e-12)
    inline = fit.fit_class(runs[0], MSS, host_wakeup=w)
    assert inline.EXp == pytest.approx(5e-6, rel=1e-6)


def test_the_background_fit_recovers_a_per_request_cost_and_a_steady_share():
    # The engine's core also runs a generator that spends 70 us per c0 request and
    # 150 us per c3 request, plus 4.6% of the core at any rate (its timers): per request
    # it measures a + share / lam, which falls as the rate rises.
    share, cost = 0.046, {"c0": 70e-6, "c3": 150e-6}

    def run(cls, lam, requests=1000):
        return fit.Run(cls, "engine", lam, lam, requests, 50e-6, 10e-6, 40e-6, 1e-3,
                       _sizes(1e3, 10), engine_background_s=cost[cls] + share / lam)

    runs = [[run(c, lam) for lam in (500.0, 1500.0, 3000.0)] for c in cost]
    bg = fit.fit_background(runs, "engine")
    assert bg.per_class == pytest.approx(tuple(cost.values()), rel=1e-9)
    assert bg.share == pytest.approx(share, rel=1e-9)
    # The mean per request of the light runs charged at full load would cut c0's engine
    # capacity; the fit's is (1 - share) / (40 + 70 us).
    alone = fit.fit_class(runs[0], MSS)
    assert (alone.engine_bg, alone.engine_share) == (0.0, 0.0)  # fitted over the classes
    c0 = replace(alone, engine_bg=bg.per_class[0], engine_share=bg.share)
    assert c0.capacities["engine"] == pytest.approx((1 - share) / 110e-6)
    mean = replace(alone, engine_bg=fit.demand(runs[0], "engine_background_s"))
    assert mean.capacities["engine"] < 0.93 * c0.capacities["engine"]
    # Every run at one rate: the share cannot be told from the per-request cost.
    flat = [[run(c, 2000.0, n) for n in (500, 1500)] for c in cost]
    assert fit.fit_background(flat, "engine") == fit.Background(
        tuple(cost[c] + share / 2000.0 for c in cost), 0.0)
    # Not measured (a server without pinned threads): no background.
    unmeasured = [[replace(r, engine_background_s=math.nan) for r in runs[0]]]
    assert fit.fit_background(unmeasured, "engine") == fit.Background((0.0,), 0.0)


def test_background_is_the_cores_busy_time_the_servers_threads_did_not_use():
    from offloadlab.study.measure import background
    server = stats_document(
        requests=1000, threads=[thread("host", 0, 0.20), thread("engine", 1, 0.05)],
        cores=[core(0, user_s=0.1, system_s=0.1, softirq_s=0.01, irq_s=0.0, idle_s=0.8),
               core(1, user_s=0.06, system_s=0.02, softirq_s=0.01, irq_s=0.01, idle_s=0.9)])
    assert background(ServerStats.from_json(server), "engine") == pytest.approx(0.05 / 1000)
    assert background(ServerStats.from_json(server), "host") == pytest.approx(0.01 / 1000)
    unpinned = {**server, "threads": [thread("host", None, 0.2)]}
    assert math.isnan(background(ServerStats.from_json(unpinned), "host"))


def test_replicates_are_pooled_per_rate_so_a_stalled_run_keeps_its_share():
    # Three replicates at each of two rates; one run at each rate was stalled: its mean
    # is 300 us higher and its interval ten times wider. Weighed by their own intervals
    # a stalled run counts 1/100 of a quiet one; pooled it counts a third, as it does in
    # the mean of replicates a sweep point is.
    keys = np.repeat([800.0, 2400.0], 3)
    gaps = np.array([100e-6, 110e-6, 400e-6, 120e-6, 130e-6, 420e-6])
    widths = np.tile([10e-6, 10e-6, 100e-6], 2)
    means, half = fit.by_replicates(keys, gaps, widths)
    assert means == pytest.approx([610e-6 / 3, 670e-6 / 3])
    # Each rate's half-width is the standard error of its replicates' mean.
    spread = np.array([np.std(gaps[:3], ddof=1), np.std(gaps[3:], ddof=1)]) / math.sqrt(3)
    assert half == pytest.approx(1.959964 * spread)
    assert fit.combine(gaps, widths)[0] < 120e-6
    assert fit.combine(means, half)[0] == pytest.approx(gaps.mean())
    # Replicates that agree better than their intervals keep the runs' own precision.
    means, half = fit.by_replicates(keys[:3], np.full(3, 1e-4), np.full(3, 20e-6))
    assert means == pytest.approx([1e-4]) and half == pytest.approx([20e-6 / math.sqrt(3)])
    # One run per rate: the runs as they are; a missing delay drops out of its rate.
    means, half = fit.by_replicates(np.array([1.0, 2.0]), gaps[:2], widths[:2])
    assert means == pytest.approx(gaps[:2]) and half == pytest.approx(widths[:2])
    means, _ = fit.by_replicates(keys[:3], np.array([1e-4, math.nan, 3e-4]), widths[:3])
    assert means == pytest.approx([2e-4])
