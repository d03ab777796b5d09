"""The software offload engine against inline mode, per size class (issue 6's second
benchmark).

On seed 000's file set (one set per class), ``offload testbed run`` serves each class
in inline and in engine mode under the same saturating closed loop (keep-alive), host
thread on core 0 and engine on core 1, ``--runs`` times. Two measurements per class:

1. no application work: host CPU seconds per request in each mode (the target: engine at
   most 0.5 times inline for classes 2-4 and no more than inline for classes 0-1), the
   engine's commands per request and mean batch, and what one command costs: host and
   engine CPU per request divided by commands per request;
2. with application work (``--work``, default det(200us)), so the host is the
   bottleneck: saturation throughput of each mode.

Prints medians and, last, ``ratio ours/peer`` where ours is engine mode and the peer is
inline mode (host CPU per request, then throughput with work). Needs the package
installed in .venv (README) and about 200 MB of temporary disk for the file set.

    .venv/bin/python bench/engine_vs_inline.py [--runs 5] [--duration 3s] [--clients 32]
                                               [--work 'det(200us)'] [--classes 0,1,2,3,4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

OFFLOAD = Path(sys.executable).with_name("offload")


def testbed(fileset: Path, cls: int, args, work: str | None) -> dict[str, dict]:
    """One `offload testbed run` of both modes on one class: each mode's summary."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [str(OFFLOAD), "testbed", "run", "--fileset", str(fileset), "--class", str(cls),
               "--mode", "inline,engine", "--clients", str(args.clients),
               "--keep-alive", "100", "--duration", args.duration, "--json", str(out)]
        if args.pin:
            cmd += ["--host-core", "0", "--engine-core", "1"]
        if work:
            cmd += ["--work", work]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        modes = json.loads(out.read_text())["modes"]
    return {m["mode"]: m["summary"] for m in modes}


def medians(runs: list[dict[str, dict]], mode: str, key: str) -> float:
    return statistics.median(r[mode][key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--duration", default="3s")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--work", default="det(200us)")
    parser.add_argument("--classes", default="0,1,2,3,4", help="Size classes to run.")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="Do not pin host and engine (default: cores 0 and 1).")
    args = parser.parse_args()
    classes = [int(c) for c in args.classes.split(",")]
    cpu_ratios, rate_ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(OFFLOAD), "workload", "fileset", "--preset", "toe-2009",
                        "--out", tmp], check=True, stdout=subprocess.DEVNULL)
        sets = sorted(p for p in Path(tmp).iterdir() if p.is_dir())
        print(f"{args.runs} runs per point, {args.clients} keep-alive clients, "
              f"{args.duration} per mode; medians")
        print("class  host µs/req inline  engine  ratio   cmds/req  batch  "
              "host ns/cmd  engine ns/cmd   req/s with work inline  engine  ratio")
        for cls in classes:
            fileset = sets[cls]
            plain = [testbed(fileset, cls, args, None) for _ in range(args.runs)]
            loaded = [testbed(fileset, cls, args, args.work) for _ in range(args.runs)]
            h_in, h_en = (medians(plain, m, "host_cpu_s") for m in ("inline", "engine"))
            e_en = medians(plain, "engine", "engine_cpu_s")
            cmds = medians(plain, "engine", "commands")
            batch = medians(plain, "engine", "batch_mean")
            r_in, r_en = (medians(loaded, m, "throughput") for m in ("inline", "engine"))
            cpu_ratios.append(h_en / h_in)
            rate_ratios.append(r_en / r_in)
            print(f"{cls:5d}  {h_in * 1e6:18.2f}  {h_en * 1e6:6.2f}  {h_en / h_in:5.2f}   "
                  f"{cmds:8.2f}  {batch:5.1f}  {h_en / cmds * 1e9:11.0f}  "
                  f"{e_en / cmds * 1e9:13.0f}   {r_in:22.0f}  {r_en:6.0f}  {r_en / r_in:5.2f}")
    print("ratio ours/peer host-cpu-per-request "
          + " ".join(f"c{c}={r:.2f}" for c, r in zip(classes, cpu_ratios, strict=True))
          + " throughput-with-work "
          + " ".join(f"c{c}={r:.2f}" for c, r in zip(classes, rate_ratios, strict=True)))


if __name__ == "__main__":
    main()
