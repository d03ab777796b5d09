"""``offload study`` end to end: measure capacity, calibrate, sweep, compare.

Phases, each reported to ``progress(phase, done, total)`` in seconds of planned load:

1. saturation: closed-loop runs per class and mode (capacity, Tables 4-3/4-4 analogs);
2. calibration 1/R: Poisson runs at fractions of that capacity, then a first fit
   (:mod:`offloadlab.calibrate.fit`), which sets the sweep's rates and the operating
   rates;
3. sweep 1/R: the Poisson sweep at fractions of that fit's saturation rate, stopping
   after a point whose p99 or error rate passes its bound;
4. calibration k/R and sweep k/R, for each further replicate k the budget asks: the
   calibration's ladder again, then the sweep's points again; then the final fit on
   every calibration run, and one fitted scenario per offload mode;
5. verdicts: inline and each offload mode in pairs at each class's operating rate,
   until the delay ratio's interval decides the verdict or the budget's cap of pairs;
6. predict and compare: model (both delay variants) and simulator at the swept rates
   (each point the mean of its replicates).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from offloadlab import dist, model, scenario, sim
from offloadlab.calibrate import fit
from offloadlab.errors import RunError
from offloadlab.mode_traits import BASELINE, traits
from offloadlab.scenario import Queue, Scenario, TrafficClass
from offloadlab.study import compare
from offloadlab.study.judge import direction
from offloadlab.study.measure import Measured, mean_of, measure, pair_ratio
from offloadlab.study.plan import (
    MIX,
    OPERATING_MIN_PAIRS,
    SATURATION_REPEATS,
    STEAL_LIMIT,
    STOP_ERROR_RATE,
    STOP_P99_S,
    STOP_SHORTFALL,
    ClassLoad,
    Plan,
)

Progress = Callable[[str, float, float], None]
# One testbed run: (plan, load, mode, use, rate) -> Measured. The real one is
# measure.measure; tests pass a synthetic testbed with known costs.
Measure = Callable[..., Measured]
# Points on each model line of the figures, from 0 to a little past saturation.
_LINE_POINTS = 40


def run(plan: Plan, progress: Progress | None = None,
        measure: Measure = measure) -> compare.Study:
    """Run the study; returns everything the report and the summary need. ``measure``
    makes one run (:func:`offloadlab.study.measure.measure` on the testbed)."""
    tick = progress or (lambda phase, done, total: None)
    measure = undisturbed(measure, plan.budget.steal_repeats)
    pairs = [(load, mode) for load in plan.loads for mode in plan.modes]
    budget = plan.budget

    # Saturation and calibration run their pairs in interleaved rounds, so that a pair's
    # runs fall in different spells of the VM (docs/study.md, "What it runs").
    tries = rounds(pairs, range(SATURATION_REPEATS), "saturation", budget.saturation_s,
                   lambda load, mode, _: measure(plan, load, mode, "saturation", 0.0), tick)
    saturation = {}
    for (name, mode), runs in tries.items():
        runs = sorted(runs, key=lambda m: m.run.throughput)
        # The measurement is the median run; it took every repeat of the three.
        median = runs[len(runs) // 2]
        if not median.run.throughput > 0:
            # Calibration runs at shares of this throughput: none can be asked of 0.
            raise RunError(
                f"class {name}, {mode} mode: the saturation runs completed "
                f"{', '.join(f'{m.run.throughput:,.0f}' for m in runs)} requests/s, so "
                "there is no capacity to calibrate at; the server stalled or the machine was "
                "held up. Run the study again, on a quieter machine if it happens again")
        saturation[name, mode] = replace(median, repeats=sum(m.repeats for m in runs))

    # The first calibration round sets the sweep's rates and the operating rates; each
    # later one runs just before the sweep's round of the same replicate, so that the
    # final fit and the points it is judged on sample the same spells of the machine.
    calibration = calibration_runs(plan, saturation, measure, tick, [0])
    first = calibrate(plan, calibration)
    operating = operating_rates(first)
    replicates, at = sweep(plan, first, operating, measure, tick)
    paired = pairs_to_run(plan, replicates, at)
    for k in range(1, budget.replicates):
        for key, more in calibration_runs(plan, saturation, measure, tick, [k]).items():
            calibration[key] += more
        replicate(plan, replicates, at, paired, measure, tick, k)
    # The scenarios keep the operating rates that the sweeps and the pairs measure at;
    # with one replicate the first fit saw every calibration run already.
    fitted = (calibrate(plan, calibration, rate=operating[MIX]) if budget.replicates > 1
              else first)
    seed = calibrate(plan, calibration, extended=False)

    runs = operating_pairs(plan, paired, operating, measure, tick)
    for (c, mode), found in runs.items():
        # The pairs' runs are replicates of the sweeps' points at the operating rate.
        replicates[c, mode][at[c, mode]] += [m for _, m in found]
        replicates[c, BASELINE][at[c, BASELINE]] += [i for i, _ in found]
    sweeps = {key: [mean_of(p) for p in points] for key, points in replicates.items()}

    tick("predict", 0, len(pairs))
    predictions = {}
    for i, (load, mode) in enumerate(pairs):
        rates = np.array([m.run.rate for m in sweeps[load.name, mode]])
        predictions[load.name, mode] = predict(fitted, load.name, mode, rates,
                                               budget.sim_requests, plan.seed)
        predictions[load.name, mode] |= baseline(seed, load.name, mode, rates)
        tick("predict", i + 1, len(pairs))
    return compare.Study(plan, fitted, saturation, calibration, sweeps, predictions, seed,
                         replicates, {(load.name, mode): runs.get((load.name, mode), [])
                                      for load in plan.classes for mode in plan.offload_modes})


def calibration_runs(plan: Plan, saturation: dict[tuple[str, str], Measured],
                     measure: Measure, tick: Progress, replicates: Sequence[int]) -> dict:
    """The calibration's ``replicates`` (:attr:`Budget.calibration_turns`): Poisson runs
    of every class and mode at the budget's shares of its measured capacity
    (``saturation``), a round of all per share, each replicate on arrivals of its own.
    Returns each class and mode's runs in turn order."""
    def one(load: ClassLoad, mode: str, turn: tuple[int, float]) -> Measured:
        k, share = turn
        rate = share * saturation[load.name, mode].run.throughput
        return measure(plan, load, mode, "calibration", rate, replicate=k)

    classes = [(load, mode) for load in plan.classes for mode in plan.modes]
    turns = [turn for turn in plan.budget.calibration_turns if turn[0] in replicates]
    return rounds(classes, turns, _round("calibration", replicates, plan), plan.budget.run_s,
                  one, tick)


