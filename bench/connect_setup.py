"""Why connection set-up through the engine reads milliseconds at saturation (issue 48,
part 2): the server's queue, or the load generator's wait for its own core?

A client's connect() on loopback completes when the kernel has done the handshake; the
server's accept comes later and does not hold it (the listen backlog, 511, is deeper
than the study's 128 saturation clients). The load generator reports set-up time from
its connect() to the socket connected, read as connect() returns (over loopback the
handshake is done by then); until 8 Dec 2026 it read it when its loop next reached the
socket's readiness event, which behind a burst of the engine's answers came
milliseconds later. On 2 cores the study gives the generator the engine's core, so in
engine mode the generator may wait for that core behind the engine; in inline mode it
has the core to itself.

This benchmark prepares the study's own plan (seed 000's file sets, cores, work,
``--budget``'s run lengths) and, in ``--rounds`` interleaved rounds, runs each class
in each mode with the generator pinned to the engine's core (as the study does) and to
the host's core instead: a saturation run (closed loop, 128 clients) and a Poisson run
at ``--share`` of the first round's inline capacity. It prints per (class, mode,
generator core) the medians of the capacity and of the mean set-up time in both runs.
If set-up follows the core the generator shares rather than the mode, it measures the
client's wait for a core, not the server.

It also prints how the set-up times are spread (median, 99th percentile, and the
share of connections that took longer than ``SLOW_S``: a SYN the listener dropped is
sent again only after the kernel's initial retransmission timeout, 1 s, so a few of
those among thousands make a mean of milliseconds) beside the kernel's TCP counters
over each run (/proc/net/netstat: ``LISTEN_COUNTERS``).

    .venv/bin/python bench/connect_setup.py [--classes 0,2] [--modes inline,engine]
        [--share 0.3] [--rounds 3] [--budget standard]

About 3 minutes of load with the defaults.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from testbed_noise import rounds_arguments, study_runs

from offloadlab.mode_traits import BASELINE
from offloadlab.study import measure
from offloadlab.testbed import modes as testbed_modes

# Set-up slower than this waited for a retransmitted SYN (the first is sent again after
# 1 s); the handshake on loopback otherwise takes tens of microseconds.
SLOW_S = 0.5
# The kernel's counters (TcpExt in /proc/net/netstat) of what makes a handshake wait:
# the listener's accept queue full, SYNs dropped for any reason, SYNs sent again; and
# connections whose TIME_WAIT was cut short (the table full) or whose port a new SYN
# reused while it lasted (recycled, or refused by PAWS on an old timestamp).
LISTEN_COUNTERS = ("ListenOverflows", "ListenDrops", "TCPSynRetrans", "TCPTimeWaitOverflow",
                   "TWRecycled", "PAWSActive")


def tcp_counters() -> dict[str, float]:
    """The kernel's :data:`LISTEN_COUNTERS` in this network namespace (NaN for one
    this kernel does not keep)."""
    lines = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines()
             if line.startswith("TcpExt:")]
    counters = dict(zip(lines[0][1:], lines[1][1:], strict=True))
    return {n: float(counters.get(n, "nan")) for n in LISTEN_COUNTERS}


def run_on(plan, load, mode: str, use: str, rate: float, core: int) -> dict:
    """One run as the study's ``measure`` makes it, the generator pinned to ``core``."""
    requests, extra, rate = measure.stream_of(plan, load, use, rate)
    before = tcp_counters()
    done = testbed_modes.run_mode(measure.options(plan, load, mode), requests,
                                  load.manifest, timeout_s=measure.TIMEOUT_S, records=True,
                                  cores=[core], **measure.LOAD, **extra)
    after = tcp_counters()
    report = done.load.parsed
    throughput = (measure.capacity(done.load.records) if use == "saturation"
                  else report.throughput)
    setup = done.load.records["connect_s"].to_numpy(float)
    setup = setup[np.isfinite(setup)]
    slow = setup >= SLOW_S
    return {"throughput": throughput, "connect_ms": (report.connect_mean_s or 0.0) * 1e3,
            "p50_ms": np.median(setup) * 1e3, "p99_ms": np.quantile(setup, 0.99) * 1e3,
            "slow_per_10k": slow.mean() * 1e4,
            # The mean without the retransmitted handshakes.
            "fast_ms": setup[~slow].mean() * 1e3,
            **{n: (after[n] - before[n]) / max(len(setup), 1) * 1e4 for n in LISTEN_COUNTERS},
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
    spread = frame.groupby(["class", "mode", "generator on", "run"])[
        ["connect_ms", "fast_ms", "p50_ms", "p99_ms", "slow_per_10k", *LISTEN_COUNTERS]
    ].median()
    print(f"\nset-up spread, medians over rounds (ms; slow: set-up over {SLOW_S:g} s, and "
          "the kernel's counters, per 10,000 connections; fast_ms: the mean without the "
          "slow ones):")
    print(spread.to_string(float_format=lambda x: f"{x:,.3f}"))
    print(f"\nRun time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
