"""Seed 003's hybrid placement on the testbed: the popular files in memory, the rest on
disk, against everything on disk, for each working-set class.

Runs as ``offload datacentre testbed`` (:mod:`offloadlab.cli.datacentre`).

Each class is a file set on disk. Its files are read from the disk on every use
(``uncached``: a server whose memory cannot hold its working set, which is the case
the paper's hybrid placement is for). ``hybrid`` also holds the files that
:func:`offloadlab.testbed.server.memory_files` picks in memory. Both run under the same
closed-loop load (zero think time, keep-alive), interleaved, ``repeats`` times; the
gain is the ratio of the medians.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.errors import InputError, require
from offloadlab.results import Check
from offloadlab.testbed import modes
from offloadlab.testbed.server import ServerOptions, memory_files
from offloadlab.workload import fileset, stream

PLACEMENTS = ("disk", "hybrid")
_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Experiment(modes.Rounds):
    """``sets`` maps a label (the working-set class) to its file-set folder."""

    sets: dict[str, Path]
    memory_below: int | str | None = None
    memory_budget: int | str | None = "64MiB"
    mode: str = "inline"

    def check(self) -> None:
        require(bool(self.sets), "give at least one file set")
        self.check_rounds()
        for label, root in self.sets.items():
            self.memory(root)
            self.options(root, "hybrid").check()
            require(Path(root).is_dir(), f"class {label}: {root} is not a file set folder")

    def describe(self) -> dict:
        return {"sets": {label: str(root) for label, root in self.sets.items()},
                "memory_below": self.memory_below, "memory_budget": self.memory_budget,
                "mode": self.mode, **self.describe_rounds()}

    def memory(self, root: Path) -> tuple[str, ...]:
        try:
            return memory_files(root, self.memory_below, self.memory_budget)
        except InputError as exc:
            raise InputError(f"{root}: {exc}") from None

    def options(self, root: Path, placement: str) -> ServerOptions:
        return ServerOptions(root=root, mode=self.mode, host_core=self.host_core,
                             engine_core=self.engine_core, seed=self.seed, uncached=True,
                             memory=self.memory(root) if placement == "hybrid" else ())


@dataclass(frozen=True)
class Result:
    """The experiment's result (:mod:`offloadlab.experiments.protocol`)."""

    experiment: Experiment
    runs: pd.DataFrame  # one row per run: class, placement, repeat, throughput, ...

    def medians(self) -> pd.DataFrame:
        """Per class: medians of each placement and the hybrid's gain."""
        runs = self.runs
        med = runs.groupby(["class", "placement"]).median(numeric_only=True)
        out = []
        for label in runs["class"].unique():
            disk, hybrid = med.loc[(label, "disk")], med.loc[(label, "hybrid")]
            out.append({
                "class": label, "working_set_bytes": int(disk["working_set_bytes"]),
                "files": int(disk["files"]), "memory_files": int(hybrid["memory_files"]),
                "memory_bytes": int(hybrid["memory_bytes"]),
                "memory_share": hybrid["memory_share"],
                "disk_throughput": disk["throughput"],
                "hybrid_throughput": hybrid["throughput"],
                "gain": hybrid["throughput"] / disk["throughput"] - 1,
                "disk_mean_ms": disk["mean_ms"], "hybrid_mean_ms": hybrid["mean_ms"],
                "runs": int(runs[runs["class"] == label]["repeat"].nunique()),
                "errors": int(runs[runs["class"] == label]["errors"].sum()),
            })
        return pd.DataFrame(out)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"runs.csv": self.runs, "summary.csv": self.medians()}

    def summary(self) -> dict:
        # The settings at the top as well, where summary.json had them before.
        return {**self.experiment.describe(), "classes": self.medians().to_dict("records")}

    def checks(self) -> list[Check]:
        return []  # none: the gain is reported, not held to a claim of the paper

    def figures(self) -> dict:
        from offloadlab.report import datacentre as figure

        return {"hybrid.png": figure.hybrid(self.medians())}


def run(exp: Experiment, progress: Callable[[str, int, int], None] | None = None) -> Result:
    """Both placements for each class, interleaved, ``repeats`` times."""
    exp.check()
    rows = []
    for label, root in exp.sets.items():
        manifest = fileset.read_manifest(root)
        requests = stream.closed(manifest, exp.clients, think="det(0)", requests=2000,
                                 keep_alive=100, seed=exp.seed)

        def one(placement: str, _rep: int, root=root, manifest=manifest, requests=requests):
            return modes.run_mode(exp.options(root, placement), requests, manifest,
                                  repeat=True, max_duration_s=exp.run_s, threads=1,
                                  verify="length", timeout_s=_TIMEOUT_S)

        say = None if progress is None else (
            lambda name, done, total, label=label: progress(
                f"class {label}, {name}" if name else "", done, total))
        for placement, rep, done in modes.rounds(PLACEMENTS, exp.repeats, one,
                                                 f"class {label}", say):
            report, server = done.load.parsed, done.stats
            rows.append({
                "class": label, "placement": placement, "repeat": rep,
                "throughput": report.throughput,
                "mean_ms": report.total.mean_s * 1e3,
                "p99_ms": report.total.p99_s * 1e3,
                "errors": report.failed,
                "memory_share": server.memory_tier.hits / max(server.requests, 1),
                "memory_files": server.memory_tier.files,
                "memory_bytes": server.memory_tier.bytes,
                "host_cpu_us": (server.per_request.host_cpu_s or np.nan) * 1e6,
                "working_set_bytes": int(manifest["size_bytes"].sum()),
                "files": len(manifest),
            })
    return Result(exp, pd.DataFrame(rows))
