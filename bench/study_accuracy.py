"""Does the model meet its accuracy targets on the testbed, run after run? Issue 25's
benchmark.

Runs ``offload study`` ``--runs`` times per scope and prints, per source (``model``, the
extended model; ``seed_model``, seed 000's fitted on the same runs; and
``sim``), the share of targets met:

- accuracy: U_host and U_engine MAPE <= 5%, T MAPE <= 15%, on every (class, mode,
  metric) row with a scored point below 80% utilisation; the target is 90% of rows.
  Beside it, the testbed's own noise on each row (how far its points stray from the
  line through their neighbours) and how many rows are quiet enough to judge a model
  at the target at all. Neighbours run back to back and share the VM's slow spells,
  so this understates the floor; ``bench/testbed_noise.py`` measures it with repeated
  runs (an exact model meets 80-83% of rows with 5 s runs, 58% with 2 s);
- saturation: within ±10% on every row where the server, not the load generator, was
  the bottleneck; the target is every row;
- verdicts: identical across the runs, and each run's verdicts and fractions reproduced
  by ``offload model scenario-<mode>.toml --json`` on its exported scenario; also
  identical across the studies the hypervisor left alone (a study that kept runs with
  more than 2% of their cores' time stolen says so in its first note).

Scopes: ``demo`` (classes 0 and 3, inline and engine, quick budget, as ``offload demo``)
and ``full`` (classes 0-3 in inline, engine and uring, standard budget). On this 2-core
machine a demo study takes about 3 minutes and a full one about 25.

    .venv/bin/python bench/study_accuracy.py [--runs 3] [--scope demo|full|both] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OFFLOAD = Path(sys.executable).with_name("offload")
SCOPES = {
    "demo": ["--classes", "0,3", "--modes", "inline,engine", "--budget", "quick"],
    "full": ["--classes", "0,1,2,3", "--modes", "inline,engine,uring", "--budget", "standard"],
}
ACCURACY_GOAL = 0.9
# Before each study: warn when the machine was more than this busy (a quiet one idles
# at 1-2%).
QUIET_BUSY = 0.10
QUIET_WINDOW_S = 2.0
SATURATION_TOLERANCE = 0.10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scope", choices=[*SCOPES, "both"], default="both")
    parser.add_argument("--keep", type=Path, help="keep each study's folder under DIR")
    args = parser.parse_args()
    scopes = list(SCOPES) if args.scope == "both" else [args.scope]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for scope in scopes:
            studies = [run_study(scope, root / f"{scope}-{i + 1}", i, args.runs)
                       for i in range(args.runs)]
            report(scope, studies)


def run_study(scope: str, out: Path, i: int, runs: int) -> tuple[dict, dict]:
    """One study; its summary and, per offload mode, ``offload model``'s class rows on
    the scenario it exported."""
    busy = busy_share()
    if busy > QUIET_BUSY:
        print(f"warning: before {scope} study {i + 1} the machine was {busy:.0%} busy over "
              f"{QUIET_WINDOW_S:g} s; other work on the cores disturbs the testbed "
              "(a nice-19 build on the other core gave uring runs p99s of 40-1,000 ms)",
              file=sys.stderr)
    started = time.monotonic()
    subprocess.run([str(OFFLOAD), "study", *SCOPES[scope], "--no-handoff", "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    summary = json.loads((out / "summary.json").read_text())
    exported = {}
    for mode in summary["meta"]["modes"][1:]:
        done = subprocess.run([str(OFFLOAD), "model", str(out / f"scenario-{mode}.toml"),
                               "--json"], check=True, capture_output=True, text=True)
        exported[mode] = {r["class"]: r for r in json.loads(done.stdout)["rows"]
                          if r["class"] != "all"}
    print(f"{scope} study {i + 1}/{runs}: {time.monotonic() - started:.0f} s; hypervisor: "
          f"{summary['meta']['steal']}", file=sys.stderr)
    return summary, exported


def busy_share(window_s: float = QUIET_WINDOW_S) -> float:
    """The machine's busy share of all cores' time over ``window_s`` (/proc/stat)."""
    def times() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields[:8]) - idle, sum(fields[:8])
    busy0, all0 = times()
    time.sleep(window_s)
    busy1, all1 = times()
    return (busy1 - busy0) / max(all1 - all0, 1)


def report(scope: str, studies: list[tuple[dict, dict]]) -> None:
    print(f"\n== {scope}: {len(studies)} studies ==")
    met, rows = collections.Counter(), collections.Counter()
    for summary, _ in studies:
        for a in summary["accuracy"]:
            if a["n"] > 0:
                rows[a["source"]] += 1
                met[a["source"]] += _within(a["mape"], a["target"])
    print("accuracy (MAPE within its target, rows with a scored point; goal "
          f"{ACCURACY_GOAL:.0%} of rows):")
    for source in ("model", "seed_model", "sim"):
        if rows[source]:
            share = met[source] / rows[source]
            print(f"  {source:11} {met[source]:3}/{rows[source]:<3} {share:6.1%}"
                  f"  {'met' if share >= ACCURACY_GOAL else 'missed'}")
    judged = [a for summary, _ in studies for a in summary["accuracy"]
              if a["source"] == "model" and a["n"] > 0]
    quiet = [a for a in judged if _within(a["floor"], a["target"])]
    print(f"  rows whose testbed noise is within the target (the rest no smooth model can "
          f"be judged on): {len(quiet)}/{len(judged)}; model met on those: "
          f"{sum(_within(a['mape'], a['target']) for a in quiet)}/{len(quiet)} (this noise "
          "understates the floor: bench/testbed_noise.py)")
    print("  per row (MAPE of model / seed_model, then the testbed's noise; medians over "
          "the studies):")
    by_row = collections.defaultdict(lambda: collections.defaultdict(list))
    for summary, _ in studies:
        for a in summary["accuracy"]:
            by_row[a["class"], a["mode"], a["metric"]][a["source"]].append(a["mape"])
            if a["source"] == "model":
                by_row[a["class"], a["mode"], a["metric"]]["floor"].append(a["floor"])
    for (cls, mode, metric), sources in sorted(by_row.items()):
        print(f"    {cls:4} {mode:7} {metric:9} "
              + " / ".join(f"{_median(sources[s]):6.1%}" for s in ("model", "seed_model"))
              + f"   noise {_median(sources['floor']):6.1%}")
    saturation(studies)
    verdicts(studies)


def saturation(studies: list[tuple[dict, dict]]) -> None:
    scored = collections.Counter()
    within = collections.Counter()
    skipped = 0
    for summary, _ in studies:
        for s in summary["saturation"]:
            if s["generator_bound"]:
                skipped += 1
                continue
            for source, error in (("model", s["error"]), ("seed_model", s["seed_error"])):
                scored[source] += 1
                within[source] += _within(error, SATURATION_TOLERANCE)
    print(f"saturation within ±{SATURATION_TOLERANCE:.0%} where the server was the "
          f"bottleneck ({skipped} generator-bound rows left out; goal: every row):")
    for source in ("model", "seed_model"):
        if scored[source]:
            print(f"  {source:11} {within[source]:3}/{scored[source]:<3} "
                  f"{within[source] / scored[source]:6.1%}")
    print("  per row (error of model / seed_model, each study):")
    by_row = collections.defaultdict(list)
    for summary, _ in studies:
        for s in summary["saturation"]:
            by_row[s["class"], s["mode"]].append(s)
    for (cls, mode), rows in sorted(by_row.items()):
        print(f"    {cls:4} {mode:7} " + "  ".join(
            f"{_pct(r['error'])} / {_pct(r['seed_error'])}"
            + (" (generator-bound)" if r["generator_bound"] else "") for r in rows))


def verdicts(studies: list[tuple[dict, dict]]) -> None:
    seen = collections.defaultdict(list)
    coherent = total = 0
    for summary, exported in studies:
        for v in summary["verdicts"]:
            seen[v["class"], v["mode"]].append(f"{v['verdict']}/{v['agree']}")
            row = exported[v["mode"]][v["class"]]
            total += 1
            coherent += (row["verdict"] == v["verdict"]
                         and math.isclose(row["f"], v["f"], abs_tol=1e-9))
    same = sum(len({x.split("/")[0] for x in labels}) == 1 for labels in seen.values())
    print(f"verdicts identical across the studies: {same}/{len(seen)} (class, mode) pairs; "
          f"reproduced by offload model on the exported scenario: {coherent}/{total}")
    # A study that kept runs the hypervisor stole from gives the machine's verdicts, not
    # the server's.
    quiet = [i for i, (summary, _) in enumerate(studies)
             if not summary["meta"]["steal_counts"]["disturbed"]]
    steady = sum(len({labels[i].split("/")[0] for i in quiet}) <= 1 for labels in seen.values())
    print(f"  studies the hypervisor disturbed: {len(studies) - len(quiet)}/{len(studies)}; "
          f"verdicts identical across the others: {steady}/{len(seen)}")
    for (cls, mode), labels in sorted(seen.items()):
        print(f"    {cls:4} {mode:7} verdict/agree: {', '.join(labels)}")


def _within(error: float | None, bound: float) -> bool:
    """|error| <= bound; a missing error (JSON null) is a miss."""
    return error is not None and abs(error) <= bound


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{x:+6.1%}"


def _median(values: list[float]) -> float:
    finite = sorted(v for v in values if v is not None and math.isfinite(v))
    if not finite:
        return math.nan
    mid = len(finite) // 2
    return finite[mid] if len(finite) % 2 else (finite[mid - 1] + finite[mid]) / 2


if __name__ == "__main__":
    main()
