"""Benchmark: re-score a kept study's testbed points with the current model.

A model change should be judged on the same measurements as the model it replaces, not
on a new study whose run-to-run spread (docs/study.md) is larger than most changes. This
reads a study's output folder (``results.parquet``, ``summary.json`` and the exported
``scenario-<mode>.toml``), evaluates the current model on each exported scenario at the
testbed's rates, chooses the shape of the other work on the engine's core and refits d0
on the study's calibration runs as the study does (measured less model, the replicates
of each rate pooled, the rates inverse-variance weighted: ``fit.burst_scv``,
``fit.by_replicates``, ``fit.combine``; a negative d0 held at 0, ``run.kept_d0``), and
prints per class, mode and metric the MAPE the study reported beside the current
model's, on the points the study scores (below 80 % busy, the offered rate kept up),
and the current model's with d0 as studies fitted it until 7 December 2026 (each run
weighed by its own interval), with the median signed errors of both. No server runs;
a folder takes a few seconds.

Inline is scored on the host alone of any exported scenario (each holds it, with the
classes' inline d0). The mix is left out: its d0 is the classes' mixture, not a fit of
its own.

    .venv/bin/python bench/study_rescore.py STUDY_DIR [STUDY_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab import model, scenario
from offloadlab.calibrate import fit
from offloadlab.mode_traits import traits
from offloadlab.study.compare import TARGETS
from offloadlab.study.measure import scorable
from offloadlab.study.run import kept_d0

# Per metric: the model's column and the testbed's, inline (the host alone) and offloaded.
METRICS = {"inline": {"U_host": ("U_noe", "U_host"), "T": ("T_noe", "T_noe")},
           "offload": {"U_host": ("U_cpu", "U_host"), "U_engine": ("U_oe", "U_engine"),
                       "T": ("T", "T")}}


def with_burst(sc: scenario.Scenario, scv: float) -> scenario.Scenario:
    """``sc`` with its engine core's background per request of shape ``scv``."""
    per_class = tuple((name, fit.burst(d.mean, scv)) for name, d in sc.engine.per_class)
    return replace(sc, engine=replace(sc.engine, per_class=per_class))


def predict(sc: scenario.Scenario, cls, rates: np.ndarray, inline: bool, d0: float
            ) -> dict[str, np.ndarray]:
    """The model's columns for class ``cls`` of ``sc`` alone at ``rates``, its delays with
    ``d0`` in place of the scenario's: the host alone (``inline``) or through the engine."""
    out = dict(model.evaluate(replace(sc, classes=(replace(cls, offload=1.0),)), rates).overall)
    delay = "T_noe" if inline else "T"
    out[delay] = out[delay] - (cls.d0 if inline else cls.d0_offload) + d0
    return out


