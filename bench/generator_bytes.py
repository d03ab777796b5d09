"""What the load generator's receive path costs per byte, and what that does to the study's
saturation runs on 2 cores (issue 48, "the machine's limit").

The study gives the load generator the engine's core. Its receive path copies every
body byte out of the kernel, so for large files it, not the server, can be what a
saturation run measures (the study marks such rows ``generator_bound``). A generator
that drops bodies in the kernel unread (``discard``: ``recv`` with ``MSG_TRUNC``,
docs/load.md) pays per packet but not per byte.

This benchmark prepares the study's own plan (seed 000's file sets, cores, work,
``--budget``'s run lengths) and, in ``--rounds`` interleaved rounds, runs per class:

- inline, Poisson at ``--share`` of the first round's inline capacity, copying and then
  discarding: the generator alone on its core, so that core's busy time per request
  is the generator's CPU per request; the difference over the class's mean body size is
  what each byte costs it;
- each mode's saturation run (closed loop), copying and discarding: the capacity, the
  host thread's and the generator's core's busy shares, and whether the generator's
  core was the bottleneck (as the study marks it: ``generator_bound``).

It prints medians per class: the generator's CPU per request both ways and per byte,
and per mode the capacity both ways with the ratio offload / inline both ways. Every
run goes through the study's ``measure``, made again when the hypervisor took more than
2 % of the cores.

    .venv/bin/python bench/generator_bytes.py [--classes 3,4] [--modes inline,engine]
        [--share 0.5] [--rounds 3] [--budget standard]

About 4 minutes of load with the defaults, plus writing the file sets (class 4: 1-5 MiB
files).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from testbed_noise import rounds_arguments, study_runs

from offloadlab.mode_traits import BASELINE
from offloadlab.study.compare import generator_bound
from offloadlab.study.measure import Measured, core_shares

DROPS = {False: "copy", True: "discard"}


def busy(m: Measured, core: int) -> float:
    """The share of the run's wall time ``core`` was busy."""
    return 1 - core_shares(next(c for c in m.cores if c.core == core))["idle"]


def main() -> None:
    args = rounds_arguments(__doc__, "3,4", 0.5)
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plan, run, pairs = study_runs(Path(tmp), args.classes, args.modes, args.budget)
        core = plan.engine_core
        plans = {d: dataclasses.replace(plan, discard=d) for d in DROPS}
        light = {}
        for i in range(args.rounds):
            for load, mode in pairs:
                for drop, name in DROPS.items():
                    m = run(plans[drop], load, mode, "saturation", 0.0)
                    rows.append({"round": i, "class": load.name, "mode": mode, "body": name,
                                 "run": "saturation", "throughput": m.run.throughput,
                                 "U_host": m.U_host, "generator_core": busy(m, core),
                                 "bound": generator_bound(m, core)})
                    if mode == BASELINE and drop is False:
                        light.setdefault(load.name, args.share * m.run.throughput)
                if mode != BASELINE:
                    continue
                for drop, name in DROPS.items():
                    m = run(plans[drop], load, mode, "validation", light[load.name])
                    rows.append({"round": i, "class": load.name, "mode": mode, "body": name,
                                 "run": "poisson", "throughput": m.run.throughput,
                                 "U_host": m.U_host,
                                 "generator_us": busy(m, core) / m.run.throughput * 1e6,
                                 "bytes": float(np.mean(m.run.sizes))})
            print(f"round {i + 1}/{args.rounds} done ({time.monotonic() - started:.0f} s)",
                  flush=True)
    frame = pd.DataFrame(rows)
    print(frame.to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
    report(frame)
    print(f"\nRun time: {time.monotonic() - started:.0f} s")


def report(frame: pd.DataFrame) -> None:
    poisson = frame[frame.run == "poisson"]
    print("\nThe generator's CPU per request, inline, Poisson (medians):")
    for cls, g in poisson.groupby("class", sort=False):
        us = g.groupby("body")["generator_us"].median()
        size = g["bytes"].median()
        per_byte = (us["copy"] - us["discard"]) * 1e3 / size
        print(f"  {cls}: {g.throughput.median():,.0f}/s, mean body {size / 1024:,.0f} KiB: "
              f"copy {us['copy']:.1f} us, discard {us['discard']:.1f} us; "
              f"{per_byte:.3f} ns per body byte copied")
    sat = frame[frame.run == "saturation"]
    print("\nSaturation (medians; generator-bound: the share of runs the study marks so, "
          "study/compare.py's generator_bound):")
    med = sat.groupby(["class", "mode", "body"], sort=False).agg(
        throughput=("throughput", "median"), U_host=("U_host", "median"),
        generator_core=("generator_core", "median"), bound=("bound", "mean"))
    print(med.to_string(float_format=lambda x: f"{x:,.3f}"))
    for (cls, body), g in med.reset_index().groupby(["class", "body"], sort=False):
        base = g[g["mode"] == BASELINE].throughput.iloc[0]
        for r in g[g["mode"] != BASELINE].itertuples():
            print(f"  {cls} {r.mode}/{BASELINE}, {body}: x{r.throughput / base:.2f}")


if __name__ == "__main__":
    main()
