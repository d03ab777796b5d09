"""The study's logic (calibrate -> predict -> compare -> verdict) on a synthetic testbed
of exact M/G/1 queues with known costs (tests/synthetic_testbed.py): what a perfect
testbed measures, the study must recover and predict. Also the checks of its settings
(StudyConfig). The real testbed's end-to-end run is tests/test_study.py."""

import itertools
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from synthetic_testbed import Costs, SyntheticTestbed, manifest

from offloadlab import model
from offloadlab.documents import CoreTimes
from offloadlab.engine_profile import EngineProfile
from offloadlab.errors import InputError, RunError
from offloadlab.model import answer
from offloadlab.study import compare, floors, judge, measure, pipeline, plan, run

COSTS = Costs()
SIZES = {"c0": [200, 500, 800, 1000], "c3": [150_000, 400_000, 700_000, 1_000_000]}


def _plan() -> plan.Plan:
    loads = tuple(plan.ClassLoad(name, Path("/nonexistent"), manifest(sizes), int(name[1]))
                  for name, sizes in SIZES.items())
    return plan.Plan(loads, ("inline", "engine"), plan.budget("quick"), None, None, None, 1,
                     "synthetic", {name: 0.5 for name in SIZES})


@pytest.fixture(scope="module")
def study():
    testbed = SyntheticTestbed(COSTS)
    found = run.run(_plan(), measure=testbed)
    return testbed, found, compare.tables(found, {})


def test_calibration_recovers_the_known_costs(study):
    testbed, found, _ = study
    for load in found.plan.classes:
        host, _ = testbed.queues(load, "inline")
        overhead, engine = testbed.queues(load, "engine")
        inline = found.fitted.fits[load.name, "inline"]
        offload = found.fitted.fits[load.name, "engine"]
        assert inline.EXp == pytest.approx(host.mean, rel=1e-6)
        assert inline.EXp_m2 == pytest.approx(host.m2, rel=1e-6)
        assert offload.EXo == pytest.approx(overhead.mean, rel=1e-6)
        assert offload.EXc + offload.EXq == pytest.approx(engine.mean, rel=1e-6)
        assert inline.d0 == pytest.approx(COSTS.d0_inline, rel=1e-9)
        assert offload.d0 == pytest.approx(COSTS.d0_offload, rel=1e-9)
    # Every queue is exact M/G/1 without wake-ups: the wake-up fit finds none.
    assert all(m.wakeup.cost == pytest.approx(0, abs=1e-9) for m in found.fitted.models)


def test_the_model_meets_every_target_on_a_perfect_testbed(study):
    _, _, tables = study
    model_rows = tables.accuracy[tables.accuracy["source"] == "model"]
    assert len(model_rows) == 2 * (2 + 3)  # (U_host, T) inline, (U_host, U_engine, T) engine
    assert (model_rows["n"] >= judge.MIN_POINTS).all()
    assert (model_rows["status"] == judge.MET).all(), model_rows[["class", "mode", "why"]]
    # The testbed is the model's own law (utilisation law, P-K), so the round trip is
    # exact: a cost fitted with the wrong spread (as X_q was, shaped with X_c's fixed
    # part inside it) shows here as a delay error of a few per cent.
    assert (model_rows["mape"] <= 1e-9).all(), model_rows[["class", "mode", "metric", "mape"]]
    # Single runs measure no floor (none is stored in the tests' private cache).
    assert tables.accuracy["floor"].isna().all()
    assert (tables.accuracy["floor_source"] == judge.UNMEASURED).all()
    assert (tables.saturation["error"].abs() < 1e-6).all()


def test_the_verdicts_are_the_truths_and_the_testbed_backs_them(study):
    testbed, found, tables = study
    loads = {load.name: load for load in found.plan.classes}
    # The operating point: each class at its share of half the host-alone capacity of
    # the mix, alone, all of it offloaded against none.
    demand = sum(0.5 * testbed.queues(load, "inline")[0].mean for load in loads.values())
    verdicts = tables.verdicts.set_index("class")
    for name, load in loads.items():
        lam = 0.5 * 0.5 / demand
        ratio = testbed.delay(load, "engine", lam) / testbed.delay(load, "inline", lam)
        truth = judge.direction(ratio, ratio)
        v = verdicts.loc[name]
        assert v["rate"] == pytest.approx(lam, rel=1e-6)
        assert v["verdict"] == truth, (name, ratio)
        assert v["measured_delay_ratio"] == pytest.approx(ratio, rel=1e-9)
        assert v["agree"] == "yes"
        # A class that hurts on its own is never recommended for offload.
        if truth == "hurts":
            assert v["f"] == 0
    # The small class pays d0's extra 40 us for little saved; the large one saves most
    # of its host time.
    assert verdicts.loc["c0", "verdict"] == "hurts"
    assert verdicts.loc["c3", "verdict"] == "helps"


def test_the_exported_scenario_gives_the_same_verdicts(study):
    _, found, tables = study
    sc = found.fitted.scenarios["engine"]
    result = model.evaluate(sc)
    for i, name in enumerate(sc.class_names):
        row = tables.verdicts.set_index("class").loc[name]
        assert result.per_class["verdict"][0, i] == row["verdict"]
        assert math.isclose(result.per_class["f"][0, i], row["f"], abs_tol=1e-9)


