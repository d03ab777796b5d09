"""Does a light run measure the same right after an overload as after a rest?

A study calibrates at 0.1, 0.3 and 0.6 of each capacity straight after its saturation
runs, and validates later. In the kept full-scope study of 29 Nov 2026 the calibration
runs read higher than the validation runs at the same rates: the mean delay ×1.0-1.75,
and at the lightest rate the inline host's busy share ×1.20-1.46. The model is fitted on
the first and judged on the second, so such a gap alone makes rows miss. One candidate
is what an overload leaves behind: tens of thousands of TIME_WAIT sockets (131,072, the
kernel's cap, during a study's saturation runs), which live 60 s.

This benchmark prepares the study's own plan (seed 000's file sets, cores, work,
``--budget``'s run length) and, for each mode, measures the capacity once. Then, for
``--rounds`` rounds: per mode a saturation run and at once a Poisson run at ``--share``
of the capacity (``after``); then ``--rest`` seconds idle and the same Poisson run again,
the same arrivals (``rested``). Each run goes through the study's own ``measure``, made
again when the hypervisor took more than 2% of the cores. It prints each light run's
TIME_WAIT count (``/proc/net/sockstat``) and per mode the medians of host CPU per
request, U_host, U_engine and the mean delay, after against rested, and their ratio.

    .venv/bin/python bench/after_overload.py [--classes 0] [--modes inline,engine]
        [--share 0.1] [--rounds 4] [--rest 65]

About 6 minutes with the defaults (4 rounds of 2 modes, 65 s rests).
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import pandas as pd
from testbed_noise import study_runs


def time_wait() -> int:
    """TCP sockets in TIME_WAIT now (IPv4)."""
    text = Path("/proc/net/sockstat").read_text()
    return int(re.search(r"^TCP:.* tw (\d+)", text, re.M).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="0")
    parser.add_argument("--modes", default="inline,engine")
    parser.add_argument("--share", type=float, default=0.1,
                        help="the light runs' rate, as a share of the measured capacity")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rest", type=float, default=65.0,
                        help="seconds idle before the rested runs (TIME_WAIT lasts 60 s)")
    parser.add_argument("--budget", default="standard")
    args = parser.parse_args()
    if args.rounds < 2 or not 0 < args.share < 1 or args.rest < 0:
        parser.error("--rounds must be at least 2, --share in (0, 1), --rest at least 0")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        plan, run, pairs = study_runs(Path(tmp), args.classes, args.modes, args.budget)
        rate = {(load.name, mode): args.share * run(plan, load, mode, "saturation", 0.0)
                .run.throughput for load, mode in pairs}
        rows = []

        def light(load, mode, when: str, i: int) -> None:
            tw = time_wait()
            m = run(plan, load, mode, "validation", rate[load.name, mode])
            rows.append({"round": i, "class": load.name, "mode": mode, "when": when,
                         "time_wait": tw, "host_us": m.run.host_s * 1e6,
                         "U_host": m.U_host, "U_engine": m.U_engine, "T_ms": m.run.T * 1e3})

        for i in range(args.rounds):
            for load, mode in pairs:
                run(plan, load, mode, "saturation", 0.0)
                light(load, mode, "after", i)
            time.sleep(args.rest)
            for load, mode in pairs:
                light(load, mode, "rested", i)
            print(f"round {i + 1}/{args.rounds} done ({time.monotonic() - started:.0f} s)",
                  flush=True)
    frame = pd.DataFrame(rows)
    print(frame.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print("\nmedians, after an overload against after a rest (ratio after / rested):")
    for (cls, mode), g in frame.groupby(["class", "mode"], sort=False):
        med = g.groupby("when")[["time_wait", "host_us", "U_host", "U_engine", "T_ms"]].median()
        parts = [f"{k} {med.loc['after', k]:,.3g} vs {med.loc['rested', k]:,.3g} "
                 f"(x{med.loc['after', k] / med.loc['rested', k]:.2f})"
                 for k in ("host_us", "U_host", "U_engine", "T_ms")
                 if pd.notna(med.loc["rested", k])]
        print(f"  {cls} {mode}: TIME_WAIT {med.loc['after', 'time_wait']:,.0f} vs "
              f"{med.loc['rested', 'time_wait']:,.0f}; " + "; ".join(parts))
    print(f"Run time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
