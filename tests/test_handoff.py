"""Seed 004's handoff model from Python: the shorthand, experiment files, the calibrated
costs against the paper's numbers (Table 1, §6.2; reference 004 §7.4's orderings), the
calibration's solver, and the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.handoff import checks, paper
from offloadlab.handoff import run as h

# Shorter runs than the paper's 400k + 600k packets keep the suite quick.
SMALL = h.Settings(values={"run.warmup_packets": 150_000, "run.packets": 250_000},
                   connections=10_000)
# The costs calibration found (paper.FIT), at those lengths: a fit takes too long here.
FITTED = SMALL.with_values(**paper.FIT)


@pytest.mark.parametrize("text", ["W-0-N-N-FCFS-400", "S-4096-P-L-T20-800", "d-256-N-L-T4-600"])
def test_shorthand_round_trips(text):
    s = h.parse_setup(text)
    assert s.label == text.upper()
    assert h.parse_setup(s.label) == s


@pytest.mark.parametrize("text, word", [("W-4096-P-L-400", "Workload-NICconns"),
                                        ("X-0-N-N-FCFS-400", "workload 'X'"),
                                        ("W-0-N-N-T0-400", "Tn"), ("W-0-N-N-FCFS-0", "MIPS")])
def test_bad_shorthand_says_the_form(text, word):
    with pytest.raises(InputError, match=word):
        h.parse_setup(text)


@pytest.fixture(scope="module")
def table1():
    """Table 1's W rows and §6.2's W-4096 rows at the fitted costs."""
    labels = ["W-1024-N-N-FCFS-400", "W-1024-P-N-FCFS-400", "W-4096-P-N-FCFS-400",
              "W-4096-P-L-FCFS-400", "W-4096-P-L-FCFS-800"]
    return h.run_all([h.parse_setup(x) for x in labels], FITTED)


def test_fitted_costs_give_the_papers_numbers(table1):
    df, _ = table1
    fit = paper.compare(df).set_index("number")
    # W-0 (Table 1, §6.2): the rate, NIC idle and stack share the fit aimed at.
    w0 = df.set_index("setup").loc["W-0-N-N-FCFS-400"]
    assert w0.requests_per_s == pytest.approx(23031, rel=0.03)
    assert w0.host_idle < 0.02
    assert w0.nic_idle == pytest.approx(0.62, abs=0.03)
    assert w0.host_stack == pytest.approx(0.57, abs=0.03)
    # Naive handoff starves the host (Table 1): host packets wait behind the NIC's TCP
    # work, the host's transmit ring overflows, its connections stall on timeouts and
    # new connections land on the NIC (88 % of them in the paper).
    naive = df.set_index("setup").loc["W-1024-N-N-FCFS-400"]
    assert naive.gain == pytest.approx(-0.30, abs=paper.TOLERANCE)
    assert naive.host_idle > 0.4 and naive.offloaded_share > 0.8 and naive.drops > 0
    assert fit.loc["W-1024-P-N-FCFS-400 gain", "within"]
    # Held out: all 2048 connections on the NIC slow its every packet (§6.2's -44 %).
    assert fit.loc["W-4096-P-N-FCFS-400 gain", "diff"] == pytest.approx(
        0, abs=paper.HELD_OUT_TOLERANCE)


def test_host_ceiling_is_the_extreme_model_that_meets_table_1():
    # The extreme model: an offloaded request at the least Table 1's host-first row
    # allows, a host request at its application work. It must give that row's own gain
    # with host requests at W-0's cost, and the ceiling's value at every share.
    r = 1 / (1 + paper.host_ceiling(1.0))
    f = paper.stated(paper.W1024P, "offloaded_share")
    assert f * r + (1 - f) * 1.0 == pytest.approx(1 / (1 + paper.stated(paper.W1024P)))
    app = 1 - paper.stated(paper.W0, "host_stack")
    assert paper.host_ceiling(0.0) == pytest.approx(1 / app - 1)
    assert paper.host_ceiling(0.6) == pytest.approx(1 / (0.6 * r + 0.4 * app) - 1)
    # The finding docs/handoff.md reports: §6.4's +58.6 % at 800 MIPS, with its 85 %
    # offloaded, is out of reach of any such model by more than the ±5 points.
    w800 = "W-4096-P-L-FCFS-800"
    ceiling = paper.host_ceiling(paper.stated(w800, "offloaded_share"))
    assert ceiling < paper.stated(w800) - paper.TOLERANCE


def test_solver_finds_a_monotone_target():
    calls = []

    def f(x):
        calls.append(x)
        return 1 - 1 / x  # rising

    x = h._solve(f, 0.75, 1.0, rising=True, tol=1e-4)
    assert f(x) == pytest.approx(0.75, abs=1e-4) and len(calls) <= 8
    x = h._solve(lambda x: 1 / x, 0.25, 1.0, rising=False, tol=1e-4)
    assert x == pytest.approx(4.0, rel=1e-3)


def test_calibration_from_the_defaults_lands_on_the_kept_fit(monkeypatch):
    # calibrate starts from paper.FIT; without it, from the Rust defaults, the search
    # docs/handoff.md describes. The simulation is seeded, so the same code lands on
    # the same fit: within 0.1% of FIT's four digits here (29 Nov 2026). 1% leaves room
    # for another CPU's floating point and still catches a fit that has moved: one
    # round short of convergence is 3-33% off, and 250k-packet runs move
    # hardware.tx_capacity by 48% and nic.miss by 31% (so this runs at full length).
    kept = paper.FIT
    monkeypatch.setattr(paper, "FIT", {})
    fitted = h.calibrate(h.Settings()).values
    for key, value in kept.items():
        assert fitted[key] == pytest.approx(value, rel=0.01), key


def test_policies_order_as_in_the_paper(table1):
    df, series = table1
    by = df.set_index("setup")
    assert by.loc["W-0-N-N-FCFS-400", "gain"] == 0
    assert by.loc["W-1024-P-N-FCFS-400", "gain"] > 0          # A4
    assert by.loc["W-4096-P-N-FCFS-400", "gain"] < 0          # A5
    assert by.loc["W-4096-P-L-FCFS-400", "gain"] > 0          # A6
    assert by.loc["W-4096-P-L-FCFS-800", "gain"] > by.loc["W-4096-P-L-FCFS-400", "gain"]
    # Figure 6: load control cuts the limit below the 2048 connections offered.
    s = series["W-4096-P-L-FCFS-400"]
    assert s.soft_limit.iloc[0] == 4096 and s.soft_limit.min() < 2048
    v = checks.evaluate(df).set_index("check")
    assert {"A1", "A4", "A5", "A6", "A14"} <= set(v.index)
    assert v.loc[["A1", "A4", "A5", "A6", "A14"], "holds"].all()
    assert "A12" not in v.index  # its configurations were not run


def test_checks_flag_a_reversed_ordering():
    base = {"workload": "W", "hard_limit": 0, "host_idle": 0.0, "nic_idle": 0.6,
            "requests_per_s": 100.0, "gain": 0.0}
    rows = [dict(base, setup="W-0-N-N-FCFS-400"),
            dict(base, setup="W-1024-N-N-FCFS-400", gain=-0.3, host_rx_delay_median_s=5e-4),
            dict(base, setup="W-1024-P-N-FCFS-400", gain=-0.4, host_rx_delay_median_s=1e-5)]
    v = checks.evaluate(pd.DataFrame(rows)).set_index("check")
    assert bool(v.loc["A3", "holds"]) and bool(v.loc["A3", "magnitude_ok"])
    assert not v.loc["A4", "holds"] and not v.loc["A4", "magnitude_ok"]


def _write(tmp_path, text):
    p = tmp_path / "exp.toml"
    p.write_text(text)
    return p


def test_sim_command_writes_results_and_figures(tmp_path):
    cfg = _write(tmp_path, """
