"""Does a second run of the same study give the same answer? Issue 46's stability
benchmark.

Runs ``offload study`` twice on the same file sets (the second serves the first's) and
prints, from the two summary.json files:

- each (class, mode, metric, source) accuracy row's status (met, missed or
  undecidable) in both runs, and the share of rows whose status matches (target: at
  least 90%);
- each verdict and the testbed's agreement with it in both runs, and whether every
  verdict matches, verdict and agreement both (target: every one);
- each (class, mode) pair's measured saturation in both runs and the ratio of the two
  (issue 7's target: at most 1.10 where the server, not the load generator, was the
  bottleneck in both; absolute throughput on this shared 2-core machine drifts between
  runs minutes apart);
- how long each study took.

The default is the issue's full scope: classes 0-3 in inline, engine and uring, with
their mix, standard budget; the two studies take over an hour. The handoff experiment
is left out: it has no rows or verdicts. Results: bench/results/study_stability.md.

With ``--across-hosts`` the second study runs across a test cluster on this machine
(``offload study --cluster``: the server in one network namespace, the load from three
others; root): issue 49's target is the same verdicts as the study run here.

    .venv/bin/python bench/study_stability.py [--classes 0,1,2,3] [--modes inline,engine,uring]
        [--budget standard] [--work DIST] [--replicates R] [--sweep-points N] [--keep DIR]
        [--across-hosts]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from offloadlab.testbed import testcluster

OFFLOAD = Path(sys.executable).with_name("offload")
STATUS_GOAL = 0.9
SATURATION_GOAL = 1.10
ABSENT = "absent"  # a row or verdict that only one of the runs has


@dataclass(frozen=True)
class Stability:
    """Two studies side by side. ``rows``: ((class, mode, metric, source), first status,
    second status); ``verdicts``: ((class, mode), (verdict, agree) of each run);
    ``saturation``: ((class, mode), measured req/s of each run, whether either run
    measured the load generator's capacity rather than the server's)."""

    rows: list[tuple[tuple, str, str]]
    verdicts: list[tuple[tuple, tuple, tuple]]
    saturation: list[tuple[tuple, float, float, bool]]

    @property
    def status_share(self) -> float:
        """The share of rows whose status is the same in both runs (a row only one run
        has does not match)."""
        return sum(a == b for _, a, b in self.rows) / len(self.rows)

    @property
    def verdicts_match(self) -> bool:
        return all(a == b for _, a, b in self.verdicts)

    @property
    def saturation_ratio(self) -> float:
        """The largest ratio between the two runs' saturation of any pair the server
        bounded in both; NaN when there is none."""
        return max((max(a, b) / min(a, b) for _, a, b, client in self.saturation
                    if not client), default=math.nan)


def compare(first: dict, second: dict) -> Stability:
    """Two studies' summary.json documents side by side: their accuracy rows' statuses,
    verdicts and measured saturation, matched by key."""
    def statuses(summary: dict) -> dict:
        return {(a["class"], a["mode"], a["metric"], a["source"]): _status(a)
                for a in summary["accuracy"]}

    def verdicts(summary: dict) -> dict:
        return {(v["class"], v["mode"]): (v["verdict"], v["agree"])
                for v in summary["verdicts"]}

    def saturation(summary: dict) -> dict:
        return {(s["class"], s["mode"]): (s["measured"], s["generator_bound"])
                for s in summary["saturation"]}

    a, b = statuses(first), statuses(second)
    va, vb = verdicts(first), verdicts(second)
    sa, sb = saturation(first), saturation(second)
    return Stability(
        rows=[(k, a.get(k, ABSENT), b.get(k, ABSENT)) for k in _keys(a, b)],
        verdicts=[(k, va.get(k, (ABSENT, ABSENT)), vb.get(k, (ABSENT, ABSENT)))
                  for k in _keys(va, vb)],
        saturation=[(k, sa[k][0], sb[k][0], sa[k][1] or sb[k][1])
                    for k in _keys(sa, sb) if k in sa and k in sb])


def _keys(a: dict, b: dict) -> list:
    """Both dicts' keys, the first's order, then those only the second has."""
    return list(dict.fromkeys([*a, *b]))


def _status(row: dict) -> str:
    if "status" not in row:
        where = "/".join(str(row.get(k)) for k in ("class", "mode", "metric", "source"))
        raise SystemExit(f"summary.json: accuracy row {where} has no 'status' (met, missed "
                         "or undecidable); it was written before issue 46's judge, which "
                         "replaces the bool 'met': run the study with the current offload")
    return row["status"]


def report(s: Stability, took_s: tuple[float, float]) -> None:
    print(f"{'class':6} {'mode':7} {'metric':9} {'source':11} {'run 1':>12} {'run 2':>12}")
    for (cls, mode, metric, source), a, b in s.rows:
        print(f"{cls:6} {mode:7} {metric:9} {source:11} {a:>12} {b:>12}"
              + ("" if a == b else "  differs"))
    print("\nverdicts (verdict/agree):")
    for (cls, mode), a, b in s.verdicts:
        print(f"  {cls:6} {mode:7} {'/'.join(a):>24} {'/'.join(b):>24}"
              + ("" if a == b else "  differs"))
    print(f"\nsaturation, req/s: {'run 1':>10} {'run 2':>10}  max/min")
    for (cls, mode), a, b, client in s.saturation:
        print(f"  {cls:6} {mode:7}  {a:10,.0f} {b:10,.0f}  {max(a, b) / min(a, b):7.3f}"
              + ("  (generator-bound: left out)" if client else ""))
    print(f"\nstudies took {took_s[0]:.0f} s and {took_s[1]:.0f} s")
    print("ratio max/min saturation over the runs, server-bound pairs: "
          + (f"{s.saturation_ratio:.3f}" if math.isfinite(s.saturation_ratio) else "none")
          + f" (target <= {SATURATION_GOAL:.2f})")
    same = sum(a == b for _, a, b in s.verdicts)
    print(f"verdicts the same in both runs: {same}/{len(s.verdicts)} (target: every one) "
          f"{'met' if s.verdicts_match else 'missed'}")
    for i in (1, 2):
        counts = collections.Counter(row[i] for row in s.rows)
        print(f"run {i}: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    matched = sum(a == b for _, a, b in s.rows)
    print(f"row statuses the same in both runs: {matched}/{len(s.rows)} = "
          f"{s.status_share:.1%} (target >= {STATUS_GOAL:.0%}) "
          f"{'met' if s.status_share >= STATUS_GOAL else 'missed'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="0,1,2,3")
    parser.add_argument("--modes", default="inline,engine,uring")
    parser.add_argument("--budget", default="standard")
    parser.add_argument("--work", help="application work per request (offload study --work)")
    parser.add_argument("--replicates", type=int, help="offload study --replicates")
    parser.add_argument("--sweep-points", type=int, help="offload study --sweep-points")
    parser.add_argument("--keep", type=Path, help="keep both studies' folders under DIR")
    parser.add_argument("--across-hosts", action="store_true",
                        help="run the second study across a test cluster of network "
                             "namespaces on this machine (offload study --cluster; root)")
    args = parser.parse_args()
    study = ["study", "--classes", args.classes, "--modes", args.modes, "--budget",
             args.budget, "--no-handoff"]
    for flag, value in (("--work", args.work), ("--replicates", args.replicates),
                        ("--sweep-points", args.sweep_points)):
        if value is not None:
            study += [flag, str(value)]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        outs = [root / "run-1", root / "run-2"]
        summaries, took = [], []
        for i, out in enumerate(outs):
            link = out / "fileset"
            if i and not link.exists():  # the second study serves the first's file sets
                out.mkdir(parents=True, exist_ok=True)
                link.unlink(missing_ok=True)  # a link left dangling
                link.symlink_to((outs[0] / "fileset").resolve())
            across = i and args.across_hosts
            with testcluster.started() if across else contextlib.nullcontext() as hosts:
                where = ["--cluster", hosts.scheduler] if across else []
                started = time.monotonic()
                subprocess.run([str(OFFLOAD), *study, *where, "--out", str(out)],
                               check=True, stdout=subprocess.DEVNULL)
                took.append(time.monotonic() - started)
            summaries.append(json.loads((out / "summary.json").read_text()))
            print(f"study {i + 1}/2: {took[-1]:.0f} s; hypervisor: "
                  f"{summaries[-1]['meta']['steal']}", file=sys.stderr)
        report(compare(*summaries), (took[0], took[1]))


if __name__ == "__main__":
    main()
