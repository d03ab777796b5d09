"""An engine of a given speed, emulated on the testbed (issue 47's engine-speed targets).

For each ``--classes`` class, engine mode with the engine emulating a speed of 1, 0.5
and 0.25 of a host core (``--engine-speed``: slowdown 1/S - 1, paid per operation), as
``offload study`` runs it (its plan, cores, work, ``measure`` and saturation runs):

1. **Engine CPU per request.** Poisson runs at one light rate, the same for every
   speed (``--light-share`` of the slowest engine's predicted capacity), interleaved
   over speeds, ``--repeats`` each: the engine's busy CPU per request (the stats
   document's), its median, and its ratio to speed 1's against the targets 2 and 4
   (within 10%). The engine's wake-ups per request are printed beside it: a wake-up
   costs tens of microseconds here (docs/model.md section 17), and a busier engine
   sleeps less.
2. **Saturation.** The study's calibration at speed 1 (its saturation runs in inline and
   engine mode, then its Poisson calibration runs and fit); the model then predicts
   each speed's saturation with the fitted scenario under ``EngineProfile.apply``
   (engine costs over the speed, the load generator on the engine's core as measured).
   Measured: the study's closed-loop saturation run at each speed, interleaved, the
   median of ``--repeats``. Target: within 10%.

Prints ours beside the target for every row. Dated results: bench/results/engine_speed.md.

    .venv/bin/python bench/engine_speed.py [--classes 0,3] [--speeds 1,0.5,0.25]
        [--repeats 3] [--light-share 0.2] [--work 'exp(mean=100us)']

About 3 minutes of load with the defaults, plus seed 000's file sets for the classes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from offloadlab.engine_profile import EngineProfile
from offloadlab.mode_traits import BASELINE
from offloadlab.model.result import evaluate
from offloadlab.study import compare, measure, pipeline
from offloadlab.study import run as study_run
from offloadlab.study.plan import SATURATION_REPEATS

MODE = "engine"
TOLERANCE = 0.10


def median_run(runs: list[measure.Measured]) -> measure.Measured:
    """The run of median throughput, as the study keeps its saturation runs."""
    return sorted(runs, key=lambda m: m.run.throughput)[len(runs) // 2]


def calibrated(the_plan, measure_one) -> compare.Fitted:
    """The study's calibration at the testbed's own engine speed: saturation in every
    mode, then Poisson runs at the budget's shares of it, then the fit."""
    pairs = [(load, mode) for load in the_plan.classes for mode in the_plan.modes]
    tick = lambda *_: None  # noqa: E731
    saturation = {key: median_run(runs) for key, runs in study_run.rounds(
        pairs, range(SATURATION_REPEATS), "saturation", 0.0,
        lambda load, mode, _: measure_one(the_plan, load, mode, "saturation", 0.0),
        tick).items()}
    calibration = study_run.calibration_runs(the_plan, saturation, measure_one, tick,
                                              range(the_plan.budget.replicates))
    return study_run.calibrate(the_plan, calibration)


def predicted_saturation(fitted, cls: str, speed: float) -> float:
    """The model's saturation of ``cls`` all offloaded, with the engine at ``speed``."""
    sc = EngineProfile(speed=speed).apply(fitted.single(cls, MODE))
    row = evaluate(sc, [sc.rate]).overall
    return float(min(row["lam_star_cpu"][0], row["lam_star_oe"][0]))


