"""Seed 003's three tiers on the testbed: a proxy tier (the engine's object cache), a
web tier (the host's application, with dynamic pages) and a database tier (SQLite by
default, or a PostgreSQL server the user names).

Runs as ``offload datacentre tiers`` (:mod:`offloadlab.cli.datacentre`).

The same closed-loop keep-alive load runs against each set-up, interleaved:

- ``web + db``: inline mode, no cache (the web tier answers everything);
- ``proxy on host``: inline mode, the cache on the host thread (seed 001's set-up B);
- ``proxy on engine``: engine mode, the cache on the engine (set-up C).

A share ``dynamic`` of the requests are dynamic pages (``?work=US&query=COUNT``): the
application burns ``work`` and runs ``queries`` point queries for random items. They
are never cached, so they always cross the web and database tiers; static files can
be answered by the proxy tier.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.documents import LoadReport, ServerStats
from offloadlab.errors import require
from offloadlab.results import Check
from offloadlab.testbed import modes
from offloadlab.testbed.server import ServerOptions, fill_db
from offloadlab.workload import fileset, stream

SETUPS = {
    "web + db": dict(mode="inline", app_offload=None),
    "proxy on host": dict(mode="inline", app_offload="cache"),
    "proxy on engine": dict(mode="engine", app_offload="cache"),
}
_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Experiment(modes.Rounds):
    root: Path
    db: str
    dynamic: float = 0.2
    queries: int = 5
    work_us: int = 100
    cache_size: str = "64MiB"

    def check_values(self) -> None:
        """The numbers alone (before any file set or database is made for them)."""
        require(0 <= self.dynamic <= 1, f"dynamic={self.dynamic}: give a share 0-1")
        require(self.queries >= 0 and self.work_us >= 0,
                "queries and work must be >= 0")
        self.check_rounds()

    def check(self) -> None:
        self.check_values()
        for setup in SETUPS:
            self.options(setup).check()

    def describe(self) -> dict:
        return {"root": str(self.root), "db": self.db_name(), "dynamic": self.dynamic,
                "queries": self.queries, "work_us": self.work_us,
                "cache_size": self.cache_size, **self.describe_rounds()}

    def db_name(self) -> str:
        """The database as shown: a PostgreSQL URL may hold a password."""
        return "PostgreSQL" if self.db.startswith(("postgresql://", "postgres://")) else self.db

    def options(self, setup: str) -> ServerOptions:
        return ServerOptions(root=self.root, host_core=self.host_core,
                             engine_core=self.engine_core if setup == "proxy on engine"
                             else None, seed=self.seed, db=self.db,
                             cache_size=self.cache_size, **SETUPS[setup])

    def objects(self) -> pd.DataFrame:
        """The file set's objects, then each file again as a dynamic page, the pages
        taking a share ``dynamic`` of the requests."""
        manifest = fileset.read_manifest(self.root)
        static = manifest.assign(probability=manifest["probability"] * (1 - self.dynamic))
        pages = manifest.assign(
            path=manifest["path"].astype(str) + f"?work={self.work_us}&query={self.queries}",
            probability=manifest["probability"] * self.dynamic)
        both = pd.concat([static, pages], ignore_index=True)
        return both[both["probability"] > 0].reset_index(drop=True)


def default_db(folder: Path, rows: int = 100_000) -> Path:
    """The embedded default: a SQLite catalogue under ``folder`` (filled once)."""
    path = folder / "items.db"
    if not path.is_file():
        fill_db(path, rows)
    return path


@dataclass(frozen=True)
class Result:
    """The experiment's result (:mod:`offloadlab.experiments.protocol`)."""

    experiment: Experiment
    runs: pd.DataFrame  # one row per run: set-up, repeat, throughput, latency, CPU, tiers

    def medians(self) -> pd.DataFrame:
        """Medians per set-up, in the set-ups' order."""
        runs = self.runs
        med = runs.groupby("setup").median(numeric_only=True).drop(columns="repeat")
        med["errors"] = runs.groupby("setup")["errors"].sum()
        return med.loc[[s for s in SETUPS if s in med.index]].reset_index()

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"runs.csv": self.runs, "summary.csv": self.medians()}

    def summary(self) -> dict:
        # The settings at the top as well, where summary.json had them before.
        return {**self.experiment.describe(), "setups": self.medians().to_dict("records")}

    def checks(self) -> list[Check]:
        return []  # none: the tiers are reported, not held to a claim of the paper

    def figures(self) -> dict:
        return {}


def run(exp: Experiment, progress: Callable[[str, int, int], None] | None = None) -> Result:
    """Every set-up ``repeats`` times, interleaved."""
    exp.check()
    objects = exp.objects()
    requests = stream.closed(objects, exp.clients, requests=2000, keep_alive=100,
                             seed=exp.seed)

    def one(setup: str, _rep: int):
        return modes.run_mode(exp.options(setup), requests, objects, repeat=True,
                              max_duration_s=exp.run_s, threads=1, verify="length",
                              timeout_s=_TIMEOUT_S)

    rows = []
    for setup, rep, done in modes.rounds(list(SETUPS), exp.repeats, one, "three tiers",
                                         progress):
        report, server = done.load.parsed, done.stats
        per = server.per_request
        queries = server.database.queries
        rows.append({
            "setup": setup, "repeat": rep, "throughput": report.throughput,
            "mean_ms": report.total.mean_s * 1e3,
            "p99_ms": report.total.p99_s * 1e3, "errors": report.failed,
            "completed": report.completed,
            # Per client request: the web tier sees only the proxy tier's misses.
            "host_cpu_us": _per_client(per.host_cpu_s, server, report),
            "engine_cpu_us": _per_client(per.engine_cpu_s, server, report),
            "db_queries_per_request": queries / max(report.completed, 1),
            "db_us_per_query": (server.database.time_s / queries * 1e6 if queries
                                else np.nan),
            "proxy_hit_rate": server.cache.hit_rate if server.cache else 0.0,
        })
    return Result(exp, pd.DataFrame(rows))


def _per_client(per_served: float | None, server: ServerStats, report: LoadReport) -> float:
    """CPU per request the clients made, from the server's per request it served."""
    if not per_served:
        return 0.0
    return per_served * server.requests / max(report.completed, 1) * 1e6