def sweep(plan: Plan, fitted: compare.Fitted, operating: dict[str, float], measure: Measure,
          tick: Progress) -> tuple[dict, dict]:
    """The validation sweep's first round: every load and mode, its rates up to the first
    past saturation (:func:`_stop`). Returns each sweep's points' runs in rate order (one
    each), and where in it the operating rate is (absent where it stopped below it)."""
    budget = plan.budget
    pairs = [(load, mode) for load in plan.loads for mode in plan.modes]
    found: dict = {}
    at: dict = {}
    total = budget.run_s * len(pairs) * (len(budget.sweep) + 1)
    done = 0.0
    for load, mode in pairs:
        rates = sweep_rates(budget.sweep, fitted.fits[load.name, mode].saturation,
                            operating[load.name])
        found[load.name, mode] = []
        for rate in rates:
            tick(_round("sweep", [0], plan), done, total)
            m = measure(plan, load, mode, "validation", rate)
            done += budget.run_s
            if rate == operating[load.name]:
                at[load.name, mode] = len(found[load.name, mode])
            found[load.name, mode].append([m])
            if _stop(m):
                break
    tick(_round("sweep", [0], plan), total, total)
    return found, at


def replicate(plan: Plan, found: dict, at: dict, paired: list[tuple[ClassLoad, str]],
              measure: Measure, tick: Progress, k: int) -> None:
    """The sweep's round ``k`` (from 1), over every point of every sweep: exactly the
    points of the first round, but not the operating point (index ``at``) of a class and
    mode in a verdict's ``paired`` runs: those are its replicates. Adds each run to its
    point's runs in ``found``, on arrivals of replicate ``k``'s own."""
    skip = {(load.name, m): at[load.name, m] for load, mode in paired for m in (BASELINE, mode)}
    points = [(load, mode, i) for load in plan.loads for mode in plan.modes
              for i in range(len(found[load.name, mode])) if skip.get((load.name, mode)) != i]
    more = rounds(points, [k], _round("sweep", [k], plan), plan.budget.run_s,
                  lambda load, mode, i, turn: measure(plan, load, mode, "validation",
                                                      found[load.name, mode][i][0].run.rate,
                                                      replicate=turn), tick)
    for (c, mode, i), runs in more.items():
        found[c, mode][i] += runs