def test_only_the_extended_models_engine_mode_host_releases_its_answers_in_rounds(study):
    _, found, _ = study
    engine = found.fitted.scenarios["engine"]
    assert engine.host.release == "round" and engine.host_alone.release == "request"
    assert all(sc.host.release == "request" for sc in found.seed.scenarios.values())
    # ... and only its engine is woken by the host's answers as well as the requests.
    assert engine.engine.answers_wake and not engine.host.answers_wake
    assert not any(sc.engine.answers_wake for sc in found.seed.scenarios.values())


def test_a_slower_engine_turns_the_large_class_verdict():
    slow = SyntheticTestbed(Costs(engine_per_byte=0.9e-9))
    found = run.run(_plan(), measure=slow)
    verdicts = compare.tables(found, {}).verdicts.set_index("class")
    assert verdicts.loc["c3", "verdict"] == "hurts"
    assert np.isfinite(verdicts.loc["c3", "measured_delay_ratio"])


class Disturbed:
    """The synthetic testbed with a hypervisor (or, ``by`` "foreign", other processes):
    the runs whose turn in ``steal`` is above 0 lose that share of their cores, and their
    delay reads five times."""

    def __init__(self, steal: tuple[float, ...], by: str = "steal"):
        self.testbed, self.steal, self.calls = SyntheticTestbed(COSTS), itertools.cycle(steal), 0
        self.by = by

    def __call__(self, *args, **kwargs):
        self.calls += 1
        m, share = self.testbed(*args, **kwargs), next(self.steal)
        slowed = replace(m.run, T=5 * m.run.T) if share > 0 else m.run
        return replace(m, run=slowed, **{self.by: share})


def test_a_run_the_hypervisor_disturbed_is_made_again_and_the_clean_one_kept(study):
    _, clean, clean_tables = study
    testbed = Disturbed((0.1, 0.0))  # every run's first try disturbed, its second clean
    found = run.run(_plan(), measure=testbed)
    kept = [m for runs in found.sweeps.values() for m in runs]
    # Each run was made again once; a point's mean carries every repeat of its runs.
    points = [p for key in found.sweeps for p in found.replicates[key]]
    assert all(m.steal == 0 and m.repeats == 1 for p in points for m in p)
    assert all(m.steal == 0 and m.repeats == len(p) for m, p in zip(kept, points, strict=True))
    for key, fitted in found.fitted.fits.items():
        assert fitted.d0 == pytest.approx(clean.fitted.fits[key].d0, rel=1e-9)
    tables = compare.tables(found, {})
    runs = testbed.calls // 2
    assert tables.meta["steal"] == (f"at most 0.0% of the cores' time stolen and 0.0% used "
                                    f"by other processes in a kept run; {runs} runs made "
                                    f"again because more than 2% was")
    assert tables.meta["steal_counts"] == {"worst": 0.0, "foreign": 0.0, "repeated": runs,
                                           "disturbed": 0,
                                           "kept": len(kept) + sum(
                                               len(r) for r in found.calibration.values())
                                           + len(found.saturation)}
    assert not any("hypervisor" in n for n in tables.meta["notes"] + tables.meta["more_notes"])
    assert tables.verdicts["verdict"].tolist() == clean_tables.verdicts["verdict"].tolist()


def test_points_the_generator_fell_behind_at_are_counted_and_the_scored_ones_named(study):
    _, found, tables = study
    assert tables.meta["generator"] == "its send lag was not measured"
    total = sum(len(runs) for runs in found.sweeps.values())
    # Late by a fifth of the mean time between requests everywhere: on plan.
    on_time = {key: [replace(m, lag=0.2 / m.run.rate) for m in runs]
               for key, runs in found.sweeps.items()}
    assert compare.tables(replace(found, sweeps=on_time), {}).meta["generator"] == (
        f"kept to its plan at all {total} sweep points (mean send lag under the mean time "
        "between requests)")
    # One sweep's lightest point (scored) and two heaviest (past 80% busy: not scored)
    # a gap and more late.
    key = next(iter(found.sweeps))
    runs = on_time[key]
    late = {0: 2.0, len(runs) - 2: 1.5, len(runs) - 1: 3.0}
    runs = [replace(m, lag=late[i] / m.run.rate) if i in late else m
            for i, m in enumerate(runs)]
    assert measure.scored(runs).tolist()[0] and not measure.scored(runs)[-2:].any()
    lags = sorted(runs[i].lag for i in late)
    assert compare.tables(replace(found, sweeps={**on_time, key: runs}), {}).meta[
        "generator"] == (f"behind its plan at 3 of {total} sweep points (mean send lag "
                         f"{lags[0] * 1e3:.3g}-{lags[-1] * 1e3:.3g} ms, more than the mean "
                         "time between requests: bursts, not the Poisson arrivals the model "
                         "takes); 1 of them scored")


def test_a_missed_rows_note_names_the_sources_that_missed_it(study):
    _, found, _ = study

    def rows(*statuses):
        return [{"class": "c0", "mode": "engine", "metric": "T", "source": source,
                 "status": status, "why": f"{source} said so"}
                for source, status in zip(("model", "seed_model", "sim"), statuses, strict=True)]

    (note,) = compare._missed(found, rows(judge.MET, judge.MISSED, judge.MISSED))
    assert note.startswith("class c0, engine: T missed by seed_model and sim (target: MAPE")
    assert "model met (model said so)" in note
    assert compare._missed(found, rows(judge.MET, judge.UNDECIDABLE, judge.MET)) == []


