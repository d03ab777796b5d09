"""How closely can the testbed judge a model? Issue 25's accuracy targets against the
testbed's own run-to-run spread.

The study scores its model by MAPE against single runs: U_host and U_engine within 5%,
mean delay T within 15%. A model can do no better than the testbed repeats itself. This
benchmark measures that: it prepares the study's own plan (file sets, work, cores,
standard budget), measures each (class, mode)'s capacity once, and then repeats one
Poisson run at ``--share`` of it, the same arrivals every time, ``--runs`` times in
interleaved rounds (each run through the study's own ``measure``, made again when the
hypervisor took more than 2% of the cores, as in a study). Per (class, mode, metric) it
prints:

- the median and the coefficient of variation of the repeats, and the correlation of
  each run with the pair's next one (near 0: the spread is not a slow drift that
  longer or interleaved runs would average out);
- ``exact``: the row MAPE of a model that is exactly right but calibrated the study's
  way, on three runs: the mean of ``CALIBRATION_RUNS`` consecutive repeats, scored
  against each of the next ``SCORED_RUNS`` (a study's row has 5-11 points). Each window
  of the series gives one such row; printed are the median row MAPE and the share of
  windows within the target. It is a floor: the study calibrates at other rates than
  it scores, which adds the fit's extrapolation to this;
- ``oracle``: the row MAPE of the runs' own median, a model no calibration can beat;
- for each offload mode's engine thread, what its CPU per request moves with from run
  to run: its wake-ups per request, counted by the server, and the other work on its
  core per request (the load generator's, on this 2-core machine).

Before that it measures each (class, mode)'s capacity ``--saturations`` times, and
prints how far apart two of the study's capacity measurements (the median of three
runs) fall: the saturation target's own floor.

    .venv/bin/python bench/testbed_noise.py [--classes 0,3] [--modes inline,engine]
        [--share 0.4] [--runs 16] [--budget standard|quick] [--out DIR]

About 9 minutes with the defaults on this 2-core machine (554 s: 64 runs of 5 s, 36
saturation runs, the file sets).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.calibrate import fit
from offloadlab.results import write_outputs
from offloadlab.study import pipeline
from offloadlab.study.measure import measure
from offloadlab.study.plan import SATURATION_REPEATS
from offloadlab.study.run import undisturbed

TARGETS = {"U_host": 0.05, "U_engine": 0.05, "T": 0.15}
SATURATION_TOLERANCE = 0.10
CALIBRATION_RUNS = 3
SCORED_RUNS = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="0,3")
    parser.add_argument("--modes", default="inline,engine")
    parser.add_argument("--share", type=float, default=0.4,
                        help="the rate, as a share of the measured capacity")
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--saturations", type=int, default=3 * SATURATION_REPEATS,
                        help="saturation runs per (class, mode), in interleaved rounds")
    parser.add_argument("--budget", default="standard",
                        help="the study budget whose run length the runs take")
    parser.add_argument("--out", type=Path, help="also write DIR/testbed_noise.csv")
    args = parser.parse_args()
    if args.runs < CALIBRATION_RUNS + SCORED_RUNS:
        parser.error(f"--runs must be at least {CALIBRATION_RUNS + SCORED_RUNS}")
    if args.saturations < 2 * SATURATION_REPEATS:
        parser.error(f"--saturations must be at least {2 * SATURATION_REPEATS}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        plan, run, pairs = study_runs(Path(tmp), args.classes, args.modes, args.budget)
        saturation = []
        for i in range(args.saturations):
            for load, mode in pairs:
                m = run(plan, load, mode, "saturation", 0.0)
                saturation.append({"round": i, "class": load.name, "mode": mode,
                                   "capacity": m.run.throughput, "steal": m.steal,
                                   "repeats": m.repeats})
            print(f"saturation round {i + 1}/{args.saturations} done "
                  f"({time.monotonic() - started:.0f} s)", flush=True)
        capacity = pd.DataFrame(saturation).groupby(["class", "mode"])["capacity"].median()
        rates = {pair: args.share * c for pair, c in capacity.items()}
        rows = []
        for i in range(args.runs):
            for load, mode in pairs:
                m = run(plan, load, mode, "validation", rates[load.name, mode])
                rows.append({"round": i, "class": load.name, "mode": mode,
                             "rate": rates[load.name, mode], "U_host": m.U_host,
                             "U_engine": m.U_engine, "T": m.run.T, "steal": m.steal,
                             "repeats": m.repeats, "engine_s": m.run.engine_s,
                             "engine_wakeups": m.run.engine_wakeups,
                             "engine_background_s": m.run.engine_background_s})
            print(f"round {i + 1}/{args.runs} done ({time.monotonic() - started:.0f} s)",
                  flush=True)
    frame, saturation = pd.DataFrame(rows), pd.DataFrame(saturation)
    report(frame)
    report_engine(frame)
    report_saturation(saturation)
    print(f"Run time: {time.monotonic() - started:.0f} s")
    if args.out:
        write_outputs(args.out, {"testbed_noise.csv": frame,
                                 "testbed_noise_saturation.csv": saturation})


def rounds_arguments(doc: str, classes: str, share: float, modes: str = "inline,engine",
                     share_of: str = "inline's capacity") -> argparse.Namespace:
    """The command line of a benchmark that runs classes and modes in interleaved rounds
    with Poisson runs at a share of a capacity (``share_of`` says which): --classes,
    --modes, --share, --rounds and --budget, checked."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--classes", default=classes)
    parser.add_argument("--modes", default=modes)
    parser.add_argument("--share", type=float, default=share,
                        help=f"the Poisson runs' rate, as a share of {share_of}")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", default="standard")
    args = parser.parse_args()
    if args.rounds < 1 or not 0 < args.share < 1:
        parser.error("--rounds must be at least 1 and --share in (0, 1)")
    return args