def _round(phase: str, replicates: Sequence[int], plan: Plan) -> str:
    """A phase's name for progress, with its round when it runs one of several."""
    r = plan.budget.replicates
    return f"{phase} {replicates[0] + 1}/{r}" if len(replicates) == 1 and r > 1 else phase


def pairs_to_run(plan: Plan, found: dict, at: dict) -> list[tuple[ClassLoad, str]]:
    """The classes and offload modes whose verdicts the paired runs measure: those whose
    sweeps, inline and in the mode, served the operating rate stably. A sweep that
    stopped at or below it decides by the saturation ratios instead."""
    def stable(c: str, mode: str) -> bool:
        return (c, mode) in at and not _stop(found[c, mode][at[c, mode]][0])
    return [(load, mode) for load in plan.classes for mode in plan.offload_modes
            if stable(load.name, BASELINE) and stable(load.name, mode)]


def operating_pairs(plan: Plan, paired: list[tuple[ClassLoad, str]],
                    operating: dict[str, float], measure: Measure, tick: Progress) -> dict:
    """Inline and the offload mode at the class's operating rate, in pairs
    (:func:`until_decided`) until the interval of their delay ratio
    (:func:`measure.pair_ratio`) shows a direction (:func:`judge.direction`), or the
    budget's cap of pairs is reached. Each pair draws its own arrivals, the same for its
    two runs. Returns each verdict's (inline, mode) pairs in order."""
    budget = plan.budget
    total = budget.operating_seconds(len(paired))
    done = 0.0

    def pair(item: tuple[ClassLoad, str], turn: int) -> tuple[Measured, Measured]:
        nonlocal done
        load, mode = item
        tick("verdicts", done, total)
        runs = {m: measure(plan, load, m, "validation", operating[load.name],
                           replicate=budget.replicates + turn)
                for m in alternating(mode, turn)}
        done += 2 * budget.run_s
        return runs[BASELINE], runs[mode]

    found = until_decided(paired, pair, lambda pairs: direction(*pair_ratio(pairs)[1:3])
                          is not None, budget.operating_pairs)
    if paired:
        tick("verdicts", total, total)
    return {(load.name, mode): pairs for (load, mode), pairs in zip(paired, found, strict=True)}


def until_decided(items: Sequence, pair: Callable[[Any, int], tuple[Measured, Measured]],
                  decided: Callable[[list], bool], cap: int,
                  turned: Callable[[int, int], None] | None = None) -> list[list]:
    """``pair(item, turn)`` for every item, a pair of each undecided one per turn, until
    ``decided(its pairs)`` after at least :data:`~offloadlab.study.plan.OPERATING_MIN_PAIRS`
    pairs, or ``cap`` pairs: so an item's pairs fall in different spells of the machine,
    and each pair's two runs in the same one. ``turned(turn, undecided)`` follows each
    turn. Returns each item's pairs in order, in the order of ``items``."""
    found: list[list] = [[] for _ in items]
    open_ = list(range(len(items)))
    for turn in range(cap):
        if not open_:
            break
        for i in list(open_):
            found[i].append(pair(items[i], turn))
            if len(found[i]) >= OPERATING_MIN_PAIRS and decided(found[i]):
                open_.remove(i)
        if turned is not None:
            turned(turn, len(open_))
    return found


def alternating(mode: str, turn: int) -> tuple[str, str]:
    """The order of a pair's runs: inline first in even turns, ``mode`` first in odd
    ones, so that neither always goes first."""
    return (BASELINE, mode) if turn % 2 == 0 else (mode, BASELINE)


