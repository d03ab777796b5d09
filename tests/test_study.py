"""``offload study`` end to end on the real testbed (short runs): its outputs, and bad
input. Each study starts and stops its servers itself; every run is
bounded by the budget's run length."""

import io
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from study_samples import study_tables
from typer.testing import CliRunner

from offloadlab import model, scenario
from offloadlab.cli import app
from offloadlab.cli import study as cli_study
from offloadlab.engine_profile import EngineProfile
from offloadlab.model import answer
from offloadlab.study import compare, judge, measure, plan
from offloadlab.study_tables import COLUMNS
from offloadlab.workload import fileset
from offloadlab.workload.specs import FileSetSpec

runner = CliRunner()
# A small and a large class. Not class 3: on 2 cores the load generator's receive copies
# of its 100 KiB-1 MiB bodies share the engine's core, and its engine-mode capacity moves
# 8-14% between runs, a limit of the machine, not of the study (docs/study.md).
# Three of the quick budget's eight sweep rates: the assertions below need the phases and
# their tables, not a dense curve (2 min of load fell to 1.5; docs/design.md, test tiers).
# No runs made again for the hypervisor's stalls (tests/test_study_logic.py checks them):
# on a noisy day they were 20 of 66 runs.
ARGS = ["study", "--classes", "0,2", "--modes", "inline,engine", "--run-length", "1s",
        "--sweep-points", "3", "--steal-repeats", "0"]


