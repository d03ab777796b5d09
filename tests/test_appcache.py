"""Seed 001's experiment (``offload appcache``): a short real run of set-ups A, B and C
through the CLI, the search for the most compliant sessions, and bad input."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.experiments import appcache
from offloadlab.workload import fileset
from offloadlab.workload.specs import FileSetSpec, SpecWeb2005Spec


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("appcache-set")
    spec = SpecWeb2005Spec(name="s", sessions=6, shared=12, own=6, items_per_session=10,
                           seed=4)
    fileset.materialise(fileset.generate(spec), root)
    return root


def test_a_short_run_of_a_b_and_c_shows_the_cache_sparing_the_host(small_set, tmp_path, testbed,
                                                                   squid_binary):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "appcache", "--fileset", str(small_set), "--out", str(out),
        "--sessions", "3,6", "--cache-sizes", "0.05,8", "--run-length", "1s",
        "--think", "det(20ms)", "--no-search",
        "--work", "exp(mean=100us)"])
    assert result.exit_code == 0, result.output
    everything = pd.read_csv(out / "points.csv")
    # B and C with the emulated cache and with Squid (the default proxy, "both").
    assert len(everything) == 2 * (1 + 2 * 2 * 2)
    assert everything["setup"].value_counts().to_dict() == {"B": 8, "C": 8, "A": 2}
    assert everything["error_share"].max() == 0 and everything["compliant"].all()
    assert (everything["pages"] > 10).all() and (everything["requests"] > 100).all()
    # Utilisation and CPU per request describe one window: the load's, not Squid's
    # shutdown after it (which once diluted the Squid rows' utilisation 2.5 times).
    window = everything["host_util"] / (everything["host_cpu_us"] * 1e-6 * everything["rate"])
    assert window.between(0.6, 1.4).all(), everything.assign(window=window)
    points = everything[everything["proxy"] != "squid"]
    a = points[points["setup"] == "A"].set_index("sessions")
    assert a["hit_rate"].isna().all()
    for setup in ("B", "C"):
        big = points[(points["setup"] == setup) & (points["cache_mib"] == 8)]
        big = big.set_index("sessions")
        # Only the dynamic pages (1 in 20 requests), downloads and first requests miss a
        # cache that holds the whole site; every hit spares the host its 100 µs of work.
        assert (big["hit_rate"] > 0.6).all() and (big["hit_rate"] < 0.96).all(), big
        assert (big["host_cpu_us"] < 0.6 * a["host_cpu_us"]).all(), (big, a)
    small = points[(points["setup"] == "C") & (points["cache_mib"] == 0.05)]
    assert (small["hit_rate"].to_numpy() < big["hit_rate"].to_numpy()).all()
    # Squid, holding the whole site too, misses the same requests, and in C its CPU is
    # the engine core's, not the host's.
    real = everything[(everything["proxy"] == "squid") & (everything["cache_mib"] == 8)]
    for setup in ("B", "C"):
        rows = real[real["setup"] == setup].set_index("sessions")
        emulated = points[(points["setup"] == setup) & (points["cache_mib"] == 8)]
        assert np.allclose(rows["hit_rate"], emulated.set_index("sessions")["hit_rate"],
                           atol=0.02), rows
        assert (rows["log_unparsed"] == 0).all()
    c = real[real["setup"] == "C"].set_index("sessions")
    assert (c["engine_cpu_us"] > 0).all() and (c["host_cpu_us"] < a["host_cpu_us"]).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["figures"] == ["appcache.png"] and (out / "appcache.png").stat().st_size
    assert "Hit rate" in result.output and "cache on the engine" in result.output
    assert "(squid;" in result.output
    # Whether the cache on the host unloads it, from this run's own CPU per request.
    balance = {b["proxy"]: b for b in summary["host_balance"]}
    assert set(balance) == {"emulated", "squid"}
    for proxy, b in balance.items():
        assert b["sessions"] == 6
        assert b["cache_us"] == pytest.approx(b["B_us"] - b["C_us"])
        assert f"cache on the host ({proxy}, 6 sessions)" in " ".join(result.output.split())
    # Four runs of C at two hit ratios fit a hit's and a miss's engine cost apart.
    costs = summary["model"]["costs"]
    assert 0 < costs["engine_hit_s"] < costs["engine_miss_s"] + costs["host_file_miss_s"]
    versus = pd.read_csv(out / "model.csv")
    assert len(versus) == 2 + 4  # the runs of A and C
    c = versus[versus["setup"] == "C"]
    assert np.allclose(c["model_engine_util"], c["engine_util"], rtol=0.5)


def test_the_search_doubles_then_bisects_to_the_last_compliant_count(small_set, monkeypatch):
    exp = appcache.Experiment(small_set, appcache.read_site(small_set),
                              replace(appcache.budget("quick"), sessions=(4,),
                                      search_steps=6))
    tried = []

    def fake(exp, setup, n, mib, proxy):
        tried.append(n)
        return {"setup": setup, "sessions": n, "cache_mib": mib, "compliant": n <= 37}
    monkeypatch.setattr(appcache, "run_point", fake)
    probes: list[dict] = []
    assert appcache.most_sessions(exp, "C", probes) == 37
    assert tried == [4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    tried.clear()
    monkeypatch.setattr(appcache, "run_point", lambda e, s, n, m, p: {"compliant": False})
    assert appcache.most_sessions(exp, "A", []) is None


@pytest.mark.parametrize(("args", "fragment"), [
    (["--sessions", "0"], "--sessions"),
    (["--sessions", "2.5"], "whole numbers"),
    (["--cache-sizes", "x"], "--cache-sizes"),
    (["--workload", "shop"], "workload"),
    (["--cache-policy", "fifo"], "cache_policy"),
    (["--time-good", "9s", "--time-tolerable", "5s"], "tolerable"),
    (["--time-good", "soon"], "--time-good"),
    (["--run-length", "soon"], "--run-length"),
    (["--budget", "huge"], "budget"),
])
def test_bad_appcache_flags_exit_2_naming_them(small_set, tmp_path, args, fragment):
    result = CliRunner().invoke(app, ["appcache", "--fileset", str(small_set), "--out",
                                      str(tmp_path / "o"), *args])
    assert result.exit_code == 2 and fragment in result.output, result.output


@pytest.mark.parametrize(("preset", "fragment"), [
    ("appcache", "run 'offload appcache'"),
    ("nope", "use toe-2009"),
    ("seed000", "seed000 is now called toe-2009"),
])
def test_the_study_sends_its_old_appcache_preset_to_the_new_verb(tmp_path, preset, fragment):
    result = CliRunner().invoke(app, ["study", "--preset", preset, "--out",
                                      str(tmp_path / "o")])
    said = " ".join(result.output.split())  # the terminal wraps lines
    assert result.exit_code == 2 and fragment in said, result.output
    assert not (tmp_path / "o").exists()


def test_a_file_set_that_is_not_a_site_or_another_workload_s_is_refused(small_set,
                                                                         tmp_path):
    flat = tmp_path / "flat"
    fileset.materialise(fileset.generate(FileSetSpec(name="f", n_files=5)), flat)
    for given, args, fragment in ((flat, [], "not a SPECweb2005-like site"),
                                  (small_set, ["--workload", "banking"], "support workload")):
        result = CliRunner().invoke(app, ["appcache", "--fileset", str(given), "--out",
                                          str(tmp_path / "o"), *args])
        said = " ".join(result.output.split())  # the terminal wraps lines
        assert result.exit_code == 2 and fragment in said, result.output


def test_the_fit_recovers_known_costs_and_the_model_then_matches_every_run():
    from offloadlab.calibrate import appcache as fitting

    alone, page, file_miss, engine_miss, engine_hit = 300e-6, 1.2e-3, 150e-6, 120e-6, 40e-6
    d = 0.05
    rows = []
    for sessions, rate in ((5, 100.0), (50, 900.0)):
        rows.append(dict(setup="A", sessions=sessions, cache_mib=None, rate=rate,
                         dynamic_share=d, hit_rate=None, host_util=rate * alone,
                         engine_util=None))
        for mib, h in ((1, 0.4), (10, 0.9)):
            rows.append(dict(setup="C", sessions=sessions, cache_mib=mib, rate=rate,
                             dynamic_share=d, hit_rate=h,
                             host_util=rate * (d * page + (1 - d - h) * file_miss),
                             engine_util=rate * ((1 - h) * engine_miss + h * engine_hit)))
    points = pd.DataFrame(rows)
    costs = fitting.fit(points)
    want = (alone, page, file_miss, engine_miss, engine_hit)
    assert [getattr(costs, f) for f in ("host_alone", "host_page", "host_file_miss",
                                        "engine_miss", "engine_hit")] == pytest.approx(want)
    table = fitting.compare(points, costs)
    assert len(table) == len(points)
    assert np.allclose(table["model_host_util"], table["host_util"], rtol=1e-6)
    c = table[table["setup"] == "C"]
    assert np.allclose(c["model_engine_util"], c["engine_util"], rtol=1e-6)
    # The simulator, run on the same fitted scenario, agrees with the model.
    assert np.allclose(table["sim_host_util"], table["model_host_util"], rtol=0.03)
    assert np.allclose(c["sim_engine_util"], c["model_engine_util"], rtol=0.03)
    assert np.allclose(table["sim_T"], table["model_T"], rtol=0.1)
    # One hit ratio cannot tell a hit's engine cost from a miss's: no fit, no comparison.
    one = points[(points["setup"] == "A") | (points["cache_mib"] == 10)]
    costs = fitting.fit(one)
    assert costs.engine_hit is None and costs.host_alone == pytest.approx(alone)
    assert set(fitting.compare(one, costs)["setup"]) == {"A"}


def test_a_failed_request_leaves_the_byte_rate_and_page_times_defined():
    from types import SimpleNamespace

    # Two clients, each a dynamic page and one file; client 1's file failed (no end).
    frame = pd.DataFrame({"dynamic": [True, False, True, False], "client": [0, 0, 1, 1]})
    records = pd.DataFrame({"request": [0, 1, 2, 3], "intended_s": [0.0, 0.1, 0.0, 0.2],
                            "total_s": [0.05, 0.4, 0.1, np.nan],
                            "error": ["", "", "", "timeout"], "bytes": [100, 900, 100, 0]})
    exp = SimpleNamespace(time_good_s=1.0, time_tolerable_s=2.0)
    row = appcache._client_side(exp, SimpleNamespace(frame=frame),
                                SimpleNamespace(records=records))
    # The run spans 0 to 0.5 s: the failed request's missing end is not a NaN span.
    assert row["byte_rate"] == pytest.approx(1100 / 0.5)
    assert row["rate"] == pytest.approx(4 / 0.5)
    assert row["error_share"] == 0.25 and not row["compliant"]
    assert row["pages"] == 2 and row["page_mean_s"] == pytest.approx(0.5)
    assert row["good"] == 0.5  # the failed page counts as never done


def test_the_host_balance_weighs_the_cache_s_cost_against_what_its_hits_spare():
    from types import SimpleNamespace

    from offloadlab.cli.appcache import balance_line

    def row(setup, proxy, sessions, mib, us):
        return {"setup": setup, "proxy": proxy, "sessions": sessions, "cache_mib": mib,
                "host_cpu_us": us}
    # The Squid runs of 27 Nov: the proxy costs about what a hit spares the origin.
    points = pd.DataFrame([
        row("A", "none", 50, math.nan, 160.0), row("A", "none", 100, math.nan, 171.0),
        row("B", "squid", 100, 10.0, 175.0), row("C", "squid", 100, 10.0, 67.0),
        row("B", "squid", 100, 1.0, 190.0), row("C", "squid", 50, 10.0, 60.0),
        row("B", "emulated", 100, 10.0, 80.0)])
    result = appcache.Result(SimpleNamespace(operating=10.0), points)
    b = result.host_balance("squid")
    assert (b["sessions"], b["cache_us"], b["spared_us"]) == (100, 108.0, 104.0)
    assert balance_line(b).endswith("so B's host core saturates no later than A's "
                                    "(4 µs per request more)")
    assert result.host_balance("emulated") is None  # no C with the emulated cache