def rounds(items: list, turns: Sequence, phase: str, run_s: float,
           one: Callable[..., Measured], tick: Progress) -> dict:
    """``one(load, *rest, turn)`` for every item ``(load, *rest)`` (a class and mode, or
    a point of its sweep), a round of all items per turn in ``turns``; ``tick`` counts
    ``run_s`` per run. Returns each item's runs in turn order, keyed ``(load.name,
    *rest)``."""
    found: dict = {(load.name, *rest): [] for load, *rest in items}
    total = len(items) * len(turns) * run_s
    for i, (turn, (load, *rest)) in enumerate(itertools.product(turns, items)):
        tick(phase, i * run_s, total)
        found[load.name, *rest].append(one(load, *rest, turn))
    tick(phase, total, total)
    return found


def undisturbed(measure: Measure, most: int) -> Measure:
    """``measure``, made again while the hypervisor, or other processes of the machine,
    took more than :data:`~offloadlab.study.plan.STEAL_LIMIT` of the run's cores (at
    most ``most`` times); the least disturbed run counts and says how many it took."""
    def again(*args, **kwargs) -> Measured:
        best, repeats = measure(*args, **kwargs), 0
        while best.disturbance > STEAL_LIMIT and repeats < most:
            repeats += 1
            best = min(best, measure(*args, **kwargs), key=lambda m: m.disturbance)
        return replace(best, repeats=repeats)
    return again


def operating_rates(fitted: compare.Fitted) -> dict[str, float]:
    """Each load's rate at the operating point, the exported scenarios' own rates (the
    same in every mode): where the verdicts are given and measured."""
    sc = next(iter(fitted.scenarios.values()))
    return {**{c.name: c.rate for c in sc.classes}, MIX: sc.rate}


def sweep_rates(shares: tuple[float, ...], top: float, operating: float) -> list[float]:
    """The sweep's rates, fractions ``shares`` of the saturation rate ``top``, with the
    operating rate in its place among them instead of any within 5% of it."""
    rates = [share * top for share in shares if abs(share * top / operating - 1) > 0.05]
    return sorted([*rates, operating])


def _stop(m: Measured) -> bool:
    """The sweep has passed saturation: p99 or errors past their bounds, or the server
    fell clearly behind the offered rate."""
    return (not m.p99 <= STOP_P99_S or not m.error_rate <= STOP_ERROR_RATE
            or m.run.throughput < (1 - STOP_SHORTFALL) * m.run.rate)


