"""Service-time distributions: duration strings, moments, sampling and spec parsing."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, stats

from offloadlab import dist
from offloadlab.dist import (
    BoundedPareto,
    Deterministic,
    Empirical,
    Exponential,
    Lognormal,
    Pareto,
    parse,
)
from offloadlab.errors import InputError
from offloadlab.units import format_time, parse_time

# ---------------------------------------------------------------- durations


@pytest.mark.parametrize("text, seconds", [
    ("250us", 250e-6), ("250µs", 250e-6), ("3ns", 3e-9), ("2.5ms", 2.5e-3), ("1.5s", 1.5),
    ("0", 0.0), ("0ms", 0.0), (" 7 ms ", 7e-3), ("1e3us", 1e-3), (".5s", 0.5),
])
def test_parse_time_units(text, seconds):
    assert parse_time(text) == pytest.approx(seconds, rel=1e-15, abs=0)


@pytest.mark.parametrize("text", ["5", "0.1", "-1ms", "-3", "fast", "", "ms", "5 min",
                                  "1ms2", "inf", "nan s", "1e400s"])
def test_parse_time_rejects(text):
    with pytest.raises(InputError):
        parse_time(text)


def test_parse_time_bare_number_suggests_unit():
    with pytest.raises(InputError, match="unit"):
        parse_time("5")


@pytest.mark.parametrize("x", [0.0, 1e-12, 3.3e-9, 250e-6, 1e-3, 0.0023300000000000004, 1.0,
                               1234.5, 0.1 + 0.2])
def test_format_time_round_trip_examples(x):
    assert parse_time(format_time(x)) == x


@given(st.floats(min_value=1e-12, max_value=1e4, allow_nan=False, allow_infinity=False))
def test_format_time_round_trip_property(x):
    assert parse_time(format_time(x)) == x


@pytest.mark.parametrize("x, text", [(250e-6, "250us"), (9e-3, "9ms"), (2.33e-3, "2.33ms"),
                                     (100e-6, "100us"), (80e-3, "80ms"), (1.0, "1s")])
def test_format_time_is_shortest(x, text):
    # docstring: "the shortest duration string that parse_time reads back"
    assert format_time(x) == text

# ---------------------------------------------------------------- moments


@pytest.mark.parametrize("nu, sigma", [(-5.2105, 1.0), (math.log(2e-4) - 0.125, 0.5),
                                       (0.3, 0.0001), (-1.0, 2.0)])
def test_lognormal_moments_match_scipy(nu, sigma):
    d = Lognormal(nu, sigma)
    ref = stats.lognorm(s=sigma, scale=math.exp(nu))
    assert d.mean == pytest.approx(ref.moment(1), rel=1e-12)
    assert d.m2 == pytest.approx(ref.moment(2), rel=1e-12)


def test_lognormal_reference_numbers():
    # reference 000 section 2.10 (b): E = 9 ms, sigma = 1 -> nu = -5.2105, E[X^2] = 220.18 ms^2
    d = parse("lognormal(mean=9ms, sigma=1)")
    assert d.nu == pytest.approx(-5.2105, abs=5e-5)
    assert d.m2 * 1e6 == pytest.approx(220.18, abs=0.005)


@pytest.mark.parametrize("alpha, k", [(2.5, 5.4e-3), (3.0, 1e-3), (7.25, 0.2)])
def test_pareto_moments_match_scipy(alpha, k):
    d = Pareto(alpha, k)
    ref = stats.pareto(b=alpha, scale=k)
    assert d.mean == pytest.approx(ref.moment(1), rel=1e-12)
    assert d.m2 == pytest.approx(ref.moment(2), rel=1e-12)


def test_pareto_reference_numbers():
    d = parse("pareto(alpha=2.5, k=5.4ms)")
    assert d.mean == pytest.approx(9e-3, rel=1e-12)
    assert d.m2 == pytest.approx(145.8e-6, rel=1e-12)


@pytest.mark.parametrize("alpha", [2.0, 1.5, 1.0001])
def test_pareto_infinite_second_moment(alpha):
    d = Pareto(alpha, 1e-3)
    assert d.m2 == math.inf
    assert math.isfinite(d.mean)
    hint = d.infinite_m2_hint()
    assert "alpha > 2" in hint and "bpareto" in hint


@pytest.mark.parametrize("spec", ["pareto(alpha=1, k=1ms)", "pareto(alpha=0.5, k=1ms)"])
def test_pareto_alpha_at_most_one_rejected(spec):
    with pytest.raises(InputError, match="alpha"):
        parse(spec)


def test_pareto_second_moment_finite_just_above_two():
    alpha = 2.0001
    assert Pareto(alpha, 1e-3).m2 == pytest.approx(alpha * 1e-6 / (alpha - 2), rel=1e-9)


@pytest.mark.parametrize("scale", [1e-3, 2.33e-3, 5.0])
def test_exponential_moments_match_scipy(scale):
    d = parse(f"exp(mean={scale}s)")
    ref = stats.expon(scale=scale)
    assert d.mean == pytest.approx(ref.moment(1), rel=1e-12)
    assert d.m2 == pytest.approx(ref.moment(2), rel=1e-12)
    assert d.scv == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("value", [0.0, 2e-3, 3.0])
def test_deterministic_moments(value):
    d = Deterministic(value)
    assert d.mean == value
    assert d.m2 == pytest.approx(value**2, rel=1e-15, abs=0)
    assert d.var == 0.0


def _bpareto_quad(alpha, lo, hi, j):
    norm = 1 - (lo / hi) ** alpha
    pdf = lambda x: alpha * lo**alpha * x ** (-alpha - 1) / norm  # noqa: E731
    # integrate in log space (x = e^u) so the wide range is resolved
    val, _ = integrate.quad(lambda u: math.exp(u * (j + 1)) * pdf(math.exp(u)),
                            math.log(lo), math.log(hi), epsabs=0, epsrel=1e-12, limit=200)
    return val


@pytest.mark.parametrize("alpha, lo, hi", [
    (1.0, 100e-6, 80e-3),   # j = alpha = 1: removable singularity in the mean
    (2.0, 100e-6, 80e-3),   # j = alpha = 2: removable singularity in the second moment
    (1.2, 100e-6, 80e-3),
    (0.7, 1e-3, 2e-3),
    (3.5, 5e-3, 1.0),
    (1.0 + 1e-12, 1e-4, 1e-1),  # next to the singularity: no cancellation blow-up
])
def test_bpareto_moments_match_quadrature(alpha, lo, hi):
    d = BoundedPareto(alpha, lo, hi)
    assert d.mean == pytest.approx(_bpareto_quad(alpha, lo, hi, 1), rel=1e-9)
    assert d.m2 == pytest.approx(_bpareto_quad(alpha, lo, hi, 2), rel=1e-9)
    assert lo <= d.mean <= hi


def test_bpareto_matches_scipy_truncated_pareto():
    alpha, lo, hi = 1.2, 100e-6, 80e-3
    ref = stats.truncpareto(b=alpha, c=hi / lo, scale=lo)
    d = BoundedPareto(alpha, lo, hi)
    assert d.mean == pytest.approx(ref.moment(1), rel=1e-9)
    assert d.m2 == pytest.approx(ref.moment(2), rel=1e-9)


@pytest.mark.parametrize("header", [False, True])
def test_empirical_moments_match_numpy(tmp_path, header):
    values = np.random.default_rng(7).lognormal(-7, 1, 500)
    lines = (["service_s,comment"] if header else []) + [f"{float(v)!r},x" for v in values]
    (tmp_path / "costs.csv").write_text("\n".join(lines) + "\n")
    d = parse("empirical(path=costs.csv)", base_dir=tmp_path)
    assert len(d.values) == len(values)
    assert d.mean == pytest.approx(np.mean(values), rel=1e-12)
    assert d.m2 == pytest.approx(np.mean(values**2), rel=1e-12)


def test_lognormal_mean_and_nu_forms_agree():
    sigma = 0.8
    mean = 2.33e-3
    nu = math.log(mean) - sigma**2 / 2
    a = parse(f"lognormal(mean=2.33ms, sigma={sigma})")
    b = parse(f"lognormal(nu={nu!r}, sigma={sigma})")
    assert a.nu == pytest.approx(b.nu, rel=1e-14)
    assert a.sigma == b.sigma
    assert a.mean == pytest.approx(mean, rel=1e-12)
    assert b.mean == pytest.approx(mean, rel=1e-12)
    assert a.m2 == pytest.approx(b.m2, rel=1e-12)

# ---------------------------------------------------------------- sampling


def _all_kinds(tmp_path):
    values = np.random.default_rng(3).exponential(1e-3, 1000)
    (tmp_path / "costs.csv").write_text("\n".join(repr(float(v)) for v in values) + "\n")
    return [
        Exponential(2e-3),
        Deterministic(1.5e-3),
        Lognormal.from_mean(9e-3, 1.0),
        Pareto(2.5, 5.4e-3),
        Pareto(4.0, 1e-3),
        BoundedPareto(1.2, 100e-6, 80e-3),
        BoundedPareto(2.0, 1e-3, 1e-2),
        Empirical.load("costs.csv", tmp_path),
    ]


def test_sample_means_within_five_standard_errors(tmp_path):
    n = 200_000
    for d in _all_kinds(tmp_path):
        x = d.sample(np.random.default_rng(1), n)
        assert x.shape == (n,)
        assert np.all(x >= 0)
        se = math.sqrt(d.var / n)
        assert abs(x.mean() - d.mean) <= 5 * se + 1e-15 * d.mean, (d, x.mean(), d.mean, se)
        if isinstance(d, BoundedPareto):
            assert x.min() >= d.lo and x.max() <= d.hi
        if isinstance(d, Pareto):
            assert x.min() >= d.k
        if isinstance(d, Empirical):
            assert np.isin(x, d.values).all()


def test_sample_second_moment_bpareto():
    # second moments too, where the fourth moment is finite (bounded support)
    d = BoundedPareto(1.2, 100e-6, 80e-3)
    n = 200_000
    x = d.sample(np.random.default_rng(1), n)
    m4 = d.moment(4)
    se = math.sqrt((m4 - d.m2**2) / n)
    assert abs(np.mean(x**2) - d.m2) <= 5 * se

# ---------------------------------------------------------------- spec round trip


@pytest.mark.parametrize("spec", [
    "exp(mean=1ms)", "exp(2.33ms)", "det(0)", "det(value=250us)",
    "lognormal(mean=9ms, sigma=1)", "lognormal(nu=-6.4915, sigma=1)",
    "lognormal(mean=0.2ms, sigma=0.5)",
    "pareto(alpha=2.5, k=5.4ms)", "bpareto(alpha=1.2, lo=100us, hi=80ms)",
    "bpareto(2, lo=1ms, hi=1s)", "  EXP ( mean = 3 us ) ",
])
def test_spec_round_trip(spec):
    d = parse(spec)
    again = parse(str(d))
    assert again == d
    assert type(again) is type(d)


def test_spec_round_trip_empirical(tmp_path):
    (tmp_path / "c.csv").write_text("0.001\n0.002\n0.0035\n")
    d = parse("empirical(path=c.csv)", base_dir=tmp_path)
    assert parse(str(d), base_dir=tmp_path) == d
    assert list(d.values) == [0.001, 0.002, 0.0035]


def test_spec_values():
    assert parse("exp(mean=1ms)") == Exponential(1e-3)
    assert parse("det(2ms)") == Deterministic(2e-3)
    assert parse("pareto(alpha=2.5, k=5.4ms)") == Pareto(2.5, 5.4e-3)
    assert parse("bpareto(alpha=1.2, lo=100us, hi=80ms)") == BoundedPareto(1.2, 1e-4, 8e-2)

# ---------------------------------------------------------------- bad specs


@pytest.mark.parametrize("spec, words", [
    ("gamma(mean=1ms)", ["gamma", "exp", "lognormal", "bpareto"]),
    ("exp(rate=1ms)", ["rate", "mean"]),
    ("pareto(alpha=2.5)", ["k", "pareto("]),
    ("bpareto(alpha=1.2, lo=1ms)", ["hi"]),
    ("lognormal(mean=1ms)", ["sigma"]),
    ("lognormal(mean=9ms, sigma=1ms)", ["sigma", "no unit"]),
    ("exp(mean=5)", ["mean", "unit"]),
    ("lognormal(mean=9ms, nu=-5, sigma=1)", ["mean", "nu", "not both"]),
    ("lognormal(sigma=1)", ["mean", "nu"]),
    ("bpareto(1.2, 100us, hi=80ms)", ["name=value"]),
    ("exp(mean=1ms, mean=2ms)", ["twice"]),
    ("exp mean=1ms", ["exp(mean=1ms)"]),
    ("exp(mean=-1ms)", [">= 0"]),
    ("bpareto(alpha=1.2, lo=80ms, hi=100us)", ["lo < hi"]),
])
def test_bad_specs(spec, words):
    with pytest.raises(InputError) as err:
        parse(spec)
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_empirical_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"nope\.csv"):
        parse("empirical(path=nope.csv)", base_dir=tmp_path)


def test_empirical_negative_value_names_file_and_line(tmp_path):
    (tmp_path / "c.csv").write_text("seconds\n0.001\n0.002\n-0.5\n0.003\n")
    with pytest.raises(InputError) as err:
        parse("empirical(path=c.csv)", base_dir=tmp_path)
    assert f"{tmp_path / 'c.csv'}:4" in str(err.value)
    assert "-0.5" in str(err.value)


def test_empirical_garbage_and_empty(tmp_path):
    (tmp_path / "g.csv").write_text("0.001\nabc\n")
    with pytest.raises(InputError, match=r"g\.csv:2"):
        parse("empirical(path=g.csv)", base_dir=tmp_path)
    (tmp_path / "e.csv").write_text("seconds\n")
    with pytest.raises(InputError, match="no service times"):
        parse("empirical(path=e.csv)", base_dir=tmp_path)


def test_known_kinds():
    assert set(dist.KINDS) == {"exp", "det", "lognormal", "pareto", "bpareto", "empirical"}
