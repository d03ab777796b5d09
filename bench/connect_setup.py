"""Why connection set-up through the engine reads milliseconds at saturation (issue 48,
part 2): the server's queue, or the load generator's wait for its own core?

A client's connect() on loopback completes when the kernel has done the handshake; the
server's accept comes later and does not hold it (the listen backlog, 511, is deeper
than the study's 128 saturation clients). What the load generator reports as set-up
time is from its connect() to its loop seeing the socket writable. On 2 cores the
study gives the generator the engine's core, so in engine mode the generator waits for
that core behind the engine; in inline mode it has the core to itself.

This benchmark prepares the study's own plan (seed 000's file sets, cores, work,
``--budget``'s run lengths) and, in ``--rounds`` interleaved rounds, runs each class
in each mode with the generator pinned to the engine's core (as the study does) and to
the host's core instead: a saturation run (closed loop, 128 clients) and a Poisson run
at ``--share`` of the first round's inline capacity. It prints per (class, mode,
generator core) the medians of the capacity and of the mean set-up time in both runs.
If set-up follows the core the generator shares rather than the mode, it measures the
client's wait for a core, not the server.

    .venv/bin/python bench/connect_setup.py [--classes 0,2] [--modes inline,engine]
        [--share 0.3] [--rounds 3] [--budget standard]

About 3 minutes of load with the defaults.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from testbed_noise import rounds_arguments, study_runs

from offloadlab.mode_traits import BASELINE
from offloadlab.study import measure
from offloadlab.testbed import modes as testbed_modes


def run_on(plan, load, mode: str, use: str, rate: float, core: int) -> dict:
    """One run as the study's ``measure`` makes it, the generator pinned to ``core``."""
    requests, extra, rate = measure.stream_of(plan, load, use, rate)
    done = testbed_modes.run_mode(measure.options(plan, load, mode), requests,
                                  load.manifest, timeout_s=measure.TIMEOUT_S, records=True,
                                  cores=[core], **measure.LOAD, **extra)
    report = done.load.parsed
    throughput = (measure.capacity(done.load.records) if use == "saturation"
                  else report.throughput)
    return {"throughput": throughput, "connect_ms": (report.connect_mean_s or 0.0) * 1e3,
            "failed": report.failed}


def main() -> None:
    args = rounds_arguments(__doc__, "0,2", 0.3)
    started = time.monotonic()
    rows, light = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        plan, _, pairs = study_runs(Path(tmp), args.classes, args.modes, args.budget)
        cores = {"engine's": plan.engine_core, "host's": plan.host_core}
        if None in cores.values():
            sys.exit("error: the study found no two cores to pin the generator to")
        for i in range(args.rounds):
            for load, mode in pairs:
                for where, core in cores.items():
                    sat = run_on(plan, load, mode, "saturation", 0.0, core)
                    if mode == BASELINE and where == "engine's":
                        light.setdefault(load.name, args.share * sat["throughput"])
                    rows.append({"round": i, "class": load.name, "mode": mode,
                                 "generator on": where, "run": "saturation", **sat})
            for load, mode in pairs:
                for where, core in cores.items():
                    m = run_on(plan, load, mode, "validation", light[load.name], core)
                    rows.append({"round": i, "class": load.name, "mode": mode,
                                 "generator on": where, "run": "poisson", **m})
            print(f"round {i + 1}/{args.rounds} done ({time.monotonic() - started:.0f} s)",
                  flush=True)
    frame = pd.DataFrame(rows)
    print(frame.to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
    med = frame.pivot_table(index=["class", "mode", "generator on"], columns="run",
                            values=["throughput", "connect_ms"], aggfunc="median")
    print("\nmedians (set-up in ms; the Poisson runs at "
          f"{args.share:g} of inline's capacity):")
    print(med.to_string(float_format=lambda x: f"{x:,.3f}"))
    print(f"\nRun time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
