"""The closed-form model against reference 000: its worked tables, its identities
(P-K, Little, M/M/1), brute force for placement, and invariants as properties."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from conftest import LARGE, SMALL, example, klass, make_scenario, one_class
from hypothesis import given
from hypothesis import strategies as st

from offloadlab import dist, scenario
from offloadlab.errors import InputError
from offloadlab.model import evaluate, verdict

MS = 1e3  # seconds -> ms


def printed_match(value, text, scale=1.0):
    """``value * scale`` agrees with a table entry to 3 significant figures (or to the last
    printed digit when fewer are printed). The reference's tables were rounded twice
    (e.g. T_cpu 3.4447 -> 3.445 -> "3.45"; section 8.1 itself gives T_noe = 1.775 where
    table (c) prints "1.78"), so the tolerance is 0.55 units of that digit, not 0.5."""
    if text == "inf":
        return value == math.inf
    if text.startswith(">"):
        return value * scale > float(text[1:])
    t = float(text)
    decimals = len(text.split(".")[1]) if "." in text else 0
    third_figure = 10.0 ** (math.floor(math.log10(abs(t))) - 2)
    unit = max(10.0**-decimals, third_figure)
    return abs(value * scale - t) <= 0.55 * unit


def overall_rows(result):
    return {row["rate"]: row for row in result.rows() if row["class"] == "all"}


def class_row(result, rate, name):
    return next(r for r in result.rows() if r["rate"] == rate and r["class"] == name)


def moments(spec):
    d = dist.parse(spec)
    return d.mean, d.m2


# ------------------------------------------------------------------ reference tables

# Reference 000, section 2.10 (b): lam, U_noe, T_noe, U_cpu, U_oe, T_cpu, T_oe, T, T_sum, N_q, N_oe
TABLE_B = """
10  0.100 11.33  0.033 0.030 3.45  3.10  3.45  6.55  0.001 0.031
25  0.250 14.00  0.083 0.075 3.63  3.27  3.63  6.90  0.007 0.082
50  0.500 22.01  0.167 0.150 4.00  3.59  4.00  7.58  0.029 0.179
75  0.750 46.03  0.250 0.225 4.44  3.97  4.44  8.41  0.073 0.298
90  0.900 118.08 0.300 0.270 4.76  4.23  4.76  8.99  0.111 0.381
150 1.5   inf    0.499 0.450 6.65  5.73  6.65  12.38 0.409 0.859
250 2.5   inf    0.833 0.750 19.88 13.00 19.88 32.88 2.50  3.25
"""
COLS_B = ["U_noe", "T_noe", "U_cpu", "U_oe", "T_cpu", "T_oe", "T", "T_sum", "N_q", "N_oe"]
TIMES = {"T_noe", "T_cpu", "T_oe", "T", "T_sum"}

# Section 2.10 (c): lam, U_noe, T_noe, U_cpu, U_oe, T_cpu, T_oe, T
TABLE_C = """
100 0.12 1.34 0.16 0.025 1.90 0.25 1.90
300 0.36 1.78 0.48 0.075 3.08 0.26 3.08
500 0.60 2.73 0.80 0.125 8.00 0.27 8.00
600 0.72 3.83 0.96 0.150 40.0 0.28 40.0
700 0.84 6.56 >1   0.175 inf  0.28 inf
"""
COLS_C = ["U_noe", "T_noe", "U_cpu", "U_oe", "T_cpu", "T_oe", "T"]


def _check_table(result, table, cols):
    rows = overall_rows(result)
    bad = []
    for line in table.strip().splitlines():
        lam, *cells = line.split()
        row = rows[float(lam)]
        for col, text in zip(cols, cells, strict=True):
            scale = MS if col in TIMES else 1.0
            if not printed_match(row[col], text, scale):
                bad.append((lam, col, text, row[col] * scale))
    assert not bad, bad


def test_reference_table_b():
    result = evaluate(example("large-files"), [10, 25, 50, 75, 90, 150, 250])
    _check_table(result, TABLE_B, COLS_B)
    rows = overall_rows(result)
    for lam in (150.0, 250.0):
        assert rows[lam]["T_noe"] == math.inf and rows[lam]["saturated_noe"] is True
        assert rows[lam]["saturated_cpu"] is False and rows[lam]["saturated_oe"] is False
    assert not any(rows[lam]["saturated"] for lam in (10.0, 25.0, 50.0, 75.0, 90.0))


def test_reference_8_1_acceptance_numbers():
    rb = overall_rows(evaluate(example("large-files"), [50]))[50.0]
    assert rb["T_noe"] * MS == pytest.approx(22.009, abs=5e-4)
    assert rb["T_cpu"] * MS == pytest.approx(3.995, abs=5e-4)
    assert rb["T_oe"] * MS == pytest.approx(3.588, abs=5e-4)
    rc = overall_rows(evaluate(example("small-files"), [300]))[300.0]
    assert rc["T_noe"] * MS == pytest.approx(1.775, abs=5e-4)
    assert rc["T_cpu"] * MS == pytest.approx(3.077, abs=5e-4)


def test_reference_table_b_pareto_variant():
    s = one_class(host_proto="pareto(alpha=2.5, k=5.4ms)")
    rows = overall_rows(evaluate(s, [25, 50, 75]))
    for lam, t in [(25.0, "12.76"), (50.0, "18.29"), (75.0, "34.87")]:
        assert printed_match(rows[lam]["T_noe"], t, MS), (lam, rows[lam]["T_noe"])


def test_reference_table_c():
    result = evaluate(example("small-files"), [100, 300, 500, 600, 700])
    _check_table(result, TABLE_C, COLS_C)
    row = overall_rows(result)[700.0]
    assert row["T_cpu"] == math.inf and row["saturated_cpu"] is True
    assert row["saturated_noe"] is False


# ------------------------------------------------------------------ overhead bound


def _closed_form_bound(base, lam):
    """Reference 000 section 2.8 item 4, with T_noe from eq. 3.9/3.10 computed here."""
    a1, _ = moments(base["app"])
    p1, p2 = moments(base["host_proto"])
    u = lam * (a1 + p1)
    t_noe = (u * a1 + lam * p2 / 2) / (1 - u) + a1 + p1 if u < 1 else math.inf
    if math.isinf(t_noe):
        return 1 / lam - a1, p1
    return t_noe / (1 + lam * t_noe) - a1, p1


def test_overhead_bound_large_files():
    row = class_row(evaluate(example("large-files"), [50]), 50.0, "c3")
    closed, p1 = _closed_form_bound(LARGE, 50.0)
    assert closed * MS == pytest.approx(9.48, abs=0.005)  # the reference's delay bound
    assert row["EXo_max"] == pytest.approx(min(p1, closed), rel=1e-9)
    assert row["EXo_max"] == pytest.approx(9e-3, rel=1e-9)


def test_overhead_bound_small_files():
    row = class_row(evaluate(example("small-files"), [300]), 300.0, "c0")
    closed, p1 = _closed_form_bound(SMALL, 300.0)
    assert closed * MS == pytest.approx(0.158, abs=5e-4)
    assert closed < p1
    assert row["EXo_max"] == pytest.approx(closed, rel=1e-6)


@pytest.mark.parametrize("base, rates", [(LARGE, [1, 10, 30, 60, 80, 95, 99]),
                                         (SMALL, [1, 50, 200, 400, 600, 800, 830])])
def test_overhead_bound_closed_form_stable(base, rates):
    result = evaluate(one_class(base=base), rates)
    for lam in rates:
        closed, p1 = _closed_form_bound(base, float(lam))
        got = class_row(result, float(lam), "c")["EXo_max"]
        assert got == pytest.approx(min(max(closed, 0.0), p1), rel=1e-6, abs=1e-12), lam


@given(a=st.floats(50, 5000), p=st.floats(10, 20000), sigma=st.floats(0, 1.5),
       util=st.floats(0.01, 0.99))
def test_overhead_bound_closed_form_property(a, p, sigma, util):
    base = dict(SMALL, app=f"exp(mean={a!r}us)",
                host_proto=f"lognormal(mean={p!r}us, sigma={sigma!r})")
    lam = util / ((a + p) * 1e-6)
    closed, p1 = _closed_form_bound(base, lam)
    got = evaluate(one_class(base=base), [lam]).per_class["EXo_max"][0, 0]
    assert got == pytest.approx(min(max(closed, 0.0), p1), rel=1e-6, abs=1e-12)


def test_overhead_bound_when_host_alone_saturates():
    """With T_noe = inf the closed form T_noe/(1 + lam T_noe) - E[X_a] tends to 1/lam - E[X_a]
    (the overhead at which the offloaded host saturates); it lies inside [0, E[X_p]] here,
    so an overhead budget of E[X_p] would saturate the offloaded host."""
    lam = 900.0  # U_noe = 1.08 for example (c)
    closed, p1 = _closed_form_bound(SMALL, lam)
    assert 0 < closed < p1
    got = class_row(evaluate(one_class(base=SMALL), [lam]), lam, "c")["EXo_max"]
    # the bound is the edge of stability of the offloaded host, not E[X_p]
    assert got == pytest.approx(1 / lam - 1e-3, rel=1e-9)
    assert got == pytest.approx(closed, rel=1e-6)


# ------------------------------------------------------------------ section 8.1 identities


def test_pk_and_little_identities():
    rates = [10, 50, 90, 150, 250]
    result = evaluate(example("large-files"), rates)
    a1, a2 = moments(LARGE["app"])
    p1, p2 = moments(LARGE["host_proto"])
    c1, _ = moments(LARGE["engine_overhead"])
    q1, q2 = moments(LARGE["engine_proto"])
    es2 = a2 + p2 + 2 * a1 * p1  # eq. 3.3
    for lam, row in overall_rows(result).items():
        u = lam * (a1 + p1)
        if u < 1:
            assert row["W_noe"] == pytest.approx(lam * es2 / (2 * (1 - u)), rel=1e-12)
            assert row["T_noe"] == pytest.approx(row["W_noe"] + a1 + p1, rel=1e-12)
        else:
            assert row["W_noe"] == math.inf
        u_c, u_oe = lam * c1, lam * (c1 + q1)
        n_q_332 = (u_c * u_oe + lam**2 * q2 / 2) / (1 - u_oe)  # eq. 3.32
        assert row["N_q"] == pytest.approx(n_q_332, rel=1e-12)
        assert row["N_q"] == pytest.approx(lam * row["W_oe"], rel=1e-12)
        assert row["N_oe"] == pytest.approx(lam * row["T_oe"], rel=1e-12)
        assert row["N_oe"] == pytest.approx(n_q_332 + u_c + lam * q1, rel=1e-12)  # eq. 3.33
        # seed's M/M/1 CPU (eqs 3.14-3.19)
        y = a1 + moments(LARGE["host_overhead"])[0]
        assert row["T_cpu"] == pytest.approx(y / (1 - lam * y), rel=1e-12)


@pytest.mark.parametrize("lam", [1, 100, 500, 900, 999])
def test_mm1_reduction(lam):
    s = one_class(host_proto="det(0)", app="exp(mean=1ms)", rate=lam)
    row = overall_rows(evaluate(s))[float(lam)]
    assert row["T_noe"] == pytest.approx(1e-3 / (1 - lam * 1e-3), rel=1e-12)


@pytest.mark.parametrize("lam", [10, 100, 200, 290])
def test_mg1_cpu_queue(lam):
    a, o = 1e-3, 2.33e-3
    s = one_class(rate=lam, options={"cpu_queue": "mg1"})
    row = overall_rows(evaluate(s))[float(lam)]
    u = lam * (a + o)
    es2 = 2 * a**2 + 2 * o**2 + 2 * a * o
    assert row["U_cpu"] == pytest.approx(u, rel=1e-12)
    assert row["T_cpu"] == pytest.approx(lam * es2 / (2 * (1 - u)) + a + o, rel=1e-12)
    # the exact hypoexponential host is less variable than the seed's M/M/1
    mm1 = overall_rows(evaluate(one_class(rate=lam)))[float(lam)]
    assert row["T_cpu"] < mm1["T_cpu"]


@pytest.mark.parametrize("lam", [10, 50, 250, 299])
def test_system_delay_sum(lam):
    row = overall_rows(evaluate(one_class(rate=lam, options={"system_delay": "sum"})))[lam]
    assert row["T"] == pytest.approx(row["T_sum"], rel=1e-12)
    assert row["T_sum"] == pytest.approx(row["T_cpu"] + row["T_oe"], rel=1e-12)
    mx = overall_rows(evaluate(one_class(rate=lam)))[lam]
    assert mx["T"] == pytest.approx(max(mx["T_cpu"], mx["T_oe"]), rel=1e-12)


def test_saturation_rates():
    s = one_class(app="exp(mean=1ms)", host_proto="lognormal(mean=9ms, sigma=1)",
                  host_overhead="exp(mean=2.33ms)", engine_overhead="exp(mean=0.5ms)",
                  engine_proto="pareto(alpha=3, k=2ms)")
    o = evaluate(s, [10, 100]).overall
    np.testing.assert_allclose(o["lam_star_noe"], 1 / (1e-3 + 9e-3), rtol=1e-12)
    np.testing.assert_allclose(o["lam_star_cpu"], 1 / (1e-3 + 2.33e-3), rtol=1e-12)
    np.testing.assert_allclose(o["lam_star_oe"], 1 / (0.5e-3 + 3e-3), rtol=1e-12)
    # just below / above lam_star the flags flip
    star = 1 / 10e-3
    r = evaluate(s, [star * (1 - 1e-9), star * (1 + 1e-9)]).overall
    assert list(r["saturated_noe"]) == [False, True]


# ------------------------------------------------------------------ several classes

TWO = [klass("big", 30, 0.3, LARGE), klass("small", 200, 0.8, SMALL)]


def test_no_offload_equals_host_alone():
    s = example("five-classes").with_offload(0.0)
    o = evaluate(s, [20, 79, 150, 300]).overall
    np.testing.assert_allclose(o["U_cpu"], o["U_noe"], rtol=1e-12)
    np.testing.assert_allclose(o["T"], o["T_noe"], rtol=1e-12)
    np.testing.assert_allclose(o["T_cpu"], o["T_noe"], rtol=1e-12)
    assert np.all(o["U_oe"] == 0) and np.all(o["N_q"] == 0)


def test_two_classes_utilisation_adds_up():
    s = make_scenario(TWO)
    r = evaluate(s, [23.0, 115.0, 400.0])
    np.testing.assert_allclose(r.overall["U_noe"], r.per_class["U_noe"].sum(-1), rtol=1e-12)
    # the merged stream as one class with the mixture's mean costs
    lam = np.array([23.0, 115.0, 400.0])
    w = np.array([30, 200]) / 230
    mean_p = w @ [moments(LARGE["host_proto"])[0], moments(SMALL["host_proto"])[0]]
    merged = one_class(app="exp(mean=1ms)", host_proto=f"det({float(mean_p)!r}s)")
    np.testing.assert_allclose(evaluate(merged, lam).overall["U_noe"], r.overall["U_noe"],
                               rtol=1e-12)


@pytest.mark.parametrize("cpu_queue", ["mm1", "mg1"])
def test_poisson_thinning_pk_mixture(cpu_queue):
    s = make_scenario(TWO, cpu_queue=cpu_queue)
    total = np.array([20.0, 100.0, 230.0, 290.0])
    r = evaluate(s, total)
    share = np.array([30, 200]) / 230
    f = np.array([0.3, 0.8])
    m = {}
    for i, base in enumerate((LARGE, SMALL)):
        for key in scenario.COST_FIELDS:
            m[key, i] = moments(base[key])
    for k, lam_tot in enumerate(total):
        lam = lam_tot * share
        # host alone: mixture of S_c = X_a + X_p,c
        es1 = [m["app", i][0] + m["host_proto", i][0] for i in (0, 1)]
        es2 = [m["app", i][1] + m["host_proto", i][1] + 2 * m["app", i][0] * m["host_proto", i][0]
               for i in (0, 1)]
        u = lam @ es1
        w_noe = (lam @ es2) / (2 * (1 - u)) if u < 1 else math.inf
        assert r.overall["W_noe"][k] == pytest.approx(w_noe, rel=1e-12)
        # host with offload: kept requests pay X_a + X_p, offloaded ones X_a + X_o
        go1 = [m["app", i][0] + m["host_overhead", i][0] for i in (0, 1)]
        if cpu_queue == "mg1":
            go2 = [2 * m["app", i][0] ** 2 + 2 * m["host_overhead", i][0] ** 2
                   + 2 * m["app", i][0] * m["host_overhead", i][0] for i in (0, 1)]
        else:
            go2 = [2 * g**2 for g in go1]
        u_cpu = (lam * (1 - f)) @ es1 + (lam * f) @ go1
        load2 = (lam * (1 - f)) @ es2 + (lam * f) @ go2
        w_cpu = load2 / (2 * (1 - u_cpu)) if u_cpu < 1 else math.inf
        assert r.overall["U_cpu"][k] == pytest.approx(u_cpu, rel=1e-12)
        assert r.overall["W_cpu"][k] == pytest.approx(w_cpu, rel=1e-12)
        # engine: thinned streams f_c lam_c with S = X_c + X_q
        e1 = [m["engine_overhead", i][0] + m["engine_proto", i][0] for i in (0, 1)]
        e2 = [m["engine_overhead", i][1] + m["engine_proto", i][1]
              + 2 * m["engine_overhead", i][0] * m["engine_proto", i][0] for i in (0, 1)]
        u_oe = (lam * f) @ e1
        assert r.overall["W_oe"][k] == pytest.approx((lam * f) @ e2 / (2 * (1 - u_oe)), rel=1e-12)
        # per-class delays and the request-weighted mean
        t_host = w_cpu + np.array(es1)
        t_off = np.maximum(w_cpu + np.array(go1), r.overall["W_oe"][k] + np.array(e1))
        t_c = (1 - f) * t_host + f * t_off
        np.testing.assert_allclose(r.per_class["T"][k], t_c, rtol=1e-12)
        assert r.overall["T"][k] == pytest.approx(share @ t_c, rel=1e-12)


# ------------------------------------------------------------------ properties

cost = st.one_of(
    st.floats(10, 20000).map(lambda us: f"exp(mean={us!r}us)"),
    st.tuples(st.floats(10, 20000), st.floats(0, 1.5)).map(
        lambda t: f"lognormal(mean={t[0]!r}us, sigma={t[1]!r})"),
)
costs = st.fixed_dictionaries({key: cost for key in scenario.COST_FIELDS})
fraction = st.one_of(st.just(0.0), st.just(1.0), st.floats(0, 1))
options = st.fixed_dictionaries({"system_delay": st.sampled_from(["max", "sum"]),
                                 "cpu_queue": st.sampled_from(["mm1", "mg1"])})


@given(costs=costs, f=fraction, lam=st.floats(0, 2000))
def test_utilisation_law(costs, f, lam):
    s = make_scenario([klass("c", 1.0, f, costs)])
    o = evaluate(s, [lam]).overall
    a, p, oo, c, q = (dist.parse(costs[k]).mean for k in scenario.COST_FIELDS)
    assert o["U_noe"][0] == pytest.approx(lam * (a + p), rel=1e-12, abs=1e-300)
    assert o["U_oe"][0] == pytest.approx(lam * f * (c + q), rel=1e-12, abs=1e-300)
    assert o["U_cpu"][0] == pytest.approx(lam * ((1 - f) * (a + p) + f * (a + oo)), rel=1e-12,
                                          abs=1e-300)


def _sweep(classes_costs, fractions, opts, n=25):
    classes = [klass(f"c{i}", 1.0 + i, f, c) for i, (c, f) in
               enumerate(zip(classes_costs, fractions, strict=True))]
    s = make_scenario(classes, **opts)
    probe = evaluate(s, [1.0]).overall
    star = min(probe["lam_star_noe"][0], probe["lam_star_cpu"][0], probe["lam_star_oe"][0])
    return evaluate(s, np.linspace(0.0, 2.5 * star, n))


@given(costs=st.lists(costs, min_size=1, max_size=3), data=st.data(), opts=options)
def test_delays_non_decreasing_in_rate(costs, data, opts):
    fs = data.draw(st.lists(fraction, min_size=len(costs), max_size=len(costs)))
    r = _sweep(costs, fs, opts)
    for key in ("T_noe", "T_cpu", "T_oe", "W_noe", "W_cpu", "W_oe"):
        x = r.overall[key]
        assert np.all(x[1:] >= x[:-1]), (key, x)
    for key in ("T_noe", "T_cpu", "T_oe", "T"):
        x = r.per_class[key]
        assert np.all(x[1:] >= x[:-1]), (key, x)


@given(costs=st.lists(costs, min_size=1, max_size=3), data=st.data(), opts=options)
def test_no_nan_or_negative_and_saturation_flags(costs, data, opts):
    fs = data.draw(st.lists(fraction, min_size=len(costs), max_size=len(costs)))
    r = _sweep(costs, fs, opts)
    for row in r.rows():
        for key, v in row.items():
            if isinstance(v, float):
                assert not math.isnan(v) and v >= 0, (key, row)
    o = r.overall
    for q in ("noe", "cpu", "oe"):
        np.testing.assert_array_equal(o[f"saturated_{q}"], o[f"U_{q}"] >= 1)
        np.testing.assert_array_equal(np.isinf(o[f"W_{q}"]), o[f"U_{q}"] >= 1)
    np.testing.assert_array_equal(np.isinf(o["T_noe"]), o["U_noe"] >= 1)
    np.testing.assert_array_equal(np.isinf(o["T_cpu"]), o["U_cpu"] >= 1)
    np.testing.assert_array_equal(
        o["saturated"], (o["U_noe"] >= 1) | (o["U_cpu"] >= 1) | (o["U_oe"] >= 1))
    assert o["saturated"][-1]  # the sweep crosses saturation


# ------------------------------------------------------------------ auto placement


def test_five_classes_placement_keeps_small_on_host():
    s = example("five-classes")
    r = evaluate(s)
    f = dict(zip(s.class_names, r.fractions[0], strict=True))
    assert f["c0"] == 0 and f["c1"] == 0
    assert f["c3"] > 0 and f["c4"] > 0
    assert r.notes == ()


def test_five_classes_auto_beats_all_host_and_all_offload():
    s = example("five-classes")
    rates = [20, 79, 150, 250, 300]
    auto = evaluate(s, rates).overall["T"]
    host = evaluate(s.with_offload(0.0), rates).overall["T"]
    off = evaluate(s.with_offload(1.0), rates).overall["T"]
    assert np.all(np.isfinite(auto))
    for t in (host, off):
        fin = np.isfinite(t)
        assert np.all(auto[fin] <= t[fin] * (1 + 1e-12)), (auto, t)


GRID = np.linspace(0.0, 1.0, 101)
GRID2 = np.stack(np.meshgrid(GRID, GRID, indexing="ij"), -1).reshape(-1, 2)


def _pair(objective, cap):
    five = example("five-classes")
    return replace(five, classes=(five.classes[3], five.classes[4]),
                   options=replace(five.options, objective=objective, util_cap=cap))


@pytest.mark.parametrize("cap, rates", [(0.85, [40, 100, 135]), (0.7, [60, 100, 110])])
def test_auto_delay_matches_brute_force(cap, rates):
    s = _pair("delay", cap)
    auto = evaluate(s, rates)
    assert auto.notes == ()
    for i, lam in enumerate(rates):
        g = evaluate(s, np.full(len(GRID2), lam), fractions=GRID2).overall
        ok = (g["U_cpu"] <= cap) & (g["U_oe"] <= cap)
        best = np.where(ok, g["T"], np.inf).min()
        assert np.isfinite(best)
        assert auto.overall["T"][i] <= best * (1 + 1e-6), (lam, auto.fractions[i], best)
        assert auto.overall["U_cpu"][i] <= cap and auto.overall["U_oe"][i] <= cap


@pytest.mark.parametrize("cap, rates", [(0.85, [60, 120, 135]), (0.7, [60, 100, 110, 120])])
def test_auto_host_cpu_matches_brute_force(cap, rates):
    s = _pair("host_cpu", cap)
    auto = evaluate(s, rates)
    for i, lam in enumerate(rates):
        g = evaluate(s, np.full(len(GRID2), lam), fractions=GRID2).overall
        best = np.where(g["U_oe"] <= cap, g["U_cpu"], np.inf).min()
        assert auto.overall["U_cpu"][i] <= best + 1e-9, (lam, auto.fractions[i], best)
        assert auto.overall["U_oe"][i] <= cap + 1e-12


@pytest.mark.parametrize("objective", ["delay", "host_cpu"])
def test_auto_overloaded_adds_note(objective):
    s = one_class(offload="auto", rate=500, options={"objective": objective})
    r = evaluate(s)
    assert len(r.notes) == 1 and "0.85" in r.notes[0]
    ok = evaluate(s, [50])
    assert ok.notes == ()


def test_explicit_fractions_override_and_validate():
    s = example("large-files")
    r = evaluate(s, [50], fractions=[0.0])
    assert r.overall["U_cpu"][0] == pytest.approx(r.overall["U_noe"][0], rel=1e-12)
    with pytest.raises(ValueError):
        evaluate(s, [50], fractions=[1.5])
    with pytest.raises(ValueError):
        evaluate(s, [-1])


# ------------------------------------------------------------------ JSON and verdicts


def test_json_is_strict_and_inf_is_a_string():
    r = evaluate(example("large-files"), [50, 150, 250])
    doc = r.to_json()
    text = json.dumps(doc, allow_nan=False)
    back = json.loads(text)
    rows = {(row["rate"], row["class"]): row for row in back["rows"]}
    assert rows[150.0, "all"]["T_noe"] == "inf"
    assert rows[150.0, "c3"]["T_noe"] == "inf"
    assert rows[50.0, "all"]["T_noe"] == pytest.approx(0.022009, rel=1e-4)
    assert back["offload"] == {"c3": 1.0} and back["source"] == "model"
    assert len(back["rows"]) == 3 * 2


def test_verdicts():
    rb = class_row(evaluate(example("large-files"), [50]), 50.0, "c3")
    label, _ = verdict(rb, EXp=9e-3, EXo=2.33e-3)
    assert label == "helps"
    rc = class_row(evaluate(example("small-files"), [300]), 300.0, "c0")
    label, reason = verdict(rc, EXp=0.2e-3, EXo=0.6e-3)
    assert label == "hurts" and "E[X_o]" in reason
    # small files with a cheap overhead: CPU relieved, but the delay question decides
    label, reason = verdict(rc, EXp=0.2e-3, EXo=0.1e-3)
    assert label == "hurts" and "delay" in reason  # T 3.08 ms > T_noe 1.78 ms


def test_verdicts_at_saturation():
    # (b) at 150: the host alone saturates, the offloaded system does not -> helps
    rb = class_row(evaluate(example("large-files"), [150]), 150.0, "c3")
    assert rb["saturated_noe"] and not rb["saturated_cpu"]
    assert verdict(rb, EXp=9e-3, EXo=2.33e-3)[0] == "helps"
    assert rb["beneficial"] is True and rb["cpu_relieved"] is True
    # (c) at 700 with a cheap overhead: offload saturates the host CPU, host alone does not
    rc = class_row(evaluate(example("small-files"), [700]), 700.0, "c0")
    label, reason = verdict(rc, EXp=0.2e-3, EXo=0.1e-3)
    assert label == "hurts" and "host CPU" in reason and "saturates" in reason
    assert rc["beneficial"] is False and rc["cpu_relieved"] is False


def test_a_queue_at_exactly_full_load_is_saturated_despite_rounding():
    # E[X_a] + E[X_p] = 10 ms at 100/s is U = 1 up to rounding; it must not give 1e17 s.
    row = evaluate(example("large-files"), rates=[100]).rows()[0]
    assert math.isinf(row["T_noe"]) and row["saturated_noe"]


def test_a_vanishing_fraction_saturates_beyond_float_range_without_overflow():
    # Found by hypothesis: f = 2.2e-309 (subnormal) makes 1 / load overflow; lam* is inf.
    c = {k: "exp(mean=10us)" for k in LARGE}
    sc = make_scenario([klass("a", 1, 0.0, **c), klass("b", 1, 2.225073858507203e-309, **c)])
    assert math.isinf(evaluate(sc, [1.0]).overall["lam_star_oe"][0])


# Seed 001's object cache on the engine: a share h of the offloaded requests is answered
# by the engine alone for X_h.
CACHED = dict(app="exp(mean=1ms)", host_proto="exp(mean=2ms)", host_overhead="exp(mean=0.5ms)",
              engine_overhead="exp(mean=0.2ms)", engine_proto="exp(mean=0.8ms)",
              engine_hit="exp(mean=0.3ms)")


@pytest.mark.parametrize("delay", ["max", "sum"])
def test_cache_hits_cost_the_engine_alone_in_closed_form(delay):
    lam, h = 300.0, 0.9
    s = make_scenario([{**klass("c", lam, 1.0, CACHED), "hit_ratio": h}],
                      cpu_queue="mg1", system_delay=delay)
    row = class_row(evaluate(s), lam, "c")
    g, e, x = 1.5e-3, 1.0e-3, 0.3e-3  # host X_a + X_o, engine X_c + X_q, engine X_h
    u_cpu = lam * (1 - h) * g
    u_oe = lam * ((1 - h) * e + h * x)
    # Second moments: a sum of two exponentials a, b has 2a^2 + 2b^2 + 2ab.
    g2 = 2 * 1e-6 + 2 * 0.25e-6 + 2 * 0.5e-6
    e2 = 2 * 0.04e-6 + 2 * 0.64e-6 + 2 * 0.16e-6
    w_cpu = lam * (1 - h) * g2 / (2 * (1 - u_cpu))
    w_oe = lam * ((1 - h) * e2 + h * 2 * x**2) / (2 * (1 - u_oe))
    host, engine = w_cpu + g, w_oe + e
    miss = max(host, engine) if delay == "max" else host + engine
    assert row["U_cpu"] == pytest.approx(u_cpu, rel=1e-12)
    assert row["U_oe"] == pytest.approx(u_oe, rel=1e-12)
    assert row["W_oe"] == pytest.approx(w_oe, rel=1e-12)
    assert row["T_cpu"] == pytest.approx(host, rel=1e-12)
    assert row["T_oe"] == pytest.approx(w_oe + (1 - h) * e + h * x, rel=1e-12)
    assert row["T"] == pytest.approx((1 - h) * miss + h * (w_oe + x), rel=1e-12)
    assert row["N_oe"] == pytest.approx(lam * row["T_oe"], rel=1e-12)  # Little


def test_every_request_a_hit_leaves_the_host_idle_and_the_engine_an_mg1():
    lam = 1000.0
    s = make_scenario([{**klass("c", lam, 1.0, CACHED), "hit_ratio": 1.0}], cpu_queue="mg1")
    row = class_row(evaluate(s), lam, "c")
    x = 0.3e-3
    assert row["U_cpu"] == 0 and row["U_oe"] == pytest.approx(lam * x)
    assert row["T"] == pytest.approx(x + lam * 2 * x**2 / (2 * (1 - lam * x)))
    # No hit ratio is seed 000's model, and the default X_h is the engine's X_q.
    plain = make_scenario([klass("c", lam / 10, 1.0, CACHED)])
    none = make_scenario([{**klass("c", lam / 10, 1.0, CACHED), "hit_ratio": 0.0}])
    assert overall_rows(evaluate(plain)) == overall_rows(evaluate(none))
    default = {k: v for k, v in CACHED.items() if k != "engine_hit"}
    s = make_scenario([{**klass("c", lam, 1.0, default), "hit_ratio": 1.0}])
    assert class_row(evaluate(s), lam, "c")["U_oe"] == pytest.approx(lam * 0.8e-3)


def test_hit_ratio_and_engine_hit_are_checked_and_round_trip():
    bad = {**klass("c", 10.0, 1.0, CACHED), "hit_ratio": 1.5, "engine_hit": "exp(mean=-1ms)"}
    with pytest.raises(InputError) as err:
        make_scenario([bad])
    assert "hit_ratio: 1.5" in str(err.value) and "engine_hit" in str(err.value)
    s = make_scenario([{**klass("c", 10.0, 1.0, CACHED), "hit_ratio": 0.93}])
    again = scenario.loads(scenario.dumps(s))
    assert again.classes[0].hit_ratio == 0.93
    assert str(again.classes[0].engine_hit) == str(s.classes[0].engine_hit)


# ------------------------------------------------------------------ wake-ups, background, d0


def _station(lam, s1, s2, **extra):
    from offloadlab.model.tandem import Extra, station
    lam = np.atleast_1d(float(lam))
    q = station(lam, lam * s1, lam * s2, lam[:, None], Extra(**extra))
    return q, float(q.sojourn(np.array([s1]))[0, 0])


def test_a_wakeup_cost_gives_welchs_exceptional_first_service():
    # M/G/1 with exceptional first service S0 = D + S, written out independently:
    # P0 = (1 - rho) / (1 + lam E[D]), W = lam E[S^2] / (2 (1 - rho))
    # + lam (E[S0^2] - E[S^2]) / (2 (1 + lam (E[S0] - E[S]))), T = W + E[S] + P0 E[D].
    lam, s1, s2, d1, d2 = 600.0, 1e-3, 2e-6, 2e-4, 4e-8
    q, sojourn = _station(lam, s1, s2, d1=d1, d2=d2)
    rho = lam * s1
    P0 = (1 - rho) / (1 + lam * d1)
    W = lam * s2 / (2 * (1 - rho)) + lam * (d2 + 2 * d1 * s1) / (2 * (1 + lam * d1))
    assert sojourn == pytest.approx(W + s1 + P0 * d1, rel=1e-12)
    assert q.wakeups[0] == pytest.approx(P0, rel=1e-12)
    # Every request that wakes the queue pays D: CPU per request falls as load rises,
    # and the busy share is 1 - P0 (so wake-ups per request are 1 - U).
    assert q.U[0] == pytest.approx(rho + lam * P0 * d1, rel=1e-12)
    assert 1 - q.U[0] == pytest.approx(P0, rel=1e-12)
    light, _ = _station(10.0, s1, s2, d1=d1, d2=d2)
    assert light.U[0] / 10.0 > q.U[0] / lam  # per request: s1 + P0 d1


def test_a_polling_queues_wakeup_is_in_its_account_and_in_no_delay():
    # A thread that polls takes the request that finds it idle at once (docs/model.md
    # §18): the delay is the Pollaczek-Khinchine queue's; its core's account is Welch's,
    # busy through D, so the wake-ups and U are as in
    # test_a_wakeup_cost_gives_welchs_exceptional_first_service.
    lam, s1, s2, d1, d2 = 600.0, 1e-3, 2e-6, 2e-4, 4e-8
    q, sojourn = _station(lam, s1, s2, d1=d1, d2=d2, polls=True)
    rho = lam * s1
    P0 = (1 - rho) / (1 + lam * d1)
    assert sojourn == pytest.approx(lam * s2 / (2 * (1 - rho)) + s1, rel=1e-12)
    assert q.wakeups[0] == pytest.approx(P0, rel=1e-12)
    assert q.U[0] == q.core[0] == pytest.approx(rho + lam * P0 * d1, rel=1e-12)
    welch, slower = _station(lam, s1, s2, d1=d1, d2=d2)
    assert slower > sojourn + P0 * d1 and welch.U[0] == q.U[0]


def test_answers_released_in_gated_rounds_wait_for_the_rest_of_their_round():
    # Written out independently (docs/model.md §16): W is the work a request finds,
    # the Pollaczek-Khinchine wait; a round's remaining work averages W / (1 + rho)
    # over time, and a share rho of it arrives behind the request, in its round.
    lam, s1, s2 = 600.0, 1e-3, 2e-6
    rho = lam * s1
    W = lam * s2 / (2 * (1 - rho))
    q, sojourn = _station(lam, s1, s2, rounds=True)
    assert sojourn == pytest.approx(W + s1 + rho * W / (1 + rho), rel=1e-12)
    assert q.U[0] == pytest.approx(rho) and q.wakeups[0] == pytest.approx(1 - rho)
    # With a wake-up, the work found is Welch's wait; the wake-up is the request's own.
    d1, d2 = 2e-4, 4e-8
    welch = W + lam * (d2 + 2 * d1 * s1) / (2 * (1 + lam * d1))
    P0 = (1 - rho) / (1 + lam * d1)
    _, woken = _station(lam, s1, s2, d1=d1, d2=d2, rounds=True)
    assert woken == pytest.approx(welch + s1 + P0 * d1 + rho * welch / (1 + rho), rel=1e-12)


def test_background_work_gives_the_preemptive_priority_queue():
    # The low class of a two-class preemptive-resume M/G/1 (background first):
    # T = E[S] / (1 - sigma) + (lam_B E[B^2] + lam E[S^2]) / (2 (1 - sigma)(1 - sigma - rho)).
    lam, s1, s2, b1, b2 = 500.0, 1e-3, 2e-6, 3e-4, 1.8e-7
    q, sojourn = _station(lam, s1, s2, b1=b1, b2=b2)
    sigma, rho = lam * b1, lam * s1
    assert sojourn == pytest.approx(s1 / (1 - sigma) + (lam * b2 + lam * s2)
                                    / (2 * (1 - sigma) * (1 - sigma - rho)), rel=1e-12)
    assert q.U[0] == pytest.approx(rho) and q.core[0] == pytest.approx(rho + sigma)
    # Own load and background together saturate the core.
    full, T_full = _station(1 / (s1 + b1), s1, s2, b1=b1, b2=b2)
    assert math.isinf(T_full) and full.core[0] >= 1


def _background_after_idle(lam, b_mean, b_scv, T_rate, trials=200_000, seed=5):
    """Monte Carlo of the work V(T) of an M/G/1 queue of gamma jobs started empty and
    run for T ~ exp(T_rate): the background a request finds that ends an idle period."""
    rng = np.random.default_rng(seed)
    shape, scale = 1 / b_scv, b_mean * b_scv
    horizon = rng.exponential(1 / T_rate, trials)
    work, clock = np.zeros(trials), np.zeros(trials)
    live = np.ones(trials, bool)
    while live.any():
        gap = rng.exponential(1 / lam, trials)
        arrives = live & (clock + gap < horizon)
        # Drain the work until the arrival (or the horizon), then add the job.
        step = np.where(arrives, gap, horizon - clock)
        work = np.where(live, np.maximum(work - step, 0.0), work)
        work = np.where(arrives, work + rng.gamma(shape, scale, trials), work)
        clock = np.where(arrives, clock + gap, clock)
        live = arrives
    return work


@pytest.mark.parametrize(("scv", "rate"), [(1.0, 2000.0), (8.0, 5000.0), (8.0, 500.0)])
def test_the_wait_for_background_that_ends_an_idle_period_is_its_work_from_empty(scv, rate):
    # The queue's idle period began with its core free of background: a request that
    # ends it finds the work background left after exp(rate) from empty, and waits for
    # the busy period it starts (mean V / (1 - sigma)). A request arriving at any moment
    # finds more, lam E[B^2] / (2 (1 - sigma)^2).
    from offloadlab.model.tandem import Extra, idle_wait
    lam, b1 = rate, 65e-6
    b2 = (1 + scv) * b1**2
    v = _background_after_idle(lam, b1, scv, rate)
    sigma = lam * b1
    expected = v.mean() / (1 - sigma)
    sem = v.std() / math.sqrt(len(v)) / (1 - sigma)
    found = float(idle_wait(np.array([rate]), np.array([[lam]]), Extra(b1=b1, b2=b2))[0])
    assert found == pytest.approx(expected, abs=4 * sem + 1e-3 * expected)
    assert found < lam * b2 / (2 * (1 - sigma) ** 2)


def test_with_background_and_no_wakeup_the_priority_queue_is_exact_for_any_job_shape():
    # The wait for background is taken from a gamma of the jobs' moments; the second
    # moment is set so that without a wake-up cost the mean delay is still the
    # preemptive-resume priority queue's, whatever the jobs' shape.
    lam, s1, s2 = 500.0, 1e-3, 2e-6
    for b1, b2 in ((3e-4, 9e-8), (3e-4, 1.8e-7), (1e-4, 9e-8)):  # det, exp, SCV 8
        _, sojourn = _station(lam, s1, s2, b1=b1, b2=b2)
        sigma, rho = lam * b1, lam * s1
        assert sojourn == pytest.approx(s1 / (1 - sigma) + (lam * b2 + lam * s2)
                                        / (2 * (1 - sigma) * (1 - sigma - rho)), rel=1e-9)


def test_a_steady_share_of_the_core_runs_the_queue_slower():
    # A share c of the core held at every rate leaves the queue 1 - c of it: M/M/1 served
    # at (1 - c) / E[S], T = 1 / ((1 - c) mu - lam). With background jobs too, it is the
    # priority queue with every time stretched by 1 / (1 - c).
    lam, s1, c = 500.0, 1e-3, 0.2
    q, sojourn = _station(lam, s1, 2 * s1**2, share=c)
    assert sojourn == pytest.approx(1 / ((1 - c) / s1 - lam), rel=1e-12)  # 3.33 ms
    assert q.U[0] == pytest.approx(lam * s1) and q.core[0] == pytest.approx(lam * s1 + c)
    b1 = 2.5e-4
    _, sojourn = _station(lam, s1, 2 * s1**2, b1=b1, b2=2 * b1**2, share=c)
    s, b = s1 / (1 - c), b1 / (1 - c)
    sigma, rho = lam * b, lam * s
    assert sojourn == pytest.approx(s / (1 - sigma) + (lam * 2 * b**2 + lam * 2 * s**2)
                                    / (2 * (1 - sigma) * (1 - sigma - rho)), rel=1e-12)
    # It saturates the core sooner: the host alone is full at (1 - c) / E[S].
    data = {"name": "q", "class": [klass("c", 100.0, 1.0, SMALL)],
            "host": {"background_share": c}}
    r = evaluate(scenario.from_dict(data), [200.0]).overall
    plain = evaluate(one_class(100.0, base=SMALL), [200.0]).overall
    assert r["lam_star_noe"][0] == pytest.approx((1 - c) * plain["lam_star_noe"][0])
    assert r["lam_star_oe"][0] == pytest.approx(plain["lam_star_oe"][0])


def test_wakeup_and_background_raise_the_delay_and_d0_adds_to_each_path():
    plain = one_class(100.0, base=SMALL)
    rows = evaluate(plain, [200.0]).rows()[1]
    sc = make_scenario([klass("c", 100.0, 1.0, SMALL, d0="300us", d0_offload="1ms")])
    shifted = evaluate(sc, [200.0]).rows()[1]
    assert shifted["T_noe"] == pytest.approx(rows["T_noe"] + 300e-6, rel=1e-12)
    assert shifted["T"] == pytest.approx(rows["T"] + 1e-3, rel=1e-12)
    assert shifted["T_sum"] == pytest.approx(rows["T_sum"] + 1e-3, rel=1e-12)
    assert shifted["T_cpu"] == pytest.approx(rows["T_cpu"], rel=1e-12)  # a station's own
    data = {"name": "q", "class": [klass("c", 100.0, 1.0, SMALL)],
            "host": {"wakeup": "det(100us)"}, "engine": {"background": "det(200us)"}}
    loaded = evaluate(scenario.from_dict(data), [200.0]).rows()[1]
    assert loaded["T_noe"] > rows["T_noe"] and loaded["U_noe"] > rows["U_noe"]
    assert loaded["T_oe"] > rows["T_oe"] and loaded["U_oe"] == pytest.approx(rows["U_oe"])
    # The engine saturates with its background: at 2500/s, 0.625 + 0.5 >= 1 > 0.625.
    saturated = evaluate(scenario.from_dict(data), [2500.0]).rows()[1]
    assert saturated["saturated_oe"] and saturated["U_oe"] < 1


def test_background_per_class_adds_up_over_the_mix():
    # Two classes at 100/s each, background 0.1 and 0.3 ms: the same engine load as one
    # background of 0.2 ms on every request, and the same first moment of B.
    classes = [klass("a", 100.0, 1.0, SMALL), klass("b", 100.0, 1.0, SMALL)]
    each = {"name": "q", "class": classes,
            "engine": {"background": {"a": "det(100us)", "b": "det(300us)"}}}
    mean = {"name": "q", "class": classes, "engine": {"background": "det(200us)"}}
    r_each, r_mean = (evaluate(scenario.from_dict(d), [200.0, 1000.0]) for d in (each, mean))
    assert r_each.overall["lam_star_oe"][0] == pytest.approx(r_mean.overall["lam_star_oe"][0])
    # E[B^2] differs (0.05 vs 0.04 ms^2), so the wait does: the mix waits longer.
    assert (r_each.overall["T_oe"] > r_mean.overall["T_oe"]).all()


def test_every_class_row_carries_its_verdict_on_its_own():
    r = evaluate(example("five-classes"), [79.0, 250.0])
    labels = r.per_class["verdict"]
    assert set(labels.ravel()) <= {"helps", "hurts", "neutral"}
    # c0's overhead exceeds its protocol work: offload adds host work at any rate.
    assert (labels[:, 0] == "hurts").all()
    # On its own: the class alone at its rate, all offloaded, as a one-class scenario says.
    sc = example("five-classes")
    for i, cls in enumerate(sc.classes):
        alone = replace(sc, classes=(replace(cls, offload=1.0),))
        row = evaluate(alone, [79.0 * cls.rate / sc.rate]).rows()[1]
        assert labels[0, i] == verdict(row, cls.host_proto.mean, cls.host_overhead.mean)[0]


def test_a_class_that_hurts_on_its_own_is_never_recommended():
    # Class a relieves the host (E[X_o] < E[X_p]) but its path to the engine is slow
    # (d0_offload): on its own it hurts. Class b loads the host; a delay optimiser that
    # ignored the verdict would offload a to make room for b.
    a = klass("a", 100.0, "auto", SMALL, host_overhead="exp(mean=0.05ms)",
              d0_offload="5ms")
    b = klass("b", 100.0, "auto", LARGE)
    sc = make_scenario([a, b], cpu_queue="mg1")
    r = evaluate(sc, np.linspace(20.0, 180.0, 9))
    hurts = r.per_class["verdict"] == "hurts"
    assert hurts[:, 0].all()
    assert (r.fractions[hurts] == 0).all()
    # Without the slow path the optimiser does offload a somewhere in this sweep.
    free = make_scenario([klass("a", 100.0, "auto", SMALL, host_overhead="exp(mean=0.05ms)"),
                          b], cpu_queue="mg1")
    assert evaluate(free, np.linspace(20.0, 180.0, 9)).fractions[:, 0].max() > 0


def test_per_class_utilisations_add_up_to_the_queues_with_cooling_wakeups():
    # Each class's share of a queue's wake-ups is charged at the cooled cost the queue
    # pays, also when the host's answers wake the engine a second time.
    sc = scenario.from_dict({
        "name": "two", "host": {"wakeup": "det(80us)", "cooling": "1ms", "release": "round"},
        "engine": {"wakeup": "det(50us)", "cooling": "2ms", "answers_wake": True},
        "options": {"system_delay": "sum", "cpu_queue": "mg1"},
        "class": [klass("a", 300, 1.0, **SMALL), klass("b", 200, 0.5, **LARGE)]})
    r = evaluate(sc, [40.0, 80.0])
    assert np.isfinite(r.overall["T"]).all()
    for key in ("U_noe", "U_cpu", "U_oe"):
        assert r.per_class[key].sum(-1) == pytest.approx(r.overall[key], rel=1e-12), key
