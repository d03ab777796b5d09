"""Seed 004's handoff policies on the real testbed: the same closed-loop keep-alive load
against inline mode and handoff mode under several policies, with the engine made
slower than the host (``slowdown``), repeated and interleaved so that drift on a shared
machine hits every policy alike.

Runs as ``offload handoff testbed`` (:mod:`offloadlab.cli.handoff`).

What the paper predicts and :func:`checks` tests: handing every connection to a slow
engine (naive full offload, ``N-N-FCFS``) loses to the host alone; host-first priority
with load control (``P-L-FCFS``) beats both. With a closed loop of ``clients``, a higher
throughput is also a lower mean latency (Little's law); the p99 is reported beside it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from offloadlab import handoff_policy
from offloadlab.documents import HandoffSeries, ServerStats
from offloadlab.errors import InputError, require
from offloadlab.mode_traits import BASELINE
from offloadlab.report.section import Section
from offloadlab.results import Check
from offloadlab.testbed import modes
from offloadlab.testbed.server import ServerOptions
from offloadlab.workload import stream

INLINE = BASELINE
NAIVE = "handoff:N-N-FCFS"
BEST = "handoff:P-L-FCFS"
POLICIES = (INLINE, NAIVE, "handoff:P-N-FCFS", BEST, "handoff:P-L-T4")
# The load generator: one thread with length checks, as in the study (its notes say why).
_LOAD = {"threads": 1, "verify": "length", "timeout_s": 5.0}
RUN_COLUMNS = ("policy", "repeat", "throughput", "mean_s", "p99_s", "errors", "host_cpu_s",
               "engine_cpu_s", "engine_share", "passed", "moved", "returned",
               "soft_limit_min")
SERIES_COLUMNS = ("policy", "repeat", "t_s", "held", "soft_limit", "qlen")
# The result as a section of a report (the study's): its heading and what it shows, the
# medians' columns shown (header, how the values read) and the figure's caption.
TITLE = "Connection handoff on the testbed"
CAPTION = ("Seed 004's policies in handoff mode (the engine accepts every connection; P host "
           "first, L load control, FCFS or Tn selection) against inline, with the engine "
           "slowed. Medians of the repeats; host and engine µs are CPU per request over all "
           "requests; on engine: requests served on engine-held connections. With a closed "
           "loop, more throughput is also a lower mean response time.")
SHOWN = {"policy": ("policy", "text"), "throughput": ("req/s", "number"),
         "vs_inline": ("vs inline", "change"), "mean_s": ("mean (ms)", "ms"),
         "p99_s": ("p99 (ms)", "ms"), "host_cpu_s": ("host (µs)", "us"),
         "engine_cpu_s": ("engine (µs)", "us"), "engine_share": ("on engine", "share"),
         "errors": ("errors", "count"), "runs": ("runs", "count")}
FIGURE_CAPTION = (
    "Seed 004's handoff policies on the testbed with a slowed engine: throughput (dots are "
    "the repeats, the label the change against inline), mean and p99 response time, and "
    "the engine's connections and Soft_limit over a P-L-FCFS run.")


@dataclass(frozen=True)
class Experiment:
    """One handoff experiment. ``policies`` are modes as :mod:`offloadlab.testbed.modes`
    names them (``inline``, ``handoff:P-L-FCFS``, ...); ``keep_alive`` is requests per
    connection; ``work`` the host's application work per request; times in seconds."""

    root: Path
    manifest: pd.DataFrame
    size_class: int | None = None
    clients: int = 64
    keep_alive: int = 100
    work: str = "exp(mean=50us)"
    slowdown: float = 6.0
    run_s: float = 3.0
    repeats: int = 3
    policies: tuple[str, ...] = POLICIES
    host_core: int | None = None
    engine_core: int | None = None
    seed: int = 1

    def check(self) -> None:
        require(self.clients >= 1, f"clients={self.clients!r}: use 1 or more")
        require(self.keep_alive >= 1, f"keep_alive={self.keep_alive!r}: use 1 or more "
                                      "requests per connection")
        require(self.repeats >= 1, f"repeats={self.repeats!r}: use 1 or more")
        require(math.isfinite(self.run_s) and self.run_s > 0,
                f"run length {self.run_s!r} s: use a time > 0, e.g. 3s")
        require(len(self.policies) >= 1, "policies: give at least one, e.g. inline,"
                                         "handoff:P-L-FCFS")
        for name in self.policies:
            require(name == INLINE or name.startswith("handoff:"),
                    f"policy {name!r}: use inline or handoff:POLICY, e.g. handoff:P-L-FCFS")
            modes.with_mode(self.server(), name).check()

    def describe(self) -> dict:
        """The experiment's settings, for a summary file."""
        return {"root": str(self.root), "size_class": self.size_class,
                "clients": self.clients, "keep_alive": self.keep_alive, "work": self.work,
                "engine_slowdown": self.slowdown, "run_s": self.run_s,
                "repeats": self.repeats, "policies": list(self.policies),
                "host_core": self.host_core, "engine_core": self.engine_core,
                "seed": self.seed}

    def server(self) -> ServerOptions:
        return ServerOptions(root=self.root, host_core=self.host_core,
                             engine_core=self.engine_core, work=self.work, seed=self.seed,
                             engine_slowdown=self.slowdown)