def calibrate(plan: Plan, calibration: dict, extended: bool = True,
              rate: float | None = None) -> compare.Fitted:
    """Fits per class and mode, the structural cost models, one scenario per offload
    mode at the mix's total ``rate`` (:func:`build_scenario`), and d0 (the delay outside
    host and engine) per class and mode. Without ``extended`` it is seed 000's model, the
    baseline: every request costs the mean CPU per request of the calibration runs, with
    no wake-up cost and no background."""
    mss = fit.loopback_mss()
    names = [load.name for load in plan.classes]

    def side(mode: str, field: str, label: str, less_app: bool = True) -> fit.CostModel:
        """One queue's cost per wake-up and other work on its core, then its per-request
        cost model."""
        runs = [[m.run for m in calibration[c, mode]] for c in names]
        queue = "engine" if field == "engine_s" else "host"
        wakeup = fit.fit_wakeup(runs, queue) if extended else fit.Wakeup()
        background = (fit.fit_background(runs, queue) if extended
                      else fit.Background((0.0,) * len(names)))
        means = [fit.per_request(r, queue, wakeup)
                 - (fit.demand(r, "app_s") if less_app else 0.0) for r in runs]
        sizes = [np.concatenate([x.sizes for x in r]) for r in runs]
        return replace(fit.fit_cost_model(mode, label, names, means, sizes, mss),
                       wakeup=wakeup, background=background)

    def with_background(f: fit.ClassFit, host: fit.CostModel,
                        engine: fit.CostModel | None = None) -> fit.ClassFit:
        i = names.index(f.cls)
        f = replace(f, host_bg=host.background.per_class[i], host_share=host.background.share)
        return f if engine is None else replace(f, engine_bg=engine.background.per_class[i],
                                                engine_share=engine.background.share)

    models = [side(BASELINE, "host_s", "host_proto")]
    fits = {}
    for c in names:
        fits[c, BASELINE] = with_background(
            fit.fit_class([m.run for m in calibration[c, BASELINE]], mss,
                          host_model=models[0], host_wakeup=models[0].wakeup), models[0])
    for mode in plan.offload_modes:
        overhead = side(mode, "host_s", "host_overhead")
        engine = side(mode, "engine_s", "engine", less_app=False)
        models += [overhead, engine]
        for c in names:
            fits[c, mode] = with_background(
                fit.fit_class([m.run for m in calibration[c, mode]], mss,
                              engine_model=engine, host_wakeup=overhead.wakeup), overhead, engine)

    def scenarios() -> dict[str, Scenario]:
        return {mode: build_scenario(plan, fits, models, mode, extended, rate)
                for mode in plan.offload_modes}

    def gaps(fitted: compare.Fitted, c: str, mode: str) -> tuple[np.ndarray, np.ndarray]:
        """What the model without d0 leaves of the calibration runs' mean delays, and
        their 95% half-widths, one estimate per offered rate (its replicates pooled)."""
        runs = calibration[c, mode]
        column = "T" if traits(mode).engine_thread else "T_noe"
        rates = np.array([m.run.throughput for m in runs])
        return fit.by_replicates(
            np.array([m.run.rate for m in runs]),
            np.array([m.run.T for m in runs]) - _model_rows(fitted, c, mode, rates)[column],
            np.array([(m.T_hi - m.T_lo) / 2 for m in runs]))

    if extended:
        for mode in plan.offload_modes:
            # The engine's neighbour's bursts: the shape whose d0s best explain this
            # mode's calibration delays, every class at once.
            def shaped(scv: float, mode: str = mode, base: tuple = tuple(models)) -> list:
                trial = _with_burst(base, mode, scv)
                fitted = compare.Fitted(fits, trial,
                                        {mode: build_scenario(plan, fits, trial, mode,
                                                              rate=rate)})
                return [gaps(fitted, c, mode) for c in names]

            models = list(_with_burst(tuple(models), mode, fit.burst_scv(shaped)))
    fitted = compare.Fitted(fits, tuple(models), scenarios())
    # d0 is what the model without it leaves of the measured delay at the calibration
    # rates; the scenarios are then built again with it.
    for c, mode in calibration:
        d0, hw = fit.combine(*gaps(fitted, c, mode))
        fits[c, mode] = replace(fits[c, mode], d0=d0, d0_hw=hw)
    if plan.mix is not None:
        shares = [plan.shares[c] for c in names]
        for mode in plan.modes:
            fits[MIX, mode] = fit.mixture([fits[c, mode] for c in names], shares, MIX)
    return compare.Fitted(fits, tuple(models), scenarios())


def _with_burst(models: tuple[fit.CostModel, ...], mode: str, scv: float
                ) -> tuple[fit.CostModel, ...]:
    """``models`` with ``mode``'s engine-core background of shape ``scv``."""
    return tuple(replace(m, background=replace(m.background, scv=scv))
                 if (m.mode, m.side) == (mode, "engine") else m for m in models)


