"""Seed 000's experiment on each host (issue 48): ``offload study --preset toe-2009`` once
per ``--host-profile``, and per class the ratios offload / inline beside the seed's.

Seed 000's shape, the issue's targets for the seed-era host: classes 0-1 hurt or
neutral (saturation ratio at most 1.05), classes 2-4 helped more as files grow, and
connection set-up through the engine no slower than inline for classes 0-2. The study's
own checks (summary.json's ``toe_2009.checks``) are printed per profile; rows where the
load generator bounded a saturation run carry the model's ratio with the generator on
cores of its own.

    .venv/bin/python bench/toe2009.py [--profiles modern,seed-era] [--budget quick]
        [--keep DIR] [-- extra offload study flags]

The seed-era host needs root, ip and ethtool. Each study is seed 000's five classes in
inline and engine mode without the handoff experiment or the mix.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OFFLOAD = Path(sys.executable).with_name("offload")
QUANTITIES = ("saturation", "conn_per_min", "connect", "goodput")


def study(profile: str, budget: str, out: Path, extra: list[str]) -> tuple[dict, float]:
    """One preset study on ``profile``: its summary's toe_2009 part and its time."""
    started = time.monotonic()
    command = [str(OFFLOAD), "study", "--preset", "toe-2009", "--budget", budget,
               "--host-profile", profile, "--no-handoff", "--no-mix", "--out", str(out),
               *extra]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return summary["toe_2009"], time.monotonic() - started


def report(parts: dict[str, tuple[dict, float]]) -> None:
    def ratio(x) -> str:
        return "   –" if x is None else f"{x:4.2f}"

    print(f"\n{'class':6} {'profile':9} " + " ".join(f"{q:>16}" for q in QUANTITIES)
          + "  generator-bound: model, client elsewhere")
    for profile, (part, _) in parts.items():
        for row in part["rows"]:
            cells = [f"{ratio(row[f'ratio_{q}'])} ({ratio(row[f'seed_ratio_{q}'])})"
                     for q in QUANTITIES]
            bound = (f"yes: x{row['model_ratio_elsewhere']:.2f}" if row["generator_bound"]
                     else "no")
            print(f"{row['class']:6} {profile:9} " + " ".join(f"{c:>16}" for c in cells)
                  + f"  {bound}")
    print("(ours offload / inline, the seed's TOE / Non-TOE in brackets)")
    for profile, (part, took) in parts.items():
        print(f"\n{profile} host ({took / 60:.1f} min):")
        for check in part["checks"]:
            print(f"  {'met   ' if check['holds'] else 'MISSED'} {check['claim']}: "
                  f"{check['detail']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default="modern,seed-era")
    parser.add_argument("--budget", default="quick")
    parser.add_argument("--keep", type=Path, help="keep each study's folder under DIR")
    parser.add_argument("extra", nargs="*", help="more offload study flags, after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        parts = {}
        for profile in args.profiles.split(","):
            print(f"studying the {profile} host …", flush=True)
            parts[profile] = study(profile, args.budget, root / profile, args.extra)
    report(parts)


if __name__ == "__main__":
    main()
