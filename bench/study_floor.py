"""How well could any model calibrated the study's way do? The calibration runs joined
by straight lines, judged as the study judges its model.

The study fits its model on calibration runs (0.1, 0.3 and 0.6 of each capacity) and
judges it on the validation sweep, so a model can be no closer to the sweep than the
testbed's calibration runs are. This benchmark measures that floor on kept studies: for
every utilisation row (U_host, and U_engine in the offload modes) it builds the
*calibration curve*, the calibration runs' means at their rates joined by straight
lines and extended along the end segments, which has no error of shape between the
calibration rates, and judges it with the study's own judge (``judge.judge_row``: the
study's scored points, the row's floor from ``summary.json``, MAPE within 5 %, K-S,
at least 4 points). The mix's curve is its classes' in their shares (the testbed's mix
costs each thread its classes' share-weighted CPU: ``bench/mix_parts.py``). Per study
it prints the rows met of the decidable ones, the model's (from the study) beside the
calibration curve's, and, for studies kept in pairs (``study_stability.py --keep``:
``DIR/run-1``, ``DIR/run-2``), the share of row statuses the same in both runs, for
each. Delay rows are left out: a straight line is no model of a delay near saturation.

The verdicts get the same treatment: at each verdict's operating rate (near the lowest
calibration rate, where a straight line will do) the calibration curves of the mean
delay, the offload mode's over inline's, give a ratio and a verdict by the model's
band (helps below 1 - 5 %, hurts above 1 + 5 %, neutral between); printed beside the
model's verdict and the testbed's paired ratio, and for pairs of studies how many
verdicts are the same in both runs. No server runs; a folder takes about a second.

    .venv/bin/python bench/study_floor.py STUDY_DIR [STUDY_DIR ...]
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
from study_rescore import study_folders

from offloadlab.mode_traits import BASELINE
from offloadlab.model.verdict import HELPS, HURTS, MARGIN, NEUTRAL
from offloadlab.study import judge
from offloadlab.study.compare import KS_P, TARGETS
from offloadlab.study.measure import scorable
from offloadlab.study.plan import MIX

METRICS = ("U_host", "U_engine")


def curve(calibration: pd.DataFrame, metric: str, rates: np.ndarray) -> np.ndarray:
    """The calibration runs' means of ``metric`` joined by straight lines at ``rates``,
    extended along the first and last segments."""
    means = calibration.groupby("rate")[metric].mean()
    x, y = means.index.to_numpy(float), means.to_numpy(float)
    inside = np.interp(rates, x, y)
    below = y[0] + (rates - x[0]) * (y[1] - y[0]) / (x[1] - x[0])
    above = y[-1] + (rates - x[-1]) * (y[-1] - y[-2]) / (x[-1] - x[-2])
    return np.where(rates < x[0], below, np.where(rates > x[-1], above, inside))


def statuses(folder: Path) -> pd.DataFrame:
    """Per utilisation row of the study in ``folder``: the model's status as the study
    judged it and the calibration curve's."""
    points = pd.read_parquet(folder / "results.parquet")
    summary = json.loads((folder / "summary.json").read_text())
    shares = summary["meta"].get("shares") or _shares(summary["meta"]["workload"])
    rows = {(a["class"], a["mode"], a["metric"]): a for a in summary["accuracy"]
            if a["source"] == "model" and a["metric"] in METRICS}
    testbed = points[points.source == "testbed"]
    out = []
    for (cls, mode, metric), row in sorted(rows.items()):
        val = testbed[(testbed["class"] == cls) & (testbed["mode"] == mode)
                      & (testbed.use == "validation")].sort_values("rate")
        rates = val.rate.to_numpy(float)
        if cls == MIX and not shares:
            continue
        parts = [(share, testbed[(testbed["class"] == c) & (testbed["mode"] == mode)
                                 & (testbed.use == "calibration")])
                 for c, share in (shares.items() if cls == MIX else [(cls, 1.0)])]
        predicted = sum(s * curve(cal, metric, rates) for s, cal in parts)
        # Between every part's lowest and highest calibration rate: no extrapolation.
        inside = ((rates >= max(cal.rate.min() for _, cal in parts))
                  & (rates <= min(cal.rate.max() for _, cal in parts)))
        busy = np.fmax(np.fmax(val.U_host, val.U_engine.fillna(0.0)),
                       val.core_busy.fillna(0.0))
        scored = scorable(busy, val.throughput, val.rate)
        floor = float(row["floor"] if row["floor"] is not None else np.nan)
        j, k = (judge.judge_row(predicted, val[metric].to_numpy(float), where,
                                TARGETS[metric], KS_P, floor, row["floor_source"])
                for where in (scored, scored & inside))
        out.append({"study": f"{folder.parent.name}/{folder.name}", "cls": cls, "mode": mode,
                    "metric": metric, "model": row["status"],
                    "model_mape": float(row["mape"] or np.nan), "curve": j.status,
                    "curve_mape": j.mape, "inside": k.status, "inside_mape": k.mape})
    return pd.DataFrame(out)