def test_no_steal_repeats_keeps_every_run_as_it_came_and_names_the_disturbed():
    testbed = Disturbed((0.3, 0.2, 0.25))
    budget = plan.with_budget_override(plan.budget("quick"), None, steal_repeats=0)
    found = run.run(replace(_plan(), budget=budget), measure=testbed)
    kept = [m for runs in found.calibration.values() for m in runs]
    assert all(m.steal >= 0.2 and m.repeats == 0 for m in kept)
    notes = compare.tables(found, {}).meta["notes"]
    assert "to the hypervisor or to other processes even after 0 repeats (up to 30%)" \
        in notes[0]
    with pytest.raises(InputError, match=r"--steal-repeats -1: give 0"):
        plan.with_budget_override(plan.budget("quick"), None, steal_repeats=-1)


def test_saturation_runs_that_complete_nothing_stop_the_study_as_a_runtime_failure():
    testbed = SyntheticTestbed(COSTS)

    def stalled(the_plan, load, mode, use, rate, **kwargs):
        m = testbed(the_plan, load, mode, use, rate, **kwargs)
        if use == "saturation" and (load.name, mode) == ("c3", "engine"):
            return replace(m, run=replace(m.run, throughput=0.0))
        return m

    with pytest.raises(RunError, match=r"class c3, engine mode: the saturation runs "
                                        r"completed 0, 0, 0 requests/s"):
        run.run(_plan(), measure=stalled)


def test_runs_still_disturbed_after_their_repeats_are_named_first():
    testbed = Disturbed((0.3, 0.2, 0.25))
    found = run.run(_plan(), measure=testbed)
    kept = [m for runs in found.calibration.values() for m in runs]
    assert all(m.steal == 0.2 and m.repeats == found.plan.budget.steal_repeats for m in kept)
    meta = compare.tables(found, {}).meta
    assert meta["steal_counts"]["disturbed"] == meta["steal_counts"]["kept"]
    notes = meta["notes"]
    assert "lost more than 2% of their cores' time to the hypervisor or to other processes " \
           "even after 2 repeats (up to 20%)" in notes[0]


def test_a_run_other_processes_disturbed_is_made_again_and_the_clean_one_kept(study):
    _, clean, _ = study
    testbed = Disturbed((0.1, 0.0), by="foreign")
    found = run.run(_plan(), measure=testbed)
    kept = [m for runs in found.calibration.values() for m in runs]
    assert all(m.foreign == 0 and m.repeats == 1 for m in kept)
    for key, fitted in found.fitted.fits.items():
        assert fitted.d0 == pytest.approx(clean.fitted.fits[key].d0, rel=1e-9)
    assert compare.tables(found, {}).meta["steal_counts"]["repeated"] == testbed.calls // 2


def test_other_processes_work_is_told_from_this_ones():
    # One of the two cores' worth of another process's user time over 1 s of 2 cores.
    before = measure.Foreign(machine_s=10.0, own_s=4.0, at=100.0, cores=2)
    later = measure.Foreign(machine_s=11.5, own_s=4.5, at=101.0, cores=2)
    assert before.share(later) == pytest.approx(0.5)
    # This process's own work (server, load generator) is not another's.
    assert before.share(replace(later, own_s=5.5)) == 0.0


def test_a_process_spinning_beside_a_run_shows_and_this_one_does_not(testbed):
    # Real /proc on a quiet machine (the serial tier): another process spinning shows;
    # this process spinning does not.
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        start = measure.Foreign.now()
        time.sleep(0.6)
        busy = start.share(measure.Foreign.now())
    finally:
        spinner.kill()
        spinner.wait()
    start, deadline = measure.Foreign.now(), time.monotonic() + 0.6
    while time.monotonic() < deadline:
        pass
    ours = start.share(measure.Foreign.now())
    cores = len(os.sched_getaffinity(0))
    assert busy > 0.6 / cores and ours < 0.3 / cores, (busy, ours)


class Logged:
    """The synthetic testbed, keeping the order of its runs: (phase, class, mode, rate)."""

    def __init__(self, testbed=None):
        self.testbed, self.log = testbed or SyntheticTestbed(COSTS), []
        self.replicates = []  # each run's replicate (its arrivals)

    def __call__(self, plan, load, mode, use, rate, **kwargs):
        self.log.append((use, load.name, mode, rate))
        self.replicates.append(kwargs.get("replicate", 0))
        return self.testbed(plan, load, mode, use, rate, **kwargs)


