"""Does ``offload study --trace`` take an access log end to end within issue 47's 10
minutes on the quick budget, and does the mix's measured host utilisation back the
model? Issue 47's "Trace end to end" targets.

Cases:

- ``synth``: a 100,000-request Combined Log Format trace from ``offload workload synth``
  (about 100 s of traffic at 900 requests/s kept, SURGE sizes, 2,000 Zipf clients);
- ``real``: a real access log nobody here wrote, at its own size: Logstalgia's
  ``example.log`` (Debian package ``logstalgia`` 1.1.4-1, file
  ``/usr/share/logstalgia/example.log``, GPL-3+; 3,260 requests of four minutes of a
  photo site on 22 April 2009, host names anonymised). It is read where the package is
  installed, else unpacked from ``apt-get download logstalgia`` into the run's
  temporary folder.

For each: ``offload study --trace FILE`` with the quick budget (and everything else at
its defaults, the handoff experiment included), its wall time beside the target and the
plan's minutes of load, the classes kept and their shares, and the mix's U_host rows
(model, per mode): met, missed or undecidable, with MAPE and floor. The issue's target
for those rows: ``met``, or ``undecidable`` with its floor shown.

    .venv/bin/python bench/study_trace.py [--case synth|real|both] [--requests 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OFFLOAD = Path(sys.executable).with_name("offload")
TARGET_S = 600.0
REAL_LOG = Path("/usr/share/logstalgia/example.log")
REAL_PACKAGE = "logstalgia"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=["synth", "real", "both"], default="both")
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="keep each study's folder under DIR")
    args = parser.parse_args()
    cases = ["synth", "real"] if args.case == "both" else [args.case]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for case in cases:
            trace = synth_trace(root, args.requests) if case == "synth" else real_log(root)
            study(case, trace, root / f"study-{case}")


def synth_trace(root: Path, requests: int) -> Path:
    path = root / "synth.log"
    subprocess.run([str(OFFLOAD), "workload", "synth", "clf", str(path), "--requests",
                    str(requests)], check=True, stdout=subprocess.DEVNULL)
    return path


def real_log(root: Path) -> Path:
    """Logstalgia's example log: installed, or unpacked from its Debian package."""
    if REAL_LOG.is_file():
        return REAL_LOG
    unpacked = root / REAL_PACKAGE
    unpacked.mkdir(exist_ok=True)
    subprocess.run(["apt-get", "download", REAL_PACKAGE], cwd=unpacked, check=True,
                   capture_output=True)
    deb = next(unpacked.glob(f"{REAL_PACKAGE}_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
    print(f"real log: {deb.name}, {REAL_LOG}", file=sys.stderr)
    return unpacked / REAL_LOG.relative_to("/")


def study(case: str, trace: Path, out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    started = time.monotonic()
    done = subprocess.run([str(OFFLOAD), "study", "--trace", str(trace), "--out", str(out)],
                          capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        print(f"== {case}: offload study exited {done.returncode} after {wall:.0f} s\n"
              f"{done.stderr[-2000:]}")
        return
    summary = json.loads((out / "summary.json").read_text())
    meta = summary["meta"]
    planned = next((line for line in done.stderr.splitlines() if "minutes of load" in line),
                   "")
    print(f"== {case}: {trace.name} ==")
    print(f"wall time {wall:.0f} s ({wall / 60:.1f} min) against the target "
          f"{TARGET_S / 60:.0f} min: {'met' if wall <= TARGET_S else 'missed'}; {planned}")
    print(f"hypervisor: {meta['steal']}")
    print(f"workload: {meta['workload']}")
    print("the mix's host utilisation (model), per mode: outcome, MAPE over scored/measured "
          "points, floor (target: met, or undecidable with its floor shown)")
    for a in summary["accuracy"]:
        if a["class"] == "mix" and a["metric"] == "U_host" and a["source"] == "model":
            floor = "none" if a["floor"] is None else f"{a['floor']:.1%}"
            mape = "n/a" if a["mape"] is None else f"{a['mape']:.1%}"
            print(f"  {a['mode']:7} {a['status']:12} MAPE {mape:>7} over {a['n']}/{a['ks_m']} "
                  f"points, floor {floor} ({a['floor_source']}); {a['why']}")
    mix_points(out)


def mix_points(out: Path) -> None:
    """The mix's swept points: the rate its trace window offered, the measured and the
    model's host utilisation, the measured mean delay."""
    import pandas as pd

    frame = pd.read_parquet(out / "results.parquet")
    mix = frame[frame["class"] == "mix"]
    measured = mix[(mix["source"] == "testbed") & (mix["use"] == "validation")]
    model = mix[(mix["source"] == "model") & (mix["use"] == "prediction")]
    print("  mode    rate/s  U_host measured  model   delay ms")
    for row in measured.itertuples():
        at = model[(model["mode"] == row.mode) & (model["rate"] == row.rate)]
        predicted = at["U_host"].iloc[0] if len(at) else float("nan")
        delay = row.T if row.mode != "inline" else row.T_noe
        print(f"  {row.mode:7} {row.rate:6,.0f}  {row.U_host:15.3f}  {predicted:5.3f}  "
              f"{delay * 1e3:8.2f}")


if __name__ == "__main__":
    main()
