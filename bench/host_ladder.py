"""Seed 000's experiment on its host and on today's, and what each of today's host
mechanisms takes off a request's protocol work, alone: the host ladder that ``offload
study --preset toe-2009`` climbs after its study (``offloadlab.study.host_ladder``,
docs/study.md), without the study.

Prepares the study's own plan (seed 000's file sets, cores, work, ``--budget``'s
saturation run length) and runs every class at saturation, inline on each step from
seed 000's host to today's (seed-era, checksum-offload, segmentation-offload, sendfile,
modern) and in engine mode on the two ends, ``--rounds`` interleaved rounds, each run
through the study's ``measure`` (made again when disturbed). Prints:

- per class and step, the medians of E[X_p] (the host thread's CPU per request less the
  application's account), the capacity and the host thread's busy share, what each
  step's mechanism took off the step before's E[X_p], and its share of the seed-era
  host's;
- per class on each end, the saturation and set-up ratios engine / inline beside the
  seed's, and the checks of the seed's shape (issue 48's targets on the seed-era host).

Needs root, ip and ethtool.

    .venv/bin/python bench/host_ladder.py [--classes 0,1,2,3,4] [--rounds 3]
        [--budget quick]

About 3.5 minutes of load with the defaults (5 classes x (5 steps + 2 ends) x 3 rounds
x 2 s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from testbed_noise import study_runs

from offloadlab.errors import InputError
from offloadlab.study import host_ladder, toe2009
from offloadlab.testbed import netns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="0,1,2,3,4")
    parser.add_argument("--rounds", type=int, default=host_ladder.ROUNDS)
    parser.add_argument("--budget", default="quick")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        netns.check()
    except InputError as exc:
        sys.exit(f"error: {exc}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        plan, measure, _ = study_runs(Path(tmp), args.classes, "inline,engine", args.budget)

        def progress(_: str, done: float, total: float) -> None:
            print(f"\r{done:.0f} of {total:.0f} s of load", end="", file=sys.stderr)

        ladder = host_ladder.run(plan, measure, args.rounds, progress)
    print(file=sys.stderr)
    table = ladder.table.assign(
        host_us=ladder.table.host_s * 1e6, EXp_us=ladder.table.EXp_s * 1e6,
        removed_us=ladder.table.removed_s * 1e6)
    print(table[["class", "profile", "adds", "host_us", "EXp_us", "removed_us",
                 "removed_share", "throughput", "U_host"]].to_string(
        index=False, float_format=lambda x: f"{x:,.3f}"))
    print("\nengine / inline on both hosts, ours beside the seed's (connect: mean set-up):")
    print(ladder.hosts.to_string(index=False, float_format=lambda x: f"{x:,.4g}"))
    for host, rows in ladder.hosts.groupby("host", sort=False):
        for check in toe2009.shape_checks(rows, f"{host} host, "):
            print(f"{'met ' if check.holds else 'MISS'} {check.claim}: {check.detail}")
    print(f"\nRun time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
