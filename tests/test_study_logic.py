"""The study's logic (calibrate -> predict -> compare -> verdict) on a synthetic testbed
of exact M/G/1 queues with known costs (tests/synthetic_testbed.py): what a perfect
testbed measures, the study must recover and predict. Also the checks of its settings
(StudyConfig). The real testbed's end-to-end run is tests/test_study.py."""

import itertools
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from synthetic_testbed import Costs, SyntheticTestbed, manifest

from offloadlab import model
from offloadlab.documents import CoreTimes
from offloadlab.errors import InputError
from offloadlab.study import compare, judge, measure, pipeline, plan, run

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
    # Straight-line utilisation has no noise; the delay's curvature is a small floor.
    assert (tables.accuracy.loc[tables.accuracy["metric"] != "T", "floor"] < 1e-9).all()
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
    """The synthetic testbed with a hypervisor: the runs whose turn in ``steal`` is
    above 0 lose that share of their cores, and their delay reads five times."""

    def __init__(self, steal: tuple[float, ...]):
        self.testbed, self.steal, self.calls = SyntheticTestbed(COSTS), itertools.cycle(steal), 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        m, share = self.testbed(*args, **kwargs), next(self.steal)
        slowed = replace(m.run, T=5 * m.run.T) if share > 0 else m.run
        return replace(m, run=slowed, steal=share)


def test_a_run_the_hypervisor_disturbed_is_made_again_and_the_clean_one_kept(study):
    _, clean, clean_tables = study
    testbed = Disturbed((0.1, 0.0))  # every run's first try disturbed, its second clean
    found = run.run(_plan(), measure=testbed)
    kept = [m for runs in found.sweeps.values() for m in runs]
    assert all(m.steal == 0 and m.repeats == 1 for m in kept)
    for key, fitted in found.fitted.fits.items():
        assert fitted.d0 == pytest.approx(clean.fitted.fits[key].d0, rel=1e-9)
    tables = compare.tables(found, {})
    runs = testbed.calls // 2
    assert tables.meta["steal"] == (f"at most 0.0% of the cores' time stolen in a kept run; "
                                    f"{runs} runs made again because more than 2% was")
    assert tables.meta["steal_counts"] == {"worst": 0.0, "repeated": runs, "disturbed": 0,
                                           "kept": len(kept) + sum(
                                               len(r) for r in found.calibration.values())
                                           + len(found.saturation)}
    assert not any("hypervisor" in n for n in tables.meta["notes"] + tables.meta["more_notes"])
    assert tables.verdicts["verdict"].tolist() == clean_tables.verdicts["verdict"].tolist()


def test_runs_still_disturbed_after_their_repeats_are_named_first():
    testbed = Disturbed((0.3, 0.2, 0.25))
    found = run.run(_plan(), measure=testbed)
    kept = [m for runs in found.calibration.values() for m in runs]
    assert all(m.steal == 0.2 and m.repeats == plan.STEAL_REPEATS for m in kept)
    meta = compare.tables(found, {}).meta
    assert meta["steal_counts"]["disturbed"] == meta["steal_counts"]["kept"]
    notes = meta["notes"]
    assert "lost more than 2% of their cores' time to the hypervisor even after 2 repeats " \
           "(up to 20%)" in notes[0]


class Logged:
    """The synthetic testbed, keeping the order of its runs: (phase, class, mode, rate)."""

    def __init__(self):
        self.testbed, self.log = SyntheticTestbed(COSTS), []

    def __call__(self, plan, load, mode, use, rate, **kwargs):
        self.log.append((use, load.name, mode, rate))
        return self.testbed(plan, load, mode, use, rate, **kwargs)


def test_saturation_and_calibration_run_their_pairs_in_interleaved_rounds():
    testbed = Logged()
    the_plan = _plan()
    found = run.run(the_plan, measure=testbed)
    pairs = [(load.name, mode) for load in the_plan.classes for mode in the_plan.modes]
    loads = [(load.name, mode) for load in the_plan.loads for mode in the_plan.modes]
    saturation = [(c, m) for use, c, m, _ in testbed.log if use == "saturation"]
    assert saturation == loads * plan.SATURATION_REPEATS
    calibration = [(c, m, rate) for use, c, m, rate in testbed.log if use == "calibration"]
    shares = the_plan.budget.calibration
    assert [(c, m) for c, m, _ in calibration] == pairs * len(shares)
    for i, (c, m, rate) in enumerate(calibration):
        capacity = found.saturation[c, m].run.throughput
        assert rate == pytest.approx(shares[i // len(pairs)] * capacity, rel=1e-12)
    # Each pair keeps its calibration runs in share order, and every phase came before
    # the sweep.
    for runs in found.calibration.values():
        assert [r.run.rate for r in runs] == sorted(r.run.rate for r in runs)
    uses = [use for use, *_ in testbed.log]
    assert uses == sorted(uses, key=["saturation", "calibration", "validation"].index)


def test_the_steal_share_is_of_every_core_s_whole_time():
    def core(i: int, busy: float, steal: float) -> CoreTimes:
        return CoreTimes(core=i, user_s=busy, system_s=0.0, idle_s=1.0 - busy - steal,
                         irq_s=0.0, softirq_s=0.0, steal_s=steal)
    assert measure.steal_share((core(0, 0.5, 0.0), core(1, 0.3, 0.1))) == pytest.approx(0.05)
    assert measure.steal_share(()) == 0.0


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
