"""Benchmark: seed 004's handoff simulator against the paper's §6 numbers (issue 28).

Calibrates the cost model (offloadlab.handoff.run.calibrate, on the numbers in
offloadlab.handoff.paper.FITTED), runs every configuration the paper's numbers need at
the paper's run lengths (400,000 + 600,000 packets, 20,000 connections, seed 0), and
prints:
  1. the headline table: per configuration the paper's gain, ours before issue 28
     (constants, measured on 26 Nov 2026 with the default matrix) and ours now, and
     whether now is within ±5 points; the set the number belongs to (fitted,
     calibration or held out); then the most W can gain at 800 MIPS in any cost
     model that meets Table 1 (offloadlab.handoff.paper.host_ceiling);
  2. the calibration set (Table 1 and §6.2's idle shares) within ±5 points;
  3. the held-out set (numbers calibration never sees) within ±8 points;
  4. §6's signs (which configurations gain and which lose), and the wrong ones;
  5. totals: signs right, headline magnitudes within ±5 points, held-out within ±8.
With --out DIR it also writes the comparison as DIR/handoff_paper.csv (atomically).

    .venv/bin/python bench/handoff_paper.py [--seed 0] [--connections 20000] [--out DIR]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from offloadlab.handoff import paper
from offloadlab.handoff import run as h
from offloadlab.results import write_outputs


def pp(x: float) -> str:
    return f"{x * 100:+.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--connections", type=int, default=20_000)
    ap.add_argument("--out", help="folder for handoff_paper.csv")
    args = ap.parse_args()

    t0 = time.perf_counter()
    settings = h.calibrate(h.Settings(connections=args.connections, seed=args.seed))
    t_fit = time.perf_counter() - t0
    results, _ = h.run_all([h.parse_setup(s) for s in paper.setups()], settings)
    t_all = time.perf_counter() - t0
    by = {r["setup"]: r for r in results.to_dict("records")}

    print("Headline (issue 28): gain over the workload's baseline, points")
    print(f"{'configuration':<44} {'paper':>7} {'before':>7} {'now':>7}  ±5 pp  set")
    signs = within = 0
    for setup, metric, ours_paper, before in paper.HEADLINE:
        n = paper.Number(setup, metric, ours_paper, "")
        now = n.ours(by)
        ok = abs(now - ours_paper) <= paper.TOLERANCE
        signs += (now > 0) == (ours_paper > 0)
        within += ok
        label = setup if metric == "gain" else f"{setup} {metric}"
        print(f"{label:<44} {pp(ours_paper):>7} {pp(before):>7} {pp(now):>7}  "
              f"{'yes' if ok else 'no':<5}  {paper.role(setup, metric)}")

    w800 = "W-4096-P-L-FCFS-800"
    share = paper.stated(w800, "offloaded_share")
    print(f"\nCeiling: a W run offloading the paper's {share:.0%} at 800 MIPS gains at most "
          f"{pp(paper.host_ceiling(share))} in any cost model that meets Table 1's "
          f"host-first row (paper.host_ceiling); the paper states {pp(paper.stated(w800))}, "
          f"we give {pp(by[w800]['gain'])} with {by[w800]['offloaded_share']:.0%} offloaded")

    table = paper.compare(results)
    for kind, tol in (("fitted", paper.TOLERANCE), ("calibration", paper.TOLERANCE),
                      ("held out", paper.HELD_OUT_TOLERANCE)):
        rows = table[table.set == kind]
        print(f"\n{kind} set (within ±{tol * 100:.0f} points"
              f"{', a rate relatively' if kind == 'fitted' else ''}): "
              f"{int(rows.within.sum())} of {len(rows)}")
        knobs = paper.KNOBS if kind == "fitted" else [""] * len(rows)
        for r, knob in zip(rows.itertuples(index=False), knobs, strict=True):
            value = (f"{r.paper:,.0f} {r.ours:,.0f}" if "requests_per_s" in r.number
                     else f"{r.paper / 1e9:.2f} {r.ours / 1e9:.2f} Gb/s" if "bps" in r.number
                     else f"{r.paper * 100:6.1f} {r.ours * 100:6.1f}")
            print(f"  {r.number:<52} {r.source:<15} {value}  "
                  f"{'yes' if r.within else 'no'}" + (f"  <- {knob}" if knob else ""))

    print("\n§6's signs (gain over the workload's baseline)")
    wrong = [f"{setup} {by[setup]['gain'] * 100:+.1f}" for setup, sign in paper.SIGNS
             if (by[setup]["gain"] > 0) != (sign > 0)]
    print(f"  {len(paper.SIGNS) - len(wrong)} of {len(paper.SIGNS)} right"
          + "".join(f"\n  wrong: {w}" for w in wrong))

    held = table[table.set == "held out"]
    print(f"\nTotals: headline signs right {signs} of {len(paper.HEADLINE)}; headline "
          f"within ±5 pp {within} of {len(paper.HEADLINE)}; held out within ±8 pp "
          f"{int(held.within.sum())} of {len(held)}")
    print(f"Run time: calibration {t_fit:.0f} s, then {len(results)} runs {t_all - t_fit:.0f} s "
          f"(total {t_all:.0f} s)")
    if args.out:
        write_outputs(args.out, {"handoff_paper.csv": pd.DataFrame(table)})


if __name__ == "__main__":
    main()
