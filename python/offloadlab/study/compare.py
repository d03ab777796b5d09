"""Lay model, simulator and testbed side by side: the study's tables.

Accuracy targets (issue 7): utilisation within 5% MAPE and delay within 15% below 80%
utilisation, K-S p > 0.2 for every curve (seed 000's criterion), saturation within
10%. Each row is met, missed or undecidable and each verdict confirmed, contradicted or
undecided by the testbed, as study/judge.py decides; a missed target is reported with
the assumption that broke, measured.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from offloadlab import model, units
from offloadlab.calibrate import fit
from offloadlab.engine_profile import EngineProfile
from offloadlab.mode_traits import BASELINE, traits
from offloadlab.model import answer
from offloadlab.scenario import Scenario
from offloadlab.study import floors, judge, measure
from offloadlab.study.measure import Measured, core_shares, cpu_rows
from offloadlab.study.plan import MIX, STEAL_LIMIT, Plan
from offloadlab.study_tables import COLUMNS, StudyTables

TARGETS = {"U_host": 0.05, "U_engine": 0.05, "T": 0.15}
KS_P = 0.2
SATURATION_TOLERANCE = 0.10
# Busy share above which a saturation run's core or thread counts as full.
FULL = 0.9
# Notes shown in the box at the top of the report; the rest go below the tables.
FIRST_NOTES = 5


@dataclass(frozen=True)
class Fitted:
    fits: dict[tuple[str, str], fit.ClassFit]
    models: tuple[fit.CostModel, ...]
    scenarios: dict[str, Scenario]

    def single(self, cls: str, mode: str) -> Scenario:
        """The scenario that predicts ``cls`` (a class, or the mix of all) in ``mode``,
        all of it offloaded; inline reads its host-alone columns, which every offload
        mode's scenario shares. Its ``overall`` results are the load's."""
        sc = self.scenarios[mode if traits(mode).engine_thread else next(iter(self.scenarios))]
        chosen = [c for c in sc.classes if cls in (MIX, c.name)]
        return replace(sc, classes=tuple(replace(c, offload=1.0) for c in chosen))


@dataclass(frozen=True)
class Study:
    plan: Plan
    fitted: Fitted
    saturation: dict[tuple[str, str], Measured]
    calibration: dict[tuple[str, str], list[Measured]]
    sweeps: dict[tuple[str, str], list[Measured]]
    predictions: dict[tuple[str, str], dict[str, pd.DataFrame]]
    # Seed 000's model fitted on the same runs: the baseline the report shows beside.
    seed: Fitted | None = None
    # Each sweep point's runs (sweeps[key][i] is the mean of replicates[key][i]), and
    # the (inline, mode) pairs at each class's operating rate (study.run).
    replicates: dict[tuple[str, str], list[list[Measured]]] = field(default_factory=dict)
    operating: dict[tuple[str, str], list[tuple[Measured, Measured]]] = field(
        default_factory=dict)


def _row(**values) -> dict:
    return {c: values.get(c, math.nan) for c in COLUMNS["points"]}


def model_points(rows: dict, rates: np.ndarray, cls: str, mode: str,
                 source: str = "model") -> pd.DataFrame:
    """Model rows (a result's ``overall`` arrays, d0 included) in the points table's
    columns."""
    inline = not traits(mode).engine_thread
    out = []
    for i, rate in enumerate(rates):
        out.append(_row(
            source=source, mode=mode, **{"class": cls}, rate=float(rate),
            U_host=rows["U_noe" if inline else "U_cpu"][i],
            U_engine=math.nan if inline else rows["U_oe"][i],
            T=rows["T_noe" if inline else "T"][i],
            T_sum=math.nan if inline else rows["T_sum"][i],
            host_trip=math.nan if inline else rows["T_cpu"][i], use="prediction"))
    return pd.DataFrame(out, columns=list(COLUMNS["points"]))


def sim_points(result, rates: np.ndarray, cls: str, mode: str) -> pd.DataFrame:
    """Simulator rows (its ``overall`` arrays, d0 included) with their 95% intervals, in
    the points table's columns."""
    p = result.overall
    inline = not traits(mode).engine_thread
    host, delay = ("U_noe", "T_noe") if inline else ("U_cpu", "T")

    def band(key: str, i: int) -> tuple[float, float, float]:
        v, hw = p[key][i], p[f"{key}_hw"][i]
        return v, v - hw, v + hw

    out = []
    for i, rate in enumerate(rates):
        u, u_lo, u_hi = band(host, i)
        e, e_lo, e_hi = (math.nan,) * 3 if inline else band("U_oe", i)
        t, t_lo, t_hi = band(delay, i)
        out.append(_row(source="sim", mode=mode, **{"class": cls}, rate=float(rate),
                        U_host=u, U_host_lo=u_lo, U_host_hi=u_hi, U_engine=e,
                        U_engine_lo=e_lo, U_engine_hi=e_hi, T=t, T_lo=t_lo, T_hi=t_hi,
                        use="prediction"))
    return pd.DataFrame(out, columns=list(COLUMNS["points"]))


def _testbed_points(cls: str, mode: str, runs: list[Measured]) -> list[dict]:
    return [_row(source="testbed", mode=mode, **{"class": cls}, rate=m.run.rate,
                 U_host=m.U_host,
                 U_engine=m.U_engine if traits(mode).engine_thread else math.nan,
                 T=m.run.T, T_lo=m.T_lo, T_hi=m.T_hi, host_trip=m.host_trip,
                 throughput=m.run.throughput, p99=m.p99, errors=m.errors,
                 core_busy=measure.core_busy(m), lag=m.lag, lag_p99=m.lag_p99, use=m.use)
            for m in runs]


def tables(study: Study, meta: dict) -> StudyTables:
    """Every table of the report; ``meta`` gains the notes on missed targets."""
    plan, fitted = study.plan, study.fitted
    pairs = list(study.sweeps)
    points = [pd.DataFrame([r for (c, m) in pairs
                            for r in _testbed_points(c, m, study.calibration.get((c, m), [])
                                                     + study.sweeps[c, m])],
                           columns=list(COLUMNS["points"]))]
    for key in pairs:
        pred = study.predictions[key]
        points += [pred[k] for k in ("line", "at", "sim", "seed_line", "seed_at") if k in pred]
    floor = floors.for_study(study)
    accuracy = [r for key in pairs for r in _accuracy(study, *key, floor)]
    saturation = [_saturation(study, *key) for key in pairs]
    found = verdicts(study)
    agreed = {a: sum(v["agree"] == a for v in found)
              for a in (judge.YES, judge.NO, judge.INCONCLUSIVE)}
    # The notes a reader must act on first: runs the hypervisor still disturbed, verdicts
    # the testbed does not back, capacity missed where the server was the bottleneck,
    # then missed accuracy targets.
    kept = [*study.saturation.values(), *(m for runs in study.calibration.values() for m in runs),
            *(m for runs in study.sweeps.values() for m in runs)]
    steal = _steal(kept)
    notes = [*meta.get("notes", []), *_steal_note(steal, plan.budget.steal_repeats),
             *(_verdict_note(v) for v in found if v["agree"] != judge.YES)]
    notes += [_saturation_note(study, r) for r in saturation
              if not abs(r["error"]) <= SATURATION_TOLERANCE]
    notes += _missed(study, accuracy)
    latency = []
    for (c, m), runs in study.sweeps.items():
        pick = min(runs, key=lambda x: abs(x.run.rate - 0.6 * fitted.fits[c, m].saturation))
        latency += [{"class": c, "mode": m, "rate": pick.run.rate, "total_s": t}
                    for t in pick.latency]
    cpu = [r for (c, m), s in study.saturation.items() for r in cpu_rows(c, m, s, plan)]
    return StudyTables(
        points=pd.concat([p for p in points if len(p)], ignore_index=True),
        saturation=pd.DataFrame(saturation, columns=list(COLUMNS["saturation"])),
        cpu=pd.DataFrame(cpu, columns=list(COLUMNS["cpu"])),
        latency=pd.DataFrame(latency, columns=list(COLUMNS["latency"])),
        accuracy=pd.DataFrame(accuracy, columns=list(COLUMNS["accuracy"])),
        verdicts=pd.DataFrame(found, columns=list(COLUMNS["verdicts"])),
        bottom_line=pd.DataFrame(bottom_line(study), columns=list(COLUMNS["bottom_line"])),
        costs=pd.DataFrame([_costs(f) for f in fitted.fits.values()],
                           columns=list(COLUMNS["costs"])),
        cost_model=pd.DataFrame(
            [{"mode": m.mode, "side": m.side, "c0": m.c0, "c_pkt": m.c_pkt,
              "c_byte": m.c_byte, "r2": m.r2, "classes": ",".join(m.classes), "note": m.note,
              "wakeup": m.wakeup.cost, "cooling": m.wakeup.cooling,
              "counted_per_wakeup": m.wakeup.counted, "wakeup_r2": m.wakeup.r2,
              "background_share": m.background.share, "background_scv": m.background.scv}
             for m in fitted.models], columns=list(COLUMNS["cost_model"])),
        meta={**meta, "steal": _steal_text(steal), "steal_counts": steal,
              "generator": _pacing(study.sweeps),
              "agreement": _agreement_text(agreed), "agreement_counts": agreed,
              "notes": notes[:FIRST_NOTES],
              "more_notes": notes[FIRST_NOTES:]},
    ).check()


def _steal(kept: list[Measured]) -> dict:
    """What the hypervisor and other processes took from the runs the study kept: the
    largest share of the cores' time stolen in one, and used by other processes, how
    many runs were made again for either, and how many kept runs still lost more than
    :data:`STEAL_LIMIT` after their repeats."""
    return {"worst": max((m.steal for m in kept), default=0.0),
            "foreign": max((m.foreign for m in kept), default=0.0),
            "repeated": sum(m.repeats for m in kept),
            "disturbed": sum(m.disturbance > STEAL_LIMIT for m in kept), "kept": len(kept)}


def _steal_text(steal: dict) -> str:
    n = steal["repeated"]
    return (f"at most {steal['worst']:.1%} of the cores' time stolen and "
            f"{steal['foreign']:.1%} used by other processes in a kept run; {n} "
            f"run{'s' * (n != 1)} made again because more than {STEAL_LIMIT:.0%} was")


def _pacing(sweeps: dict[tuple[str, str], list[Measured]]) -> str:
    """How well the load generator kept to its plan over the sweeps
    (:func:`measure.behind_plan`), and whether any point it fell behind at was scored."""
    known = [(m, bool(s)) for runs in sweeps.values()
             for m, s in zip(runs, measure.scored(runs), strict=True) if math.isfinite(m.lag)]
    if not known:
        return "its send lag was not measured"
    behind = [(m, s) for m, s in known if measure.behind_plan(m)]
    if not behind:
        return (f"kept to its plan at all {len(known)} sweep points (mean send lag under "
                "the mean time between requests)")
    lags = [m.lag for m, _ in behind]
    scored = sum(s for _, s in behind)
    return (f"behind its plan at {len(behind)} of {len(known)} sweep points (mean send lag "
            f"{units.ms(min(lags))}-{units.ms(max(lags))} ms, more than the mean "
            "time between requests: bursts, not the Poisson arrivals the model takes); "
            f"{scored} of them scored")


def _steal_note(steal: dict, repeats: int) -> list[str]:
    """The first note when some kept runs still lost more than :data:`STEAL_LIMIT` after
    at most ``repeats`` repeats."""
    if not steal["disturbed"]:
        return []
    return [f"{steal['disturbed']} of {steal['kept']} runs lost more than {STEAL_LIMIT:.0%} "
            f"of their cores' time to the hypervisor or to other processes even after "
            f"{repeats} repeats (up to {max(steal['worst'], steal['foreign']):.0%}): "
            "requests wait out such stalls, so those runs' delays read high and their "
            "capacities low. Run the study again on a quieter machine, with nothing else "
            "running."]


def _agreement_text(agreed: dict) -> str:
    """The report's first line: how many verdicts the testbed decided, and how."""
    total = sum(agreed.values())
    return (f"The testbed confirmed {agreed[judge.YES]} of {total} verdicts, contradicted "
            f"{agreed[judge.NO]} and could not decide {agreed[judge.INCONCLUSIVE]}.")


def _verdict_note(v: dict) -> str:
    """Why the testbed does not back a verdict, and what to do about it."""
    _, why = judge.agreement(v["verdict"], v["measured_delay_ratio"], v["delay_low"],
                             v["delay_high"], v["saturation_ratio"],
                             v["measured_saturation_ratio"], v["client_bound"])
    ratio, high = v["measured_delay_ratio"], v["delay_high"]
    interval = (f"95% interval ×{v['delay_low']:.2f}–×{high:.2f}" if math.isfinite(high)
                else "interval unknown")
    measured = (f"measured delay ×{ratio:.2f} at {v['rate']:,.0f} req/s ({interval}, "
                f"{v['pairs']} pair{'s' * (v['pairs'] != 1)})" if math.isfinite(ratio) else
                f"no stable delay measured at {v['rate']:,.0f} req/s")
    if v["agree"] == judge.INCONCLUSIVE:
        return (f"class {v['class']}, {v['mode']}: the testbed cannot decide the verdict "
                f"'{v['verdict']}': {measured}; {why}. More pairs at the operating rate "
                "narrow the interval.")
    return (f"class {v['class']}, {v['mode']}: the testbed contradicts the verdict "
            f"'{v['verdict']}': {measured}; {why}.")


def _missed(study: Study, accuracy: list[dict]) -> list[str]:
    """One note per curve that a source missed: each source's outcome, then why."""
    notes = []
    for key, rows in itertools.groupby(accuracy, lambda r: (r["class"], r["mode"], r["metric"])):
        rows = list(rows)
        if all(r["status"] != judge.MISSED for r in rows):
            continue
        cls, mode, metric = key
        by = " and ".join(r["source"] for r in rows if r["status"] == judge.MISSED)
        scores = "; ".join(f"{r['source']} {r['status']} ({r['why']})" for r in rows)
        reasons = "; ".join(_reasons(study, cls, mode, metric)) or "no single cause measured"
        notes.append(f"class {cls}, {mode}: {metric} missed by {by} (target: MAPE ≤ "
                     f"{TARGETS[metric]:.0%}, K-S p > {KS_P}, at least {judge.MIN_POINTS} "
                     f"points): {scores}. Why: {reasons}.")
    return notes


def _accuracy(study: Study, cls: str, mode: str,
              floor: dict[tuple[str, str, str], tuple[float, str]]) -> list[dict]:
    """Each metric's row per source, judged on the sweep's scored points against the
    row's ``floor`` (:func:`floors.for_study`)."""
    runs = study.sweeps[cls, mode]
    pred = study.predictions[cls, mode]
    measured = {"U_host": np.array([m.U_host for m in runs]),
                "U_engine": np.array([m.U_engine for m in runs]),
                "T": np.array([m.run.T for m in runs])}
    rates = np.array([m.run.rate for m in runs])
    scored = measure.scored(runs)
    sims = pred["sim"].set_index("rate") if len(pred["sim"]) else None
    metrics = ["U_host", "U_engine", "T"] if traits(mode).engine_thread else ["U_host", "T"]
    rows = []
    for metric in metrics:
        row_floor, floor_source = floor.get((cls, mode, metric), (math.nan, judge.UNMEASURED))
        sources = {"model": pred["at"][metric].to_numpy(float)}
        if "seed_at" in pred:
            sources["seed_model"] = pred["seed_at"][metric].to_numpy(float)
        if sims is not None:
            # The simulator runs the model's scenario only below its saturation
            # (study/run.py, predict): a rate it skipped is one where that scenario
            # saturates, a prediction as unbounded as the model's T = inf there.
            sources["sim"] = sims[metric].reindex(rates, fill_value=math.inf).to_numpy(float)
        for source, predicted in sources.items():
            j = judge.judge_row(predicted, measured[metric], scored, TARGETS[metric], KS_P,
                                row_floor, floor_source)
            rows.append({"class": cls, "mode": mode, "metric": metric, "source": source,
                         "mape": j.mape, "n": j.n, "floor": row_floor,
                         "floor_source": floor_source, "ks_D": j.ks_D, "ks_p": j.ks_p,
                         "ks_n": j.ks_n, "ks_m": j.ks_m, "target": TARGETS[metric],
                         "status": j.status, "why": j.why})
    return rows


def _reasons(study: Study, cls: str, mode: str, metric: str) -> list[str]:
    """What the measurements show the model leaves out, for one curve."""
    runs = study.sweeps[cls, mode]
    f = study.fitted.fits[cls, mode]
    parts = []
    if traits(mode).engine_busy_from_kernel and metric == "U_engine":
        return ["the SQPOLL thread's work time (the kernel's SqWorkTime) is sampled at "
                "scheduler ticks, so a short run's engine demand is coarse (docs/testbed.md)"]
    field, label, fitted_s = (("engine_s", "engine", f.engine) if metric == "U_engine"
                              else ("host_s", "host", f.host))
    demand = np.array([getattr(m.run, field) for m in runs])
    demand = demand[np.isfinite(demand)]
    if len(demand) and demand.max() > 1.1 * demand.min():
        parts.append(f"{label} CPU per request ran {demand.min() * 1e6:.0f}-"
                     f"{demand.max() * 1e6:.0f} us over the sweep (per-wake-up costs "
                     f"shrink as batches grow) while the model holds the calibrated "
                     f"{fitted_s * 1e6:.0f} us")
    if metric == "T":
        spread = np.array([(m.T_hi - m.T_lo) / 2 / m.run.T for m in runs if m.run.T > 0])
        spread = spread[np.isfinite(spread)]
        if len(spread) and np.median(spread) > TARGETS["T"] / 2:
            parts.append(f"the measured means are themselves uncertain by ±"
                         f"{np.median(spread):.0%} (median 95% interval: rare stalls of "
                         "milliseconds weigh on short runs; a longer budget narrows it)")
        core = measure.generator_core(study.plan)
        if traits(mode).engine_thread and core is not None:
            busy = _core_busy(study.saturation[cls, mode], core)
            parts.append(f"the engine shares its core with the load generator (that core "
                         f"was {busy:.0%} busy at saturation), so it also waits for its "
                         "core, which the model does not see")
    return parts


def _core_busy(m: Measured, core: int) -> float:
    """Busy share of ``core``'s wall time during run ``m``."""
    shares = next((core_shares(c) for c in m.cores if c.core == core), {})
    return 1 - shares["idle"] if shares else math.nan


def _saturation_note(study: Study, r: dict) -> str:
    """A missed saturation prediction, with what the busy shares show."""
    m = study.saturation[r["class"], r["mode"]]
    cores = {c.core: _core_busy(m, c.core) for c in m.cores}
    text = (f"class {r['class']}, {r['mode']}: predicted saturation {r['model']:,.0f}/s is "
            f"{r['error']:+.0%} off the measured {r['measured']:,.0f}/s (target "
            f"±{SATURATION_TOLERANCE:.0%}); the host thread was busy {r['host_util']:.0%} "
            "of the saturation run, the cores " + ", ".join(f"{b:.0%}" for b in cores.values()))
    if r["generator_bound"]:
        text += (f". The load generator's core ({measure.generator_core(study.plan)}) was "
                 "the bottleneck: "
                 "this run measured the client's capacity, not the server's; with the "
                 f"client on cores of its own the model predicts {r['model_elsewhere']:,.0f}/s")
    return text


def generator_bound(m: Measured, core: int | None) -> bool:
    """Saturation run ``m`` was limited by the load generator's ``core``, not by the
    server: that core was full (over 90% busy) while the host thread was not, and
    everything on it but the server's engine thread (the generator, its interrupts)
    took more of it than that thread's work did. Such a run measures the client's loop
    as much as the server: the closed-loop generator of a saturation run costs less per
    request than the open-loop one of the calibration runs the model takes its share
    from (uring, class 3: 80 against 95 us, bench/results/saturation_loop.md)."""
    busy = _core_busy(m, core) if core is not None else math.nan
    server = float(np.nan_to_num(m.U_engine))
    return bool(busy > FULL and m.U_host < FULL and busy - server > server)


def _saturation(study: Study, cls: str, mode: str) -> dict:
    m = study.saturation[cls, mode]
    f = study.fitted.fits[cls, mode]
    seed = study.seed.fits[cls, mode].saturation if study.seed is not None else math.nan
    measured = m.run.throughput

    def error(predicted: float) -> float:
        return predicted / measured - 1 if measured > 0 else math.nan

    return {"class": cls, "mode": mode, "measured": measured, "model": f.saturation,
            "bottleneck": f.bottleneck, "error": error(f.saturation), "seed_model": seed,
            "seed_error": error(seed),
            "generator_bound": generator_bound(m, measure.generator_core(study.plan)),
            "host_util": m.U_host,
            "conn_per_min": m.connections_per_s * 60,
            "connect_s": m.connect_s, "goodput_Bps": m.goodput_Bps,
            "model_elsewhere": f.client_elsewhere.saturation}


def verdicts(study: Study) -> list[dict]:
    """Per class and offload mode, at the exported scenario's own rates (the operating
    point): the model's verdict and recommended fraction, exactly as ``offload model``
    gives them on that scenario, and the testbed's evidence at the class's rate: the
    measured saturation ratio, the delay ratio with its interval and the pairs of runs
    it rests on, and whether that backs the verdict (:func:`judge.agreement`)."""
    rows = []
    core = measure.generator_core(study.plan)
    for mode, sc in study.fitted.scenarios.items():
        result = model.evaluate(sc)
        alone = model.alone(sc, result.rates)[0]
        per = result.per_class
        for i, c in enumerate(sc.class_names):
            base, off = study.fitted.fits[c, BASELINE], study.fitted.fits[c, mode]
            row = alone[i]
            rate = row["lam"]
            label = str(per["verdict"][0, i])
            crossover = _crossover(study.fitted, c, mode)
            sat = (study.saturation[c, mode].run.throughput
                   / study.saturation[c, BASELINE].run.throughput)
            predicted_sat = off.saturation / base.saturation
            client = any(generator_bound(study.saturation[c, m], core) for m in (BASELINE, mode))
            delay, low, high, pairs = measure.operating_ratio(study, c, mode)
            agree, _ = judge.agreement(label, delay, low, high, predicted_sat, sat, client)
            rows.append({"class": c, "mode": mode, "verdict": label,
                         "reason": str(per["reason"][0, i]) + crossover,
                         "f": float(per["f"][0, i]), "EXp": base.EXp, "EXo": off.EXo,
                         "rate": rate, "T_noe": row["T_noe"], "T": row["T"],
                         "saturation_ratio": predicted_sat,
                         "measured_saturation_ratio": sat, "measured_delay_ratio": delay,
                         "delay_low": low, "delay_high": high, "pairs": pairs,
                         "client_bound": client, "agree": agree})
    return rows


def _crossover(fitted: Fitted, cls: str, mode: str) -> str:
    """A clause that says from which rate of the class, by the model, offload pays
    (model/answer.py) and what it does to the saturation rate: a verdict at one rate
    hides both."""
    base, off = fitted.fits[cls, BASELINE], fitted.fits[cls, mode]
    start = answer.pays_from(fitted.single(cls, mode), EngineProfile())
    capacity = f"; saturation {base.saturation:,.0f} -> {off.saturation:,.0f} req/s"
    if start == 0:
        return f"; pays at every rate{capacity}"
    if math.isnan(start):
        return f"; pays at no rate{capacity}"
    return f"; pays from {start:,.0f} req/s on{capacity}"


def bottom_line(study: Study) -> list[dict]:
    """The model's answer per offload mode (model/answer.py) at the plan's rate, or at
    the exported scenario's own: for each class on its own, then the mix. The engine
    is the one measured, and its speed that of a host core: the testbed's engine is a
    core of this machine. An emulated engine (``plan.engine``) is in the fitted costs
    already, so the answer is solved against it and its break-even speed, relative to
    it, is scaled by its speed to be relative to a host core."""
    emulated = study.plan.engine
    measured, speed = ((EngineProfile(), 1.0) if emulated is None else
                       (EngineProfile(emulated.name, on_host=emulated.on_host), emulated.speed))
    return [{"mode": mode, **vars(row), "break_even_speed": row.break_even_speed * speed,
             "break_even_low": row.break_even_low * speed,
             "break_even_high": row.break_even_high * speed}
            for mode, sc in study.fitted.scenarios.items()
            for row in answer.answers(sc, measured, study.plan.rate, {
                load: capacity_error(study, load, mode)
                for load in [*(c.name for c in sc.classes), MIX]})]


def capacity_error(study: Study, load: str, mode: str) -> float:
    """How far off the model's capacities for ``load`` are, as this study measured them:
    the larger saturation error of the host alone and of ``mode`` for that load, over
    the runs that measured the server (not generator-bound); 0 when none did."""
    core = measure.generator_core(study.plan)
    errors = [abs(study.fitted.fits[load, m].saturation / s.run.throughput - 1)
              for m in (BASELINE, mode) if (s := study.saturation.get((load, m))) is not None
              and (load, m) in study.fitted.fits and s.run.throughput > 0
              and not generator_bound(s, core)]
    return max(errors, default=0.0)


def engine_named(plan, mode: str) -> str:
    """The engine a mode's bottom line answers for: the mode's own, or the profile its
    engine emulates."""
    own = f"the {mode} mode's engine"
    return own if plan.engine is None else f"{plan.engine.describe()}, emulated by {own}"


def _costs(f: fit.ClassFit) -> dict:
    return {"class": f.cls, "mode": f.mode, "EXa": f.EXa, "EXp": f.EXp, "EXp_m2": f.EXp_m2,
            "EXo": f.EXo, "EXc": f.EXc, "EXq": f.EXq, "EXq_m2": f.EXq_m2,
            "lognormal": f.lognormal, "pareto": f.pareto, "d0": f.d0,
            "host_bg": f.host_bg,
            "engine_bg": f.engine_bg if traits(f.mode).engine_thread else math.nan}