def at_speed(the_plan, speed: float):
    return replace(the_plan, engine=EngineProfile(name=f"speed {speed:g}", speed=speed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="0,3")
    parser.add_argument("--speeds", default="1,0.5,0.25")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--light-share", type=float, default=0.2)
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    speeds = [float(s) for s in args.speeds.split(",")]
    assert speeds[0] == 1, "the first speed is the reference, 1"
    started = time.time()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="engine-speed-") as tmp:
        config = pipeline.StudyConfig(Path(tmp), classes=args.classes,
                                      modes=f"{BASELINE},{MODE}", work=args.work,
                                      mix=False, handoff_slowdown=None)
        the_plan = pipeline.prepare(config).plan
        measure_one = study_run.undisturbed(measure.measure, the_plan.budget.steal_repeats)
        fitted = calibrated(the_plan, measure_one)
        rows = []
        for load in the_plan.classes:
            predicted = {s: predicted_saturation(fitted, load.name, s) for s in speeds}
            light = args.light_share * min(predicted.values())
            cpu: dict[float, list] = {s: [] for s in speeds}
            sat: dict[float, list] = {s: [] for s in speeds}
            for _ in range(args.repeats):
                for s in speeds:
                    cpu[s].append(measure_one(at_speed(the_plan, s), load, MODE,
                                              "calibration", light))
                    sat[s].append(measure_one(at_speed(the_plan, s), load, MODE,
                                              "saturation", 0.0))
            base = statistics.median(m.run.engine_s for m in cpu[1.0])
            for s in speeds:
                engine_s = statistics.median(m.run.engine_s for m in cpu[s])
                wakeups = statistics.median(m.run.engine_wakeups for m in cpu[s])
                measured = median_run(sat[s])
                rows.append({
                    "class": load.name, "speed": s, "light": light, "engine_us": engine_s * 1e6,
                    "spread_us": np.ptp([m.run.engine_s for m in cpu[s]]) * 1e6,
                    "ratio": engine_s / base, "target": 1 / s, "wakeups": wakeups,
                    "measured": measured.run.throughput, "model": predicted[s],
                    "measured_1": median_run(sat[1.0]).run.throughput,
                    "model_1": predicted[1.0], "host_busy": measured.U_host,
                    "engine_busy": measured.U_engine, "cores": busy_cores(measured)})
        fits = [fitted.fits[load.name, MODE] for load in the_plan.classes]
    print_table(rows)
    print("\nThe fit at speed 1 (per request: host and engine demand with the other work "
          "charged per request; the share of each core other work held at any rate):")
    for f in fits:
        print(f"  {f.cls}: host {f.host * 1e6:.0f} + {f.host_bg * 1e6:.0f} us, core held "
              f"{f.host_share:.0%}; engine {f.engine * 1e6:.0f} + {f.engine_bg * 1e6:.0f} us, "
              f"core held {f.engine_share:.0%}; capacities "
              + ", ".join(f"{k} {v:,.0f}/s" for k, v in f.capacities.items()))
    print(f"\nrun time {time.time() - started:.0f} s; load average at the end "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")


def busy_cores(m: measure.Measured) -> str:
    """Each core's busy share of the run's wall time."""
    return ", ".join(f"{1 - measure.core_shares(c).get('idle', 1):.0%}" for c in m.cores)


def print_table(rows: list[dict]) -> None:
    def ok(error: float) -> str:
        return "yes" if abs(error) <= TOLERANCE else "NO"

    print("\nEngine CPU per request at one light Poisson rate (median of the repeats):")
    print("| class | speed | rate | engine CPU/request | spread | ratio to speed 1 | target "
          "| within 10% | engine wake-ups/request |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['class']} | {r['speed']:g} | {r['light']:,.0f}/s | {r['engine_us']:.1f} us "
              f"| {r['spread_us']:.1f} us | {r['ratio']:.2f} | {r['target']:.2f} "
              f"| {ok(r['ratio'] / r['target'] - 1)} | {r['wakeups']:.2f} |")
    print("\nSaturation (closed loop, the study's runs; median of the repeats) against the "
          "model fitted at speed 1 with EngineProfile.apply:")
    print("| class | speed | measured | model | error | within 10% | over speed 1's: "
          "measured | model | error | host thread busy | engine thread busy | cores busy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        error = r["model"] / r["measured"] - 1
        measured_rel, model_rel = r["measured"] / r["measured_1"], r["model"] / r["model_1"]
        print(f"| {r['class']} | {r['speed']:g} | {r['measured']:,.0f}/s | {r['model']:,.0f}/s "
              f"| {error:+.1%} | {ok(error)} | {measured_rel:.2f} | {model_rel:.2f} "
              f"| {model_rel / measured_rel - 1:+.1%} | {r['host_busy']:.0%} "
              f"| {r['engine_busy']:.0%} | {r['cores']} |")


if __name__ == "__main__":
    main()