@dataclass(frozen=True)
class Result:
    """The experiment's result (:mod:`offloadlab.experiments.protocol`)."""

    experiment: Experiment
    runs: pd.DataFrame     # RUN_COLUMNS, one row per run
    series: pd.DataFrame   # SERIES_COLUMNS, the engine's gauges every 0.1 s

    def medians(self) -> pd.DataFrame:
        """Per policy, in the experiment's order: medians over the repeats, and the
        throughput as a ratio to inline's median."""
        return self._medians

    # Computed once: the summary, the checks, a terminal table and a report's section all
    # read the same medians.
    @cached_property
    def _medians(self) -> pd.DataFrame:
        order = list(dict.fromkeys(self.runs["policy"]))
        grouped = self.runs.groupby("policy", sort=False)
        table = grouped[["throughput", "mean_s", "p99_s", "host_cpu_s", "engine_cpu_s",
                         "engine_share"]].median()
        table["errors"] = grouped["errors"].sum()
        table["runs"] = grouped.size()
        inline = table["throughput"].get(INLINE, math.nan)
        table["vs_inline"] = table["throughput"] / inline
        return table.loc[order].reset_index()

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"runs.csv": self.runs, "series.parquet": self.series}

    def summary(self) -> dict:
        return {"summary": self.medians().to_dict("records")}

    def checks(self) -> list[Check]:
        return checks(self.medians())

    def figures(self) -> dict:
        from offloadlab.report import handoff as figures

        return {"handoff-testbed.png": figures.testbed_figure(self.runs, self.series)}

    def section(self) -> Section:
        """The medians, the checks and the figure as a section of a report."""
        e = self.experiment
        setup = (f"{e.clients} closed-loop clients with zero think time, {e.keep_alive} "
                 f"requests per connection, class {e.size_class} files, application work "
                 f"{e.work}, engine slowdown {e.slowdown:g} (an engine {e.slowdown + 1:g} "
                 f"times slower), {e.repeats} runs of {e.run_s:g} s per policy, "
                 "interleaved.")
        return Section(TITLE, CAPTION, setup, self.medians(), SHOWN, self.checks(),
                       {name: (fig, FIGURE_CAPTION) for name, fig in self.figures().items()})