def study_runs(folder: Path, classes: str, modes: str, budget: str, mix: bool = False):
    """The study's own plan for ``classes`` and ``modes`` (its file sets under
    ``folder``; with ``mix``, the classes' mix too, in ``plan.loads``), its ``measure``
    made again for the hypervisor as a study does, and the plan's (class load, mode)
    pairs."""
    config = pipeline.StudyConfig(folder, classes=classes, modes=modes, budget=budget,
                                  mix=mix, handoff_slowdown=None)
    plan = pipeline.prepare(config).plan
    pairs = [(load, mode) for load in plan.classes for mode in plan.modes]
    return plan, undisturbed(measure, plan.budget.steal_repeats), pairs


def exact_rows(x: np.ndarray) -> np.ndarray:
    """Row MAPEs of an exact model calibrated on CALIBRATION_RUNS consecutive runs and
    scored on the next SCORED_RUNS, one per window of the series ``x``."""
    span = CALIBRATION_RUNS + SCORED_RUNS
    return np.array([fit.mape(np.full(SCORED_RUNS, x[s:s + CALIBRATION_RUNS].mean()),
                              x[s + CALIBRATION_RUNS:s + span])
                     for s in range(len(x) - span + 1)])


def report(frame: pd.DataFrame) -> None:
    print(f"\n{'class':5} {'mode':6} {'metric':8} {'median':>9} {'CV':>6} {'next r':>6} "
          f"{'exact MAPE':>10} {'within':>6} {'oracle':>6} {'target':>6}")
    met, within = 0, []
    for (cls, mode), runs in frame.groupby(["class", "mode"], sort=False):
        for metric, target in TARGETS.items():
            x = runs.sort_values("round")[metric].to_numpy(float)
            if not np.isfinite(x).all():
                continue
            exact = exact_rows(x)
            oracle = fit.mape(np.full(len(x), np.median(x)), x)
            median_row = np.median(exact)
            within.append(np.mean(exact <= target))
            met += median_row <= target
            scale = 1e3 if metric == "T" else 100
            unit = "ms" if metric == "T" else "%"
            print(f"{cls:5} {mode:6} {metric:8} {np.median(x) * scale:7.2f}{unit:>2} "
                  f"{x.std(ddof=1) / x.mean():6.1%} {np.corrcoef(x[:-1], x[1:])[0, 1]:6.2f} "
                  f"{median_row:10.1%} {np.mean(exact <= target):6.0%} {oracle:6.1%} "
                  f"{target:6.0%}")
    print(f"\nan exact model calibrated on {CALIBRATION_RUNS} runs meets its target on "
          f"{met} of {len(within)} rows in their median window, and on {np.mean(within):.0%} "
          "of the rows it is judged on (the mean of 'within'); issue 25 asks 90% of a "
          "study's rows; "
          f"runs made again for stolen time: {int(frame['repeats'].sum())}, most stolen in "
          f"a kept run: {frame['steal'].max():.1%}")


