"""Seed 001's experiment (``offload study --preset appcache``): a short real run of set-ups
A, B and C through the CLI, the search for the most compliant sessions, and bad input."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.testbed import appcache
from offloadlab.workload import fileset
from offloadlab.workload.specs import FileSetSpec


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("appcache-set")
    spec = FileSetSpec(name="s", n_files=120, max_bytes=300_000, zipf_alpha=0.9, seed=4)
    fileset.materialise(fileset.generate(spec), root)
    return root


def test_a_short_study_runs_a_b_and_c_and_the_cache_spares_the_host(small_set, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "study", "--preset", "appcache", "--fileset", str(small_set), "--out", str(out),
        "--sessions", "3,6", "--cache-sizes", "0.05,8", "--run-length", "2s",
        "--think", "det(20ms)", "--files-per-session", "20", "--no-search",
        "--work", "exp(mean=100us)"])
    assert result.exit_code == 0, result.output
    points = pd.read_csv(out / "points.csv")
    assert len(points) == 2 * (1 + 2 * 2)
    assert points["setup"].value_counts().to_dict() == {"B": 4, "C": 4, "A": 2}
    assert points["error_share"].max() == 0 and points["compliant"].all()
    assert (points["pages"] > 10).all() and (points["requests"] > 100).all()
    a = points[points["setup"] == "A"].set_index("sessions")
    assert a["hit_rate"].isna().all()
    for setup in ("B", "C"):
        big = points[(points["setup"] == setup) & (points["cache_mib"] == 8)]
        big = big.set_index("sessions")
        # Only the dynamic pages (1 in 20 requests) and first requests miss a cache that
        # holds the whole set; every hit spares the host its 100 µs of work.
        assert (big["hit_rate"] > 0.6).all() and (big["hit_rate"] < 0.96).all(), big
        assert (big["host_cpu_us"] < 0.6 * a["host_cpu_us"]).all(), (big, a)
    small = points[(points["setup"] == "C") & (points["cache_mib"] == 0.05)]
    assert (small["hit_rate"].to_numpy() < big["hit_rate"].to_numpy()).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["figures"] == ["appcache.png"] and (out / "appcache.png").stat().st_size
    assert "Hit rate" in result.output and "cache on the engine" in result.output


def test_the_search_doubles_then_bisects_to_the_last_compliant_count(small_set, monkeypatch):
    exp = appcache.Experiment(small_set, appcache.read_fileset(small_set),
                              replace(appcache.budget("quick"), sessions=(4,),
                                      search_steps=6))
    tried = []

    def fake(exp, setup, n, mib):
        tried.append(n)
        return {"setup": setup, "sessions": n, "cache_mib": mib, "compliant": n <= 37}
    monkeypatch.setattr(appcache, "run_point", fake)
    probes: list[dict] = []
    assert appcache.most_sessions(exp, "C", probes) == 37
    assert tried == [4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    tried.clear()
    monkeypatch.setattr(appcache, "run_point", lambda e, s, n, m: {"compliant": False})
    assert appcache.most_sessions(exp, "A", []) is None


@pytest.mark.parametrize(("args", "fragment"), [
    (["--preset", "nope"], "--preset"),
    (["--preset", "appcache", "--sessions", "0"], "--sessions"),
    (["--preset", "appcache", "--sessions", "2.5"], "whole numbers"),
    (["--preset", "appcache", "--cache-sizes", "x"], "--cache-sizes"),
    (["--preset", "appcache", "--workload", "shop"], "workload"),
    (["--preset", "appcache", "--cache-policy", "fifo"], "cache_policy"),
    (["--preset", "appcache", "--time-good", "9s", "--time-tolerable", "5s"], "tolerable"),
])
def test_bad_appcache_flags_exit_2_naming_them(small_set, tmp_path, args, fragment):
    result = CliRunner().invoke(app, ["study", "--fileset", str(small_set), "--out",
                                      str(tmp_path / "o"), *args])
    assert result.exit_code == 2 and fragment in result.output, result.output