runs = ["W-1024-P-N-FCFS-400", "W-4096-P-L-FCFS-400"]
calibrate = false
connections = 10000
[run]
warmup_packets = 100000
packets = 150000
[load_control]
hiwat = 1024
lowat = 128
""")
    res = CliRunner().invoke(app, ["handoff", "sim", str(cfg), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    o = tmp_path / "o"
    df = pd.read_csv(o / "results.csv")
    assert list(df.setup) == ["W-0-N-N-FCFS-400", "W-1024-P-N-FCFS-400",
                              "W-4096-P-L-FCFS-400"]
    assert (df.measured_s > 0).all() and not df.truncated.any()
    summary = json.loads((o / "summary.json").read_text())
    assert summary["watermarks"] == [1024, 128, 32, 32] and not summary["calibrated"]
    assert summary["figures"] and all((o / f).stat().st_size > 1000
                                      for f in summary["figures"])
    series = pd.read_parquet(o / "series.parquet")
    assert set(series.setup) == set(df.setup)


@pytest.mark.parametrize("text, word", [
    ('runs = "W-0-N-N-FCFS-400"', "runs must be a list"),
    ('runs = ["W-0-N-N-FCFS-400"]\n[nic]\nspeed = 3', "nic.speed"),
    ('runs = ["W-0-N-N-FCFS-400"]\n[hardware]\nnic_ips = 1e9', "MIPS"),
    ('runs = ["W-0-N-N-FCFS-400"]\n[load_control]\nhi = 3', "hiwat"),
    ('runs = ["W-0-N-N-FCFS-400"]\nconnections = 0', "connections"),
    ('runs = ["W-0-N-N-FCFS-400"]\nfoo = 1', "unknown keys"),
])
def test_bad_experiment_files_exit_2_naming_the_field(tmp_path, text, word):
    res = CliRunner().invoke(app, ["handoff", "sim", str(_write(tmp_path, text)),
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert word in res.output
    assert not (tmp_path / "o" / "results.csv").exists()


def test_bad_model_values_are_refused_by_the_core():
    with pytest.raises(InputError, match=r"tcp\.window"):
        h.run_setup(h.parse_setup("W-0-N-N-FCFS-400"), SMALL.with_values(**{"tcp.window": 0}))
    with pytest.raises(InputError, match="lowat"):
        h.run_setup(h.parse_setup("W-1024-P-L-FCFS-400"),
                    h.Settings(watermarks=h.Watermarks(hiwat=10, lowat=20)))
