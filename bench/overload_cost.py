"""Why the model's inline saturation is low: what a request costs the host under overload.

Every server-bound saturation row of the full study of 29 Nov 2026 (17:10) was under
the measured capacity (c0 -12.1%, c1 -7.7%, c2 -5.8%, c3 -1.2%, the mix -10.8%), while
the same rows' U_host met their targets below 95% busy. The model's capacity is one over
the host's demand per request as the calibration runs (0.1, 0.3, 0.6 of capacity) put it
once wake-ups are gone; the saturation runs are closed loop, with the host's queue long.

This benchmark prepares the study's own plan (file sets, cores, work, ``--budget``'s run
lengths) and, in ``--rounds`` rounds, runs each class in inline mode closed loop (the
study's saturation run) and Poisson at each ``--shares`` of the measured capacity, every
run through the study's ``measure`` (made again when the hypervisor took more than 2%).
It prints per run the host thread's CPU per request, its protocol part (less the
application's own account), its turns per request, the other work on the
host's core per request, and the core's total; then per class, medians by share, and a
fit over the open-loop runs up to ``--fit-below`` of capacity of

    protocol CPU per request = S + D * turns per request

(least squares), its prediction of the protocol cost at the saturation runs' own turns,
and the capacity that follows, beside the measured one. Turns are the host loop's turns
that found work, blocking or not (``wakeups.host_turns``), so they are counted under
overload too, where the host never blocks and its wake-ups (``wakeups.host``, shown
beside them) read 0.

    .venv/bin/python bench/overload_cost.py [--classes 0,3] [--shares 0.1,0.3,0.6,0.8,0.9]
        [--rounds 3] [--fit-below 0.95] [--budget standard]

About 2 minutes of load with the defaults (102 s on a quiet machine, 29 Nov 2026;
335 s beside a build, when many runs were made again).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from testbed_noise import study_runs

MODE = "inline"


def row(m, cls: str, share: float, i: int) -> dict:
    r = m.run
    return {"round": i, "class": cls, "share": share, "rate": r.rate,
            "throughput": r.throughput, "U_host": m.U_host, "host_us": r.host_s * 1e6,
            "proto_us": (r.host_s - r.app_s) * 1e6, "turns": r.host_turns,
            "wakeups": r.host_wakeups,
            "other_us": r.host_background_s * 1e6,
            "core_us": (r.host_s + np.nan_to_num(r.host_background_s)) * 1e6}


def gated_turns(lam: float, work: float, turn: float, phases: float) -> float:
    """Turns per request of a loop that, each turn, pays ``turn`` seconds and serves
    every event that came while the turn before ran (gated), and blocks when a turn
    brings none; each request brings ``phases`` events of ``work / phases`` each, as a
    Poisson stream of lam requests/s. The events a turn finds, n, form a branching
    chain: the next turn finds Poisson(a + rho n) with a = phases lam turn and
    rho = lam work, and after a turn that finds none the loop blocks until one comes
    (n = 1). Its generating function, iterated along z_(k+1) = exp(rho (z_k - 1)) from
    0, gives the share p0 of turns after which the loop blocks, and the chain's mean,
    E[n] = (a + p0) / (1 - rho): one turn per E[n] events. Light load gives ``phases``
    turns per request; heavy load (1 - rho) / (lam turn), fewer as the queue grows."""
    a, rho = phases * lam * turn, lam * work
    if rho >= 1:
        return 0.0
    z, q, tail = 0.0, 1.0, 0.0
    while True:  # z -> 1 geometrically, at rate rho
        q *= math.exp(a * (z - 1))
        z = math.exp(rho * (z - 1))
        tail += (z - 1) * q
        if 1 - z < 1e-12:
            break
    p0 = q / (1 - tail)
    return phases * (1 - rho) / (a + p0)


def explain(runs: pd.DataFrame, fit_below: float) -> None:
    """Medians by share, and the turn fit's prediction at the saturation runs."""
    for cls, g in runs.groupby("class", sort=False):
        print(f"\nclass {cls}, {MODE}: medians by share of capacity (closed loop: 'sat')")
        med = g.groupby("share")[["throughput", "U_host", "host_us", "proto_us", "turns",
                                  "wakeups", "other_us", "core_us"]].median()
        med.index = [("sat" if s == 0 else f"{s:g}") for s in med.index]
        print(med.to_string(float_format=lambda x: f"{x:,.3f}"))
        light = g[(g.share > 0) & (g.share <= fit_below)]
        sat = g[g.share == 0]
        X = np.column_stack([np.ones(len(light)), light.turns])
        (S, D), *_ = np.linalg.lstsq(X, light.proto_us.to_numpy(), rcond=None)
        pred = light.proto_us.to_numpy() - X @ (S, D)
        r2 = 1 - (pred ** 2).sum() / ((light.proto_us - light.proto_us.mean()) ** 2).sum()
        turns = sat.turns.median()
        predicted = S + D * turns
        app = (sat.host_us - sat.proto_us).median()
        other = sat.other_us.median()
        print(f"fit over {len(light)} open-loop runs up to {fit_below:g} of capacity: "
              f"protocol = {S:.1f} us + {D:.1f} us x turns/request (R² {r2:.2f})")
        # The gated loop with that turn cost, the application's and the line's
        # per-request work, and the lightest runs' turns per request as its phases.
        phases = med.turns.iloc[1] if len(med) > 1 else math.nan
        work = (g.host_us - g.proto_us).median() + S
        print(f"  gated loop ({phases:.2f} events per request, {work:.1f} us of work each "
              f"request, {D:.1f} us a turn): turns per request counted / predicted")
        for share, m in g[g.share > 0].groupby("share"):
            lam = m.throughput.median()
            print(f"    {share:g} of capacity ({lam:,.0f}/s): {m.turns.median():.2f} / "
                  f"{gated_turns(lam, work * 1e-6, D * 1e-6, phases):.2f}")
        print(f"  saturation runs: {turns:.3f} turns/request counted; protocol measured "
              f"{sat.proto_us.median():.1f} us, the line at that count {predicted:.1f} us")
        capacity, measured = 1e6 / (app + predicted + other), sat.throughput.median()
        print(f"  capacity from the fit (application {app:.1f} + protocol {predicted:.1f} "
              f"+ other {other:.1f} us): {capacity:,.0f}/s against {measured:,.0f}/s "
              f"measured ({capacity / measured - 1:+.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="0,3")
    parser.add_argument("--shares", default="0.1,0.3,0.6,0.8,0.9",
                        help="Poisson rates, as shares of the measured capacity")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fit-below", type=float, default=0.95)
    parser.add_argument("--budget", default="standard")
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",")]
    if args.rounds < 1 or not all(0 < s < 1.2 for s in shares):
        parser.error("--rounds must be at least 1 and each share in (0, 1.2)")
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # A study's plan needs an offload mode; only inline runs.
        plan, run, pairs = study_runs(Path(tmp), args.classes, f"{MODE},engine", args.budget)
        for i in range(args.rounds):
            for load, mode in [(load, mode) for load, mode in pairs if mode == MODE]:
                sat = run(plan, load, mode, "saturation", 0.0)
                rows.append(row(sat, load.name, 0.0, i))
                for share in shares:
                    m = run(plan, load, mode, "validation", share * sat.run.throughput)
                    rows.append(row(m, load.name, share, i))
            print(f"round {i + 1}/{args.rounds} done ({time.monotonic() - started:.0f} s)",
                  flush=True)
    frame = pd.DataFrame(rows)
    print(frame.to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
    explain(frame, args.fit_below)
    print(f"\nRun time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
