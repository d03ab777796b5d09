"""Seed 004's handoff model from Python: the shorthand, experiment files, calibration on
W-0, the policies' orderings from the paper (reference 004 §7.4), and the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.handoff import checks
from offloadlab.handoff import run as h

# Shorter runs than the paper's 400k + 600k packets keep the suite quick.
SMALL = h.Settings(values={"run.warmup_packets": 150_000, "run.packets": 250_000},
                   connections=10_000)


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
def calibrated():
    return h.calibrate(SMALL)


def test_calibration_hits_the_papers_baseline(calibrated):
    r = h.run_setup(h.parse_setup("W-0-N-N-FCFS-400"), calibrated)
    assert r["requests_per_s"] == pytest.approx(h.BASELINE_RATE, rel=0.03)
    assert r["nic_idle"] == pytest.approx(h.BASELINE_NIC_IDLE, abs=0.03)
    assert r["host_idle"] < 0.02
    v = calibrated.values
    assert v["nic.packet"] == pytest.approx(h.NIC_PACKET_RATIO * v["nic.host_packet"])


def test_policies_order_as_in_the_paper(calibrated):
    labels = ["W-1024-N-N-FCFS-400", "W-1024-P-N-FCFS-400", "W-4096-P-N-FCFS-400",
              "W-4096-P-L-FCFS-400", "W-4096-P-L-FCFS-800"]
    df, series = h.run_all([h.parse_setup(x) for x in labels], calibrated)
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
