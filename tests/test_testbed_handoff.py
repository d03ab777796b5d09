"""Seed 004's policies on the testbed (:mod:`offloadlab.experiments.handoff`): a short real
experiment through the CLI, the claims' checks on known summaries, the policy list and
bad input. Servers listen on ephemeral loopback ports and every run is bounded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.experiments import handoff
from offloadlab.report import handoff as report


def test_a_short_experiment_runs_every_policy_and_writes_its_files(served_set, tmp_path, testbed):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "handoff", "testbed", "--fileset", str(served_set), "--out", str(out),
        "--policies", "inline,N-N-FCFS,handoff:P-L-FCFS", "--clients", "8",
        "--keep-alive", "20", "--run-length", "0.5s", "--repeats", "2",
        "--engine-slowdown", "2"])
    assert result.exit_code == 0, result.output
    runs = pd.read_csv(out / "runs.csv")
    assert list(runs["policy"]) == ["inline", "handoff:N-N-FCFS", "handoff:P-L-FCFS"] * 2
    assert list(runs["repeat"]) == [0, 0, 0, 1, 1, 1]
    assert (runs["throughput"] > 0).all() and (runs["errors"] == 0).all()
    by = runs.groupby("policy")
    # Inline has no engine; naive offload puts every request on it.
    assert by.get_group("inline")["engine_share"].eq(0).all()
    # The engine counts a request when it takes it, the server's total when it is
    # answered: the 8 clients' requests in flight when the run stops may differ
    # (1.002 in one CI run of about 4,000 requests).
    naive = by.get_group("handoff:N-N-FCFS")["engine_share"]
    assert ((naive - 1).abs() <= 0.01).all(), naive
    series = pd.read_parquet(out / "series.parquet")
    assert set(series["policy"]) == {"handoff:N-N-FCFS", "handoff:P-L-FCFS"}
    assert (series["held"] <= 8).all()
    summary = json.loads((out / "summary.json").read_text())
    assert [r["policy"] for r in summary["summary"]] == ["inline", "handoff:N-N-FCFS",
                                                         "handoff:P-L-FCFS"]
    assert [c["claim"] for c in summary["checks"]] == [
        "naive full offload loses to inline",
        "host-first + load control beats inline and naive offload"]
    assert summary["figures"] == ["handoff-testbed.png"]
    assert (out / "handoff-testbed.png").stat().st_size > 10_000
    assert "vs inline" in result.output


def _summary(inline: float, naive: float, best: float) -> pd.DataFrame:
    runs = pd.DataFrame([
        {"policy": p, "repeat": r, "throughput": x * (1 + 0.01 * r), "mean_s": 64 / x,
         "p99_s": 0.01, "errors": 0, "host_cpu_s": 1e-5, "engine_cpu_s": math.nan,
         "engine_share": 0.5, "passed": 0, "moved": 0, "returned": 0,
         "soft_limit_min": math.nan}
        for r in range(3) for p, x in ((handoff.INLINE, inline), (handoff.NAIVE, naive),
                                       (handoff.BEST, best))])
    exp = handoff.Experiment(Path("fileset"), pd.DataFrame())
    return handoff.Result(exp, runs, pd.DataFrame(columns=list(handoff.SERIES_COLUMNS))).medians()


def test_the_summary_takes_medians_and_the_checks_follow_the_throughputs():
    s = _summary(100.0, 80.0, 120.0)
    assert list(s["policy"]) == [handoff.INLINE, handoff.NAIVE, handoff.BEST]
    # Medians of x, 1.01x, 1.02x: 1.01x; vs_inline is the ratio of medians.
    assert s["throughput"].tolist() == pytest.approx([101.0, 80.8, 121.2])
    assert s["vs_inline"].tolist() == pytest.approx([1.0, 0.8, 1.2])
    assert s["runs"].tolist() == [3, 3, 3]
    assert [c.holds for c in handoff.checks(s)] == [True, True]
    assert [c.holds for c in handoff.checks(_summary(100.0, 110.0, 120.0))] == [False, True]
    assert [c.holds for c in handoff.checks(_summary(100.0, 80.0, 90.0))] == [True, False]
    # Only the claims whose policies ran are checked.
    assert handoff.checks(s[s["policy"] != handoff.NAIVE]) == []


def test_the_figure_draws_bars_and_the_load_control_series():
    runs = pd.DataFrame([{"policy": p, "repeat": 0, "throughput": x, "mean_s": 0.004,
                          "p99_s": 0.008} for p, x in ((handoff.INLINE, 100.0),
                                                       (handoff.BEST, 120.0))])
    series = pd.DataFrame({"policy": handoff.BEST, "repeat": 0, "t_s": [0.1, 0.2],
                           "held": [10.0, 8.0], "soft_limit": [12.0, 8.0], "qlen": [3, 1]})
    fig = report.testbed_figure(runs, series)
    assert fig is not None
    assert [ax.get_title() for ax in fig.axes][:3] == [
        "throughput", "latency: mean (plain), p99 (hatched)",
        "P-L-FCFS: load control over time"]
    assert report.testbed_figure(runs.iloc[:0], series) is None


def test_policies_parse_with_or_without_the_mode_prefix():
    assert handoff.parse_policies("inline, p-l-fcfs,handoff:N-N-T4,P-L-FCFS") == (
        "inline", "handoff:P-L-FCFS", "handoff:N-N-T4")
    for bad in ("", "fast", "P-L-T0"):
        with pytest.raises(InputError):
            handoff.parse_policies(bad)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--policies", "inline,warp"], "handoff policy"),
    (["--repeats", "0"], "repeats"),
    (["--clients", "0"], "clients"),
    (["--run-length", "soon"], "--run-length"),
    (["--engine-slowdown", "-1"], "engine_slowdown"),
])
def test_bad_flags_exit_2_naming_them(served_set, tmp_path, args, fragment):
    result = CliRunner().invoke(app, ["handoff", "testbed", "--fileset", str(served_set),
                                      "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 2, result.output
    assert fragment in result.output
    assert not (tmp_path / "o").exists()
