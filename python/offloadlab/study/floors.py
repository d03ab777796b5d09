"""A row's floor: the MAPE that a model exactly on the true means would score against the
study's points, from the spread of each point's replicates (:func:`judge.replicate_floor`
over the scored points). A study with replicates measures its own; a study of single
runs (the quick budget) reads the last one measured on this machine at its run length,
which every study with replicates stores in the user's cache.

The stored floor is a single run's, so that any study can scale it: the floors of the
points' own replicates, each times the square root of its replicate count, pooled. It is
kept per workload (``Plan.floors_key``: seed 000's file sets, a file set or a trace by
name), so that a trace's class c1 does not read the floor of seed 000's.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from offloadlab.mode_traits import traits
from offloadlab.results import write_json
from offloadlab.study import judge
from offloadlab.study.judge import REPLICATES, UNMEASURED
from offloadlab.study.measure import scored
from offloadlab.study.plan import SEED_FILESETS

# The metrics a row is scored on, and how each is read from a point.
METRICS = {"U_host": lambda m: m.U_host, "U_engine": lambda m: m.U_engine,
           "T": lambda m: m.run.T}

Key = tuple[str, str, str]  # (class, mode, metric)


def _values(study) -> Iterator[tuple[Key, np.ndarray]]:
    """Per (class, mode, metric) of a study: its scored points' replicates, one row per
    point and one column per replicate (NaN where a point has fewer)."""
    for (cls, mode), points in study.replicates.items():
        keep = scored(study.sweeps[cls, mode])
        width = max((len(p) for p in points), default=0)
        for metric, read in METRICS.items():
            if metric == "U_engine" and not traits(mode).engine_thread:
                continue
            rows = [[read(m) for m in p] + [math.nan] * (width - len(p)) for p in points]
            yield (cls, mode, metric), np.array(rows, float).reshape(len(points), width)[keep]


def replicate_floors(study) -> dict[Key, float]:
    """Each row's floor from its own replicates (NaN where no scored point has two)."""
    return {key: judge.replicate_floor(v) for key, v in _values(study)}


def single_run_floors(study) -> dict[Key, float]:
    """Each row's floor as a study of single runs would have it: each scored point's own
    floor times the square root of its replicate count, pooled as the points' mean
    square (NaN where no scored point has two replicates)."""
    def single(v: np.ndarray) -> float:
        own = np.array([judge.replicate_floor(row[None]) * math.sqrt(np.isfinite(row).sum())
                        for row in v])
        own = own[np.isfinite(own)]
        return float(math.sqrt(np.mean(own**2))) if len(own) else math.nan
    return {key: single(v) for key, v in _values(study)}


def path() -> Path:
    """The floors file: ``$XDG_CACHE_HOME/offloadlab/floors.json``, else under
    ``~/.cache``."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "offloadlab" / "floors.json"


def store(study, file: Path | None = None) -> None:
    """Keep the single-run floors of a study with replicates in the floors file, in place
    of any stored for the same workload, class, mode, metric and run length, with the
    date and this machine's name. A study of single runs stores nothing."""
    budget, workload = study.plan.budget, study.plan.floors_workload
    if budget.replicates < 2:
        return
    file = file or path()
    found = {key: f for key, f in single_run_floors(study).items() if math.isfinite(f)}
    date = datetime.datetime.now().isoformat(timespec="seconds")
    rows = [r for r in _rows(file)
            if (r["class"], r["mode"], r["metric"]) not in found or r["run_s"] != budget.run_s
            or r["workload"] != workload]
    rows += [{"workload": workload, "class": c, "mode": m, "metric": metric,
              "run_s": budget.run_s, "floor": f, "replicates": budget.replicates,
              "date": date, "host": platform.node()}
             for (c, m, metric), f in found.items()]
    file.parent.mkdir(parents=True, exist_ok=True)
    write_json(file, {"floors": rows})


def stored(run_s: float, workload: str, file: Path | None = None
           ) -> dict[Key, tuple[float, str]]:
    """The single-run floors stored for runs of ``run_s`` of ``workload``, each with its
    source text (``replicates of <date> on <host>``). A missing file gives none; an
    unreadable one gives none and a warning that names it."""
    return {(r["class"], r["mode"], r["metric"]):
            (r["floor"], f"{REPLICATES} of {r['date']} on {r['host']}")
            for r in _rows(file or path()) if r["run_s"] == run_s and r["workload"] == workload}


def _rows(file: Path) -> list[dict]:
    """The floors file's records; none if it is missing or unreadable (with a warning:
    the next study with replicates writes it anew)."""
    if not file.exists():
        return []
    try:
        # Floors stored before they were kept per workload are seed 000's.
        return [{"workload": str(r.get("workload", SEED_FILESETS)),
                 "class": str(r["class"]), "mode": str(r["mode"]), "metric": str(r["metric"]),
                 "run_s": float(r["run_s"]), "floor": float(r["floor"]),
                 "replicates": int(r["replicates"]), "date": str(r["date"]),
                 "host": str(r["host"])}
                for r in json.loads(file.read_text())["floors"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"{file}: unreadable floors file ({type(exc).__name__}: {exc}); its "
                      "floors count as unmeasured until a study with 2 or more --replicates "
                      "writes it again", stacklevel=2)
        return []


def for_study(study, file: Path | None = None) -> dict[Key, tuple[float, str]]:
    """Each row's floor and its source: the study's own replicates, else (a study of
    single runs) the single-run floor stored on this machine for its run length, else
    NaN and ``unmeasured``."""
    budget = study.plan.budget
    own = replicate_floors(study)
    if budget.replicates >= 2:
        return {key: (f, REPLICATES if math.isfinite(f) else UNMEASURED)
                for key, f in own.items()}
    kept = stored(budget.run_s, study.plan.floors_workload, file)
    return {key: kept.get(key, (math.nan, UNMEASURED)) for key in own}