def test_saturation_and_calibration_run_their_pairs_in_interleaved_rounds():
    testbed = Logged()
    the_plan = _plan_with(replicates=2)
    found = run.run(the_plan, measure=testbed)
    pairs = [(load.name, mode) for load in the_plan.classes for mode in the_plan.modes]
    loads = [(load.name, mode) for load in the_plan.loads for mode in the_plan.modes]
    saturation = [(c, m) for use, c, m, _ in testbed.log if use == "saturation"]
    assert saturation == loads * plan.SATURATION_REPEATS
    calibration = [(c, m, rate, k) for (use, c, m, rate), k
                   in zip(testbed.log, testbed.replicates, strict=True) if use == "calibration"]
    shares = the_plan.budget.calibration
    # A round of every pair per share, the whole ladder once per replicate, each
    # replicate on arrivals of its own.
    turns = [(k, share) for k in range(2) for share in shares]
    assert the_plan.budget.calibration_turns == turns
    assert [(c, m) for c, m, _, _ in calibration] == pairs * len(turns)
    for i, (c, m, rate, k) in enumerate(calibration):
        replicate, share = turns[i // len(pairs)]
        capacity = found.saturation[c, m].run.throughput
        assert rate == pytest.approx(share * capacity, rel=1e-12) and k == replicate
    # Each pair keeps its calibration runs in turn order, every one of them.
    for runs in found.calibration.values():
        ladder = [r.run.rate for r in runs[:len(shares)]]
        assert ladder == sorted(ladder) and [r.run.rate for r in runs] == ladder * 2


def test_each_calibration_replicate_runs_just_before_the_sweep_s_round_of_the_same_replicate():
    testbed = Logged()
    the_plan = _plan_with(replicates=3)
    found = run.run(the_plan, measure=testbed)
    phases = [(use, k) for (use, *_), k in zip(testbed.log, testbed.replicates, strict=True)]
    blocks = [key for key, _ in itertools.groupby(phases)]
    # Saturation; then per replicate its calibration ladder, then the sweep's round of
    # it; then the verdicts' pairs, on arrivals of their own.
    assert blocks[:7] == [("saturation", 0), ("calibration", 0), ("validation", 0),
                          ("calibration", 1), ("validation", 1), ("calibration", 2),
                          ("validation", 2)]
    assert {use for use, _ in blocks[7:]} == {"validation"}
    assert min(k for _, k in blocks[7:]) >= the_plan.budget.replicates
    # The final fit saw every calibration run: refitted from them, it is the study's.
    assert all(len(runs) == 3 * len(the_plan.budget.calibration)
               for runs in found.calibration.values())
    operating = run.operating_rates(found.fitted)
    again = run.calibrate(the_plan, found.calibration, rate=operating[plan.MIX])
    for key, f in found.fitted.fits.items():
        assert again.fits[key].host == pytest.approx(f.host, rel=1e-12), key
    # Its scenarios keep the rates the first fit set, where the pairs were measured.
    for (c, _), pairs in found.operating.items():
        assert pairs and {m.run.rate for pair in pairs for m in pair} == {operating[c]}


def test_the_steal_share_is_of_every_core_s_whole_time():
    def core(i: int, busy: float, steal: float) -> CoreTimes:
        return CoreTimes(core=i, user_s=busy, system_s=0.0, idle_s=1.0 - busy - steal,
                         irq_s=0.0, softirq_s=0.0, steal_s=steal)
    assert measure.steal_share((core(0, 0.5, 0.0), core(1, 0.3, 0.1))) == pytest.approx(0.05)
    assert measure.steal_share(()) == 0.0


@pytest.mark.parametrize(("U_host", "engine_core_busy", "U_engine", "bound"), [
    (0.80, 0.99, 0.37, True),    # uring, class 3: the generator held 62% of a full core
    (0.80, 0.99, 0.55, False),   # the engine's own work filled most of it: the server's
    (0.95, 0.99, 0.20, False),   # the host was full too
    (0.70, 0.85, 0.20, False),   # the generator's core had time to spare
    (0.70, 0.95, math.nan, True),  # inline: nothing of the server's on that core
])
def test_a_saturation_run_is_generator_bound_when_the_generator_fills_its_core(
        study, U_host, engine_core_busy, U_engine, bound):
    _, found, _ = study
    m = found.saturation["c3", "engine"]
    cores = (CoreTimes(core=0, user_s=U_host, system_s=0.0, idle_s=1 - U_host, irq_s=0.0,
                       softirq_s=0.0, steal_s=0.0),
             CoreTimes(core=1, user_s=engine_core_busy, system_s=0.0,
                       idle_s=1 - engine_core_busy, irq_s=0.0, softirq_s=0.0, steal_s=0.0))
    m = replace(m, U_host=U_host, U_engine=U_engine, cores=cores)
    assert compare.generator_bound(m, 1) is bound
    assert compare.generator_bound(m, None) is False


@pytest.mark.parametrize(("settings", "fragment"), [
    ({"classes": "7"}, "--classes '7': give size classes 0-4"),
    ({"modes": "engine"}, "--modes 'engine': give inline"),
    ({"budget": "huge"}, "--budget 'huge': use one of quick, standard, thorough"),
    ({"run_length": "soon"}, "--run-length"),
    ({"work": "exp(mean=-1us)"}, "--work"),
    # Two bad flags: the first in the command's order is named.
    ({"modes": "engine", "classes": "7"}, "--classes"),
])
def test_a_study_config_refuses_bad_settings_naming_the_flag(tmp_path, settings, fragment):
    with pytest.raises(InputError, match=re.escape(fragment)):
        pipeline.StudyConfig(tmp_path / "s", **settings)
    assert not (tmp_path / "s").exists()


def test_the_demo_config_is_a_quick_study_of_a_small_and_a_large_class(tmp_path):
    demo = pipeline.StudyConfig.demo(tmp_path)
    assert demo.size_classes() == (0, 3) and demo.mode_names() == ("inline", "engine")
    assert demo.chosen_budget().name == "quick" and demo.mix
    assert demo.handoff_slowdown is not None  # the handoff section runs
    assert demo.work_dist().mean == pytest.approx(100e-6)


def _plan_with(**budget) -> plan.Plan:
    """The synthetic study's plan with some of its budget's settings changed."""
    the_plan = _plan()
    return replace(the_plan, budget=replace(the_plan.budget, **budget))


class Effect:
    """The synthetic testbed whose validation runs read a delay of inline's at the rate,
    ``effect`` times in the offload mode, each run off by a log-normal factor of spread
    ``noise`` (seeded): a verdict's true delay ratio is ``effect``."""

    def __init__(self, effect: float, noise: float, seed: int = 7):
        self.testbed, self.effect, self.noise = SyntheticTestbed(COSTS), effect, noise
        self.rng = np.random.default_rng(seed)

    def __call__(self, plan, load, mode, use, rate, **kwargs):
        m = self.testbed(plan, load, mode, use, rate, **kwargs)
        if use != "validation":
            return m
        T = (self.testbed.delay(load, "inline", rate) * (1 if mode == "inline" else self.effect)
             * math.exp(self.noise * self.rng.standard_normal()))
        return replace(m, run=replace(m.run, T=T), T_lo=0.99 * T, T_hi=1.01 * T)


def test_sweep_points_are_measured_in_interleaved_rounds_of_replicates():
    testbed = Logged()
    found = run.run(_plan_with(replicates=3), measure=testbed)
    runs = [(c, m, rate, turn) for (use, c, m, rate), turn
            in zip(testbed.log, testbed.replicates, strict=True) if use == "validation"]
    operating = run.operating_rates(found.fitted)
    # The first round measures every sweep, each up to the first point past saturation...
    first = [(c, m, p[0].run.rate, 0) for (c, m), points in found.replicates.items()
             for p in points]
    assert runs[:len(first)] == first
    # ... and rounds 2 and 3 repeat exactly those points, every sweep's per round, but
    # not a class's operating point: the paired runs there are its replicates.
    again = [(c, m, rate) for c, m, rate, _ in first
             if c == plan.MIX or rate != operating[c]]
    assert runs[len(first):len(first) + 2 * len(again)] == [
        (c, m, rate, turn) for turn in (1, 2) for c, m, rate in again]
    # The paired runs come last, all at the classes' operating rates.
    paired = runs[len(first) + 2 * len(again):]
    assert len(paired) == 2 * sum(len(p) for p in found.operating.values()) > 0
    assert all(rate == operating[c] for c, _, rate, _ in paired)
    for (c, mode), points in found.replicates.items():
        for point, mean in zip(points, found.sweeps[c, mode], strict=True):
            rate = point[0].run.rate
            if c == plan.MIX or rate != operating[c]:
                assert len(point) == 3
            else:  # one sweep run and one per pair, of every offload mode inline
                pairs = [p for (pc, pm), p in found.operating.items()
                         if pc == c and mode in ("inline", pm)]
                assert len(point) == 1 + sum(len(p) for p in pairs)
            assert all(m.run.rate == rate for m in point)
            assert pytest.approx(mean.run.T, rel=1e-12) == measure.mean_of(point).run.T


def _measured(T: float, U_host: float, host_s: float, **fields) -> measure.Measured:
    m = SyntheticTestbed(COSTS)(None, _plan().classes[0], "engine", "validation", 1000.0)
    return replace(m, run=replace(m.run, T=T, host_s=host_s, requests=1000),
                   U_host=U_host, **fields)


def test_a_point_is_scored_by_its_busiest_core_with_everything_on_it():
    def point(U_host: float, U_engine: float, host_bg: float, engine_bg: float):
        m = _measured(1e-3, U_host, 1e-4, U_engine=U_engine)
        # 1,000 requests/s: a background of 100 us per request holds 10% of the core.
        return replace(m, run=replace(m.run, throughput=1000.0, host_background_s=host_bg,
                                      engine_background_s=engine_bg))

    quiet = point(0.5, 0.35, 10e-6, 250e-6)
    # The engine thread is 35% busy, and with the load generator's 570 us per request
    # its core is 92% busy.
    shared = point(0.5, 0.35, 10e-6, 570e-6)
    # The host core counts its other work too.
    host_side = point(0.75, 0.35, 60e-6, 0.0)
    # Without background (NaN: the thread was not pinned) the threads decide.
    bare = point(0.5, 0.35, math.nan, math.nan)
    busy_host = point(0.85, 0.35, math.nan, math.nan)
    assert measure.core_busy(shared) == pytest.approx(0.92)
    assert measure.core_busy(host_side) == pytest.approx(0.81)
    assert measure.core_busy(bare) == pytest.approx(0.5)
    assert measure.scored([quiet, shared, host_side, bare, busy_host]).tolist() == [
        True, False, False, True, False]


def test_a_points_value_is_the_mean_of_its_replicates():
    def cores(busy: float) -> tuple[CoreTimes, ...]:
        return tuple(CoreTimes(core=i, user_s=busy, system_s=0.1, idle_s=1.0, irq_s=0.0,
                               softirq_s=0.0, steal_s=0.01 * i) for i in (0, 1))

    runs = [_measured(1e-3, 0.30, 20e-6, errors=1, steal=0.01, repeats=0, cores=cores(0.2),
                      latency=np.array([1e-3, 2e-3])),
            _measured(2e-3, 0.40, 30e-6, errors=0, steal=0.03, repeats=2, cores=cores(0.4),
                      latency=np.array([0.5e-3])),
            _measured(1.5e-3, 0.35, 25e-6, errors=2, steal=0.00, repeats=1, cores=cores(0.6),
                      latency=np.array([3e-3]))]
    mean = measure.mean_of(runs)
    assert mean.U_host == pytest.approx(0.35) and pytest.approx(1.5e-3) == mean.run.T
    assert mean.run.host_s == pytest.approx(25e-6) and mean.run.rate == 1000.0
    assert mean.run.requests == 3000 and len(mean.run.sizes) == 3 * len(runs[0].run.sizes)
    # The delay's interval is Student's t interval of the replicates' mean (scipy's).
    from scipy import stats
    low, high = stats.t.interval(0.95, 2, loc=1.5e-3, scale=stats.sem([1e-3, 2e-3, 1.5e-3]))
    assert (mean.T_lo, mean.T_hi) == (pytest.approx(low), pytest.approx(high))
    assert mean.errors == 3 and mean.steal == 0.03 and mean.repeats == 3
    assert mean.latency.tolist() == [0.5e-3, 1e-3, 2e-3, 3e-3]
    assert [c.user_s for c in mean.cores] == [pytest.approx(1.2)] * 2
    assert [c.steal_s for c in mean.cores] == [0.0, pytest.approx(0.03)]
    # One run is its own mean, with its own interval from its batches.
    assert measure.mean_of(runs[:1]) is runs[0]


def _pairs_log(testbed: Logged, found) -> list[tuple[str, str, int]]:
    """The paired runs at the end of a study's log: (class, mode, replicate)."""
    n = 2 * sum(len(p) for p in found.operating.values())
    return [(c, m, turn) for (_, c, m, _), turn
            in zip(testbed.log[-n:], testbed.replicates[-n:], strict=True)]


def test_pairs_alternate_which_mode_goes_first_and_stop_once_the_interval_decides():
    testbed = Logged(Effect(0.8, noise=0.01))
    found = run.run(_plan_with(operating_pairs=10), measure=testbed)
    assert set(found.operating) == {("c0", "engine"), ("c3", "engine")}
    for key, pairs in found.operating.items():
        assert len(pairs) == plan.OPERATING_MIN_PAIRS  # the fewest the interval may use
        assert all(i.run.mode == "inline" and m.run.mode == "engine" for i, m in pairs)
        ratio, low, high, n = measure.operating_ratio(found, *key)
        assert ratio == pytest.approx(0.8, rel=0.02) and n == 3
        assert judge.direction(low, high) == "helps"
    # Each turn runs one pair of each verdict, back to back, on the same arrivals; the
    # mode goes first in every other pair.
    log = _pairs_log(testbed, found)
    budget = found.plan.budget
    for turn in range(3):
        for j, c in enumerate(("c0", "c3")):
            first, second = log[4 * turn + 2 * j:4 * turn + 2 * j + 2]
            assert first[:2] == (c, "inline" if turn % 2 == 0 else "engine")
            assert {first[1], second[1]} == {"inline", "engine"} and second[0] == c
            assert first[2] == second[2] == budget.replicates + turn


def test_pairs_of_an_undecidable_verdict_run_to_the_cap():
    found = run.run(_plan_with(operating_pairs=6), measure=Effect(1.0, noise=0.3))
    for key, pairs in found.operating.items():
        assert len(pairs) == 6
        _, low, high, _ = measure.operating_ratio(found, *key)
        assert judge.direction(low, high) is None
    assert measure.operating_ratio(found, "c0", "uring") == (
        pytest.approx(math.nan, nan_ok=True), 0.0, math.inf, 0)


def test_each_item_pairs_until_it_decides_one_pair_per_turn_up_to_the_cap():
    calls, turns = [], []
    decide_at = {"a": 3, "b": 5, "c": 99}

    def pair(item: str, turn: int) -> tuple:
        calls.append((item, turn))
        return (item, turn)

    found = run.until_decided(list(decide_at), pair,
                              lambda pairs: len(pairs) >= decide_at[pairs[0][0]], 6,
                              lambda turn, left: turns.append((turn, left)))
    assert [len(pairs) for pairs in found] == [3, 5, 6]
    assert found[1] == [("b", t) for t in range(5)]
    assert calls[:4] == [("a", 0), ("b", 0), ("c", 0), ("a", 1)]
    assert turns == [(0, 3), (1, 3), (2, 2), (3, 2), (4, 1), (5, 1)]
    # Decided before the fewest pairs the interval may use is not decided.
    early = run.until_decided(["a"], pair, lambda pairs: True, 6)
    assert len(early[0]) == plan.OPERATING_MIN_PAIRS
    assert run.alternating("uring", 0) == ("inline", "uring")
    assert run.alternating("uring", 1) == ("uring", "inline")


def test_the_plan_counts_every_run_and_the_progress_its_planned_seconds():
    ticks: dict = {}

    def progress(phase: str, done: float, total: float) -> None:
        ticks.setdefault(phase, []).append((done, total))

    testbed = Logged(Effect(1.0, noise=0.3))  # every verdict's pairs run to the cap
    the_plan = _plan_with(replicates=2, operating_pairs=4)
    found = run.run(the_plan, progress, measure=testbed)
    budget = the_plan.budget
    assert all(len(p) == 4 for p in found.operating.values())
    seconds = budget.run_s * len(testbed.log)  # the synthetic study's runs are all 2 s
    # The plan counts a point at the operating rate in every sweep; where the operating
    # rate fell within 5% of a sweep rate it replaced it instead (one run per replicate).
    missing = sum(len(budget.sweep) + 1 - len(p) for p in found.replicates.values())
    assert missing <= len(found.replicates)
    assert seconds <= the_plan.load_seconds() <= seconds + budget.run_s * 2 * missing
    for phase, seen in ticks.items():
        done = [d for d, _ in seen]
        assert done == sorted(done) and all(d <= t for d, t in seen), phase
        assert seen[-1][0] == seen[-1][1] == seen[0][1], phase  # the plan, then done
    assert ticks["verdicts"][-1][1] == budget.operating_seconds(2)
    assert sum(t[-1][1] for t in ticks.values() if t is not ticks["predict"]) == pytest.approx(
        seconds + budget.run_s * missing)


def test_the_standard_budget_plans_the_full_scope_within_40_minutes():
    standard = plan.budget("standard")
    # Classes 0-3; inline, engine and uring; the mix.
    full = standard.load_seconds(4, 3, mix=True)
    per_pair = plan.SATURATION_REPEATS * standard.saturation_s
    sweep = standard.replicates * (len(standard.sweep) + 1)
    # A class's operating point: one sweep run, its other replicates the 24 pairs.
    calibration = standard.replicates * len(standard.calibration)
    expected = (12 * (per_pair + standard.run_s * (calibration + sweep - 2))
                + 3 * (per_pair + standard.run_s * sweep)
                + 4 * 2 * 2 * standard.operating_pairs * standard.run_s)
    assert full == pytest.approx(expected) and full <= 40 * 60
    # The demo (the quick budget: single runs, the three pairs an interval needs) plans
    # what it did with one long run at the operating rate: README.md's 3.7 minutes.
    quick = plan.budget("quick")
    assert (quick.replicates, quick.operating_pairs) == (1, plan.OPERATING_MIN_PAIRS)
    assert quick.load_seconds(2, 2, mix=True) == 192
    assert all(b.replicates == 3 for b in (standard, plan.budget("thorough")))


@pytest.mark.parametrize("replicates", [0, -2])
def test_replicates_below_one_are_refused_naming_the_flag(tmp_path, replicates):
    with pytest.raises(InputError, match=re.escape(f"--replicates {replicates}: measure every "
                                                   "sweep point at least once")):
        pipeline.StudyConfig(tmp_path / "s", replicates=replicates)
    assert not (tmp_path / "s").exists()
    assert pipeline.StudyConfig(tmp_path, budget="standard", replicates=5).chosen_budget(
    ).replicates == 5


@pytest.fixture(scope="module")
def replicated():
    """The synthetic study, with the mix, in three replicates, its delays off by 10%
    (log-normal) per run, its utilisations exact."""
    sizes = [*itertools.chain(*SIZES.values())]
    mixed = plan.ClassLoad(plan.MIX, Path("/nonexistent"), manifest(sizes), None)
    the_plan = replace(_plan_with(replicates=3, operating_pairs=4), mix=mixed)
    return run.run(the_plan, measure=Effect(1.0, noise=0.1))


def test_a_rows_floor_comes_from_its_points_replicates(replicated):
    own, single = floors.replicate_floors(replicated), floors.single_run_floors(replicated)
    assert set(own) == set(single) == {
        (c, m, metric) for c in ("c0", "c3", plan.MIX) for m in ("inline", "engine")
        for metric in ("U_host", "T", *(("U_engine",) if m == "engine" else ()))}
    for (c, _, metric), floor in own.items():
        if metric != "T":
            # Exact utilisations.
            assert floor == pytest.approx(0, abs=1e-12) == single[c, _, metric]
        elif c == plan.MIX:  # every point three replicates: the mean's floor is 1/sqrt(3)
            assert single[c, _, metric] == pytest.approx(floor * math.sqrt(3), rel=1e-12)
    # A single run's floor is E|error| of a 10% log-normal spread: sqrt(2/pi) 10%, within
    # about 2.5 standard errors of the six rows' pooled estimate.
    T = [f for (_, _, metric), f in single.items() if metric == "T"]
    assert np.mean(T) == pytest.approx(math.sqrt(2 / math.pi) * 0.1, rel=0.2)


def test_floors_are_stored_and_read_back_for_studies_of_single_runs(replicated, study,
                                                                    tmp_path):
    file = tmp_path / "cache" / "offloadlab" / "floors.json"
    floors.store(replicated, file)
    single = floors.single_run_floors(replicated)
    seed = plan.SEED_FILESETS
    kept = floors.stored(replicated.plan.budget.run_s, seed, file)
    assert {k: f for k, (f, _) in kept.items()} == pytest.approx(single)
    assert all(s.startswith("replicates of ") and s.endswith(f" on {platform.node()}")
               for _, s in kept.values())
    # The quick study (single runs, the same 2 s; no mix) reads them, with their date.
    quick = study[1]
    assert quick.plan.budget.replicates == 1
    read = floors.for_study(quick, file)
    assert read == {key: kept[key] for key in read} and len(read) == len(kept) - 5
    # ... and stores nothing; another run length finds none.
    floors.store(quick, tmp_path / "none.json")
    assert not (tmp_path / "none.json").exists()
    assert floors.stored(5.0, seed, file) == {}
    # Another workload (a trace's classes share the names c0-c4) finds none either.
    assert floors.stored(2.0, "trace /logs/site.log", file) == {}
    traced = replace(quick, plan=replace(quick.plan, floors_key="trace /logs/site.log"))
    assert all(s == "unmeasured" for _, s in floors.for_study(traced, file).values())
    # A study with replicates measures its own.
    assert floors.for_study(replicated, file) == {
        k: (f, "replicates") for k, f in floors.replicate_floors(replicated).items()}
    # Storing again replaces the same rows and keeps those of other run lengths.
    longer = replace(replicated, plan=replace(replicated.plan, budget=replace(
        replicated.plan.budget, run_s=5.0)))
    floors.store(longer, file)
    floors.store(replicated, file)
    rows = json.loads(file.read_text())["floors"]
    assert len(rows) == 2 * len(single)
    assert {r["run_s"] for r in rows} == {2.0, 5.0} and {r["workload"] for r in rows} == {seed}
    # A file written before floors were kept per workload holds seed 000's.
    for r in rows:
        del r["workload"]
    file.write_text(json.dumps({"floors": rows}))
    assert {k: f for k, (f, _) in floors.stored(2.0, seed, file).items()} == pytest.approx(
        single)


def test_without_a_floors_file_a_study_of_single_runs_has_its_floors_unmeasured(study,
                                                                                 tmp_path):
    found = floors.for_study(study[1], tmp_path / "missing.json")
    assert found and all(math.isnan(f) and s == "unmeasured" for f, s in found.values())


@pytest.mark.parametrize("text", ["not json", '{"floors": [{"class": "c0"}]}', "[1, 2]",
                                  '{"floors": 3}', '{"floors": [{"class": "c0", "mode": '
                                  '"inline", "metric": "T", "run_s": 2, "floor": "high", '
                                  '"replicates": 3, "date": "d", "host": "h"}]}'])
def test_an_unreadable_floors_file_warns_and_counts_as_unmeasured(study, replicated, tmp_path,
                                                                  text):
    file = tmp_path / "floors.json"
    file.write_text(text)
    with pytest.warns(UserWarning, match=re.escape(f"{file}: unreadable floors file")):
        found = floors.for_study(study[1], file)
    assert all(math.isnan(f) and s == "unmeasured" for f, s in found.values())
    # The next study with replicates writes it anew.
    with pytest.warns(UserWarning, match="unreadable floors file"):
        floors.store(replicated, file)
    assert floors.stored(2.0, plan.SEED_FILESETS, file)


def test_the_floors_file_lives_in_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert floors.path() == tmp_path / "xdg" / "offloadlab" / "floors.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert floors.path() == tmp_path / "home" / ".cache" / "offloadlab" / "floors.json"


def test_the_bottom_line_answers_at_the_rate_asked(study):
    """The bottom line sits at the exported scenario's rate, or at the plan's (--rate),
    the classes keeping their shares of it; it is model.answer on that scenario."""
    _, found, tables = study
    sc = found.fitted.scenarios["engine"]
    assert tables.bottom_line["load"].tolist() == ["c0", "c3", "mix"]
    assert tables.bottom_line["rate"].iloc[-1] == pytest.approx(sc.rate)
    moved = compare.bottom_line(replace(found, plan=replace(found.plan, rate=1000.0)))
    assert sum(r["rate"] for r in moved[:-1]) == pytest.approx(1000.0)
    assert moved[-1]["rate"] == pytest.approx(1000.0)
    assert moved[-1]["break_even_speed"] == pytest.approx(
        answer.break_even_speed(answer._auto(sc), EngineProfile(), 1000.0))


def test_the_break_even_range_spans_the_saturation_error_the_study_measured(study):
    """A load's capacity error is the larger saturation error of its server-bound runs,
    host alone and offloaded, as the saturation table gives them; the break-even range
    is the model's over it."""
    _, exact, _ = study
    # The synthetic testbed is the model's own law; make its c3 saturation runs miss the
    # model by +10 % (host alone) and -4 % (engine), as a real one would.
    measured = {**exact.saturation}
    for mode, factor in (("inline", 1.1), ("engine", 0.96)):
        m = measured["c3", mode]
        measured["c3", mode] = replace(m, run=replace(m.run, throughput=m.run.throughput
                                                      * factor))
    found = replace(exact, saturation=measured)
    sat = compare.tables(found, {}).saturation.set_index(["class", "mode"])
    assert compare.capacity_error(found, "c3", "engine") == pytest.approx(1 - 1 / 1.1)
    for r in compare.bottom_line(found):
        rows = sat.loc[[(r["load"], m) for m in ("inline", r["mode"])
                        if (r["load"], m) in sat.index]]
        # No server-bound saturation run (the mix here has none): no error known, 0.
        assert r["capacity_error"] == pytest.approx(
            rows["error"][~rows["generator_bound"]].abs().max() if len(rows) else 0.0)
        sc = found.fitted.scenarios[r["mode"]]
        alone = (answer._auto(sc) if r["load"] == "mix"
                 else answer._alone(sc, sc.class_names.index(r["load"])))
        assert (r["break_even_low"], r["break_even_high"]) == pytest.approx(
            answer.break_even_range(alone, EngineProfile(), r["rate"], r["capacity_error"]))
        assert r["break_even_low"] <= r["break_even_speed"] <= r["break_even_high"]


def test_the_bottom_line_of_an_emulated_engine_gives_its_speed_against_a_host_core(study):
    """With --engine-speed 0.5 the fitted costs are the emulated engine's own: the answer
    is solved against it, and an engine r times as fast as it is 0.5 r host cores'."""
    _, found, _ = study
    own = compare.bottom_line(found)
    half = compare.bottom_line(replace(found, plan=replace(
        found.plan, engine=EngineProfile("half a host core", speed=0.5))))
    for a, b in zip(own, half, strict=True):
        for key in ("break_even_speed", "break_even_low", "break_even_high"):
            assert b[key] == pytest.approx(0.5 * a[key])
        assert b["pays_from"] == pytest.approx(a["pays_from"], nan_ok=True)
        assert b["host_cores_saved"] == pytest.approx(a["host_cores_saved"])
