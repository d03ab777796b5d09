"""Does the load generator cost the same per request in a saturation run as in a sweep?

On 2 cores the study gives the load generator the engine's core, and the model charges
that core the generator's CPU per request as its calibration runs measured it (open
loop: Poisson arrivals). The saturation runs it predicts are closed loops (128 clients,
zero think time). In every full-scope study of 6-7 Dec 2026 the model put uring's class
3 saturation 7-27% under the closed-loop run, while the open-loop sweep itself fell
short between 0.9 and 1.06 times the model's rate. This benchmark measures both loops
on the same server: per class and mode, in ``--rounds`` interleaved rounds, the
saturation run, then Poisson at ``--share`` of that run's capacity, and prints (medians)
the engine thread's CPU per request and the other work on its core per request (the
generator, and interrupts no thread's clock sees) in each loop, the capacity the engine
core's parts imply in each, 1 / (engine + other), beside the capacity measured, and
whether the study marks the saturation run generator-bound (``generator_bound``).
Inline has no engine thread: its generator's core holds the generator alone.

    .venv/bin/python bench/saturation_loop.py [--classes 2,3]
        [--modes inline,engine,uring] [--share 0.85] [--rounds 3] [--budget standard]

Every run goes through the study's ``measure``, made again when the hypervisor took more
than 2% of the cores.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import pandas as pd
from generator_bytes import busy
from testbed_noise import rounds_arguments, study_runs

from offloadlab.study.compare import generator_bound
from offloadlab.study.measure import Measured

LOOPS = ("closed", "open")


def parts(m: Measured, core: int) -> dict:
    """A run's engine thread CPU and other work on the engine's core, per request (us)."""
    other = m.run.engine_background_s
    if not math.isfinite(other):  # inline: the generator's core holds it alone
        other = busy(m, core) / m.run.throughput
    engine = m.run.engine_s if math.isfinite(m.run.engine_s) else 0.0
    return {"throughput": m.run.throughput, "engine_us": engine * 1e6,
            "other_us": other * 1e6, "U_host": m.U_host}


def main() -> None:
    args = rounds_arguments(__doc__, "2,3", 0.85, modes="inline,engine,uring",
                            share_of="the same mode's saturation run in that round")
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plan, run, pairs = study_runs(Path(tmp), args.classes, args.modes, args.budget)
        core = plan.engine_core
        for i in range(args.rounds):
            for load, mode in pairs:
                closed = run(plan, load, mode, "saturation", 0.0, replicate=i)
                rows.append({"round": i, "class": load.name, "mode": mode, "loop": "closed",
                             "bound": generator_bound(closed, core), **parts(closed, core)})
                rate = args.share * closed.run.throughput
                opened = run(plan, load, mode, "validation", rate, replicate=i)
                rows.append({"round": i, "class": load.name, "mode": mode, "loop": "open",
                             "rate": rate, **parts(opened, core)})
            print(f"round {i + 1}/{args.rounds} done ({time.monotonic() - started:.0f} s)",
                  flush=True)
    report(pd.DataFrame(rows), args.share)
    print(f"\nRun time: {time.monotonic() - started:.0f} s")


def report(frame: pd.DataFrame, share: float) -> None:
    med = frame.groupby(["class", "mode", "loop"], sort=False).median(numeric_only=True)
    print(f"\nmedians of {frame['round'].nunique()} rounds; open: Poisson at {share:.0%} of "
          "the closed loop's capacity; per request on the engine's core (us)")
    print(f"{'class':5} {'mode':6} {'engine':>13} {'other':>13} {'other':>6} "
          f"{'capacity implied':>17} {'measured':>8} {'host':>5} {'gen-bound':>9}")
    print(f"{'':5} {'':6} {'closed / open':>13} {'closed / open':>13} {'ratio':>6} "
          f"{'closed / open':>17} {'closed':>8} {'busy':>5} {'runs':>9}")
    for (cls, mode), g in med.groupby(level=[0, 1], sort=False):
        c, o = g.loc[(cls, mode, "closed")], g.loc[(cls, mode, "open")]

        def implied(r: pd.Series) -> float:
            return 1e6 / (r.engine_us + r.other_us)

        bound = frame[(frame["class"] == cls) & (frame["mode"] == mode)]["bound"].dropna()
        print(f"{cls:5} {mode:6} {c.engine_us:6.1f}/{o.engine_us:6.1f} "
              f"{c.other_us:6.1f}/{o.other_us:6.1f} {c.other_us / o.other_us:6.2f} "
              f"{implied(c):8,.0f}/{implied(o):8,.0f} {c.throughput:8,.0f} {c.U_host:5.0%} "
              f"{int(bound.sum())}/{len(bound):<7}")


if __name__ == "__main__":
    main()