def run(exp: Experiment, progress: Callable[[str, int, int], None] | None = None) -> Result:
    """Every policy ``repeats`` times, interleaved; ``progress(policy, done, total)``."""
    exp.check()
    requests = stream.closed(exp.manifest, exp.clients, requests=1000,
                             keep_alive=exp.keep_alive, size_class=exp.size_class,
                             seed=exp.seed)
    cores = [] if exp.engine_core is None else [exp.engine_core]

    def run_one(name: str, _rep: int) -> modes.ModeRun:
        return modes.run_mode(modes.with_mode(exp.server(), name), requests, exp.manifest,
                              name=name, cores=cores, repeat=True,
                              max_duration_s=exp.run_s, **_LOAD)

    done = modes.rounds(exp.policies, exp.repeats, run_one, "handoff experiment", progress)
    rows = [_row(name, rep, run) for name, rep, run in done]
    series = [_series(name, rep, run.stats) for name, rep, run in done]
    return Result(exp, pd.DataFrame(rows, columns=list(RUN_COLUMNS)),
                  pd.concat(series, ignore_index=True) if series else
                  pd.DataFrame(columns=list(SERIES_COLUMNS)))


def _row(name: str, rep: int, done: modes.ModeRun) -> dict:
    report, server = done.load.parsed, done.stats
    per, h = server.per_request, server.handoff
    served = server.requests
    throughput = report.throughput
    # Modes other than handoff move no connections.
    engine, passed, moved, returned = ((h.engine_requests, h.passed, h.adopted, h.returned)
                                       if h else (0, 0, 0, 0))
    limits = (h.series.soft_limit if h else ()) or [math.nan]
    return {
        "policy": name, "repeat": rep, "throughput": throughput,
        # Little's law over the closed loop: every client always has a request out.
        "mean_s": report.total.mean_s, "p99_s": report.total.p99_s,
        "errors": report.failed, "host_cpu_s": per.host_cpu_s,
        "engine_cpu_s": per.engine_cpu_s if name != INLINE else math.nan,
        # The engine counts a request as it takes it, ``served`` as it is answered: the
        # requests in flight at the end can put a naive handoff a little above 1.
        "engine_share": engine / served if served else math.nan,
        "passed": passed, "moved": moved, "returned": returned,
        "soft_limit_min": min(limits),
    }


def _series(name: str, rep: int, server: ServerStats) -> pd.DataFrame:
    s = server.handoff.series if server.handoff else HandoffSeries((), (), (), ())
    frame = pd.DataFrame(dataclasses.asdict(s))  # SERIES_COLUMNS[2:]
    frame.insert(0, "repeat", rep)
    frame.insert(0, "policy", name)
    return frame


def checks(summary: pd.DataFrame) -> list[Check]:
    """Reference 004's claims, as far as the experiment ran the policies they name."""
    by = summary.set_index("policy")
    have = set(by.index)
    out = []

    def thr(name: str) -> float:
        return float(by.at[name, "throughput"])

    if {INLINE, NAIVE} <= have:
        out.append(Check("naive full offload loses to inline", thr(NAIVE) < thr(INLINE),
                         f"{NAIVE} {thr(NAIVE):,.0f}/s vs inline {thr(INLINE):,.0f}/s "
                         f"({thr(NAIVE) / thr(INLINE) - 1:+.1%})"))
    if {INLINE, NAIVE, BEST} <= have:
        best = thr(BEST)
        out.append(Check("host-first + load control beats inline and naive offload",
                         best > thr(INLINE) and best > thr(NAIVE),
                         f"{BEST} {best:,.0f}/s: {best / thr(INLINE) - 1:+.1%} vs inline, "
                         f"{best / thr(NAIVE) - 1:+.1%} vs naive; p99 "
                         f"{by.at[BEST, 'p99_s'] * 1e3:.2f} ms vs inline "
                         f"{by.at[INLINE, 'p99_s'] * 1e3:.2f} ms"))
    return out


def parse_policies(text: str) -> tuple[str, ...]:
    """``inline,P-L-FCFS,N-N-FCFS`` (the handoff: prefix optional) -> mode names."""
    names = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part == INLINE:
            names.append(INLINE)
            continue
        p = handoff_policy.parse(part.removeprefix("handoff:"))
        names.append(f"handoff:{p.label}")
    if not names:
        raise InputError(f"--policies {text!r}: give inline and/or policies such as "
                         "P-L-FCFS, comma-separated")
    return tuple(dict.fromkeys(names))