def verdicts(folder: Path) -> pd.DataFrame:
    """Per verdict of the study in ``folder``: the model's, the calibration curves' (the
    delay ratio at the operating rate, by the model's band) and the testbed's paired
    ratio."""
    points = pd.read_parquet(folder / "results.parquet")
    summary = json.loads((folder / "summary.json").read_text())
    # A calibration run's delay is the middle of its (symmetric) interval.
    cal = points[(points.source == "testbed") & (points.use == "calibration")].assign(
        T=lambda x: (x.T_lo + x.T_hi) / 2)
    out = []
    for v in summary["verdicts"]:
        rate = np.array([v["rate"]])

        def delay(mode: str, v: dict = v, rate: np.ndarray = rate) -> float:
            return curve(cal[(cal["class"] == v["class"]) & (cal["mode"] == mode)], "T",
                         rate)[0]

        ratio = delay(v["mode"]) / delay(BASELINE)
        out.append({"study": f"{folder.parent.name}/{folder.name}", "cls": v["class"],
                    "mode": v["mode"], "model": v["verdict"], "curve": _band(ratio),
                    "curve_ratio": ratio, "measured": v.get("measured_delay_ratio")})
    return pd.DataFrame(out)


def _band(ratio: float) -> str:
    return HELPS if ratio < 1 - MARGIN else HURTS if ratio > 1 + MARGIN else NEUTRAL


def _paired(table: pd.DataFrame, index: list[str], kinds: tuple[str, ...]) -> dict:
    """For each pair of studies kept as DIR/run-1 and DIR/run-2: per kind, (pair, rows
    the same in both runs, rows)."""
    split = table.study.str.rsplit("/", n=1)
    pairs = table.assign(pair=split.str[0], run=split.str[1])
    same: dict = {kind: [] for kind in kinds}
    for pair, rows in pairs.groupby("pair", sort=False):
        wide = rows.pivot_table(index=index, columns="run", values=list(kinds),
                                aggfunc="first")
        if wide.columns.get_level_values(1).nunique() != 2:
            continue
        for kind in kinds:
            a, b = (wide[kind][c] for c in sorted(wide[kind].columns))
            same[kind].append((pair, int((a == b).sum()), len(a)))
    return same


def _print_same(title: str, same: dict) -> None:
    kinds = list(same)
    if not same[kinds[0]]:
        return
    print(f"\n{title}, {' | '.join(kinds)}:")
    for i, (pair, _, n) in enumerate(same[kinds[0]]):
        cells = [f"{same[k][i][1]}/{n} ({same[k][i][1] / n:.0%})" for k in kinds]
        print(f"  {pair:<14} {' | '.join(cells)}")
    totals = [(sum(m for _, m, _ in same[k]), sum(n for _, _, n in same[k])) for k in kinds]
    print(f"  {'all':<14} {' | '.join(f'{m}/{n} ({m / n:.0%})' for m, n in totals)}")


def _shares(workload: str) -> dict[str, float]:
    """The classes' shares as studies before ``meta.shares`` (7 Dec 2026) wrote them in
    their workload's sentence: "... mixed (c0 25%, c1 25%, ...)"."""
    found = re.search(r"mixed \(([^)]*)\)", workload)
    return {} if found is None else {
        name: float(pct) / 100 for name, pct in re.findall(r"(\S+) ([\d.]+)%", found[1])}


def met_share(s: pd.Series) -> str:
    t = judge.tally(s)
    return f"{t.met}/{t.decidable} ({t.met_share:.0%})"


def main() -> None:
    folders = study_folders(__doc__.split("\n\n")[0])
    table = pd.concat([statuses(f) for f in folders], ignore_index=True)
    print("utilisation rows met of the decidable: the study's model | the calibration "
          "curve | the curve on the points between its calibration rates alone")
    for study, rows in [*table.groupby("study", sort=False), ("all", table)]:
        print(f"  {study:<14} {met_share(rows.model):>14} | {met_share(rows.curve):>14} | "
              f"{met_share(rows.inside):>14}")
    _print_same("row statuses the same in both runs of a pair",
                _paired(table, ["cls", "mode", "metric"], ("model", "curve")))
    missed = table[(table.curve == judge.MISSED)]
    if not missed.empty:
        print("\nrows the calibration curve missed (MAPE: curve, model):")
        for r in missed.itertuples(index=False):
            print(f"  {r.study:<14} {r.cls:<4} {r.mode:<7} {r.metric:<9} "
                  f"{r.curve_mape:6.1%} {r.model_mape:6.1%}  model {r.model}")

    calls = pd.concat([verdicts(f) for f in folders], ignore_index=True)
    print("\nverdicts: the model's | the calibration curves' (their delay ratio) | the "
          "testbed's paired ratio")
    for r in calls.itertuples(index=False):
        print(f"  {r.study:<14} {r.cls:<4} {r.mode:<7} {r.model:>8} | {r.curve:>8} "
              f"(x{r.curve_ratio:.3f}) | x{r.measured:.3f}")
    _print_same("verdicts the same in both runs of a pair",
                _paired(calls, ["cls", "mode"], ("model", "curve")))


if __name__ == "__main__":
    main()