def build_scenario(plan: Plan, fits: dict, models: list[fit.CostModel], mode: str,
                   extended: bool = True, rate: float | None = None) -> Scenario:
    """The fitted scenario of one offload mode: every class with its own costs and d0,
    the plan's shares of a total ``rate`` (by default half the host-alone capacity of
    that mix), and offload left to the optimiser; each queue with its cost per wake-up,
    each class's background work on that queue's core, the share of the core that work
    holds at any rate, and (``extended``) how the mode's host releases its answers. X_a
    keeps the shape of the configured work."""
    work_scv = plan.work.scv if plan.work is not None else 0.0
    names = [load.name for load in plan.classes]
    total = rate or 0.5 / sum(plan.shares[c] * fits[c, BASELINE].host for c in names)
    classes = []
    for c in names:
        base, off = fits[c, BASELINE], fits[c, mode]
        classes.append(TrafficClass(
            c, plan.shares[c] * total,
            app=dist.with_moments(base.EXa, base.EXa**2 * (1 + work_scv)),
            host_proto=dist.with_moments(base.EXp, base.EXp_m2),
            host_overhead=dist.with_moments(off.EXo, off.EXo**2),
            engine_overhead=dist.with_moments(off.EXc, off.EXc**2),
            engine_proto=dist.with_moments(off.EXq, off.EXq_m2),
            offload="auto", d0=kept_d0(base.d0), d0_offload=kept_d0(off.d0)))
    queue_costs = {(m.mode, m.side): (m.wakeup, m.background) for m in models}
    # On the testbed a request passes engine, host, engine in turn, so its delay is the
    # stages' sum; the seed's max (stages that overlap) stays with the baseline.
    delay = "sum" if extended else "max"

    def queue(side: str, fitted_mode: str, background: str, release: str = "request") -> Queue:
        w, other = queue_costs[fitted_mode, side]
        return Queue(wakeup=dist.Deterministic(w.cost), cooling=w.cooling, per_class=tuple(
            (c, fit.burst(getattr(fits[c, fitted_mode], background), other.scv)) for c in names),
            background_share=other.share, release=release if extended else "request",
            answers_wake=(extended and side == "engine"
                          and traits(fitted_mode).answers_wake_engine),
            polls=side == "engine" and traits(fitted_mode).engine_spins)

    return Scenario(f"fitted-{mode}", tuple(classes),
                    scenario.Options(system_delay=delay, cpu_queue="mg1"),
                    f"Fitted by offload study on the testbed ({mode} mode, "
                    f"{plan.workload}); the classes' shares of the mix at half its "
                    "host-alone capacity",
                    host_alone=queue("host_proto", BASELINE, "host_bg"),
                    host=queue("host_overhead", mode, "host_bg",
                               "round" if traits(mode).answers_in_rounds else "request"),
                    engine=queue("engine", mode, "engine_bg"))


def kept_d0(d0: float) -> float:
    """A fitted d0 as the scenario keeps it: none before it is fitted, and never below 0
    (a negative gap means the model over-predicts the delay; the accuracy table shows it)."""
    return max(d0, 0.0) if math.isfinite(d0) else 0.0


def _model_rows(fitted: compare.Fitted, cls: str, mode: str, rates: np.ndarray) -> dict:
    return model.evaluate(fitted.single(cls, mode), rates).overall


def curves(fitted: compare.Fitted, cls: str, mode: str, rates: np.ndarray,
           source: str = "model") -> dict[str, pd.DataFrame]:
    """A model at the swept rates ("at") and on a line up to past saturation ("line"),
    in the points table's columns."""
    line = np.linspace(0, 1.05 * fitted.fits[cls, mode].saturation, _LINE_POINTS)[1:]
    return {key: compare.model_points(_model_rows(fitted, cls, mode, x), x, cls, mode, source)
            for key, x in (("at", rates), ("line", line))}


def baseline(seed: compare.Fitted, cls: str, mode: str,
             rates: np.ndarray) -> dict[str, pd.DataFrame]:
    """Seed 000's model at the swept rates and on its line, as source ``seed_model``."""
    return {f"seed_{key}": frame
            for key, frame in curves(seed, cls, mode, rates, "seed_model").items()}


def predict(fitted: compare.Fitted, cls: str, mode: str, rates: np.ndarray,
            requests: int, seed: int) -> dict[str, pd.DataFrame]:
    """Model at the swept rates and on a line up to past saturation; the simulator at
    the swept rates below saturation. Frames in the points table's columns."""
    stable = rates[(rates > 0) & (rates < 0.98 * fitted.fits[cls, mode].saturation)]
    sims = pd.DataFrame()
    if len(stable):
        result = sim.run(fitted.single(cls, mode), rates=stable, requests=requests, seed=seed)
        sims = compare.sim_points(result, stable, cls, mode)
    return {**curves(fitted, cls, mode, rates), "sim": sims}