def gaps(sc: scenario.Scenario, cls, cal: pd.DataFrame, inline: bool
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each calibration run's offered rate, mean delay less the model's without d0, and
    half-width: what the study fits d0 to, once its replicates are pooled per rate."""
    column = METRICS["inline" if inline else "offload"]["T"]
    bare = predict(sc, cls, cal.rate.to_numpy(), inline, 0.0)[column[0]]
    return (cal.rate.to_numpy(), cal[column[1]].to_numpy() - bare,
            (cal["T_hi"] - cal["T_lo"]).to_numpy() / 2)


def signed(predicted: np.ndarray, measured: np.ndarray) -> float:
    """The median signed relative error of ``predicted`` (negative: under the testbed)."""
    return float(np.median(np.asarray(predicted) / np.asarray(measured) - 1))


def rescore(folder: Path) -> pd.DataFrame:
    points = pd.read_parquet(folder / "results.parquet")
    # summary.json writes an infinite MAPE as "inf" and a missing one as null.
    reported = {(a["class"], a["mode"], a["metric"]): float(a["mape"] or np.nan)
                for a in json.loads((folder / "summary.json").read_text())["accuracy"]
                if a["source"] == "model"}
    testbed = points[points.source == "testbed"]
    exported = sorted(folder.glob("scenario-*.toml"))
    rows = []
    for mode in sorted(set(testbed["mode"])):
        inline = mode == "inline"
        # Every exported scenario holds the host alone and the classes' inline d0.
        path = exported[0] if inline and exported else folder / f"scenario-{mode}.toml"
        if not path.exists():
            continue
        kept = scenario.load(path)
        if not inline:
            # The engine's polling as the study now exports it (scenarios kept before
            # 7 Dec 2026 do not say).
            kept = replace(kept, engine=replace(kept.engine, polls=traits(mode).engine_spins))
        runs_of = {cls.name: testbed[(testbed["class"] == cls.name) & (testbed["mode"] == mode)]
                   for cls in kept.classes}
        calibration = {c: runs[runs.use == "calibration"] for c, runs in runs_of.items()
                       if not runs.empty}

        def shaped(scv: float, kept=kept, calibration=calibration) -> list:
            sc = with_burst(kept, scv)
            return [fit.by_replicates(*gaps(sc, cls, calibration[cls.name], False))
                    for cls in sc.classes if cls.name in calibration]

        fitted = kept
        if not inline:
            # The engine core's bursts chosen on the calibration runs, as the study does.
            scv = fit.burst_scv(shaped)
            fitted = with_burst(kept, scv)
            print(f"{folder.parent.name}/{folder.name} {mode}: engine core's background "
                  f"scv {scv:g}", file=sys.stderr)
        for cls in fitted.classes:
            runs = runs_of[cls.name]
            if runs.empty:
                continue
            # Kept as the study keeps it: a negative d0 (the model over-predicting the
            # calibration delays) is held at 0. Beside it, d0 as studies fitted it until
            # 7 Dec 2026: each run weighed by its own interval.
            rates, gap, width = gaps(fitted, cls, calibration[cls.name], inline)
            d0 = kept_d0(fit.combine(*fit.by_replicates(rates, gap, width))[0])
            d0_runs = kept_d0(fit.combine(gap, width)[0])
            val = runs[runs.use == "validation"]
            # As the study scores: the busier core, everything on it counted (kept
            # studies older than the core_busy column: the threads alone).
            busy = np.fmax(val.U_host, val.U_engine.fillna(0.0))
            if "core_busy" in val:
                busy = np.fmax(busy, val.core_busy.fillna(0.0))
            val = val[scorable(busy, val.throughput, val.rate)]
            now = predict(fitted, cls, val.rate.to_numpy(), inline, d0)
            per_run = predict(fitted, cls, val.rate.to_numpy(), inline, d0_runs)
            for metric, (column, measured) in METRICS["inline" if inline else "offload"].items():
                seen = val[measured].to_numpy()
                rows.append({"study": f"{folder.parent.name}/{folder.name}",
                             "cls": cls.name, "mode": mode,
                             "metric": metric, "n": len(val),
                             "then": reported.get((cls.name, mode, metric), np.nan),
                             "runs": fit.mape(per_run[column], seen),
                             "now": fit.mape(now[column], seen),
                             "signed_runs": signed(per_run[column], seen),
                             "signed_now": signed(now[column], seen),
                             "target": TARGETS[metric]})
    return pd.DataFrame(rows)


def study_folders(description: str) -> list[Path]:
    """The kept ``offload study --out`` folders named on the command line; exits with a
    message naming those without a study's results."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("folders", nargs="+", type=Path, help="offload study output folders")
    folders = ap.parse_args().folders
    missing = [str(f) for f in folders
               if not ((f / "results.parquet").exists() and (f / "summary.json").exists())]
    if missing:
        sys.exit(f"error: no results.parquet and summary.json in {', '.join(missing)}; "
                 "give the --out folders of offload study runs")
    return folders


def main() -> None:
    folders = study_folders(__doc__.splitlines()[0])
    table = pd.concat([rescore(f) for f in folders], ignore_index=True)
    print("MAPE on the study's scored points: as the study reported it (then), and with "
          "the current model, d0 weighed per run (as until 7 Dec 2026) and pooled per "
          "rate (now)")
    print(f"{'study':<16} {'mode':<7} {'class':<6} {'metric':<9} {'n':>3} "
          f"{'then':>7} {'per run':>7} {'now':>7} {'target':>7}")
    for r in table.itertuples(index=False):
        print(f"{r.study:<16} {r.mode:<7} {r.cls:<6} {r.metric:<9} {r.n:>3} "
              f"{r.then * 100:6.1f}% {r.runs * 100:6.1f}% {r.now * 100:6.1f}% "
              f"{r.target * 100:6.0f}%")
    for metric, rows in table.groupby("metric", sort=False):
        met = {c: int((rows[c] <= rows.target).sum()) for c in ("then", "runs", "now")}
        print(f"{metric}: median MAPE then {rows.then.median() * 100:.1f}%, per run "
              f"{rows.runs.median() * 100:.1f}%, now {rows.now.median() * 100:.1f}%; rows "
              f"within target then {met['then']}, per run {met['runs']}, now {met['now']} "
              f"of {len(rows)}; median signed error per run "
              f"{rows.signed_runs.median() * 100:+.1f}% ({int((rows.signed_runs < 0).sum())} "
              f"rows under), now {rows.signed_now.median() * 100:+.1f}% "
              f"({int((rows.signed_now < 0).sum())} under)")


if __name__ == "__main__":
    main()