@pytest.fixture(scope="module")
def real_study(tmp_path_factory, testbed):
    """One real study: its folder and what it printed. Whether a re-run agrees is
    bench/study_stability.py's question (rates on this shared machine drift between runs
    minutes apart); the study's logic is checked exactly in tests/test_study_logic.py."""
    out = tmp_path_factory.mktemp("study")
    result = runner.invoke(app, [*ARGS, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_sweep_points_keep_the_lightest_and_heaviest_rates_and_spread_the_rest():
    quick = plan.budget("quick")
    assert quick.sweep == (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 1.0)
    assert plan.with_budget_override(quick, None, 3).sweep == (0.1, 0.7, 1.0)
    assert plan.with_budget_override(quick, 1.0, 2).sweep == (0.1, 1.0)
    assert plan.with_budget_override(quick, None, 8) == quick
    assert plan.with_budget_override(quick, 1.0, 4).run_s == 1.0


def test_capacity_is_the_median_window_rate_so_a_stall_moves_it_little():
    # 2 s of completions at 1,000/s with nothing from 0.8 to 1.2 s.
    done = np.arange(0.0005, 2.0, 0.001)
    done = done[(done < 0.8) | (done >= 1.2)]
    records = pd.DataFrame({"intended_s": done - 0.0002, "total_s": 0.0002, "error": ""})
    assert len(done) / 2.0 == pytest.approx(800)           # the mean rate
    assert measure.capacity(records) == pytest.approx(1000)
    short = records[records["intended_s"] < 0.3]
    assert math.isnan(measure.capacity(short))


def test_a_study_writes_its_report_results_scenarios_and_summary(real_study):
    out, text = real_study
    assert (out / "report.html").stat().st_size > 0
    assert len(list((out / "figures").glob("*.png"))) >= 5
    assert "Does offload help?" in text and str(out / "report.html") in text
    # The first thing printed after the run: how many verdicts the testbed decided.
    first = re.search(r"The testbed confirmed \d+ of \d+ verdicts, contradicted \d+ and "
                      r"could not decide \d+\.", text)
    assert first and first.start() < text.index("Does offload help?")
    assert "hypervisor: at most" in text
    assert re.search(r"load\s+generator:\s+(kept\s+to\s+its\s+plan\s+at\s+all\s+\d+|"
                     r"behind\s+its\s+plan\s+at\s+\d+\s+of\s+\d+)\s+sweep\s+points", text)
    frame = pd.read_parquet(out / "results.parquet")
    assert set(frame["source"]) == {"model", "seed_model", "sim", "testbed"}
    assert set(frame["class"]) == {"c0", "c2", "mix"}
    assert set(frame["mode"]) == {"inline", "engine"}
    # The shared schema: host-alone columns on inline rows, offload columns on the others.
    inline = frame[frame["mode"] == "inline"]
    assert inline["U_noe"].notna().all() and inline["U_cpu"].isna().all()
    engine = frame[(frame["mode"] == "engine") & (frame["source"] == "testbed")]
    assert (engine["U_oe"] > 0).all() and engine["U_noe"].isna().all()
    # The engine timed each request's trip through the host: at least the host's own
    # work (100 us of application work on average), and nowhere near a second.
    assert ((engine["host_trip"] > 50e-6) & (engine["host_trip"] < 0.5)).all()
    assert inline["host_trip"].isna().all()
    # The generator's send lag of each open-loop run: the plan's start times are kept to
    # within a second at these light rates; saturation runs have no plan to lag.
    testbed = frame[frame["source"] == "testbed"]
    swept = testbed[testbed["use"] != "saturation"]
    assert ((swept["lag"] >= 0) & (swept["lag"] <= swept["lag_p99"])
            & (swept["lag_p99"] < 1.0)).all()
    assert frame.loc[frame["source"] != "testbed", "lag"].isna().all()
    summary = json.loads((out / "summary.json").read_text())
    # The machine line says whether idle cores polled during the runs, or why not.
    assert re.search(r"idle cores (poll|halt) \(", summary["meta"]["machine"])
    assert {(v["class"], v["mode"]) for v in summary["verdicts"]} == {("c0", "engine"),
                                                                      ("c2", "engine")}
    assert set(summary["accuracy"][0]) == set(COLUMNS["accuracy"])
    # Each run's steal was read from the server's core times (0 on bare metal), and
    # other processes' work from /proc/stat.
    assert re.fullmatch(r"at most \d+\.\d% of the cores' time stolen and \d+\.\d% used by "
                        r"other processes in a kept run; \d+ runs? made again because more "
                        r"than 2% was", summary["meta"]["steal"])
    # The handoff experiment ran on the smallest class, every policy three times.
    handoff = summary["handoff"]
    assert summary["meta"]["handoff"]["size_class"] == 0
    assert [r["policy"] for r in handoff["summary"]] == [
        "inline", "handoff:N-N-FCFS", "handoff:P-N-FCFS", "handoff:P-L-FCFS",
        "handoff:P-L-T4"]
    assert all(r["runs"] == 3 and r["errors"] == 0 for r in handoff["summary"])
    assert len(handoff["checks"]) == 2
    assert (out / "figures" / "handoff-testbed.png").is_file()


def test_a_study_on_seed_000s_file_sets_sets_the_seeds_tables_beside_ours(real_study):
    out, text = real_study
    part = json.loads((out / "summary.json").read_text())["toe_2009"]
    assert part["host_profile"] == "modern"
    rows = {r["class"]: r for r in part["rows"]}
    assert set(rows) == {"c0", "c2"} and {r["mode"] for r in rows.values()} == {"engine"}
    # Ours from the saturation table, the seed's from its Table 4-1 (class 2 only).
    sat = {(s["class"], s["mode"]): s["measured"]
           for s in json.loads((out / "summary.json").read_text())["saturation"]}
    assert rows["c2"]["ratio_saturation"] == pytest.approx(sat["c2", "engine"]
                                                           / sat["c2", "inline"])
    assert rows["c2"]["seed_inline_saturation"] == 300
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Seed 000&#x27;s experiment: saturation (its Table 4-1)" in report
    assert "Seed 000's experiment: offload / inline" in " ".join(text.split())  # wrapped


def test_the_bottom_line_is_the_model_on_the_exported_scenario(real_study):
    out, text = real_study
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["bottom_line"]
    assert [(r["mode"], r["load"]) for r in rows] == [("engine", "c0"), ("engine", "c2"),
                                                      ("engine", "mix")]
    assert "Bottom line with the engine mode's engine" in text
    # Anyone can ask the exported scenario the same question and get the same answer.
    # (--capacity-error: the study's own for each load, from its saturation runs.)
    again = answer.answers(scenario.load(out / "scenario-engine.toml"), EngineProfile(),
                           errors={r["load"]: r["capacity_error"] for r in rows})
    for row, solved in zip(rows, again, strict=True):
        assert row["load"] == solved.load and row["pays"] == solved.pays
        assert row["host_cores_saved"] == pytest.approx(solved.host_cores_saved)
        for key in ("break_even_speed", "break_even_low", "break_even_high"):
            speed, expected = row[key], getattr(solved, key)
            assert (speed == "inf") if expected == math.inf else (
                speed == pytest.approx(expected))


def test_the_fitted_scenario_is_reusable_and_matches_the_costs(real_study):
    out, _ = real_study
    sc = scenario.load(out / "scenario-engine.toml")
    summary = json.loads((out / "summary.json").read_text())
    costs = {(c["class"], c["mode"]): c for c in summary["costs"]}
    for cls in sc.classes:
        base, off = costs[cls.name, "inline"], costs[cls.name, "engine"]
        assert cls.app.mean == pytest.approx(base["EXa"])
        assert cls.host_proto.mean == pytest.approx(base["EXp"])
        assert cls.host_overhead.mean == pytest.approx(off["EXo"])
        assert (cls.engine_overhead.mean + cls.engine_proto.mean
                == pytest.approx(off["EXc"] + off["EXq"]))
        # Application work is about the configured exp(mean=100us), measured.
        assert 90e-6 < cls.app.mean < 115e-6
        # Once the host's wake-ups are counted apart (about 22 µs each), what it pays per
        # request to talk to the engine is 1-2 µs, and noise can fit it at the fit's
        # floor, 0 (c2 in one CI run); it stays well below the protocol work it replaces.
        assert 0 <= cls.host_overhead.mean < cls.host_proto.mean
        # The other work on each core, per request and as a steady share, is the fit's.
        assert sc.engine.background_of(cls.name).mean == pytest.approx(off["engine_bg"])
        assert sc.host.background_of(cls.name).mean == pytest.approx(off["host_bg"])
    shares = {(m["mode"], m["side"]): m["background_share"] for m in summary["cost_model"]}
    assert sc.engine.background_share == pytest.approx(shares["engine", "engine"])
    assert sc.host.background_share == pytest.approx(shares["engine", "host_overhead"])
    assert sc.host_alone.background_share == pytest.approx(shares["inline", "host_proto"])
    assert 0 <= sc.engine.background_share < 0.5
    # The testbed's stages run one after the other: the delay is their sum.
    assert sc.options.system_delay == "sum"
    assert model.evaluate(sc).rows()  # the model solves it as written


def test_the_exported_scenario_gives_the_studys_verdicts_and_fractions(real_study):
    out, _ = real_study
    summary = json.loads((out / "summary.json").read_text())
    result = runner.invoke(app, ["model", str(out / "scenario-engine.toml"), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["class"]: r for r in json.loads(result.stdout)["rows"] if r["class"] != "all"}
    for v in summary["verdicts"]:
        row = rows[v["class"]]
        assert row["verdict"] == v["verdict"] and row["f"] == pytest.approx(v["f"]), v
        assert row["lam"] == pytest.approx(v["rate"])
        assert v["verdict"] != "hurts" or v["f"] == 0
        # The judge's rule on the row's own numbers; summary.json writes NaN as null and
        # an infinite bound as "inf".
        values = [math.nan if v[k] is None else float(v[k])
                  for k in ("measured_delay_ratio", "delay_low", "delay_high",
                            "saturation_ratio", "measured_saturation_ratio")]
        assert v["agree"] == judge.agreement(v["verdict"], *values)[0], v
        # Paired runs at the operating rate, from the minimum up to the budget's cap;
        # none where a sweep saturated below that rate.
        assert (v["pairs"] == 0 if math.isnan(values[0]) else
                plan.OPERATING_MIN_PAIRS <= v["pairs"] <= plan.budget("quick").operating_pairs)
    counts = summary["meta"]["agreement_counts"]
    assert sum(counts.values()) == len(summary["verdicts"])
    assert counts["yes"] == sum(v["agree"] == "yes" for v in summary["verdicts"])


@pytest.mark.parametrize(
    ("label", "ratio", "low", "high", "model_sat", "measured_sat", "agree"), [
        ("helps", 0.80, 0.76, 0.84, 1.5, 1.4, "yes"),
        ("hurts", 1.30, 1.24, 1.37, 0.9, 0.8, "yes"),
        ("neutral", 1.03, 0.98, 1.04, 1.0, 1.02, "yes"),
        ("neutral", 1.33, 0.91, 1.94, 1.0, 1.0, "inconclusive"),  # wide: agrees with nothing
        # A missing measured capacity decides nothing (it used to count as no contradiction).
        ("helps", 0.80, 0.76, 0.84, 1.5, math.nan, "inconclusive"),
        ("helps", 0.80, 0.0, math.inf, 1.5, 1.4, "inconclusive"),  # an unknown interval
        ("helps", 1.20, 1.14, 1.26, 1.5, 1.4, "no"),
        ("helps", 0.80, 0.76, 0.84, 1.5, 0.7, "no"),  # capacity measured the other way
        # ×0.912 ±14.6% (a full study's c0 in uring, 27 Nov 2026): the interval crosses
        # the band's edge, so it neither confirms nor contradicts any verdict.
        ("helps", 0.912, 0.788, 1.055, 1.14, 1.08, "inconclusive"),
        ("hurts", 0.912, 0.788, 1.055, 0.9, 0.9, "inconclusive"),
        ("neutral", 0.912, 0.788, 1.055, 1.0, 1.0, "inconclusive"),
        ("helps", 1.00, 0.86, 1.16, 1.14, 1.08, "inconclusive"),
        # A tight interval below the band contradicts neutral; a wide one beyond the band
        # (a hurts at ×2.15 ±38%, 29 Nov 2026) confirms its side however wide it is.
        ("neutral", 0.91, 0.89, 0.93, 1.0, 1.0, "no"),
        ("hurts", 2.15, 1.47, 3.14, 0.7, 0.63, "yes"),
        # A sweep saturated below the rate: the saturation ratios decide.
        ("helps", math.nan, math.nan, math.nan, 1.5, 1.4, "yes"),
        ("hurts", math.nan, math.nan, math.nan, 0.7, 1.0, "inconclusive"),
        ("hurts", math.nan, math.nan, math.nan, 0.7, 1.3, "no"),
    ])
def test_agreement_needs_the_whole_interval_on_the_verdicts_side_of_the_band(
        label, ratio, low, high, model_sat, measured_sat, agree):
    assert judge.agreement(label, ratio, low, high, model_sat, measured_sat)[0] == agree


def test_the_model_tracks_measured_host_utilisation_and_capacity(real_study):
    """Loose bounds (the machine is shared and noisy): they catch a broken fit, a unit
    slip or a wrong utilisation law, not the accuracy the report scores."""
    summary = json.loads((real_study[0] / "summary.json").read_text())
    # Runs the hypervisor still stole more than 2% from after their repeats read low
    # capacities (38% stolen in one study): then the study must say so, first.
    disturbed = summary["meta"]["steal_counts"]["disturbed"] > 0
    assert not disturbed or ("to the hypervisor or to other processes even after"
                             in summary["meta"]["notes"][0])
    host = [a for a in summary["accuracy"] if a["metric"] == "U_host" and a["source"] == "model"]
    assert len(host) == 6 and (disturbed or all(a["mape"] < 0.25 for a in host)), host
    for s in summary["saturation"]:
        assert disturbed or abs(s["error"]) < 0.5, s
        # A unit check (per minute against per second), not a rate check: the
        # connections' mean rate over a 1 s run and the capacity (median window rate)
        # differ by a stall's share; 5.9% in one CI run.
        assert s["conn_per_min"] == pytest.approx(60 * s["measured"], rel=0.2)


@pytest.mark.parametrize("args, fragment", [
    (["--modes", "engine"], "give inline"),
    (["--modes", "inline,nic"], "give inline"),
    (["--modes", "inline,handoff"], "give inline"),
    (["--classes", "7"], "size classes 0-4"),
    (["--budget", "huge"], "quick, standard, thorough"),
    (["--work", "exp(mean=-1us)"], "--work"),
    (["--run-length", "soon"], "--run-length"),
    (["--sweep-points", "1"], "--sweep-points 1"),
    (["--sweep-points", "9"], "keep 2 to 8"),
    (["--rate", "0"], "--rate 0.0: give the total requests/s"),
    (["--rate", "nan"], "--rate nan"),
])
def test_bad_input_is_refused_before_any_run(tmp_path, args, fragment):
    result = runner.invoke(app, ["study", "--out", str(tmp_path / "s"), *args])
    assert result.exit_code == 2
    assert fragment in " ".join(result.output.split())
    assert not (tmp_path / "s").exists()


def test_a_fileset_without_the_class_is_refused(tmp_path):
    fs = tmp_path / "fs"
    result = runner.invoke(app, ["workload", "fileset", "--preset", "toe-2009", "--out", str(fs)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["study", "--fileset", str(fs / "toe-2009-c0"), "--classes",
                                 "3", "--out", str(tmp_path / "s")])
    # The message names the path, so where rich wraps it depends on the path's length.
    assert result.exit_code == 2 and "has no files of class 3" in " ".join(result.output.split())


def test_the_sweep_measures_the_operating_rate_in_place_of_a_point_near_it():
    from offloadlab.study.run import sweep_rates
    assert sweep_rates((0.1, 0.5, 0.9), 1000.0, 300.0) == [100.0, 300.0, 500.0, 900.0]
    assert sweep_rates((0.1, 0.5, 0.9), 1000.0, 490.0) == [100.0, 490.0, 900.0]


def test_budgets_plan_their_load():
    quick = plan.budget("quick")
    # Per class and mode: three saturation runs, 3 calibration and 8 sweep runs, and one
    # at the operating rate; per class, three pairs of runs there (inline, engine).
    per = 3 * 2 + 2 * (3 + 8 + 1)
    pairs = 2 * 3 * 2 * 2
    assert quick.load_seconds(2, 2) == 4 * per + pairs
    assert quick.load_seconds(2, 2, mix=True) == 4 * per + pairs + 2 * (3 * 2 + 2 * (8 + 1))
    assert plan.with_budget_override(quick, 1.0).run_s == 1.0
    assert all(b.sweep == tuple(sorted(b.sweep)) for b in plan.BUDGETS.values())
    assert math.isclose(max(plan.BUDGETS["standard"].sweep), 1.1)


def test_the_mix_is_checked_against_the_multi_class_model(real_study):
    out, _ = real_study
    summary = json.loads((out / "summary.json").read_text())
    costs = {(c["class"], c["mode"]): c for c in summary["costs"]}
    # Seed 000's separate sets are mixed in equal shares: the mix's costs are means.
    for field in ("EXa", "EXp"):
        assert costs["mix", "inline"][field] == pytest.approx(
            (costs["c0", "inline"][field] + costs["c2", "inline"][field]) / 2)
    sat = {(s["class"], s["mode"]): s for s in summary["saturation"]}
    demand = (1 / sat["c0", "inline"]["model"] + 1 / sat["c2", "inline"]["model"]) / 2
    assert sat["mix", "inline"]["model"] == pytest.approx(1 / demand)
    frame = pd.read_parquet(out / "results.parquet")
    mixed = frame[(frame["class"] == "mix") & (frame["source"] == "testbed")]
    # Per mode: the three sweep rates, and the operating rate unless it replaced one.
    assert len(mixed) >= 3 * 2 and (mixed["errors"] == 0).all()


def test_mixing_one_file_set_keeps_its_popularity(tmp_path):
    fs = tmp_path / "fs"
    fileset.materialise(fileset.generate(FileSetSpec(name="site", n_files=300,
                                                     max_bytes=200_000, seed=5)), fs)
    loads = plan.folder_classes(fs, (0, 1, 2))
    load, shares = plan.mix(loads)
    manifest = loads[0].manifest
    chosen = manifest[manifest["class"].isin([0, 1, 2])]
    assert set(load.manifest["path"]) == set(chosen["path"])
    for c, name in enumerate(("c0", "c1", "c2")):
        expected = chosen.loc[chosen["class"] == c, "probability"].sum() / chosen[
            "probability"].sum()
        assert shares[name] == pytest.approx(expected)
    assert load.root == fs and load.size_class is None


def test_the_note_on_an_undecided_verdict_says_why():
    row = {"class": "c0", "mode": "uring", "verdict": "helps", "rate": 961.0,
           "measured_saturation_ratio": 1.08, "saturation_ratio": 1.14, "pairs": 1,
           "client_bound": False, "agree": "inconclusive"}
    crossing = compare._verdict_note({**row, "measured_delay_ratio": 0.912,
                                      "delay_low": 0.788, "delay_high": 1.055})
    assert "95% interval ×0.79–×1.05, 1 pair" in crossing
    assert "does not lie wholly on one side of ±5%" in crossing
    assert "cannot decide the verdict 'helps'" in crossing
    saturated = compare._verdict_note({**row, "measured_delay_ratio": math.nan,
                                       "delay_low": math.nan, "delay_high": math.nan,
                                       "pairs": 0, "measured_saturation_ratio": 1.02})
    assert "no stable delay measured at 961 req/s" in saturated
    assert "a sweep saturated below the rate" in saturated
    contradicted = compare._verdict_note({**row, "agree": "no", "measured_delay_ratio": 1.2,
                                          "delay_low": 1.1, "delay_high": 1.3})
    assert "contradicts the verdict 'helps'" in contradicted and "shows hurts" in contradicted


def test_the_printed_tables_show_each_rows_outcome_and_each_verdicts_interval():
    tables = study_tables()
    console = Console(file=io.StringIO(), width=300, record=True)
    console.print(cli_study.verdict_table(tables))
    console.print(cli_study.accuracy_table(tables))
    text = console.export_text()
    lines = text.splitlines()
    # c2 inline's host utilisation: the sample's floor above its target.
    row = next(x for x in lines if "c2" in x and "inline" in x and "U_host" in x)
    assert "6.0% (replicates)" in row and "undecidable" in row
    assert any("c3" in x and "engine" in x and " T " in x and "missed" in x for x in lines)
    v = tables.verdicts.iloc[0]
    assert f"{v.measured_delay_ratio:.2f} ({v.delay_low:.2f}–{v.delay_high:.2f})" in text