def report_engine(frame: pd.DataFrame) -> None:
    """The engine thread's CPU per request beside what it may move with: a thread that
    sleeps less because its work took longer shows a negative correlation with its
    wake-ups; work on its core that slows with it, a positive one with the background."""
    engine = frame[np.isfinite(frame["engine_s"])]
    if engine.empty:
        return
    print("\nengine thread, run to run: CPU per request against its wake-ups per request "
          "and the other work on its core per request")
    print(f"{'class':5} {'mode':6} {'CPU':>8} {'CV':>6} {'wake-ups':>8} {'CV':>6} "
          f"{'corr':>6} {'other':>8} {'CV':>6} {'corr':>6}")
    for (cls, mode), runs in engine.groupby(["class", "mode"], sort=False):
        cpu, woke, other = (runs[k].to_numpy(float) for k in
                            ("engine_s", "engine_wakeups", "engine_background_s"))

        # uring's SQPOLL thread spins instead of sleeping: no wake-ups are counted.
        print(f"{cls:5} {mode:6} {cpu.mean() * 1e6:6.1f}us {_cv(cpu)} {woke.mean():8.3f} "
              f"{_cv(woke)} {_corr(cpu, woke)} {other.mean() * 1e6:6.1f}us {_cv(other)} "
              f"{_corr(cpu, other)}")


def _cv(x: np.ndarray) -> str:
    return f"{x.std(ddof=1) / x.mean():6.1%}" if np.isfinite(x).all() else f"{'-':>6}"


def _corr(x: np.ndarray, y: np.ndarray) -> str:
    return f"{np.corrcoef(x, y)[0, 1]:6.2f}" if np.isfinite(y).all() else f"{'-':>6}"


def report_saturation(saturation: pd.DataFrame) -> None:
    """Capacity as the study measures it, the median of SATURATION_REPEATS saturation
    runs: how far two such measurements of the same server lie apart."""
    print(f"\ncapacity (closed loop, zero think time; the study's is the median of "
          f"{SATURATION_REPEATS} runs)")
    print(f"{'class':5} {'mode':6} {'median':>8} {'CV':>6} {'medians of 3':>22} "
          f"{'pairs within ±10%':>17}")
    within = []
    for (cls, mode), runs in saturation.groupby(["class", "mode"], sort=False):
        x = runs.sort_values("round")["capacity"].to_numpy(float)
        groups = len(x) // SATURATION_REPEATS
        medians = np.median(x[:groups * SATURATION_REPEATS].reshape(groups, -1), axis=1)
        close = [abs(a / b - 1) <= SATURATION_TOLERANCE
                 for i, a in enumerate(medians) for b in medians[i + 1:]]
        within.append(np.mean(close))
        print(f"{cls:5} {mode:6} {np.median(x):8,.0f} {x.std(ddof=1) / x.mean():6.1%} "
              f"{', '.join(f'{v:,.0f}' for v in medians):>22} {np.mean(close):17.0%}")
    print(f"two capacity measurements of one server agree within ±10% in "
          f"{np.mean(within):.0%} of pairs; issue 25 asks the model within ±10% on every "
          "server-bound row")


if __name__ == "__main__":
    main()
