"""The user's own server as the study's host alone (``offload study --server-cmd`` or
``--server-pid`` with ``--target``).

The baseline mode's runs go to the user's server (:mod:`offloadlab.testbed.external`)
instead of ours, with the same streams: its CPU is every thread of its process tree,
read from ``/proc`` before and after each run, over the requests the load generator
completed. That is U_host and the host's CPU per request the fit splits into E[X_a],
what ``--work`` declares (the user's application work; none by default), and E[X_p],
the rest. The offload modes still run on OffloadLab's server with the same ``--work``,
so X_a is the same on both sides (the assumption docs/study.md states): the offload
side comes from OffloadLab's engine, measured on the same traffic. :attr:`HostServer.
offload_side` names that source, the seam where another one (an engine profile) goes.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pandas as pd

from offloadlab.calibrate import fit
from offloadlab.errors import RunError
from offloadlab.mode_traits import BASELINE, traits
from offloadlab.report.section import Section
from offloadlab.study import measure
from offloadlab.study.plan import ClassLoad, Plan
from offloadlab.testbed import external, load, remote
from offloadlab.units import us

TITLE = "Your server as the host"
OFFLOAD_SIDE = "OffloadLab's engine, measured on the same traffic"
# The section's table: per class, each thread's CPU per completed request and its share
# of the server's, then a row of all threads with the fit's split of it (report.section).
COLUMNS = {"class": ("class", "text"), "pid": ("PID", "count"), "tid": ("thread", "count"),
           "name": ("name", "text"), "cpu_per_request_s": ("CPU per request", "us"),
           "share": ("share of the server's CPU", "share"),
           "EXa": ("E[X_a] (--work)", "us"), "EXp": ("E[X_p]", "us"),
           "wakeup_s": ("wake-ups per request", "us")}
ALL_THREADS = "all threads"

@dataclass
class HostServer:
    """The user's server, running, as the study's host alone; what its calibration runs
    cost per thread, per class (``threads``: (pid, tid, name) -> CPU seconds;
    ``requests``: completed), and the most cores it kept busy in one run."""

    server: external.ExternalServer
    live: external.Live
    root: os.PathLike
    work_s: float
    threads: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    requests: dict = field(default_factory=lambda: defaultdict(int))
    most_cores: float = 0.0
    offload_side: str = OFFLOAD_SIDE
    # Across hosts (--cluster): the server host's :class:`~offloadlab.testbed.remote.
    # UserServer` that runs it and reads its CPU there, and the hosts the load comes from.
    hosts: remote.Hosts | None = None
    user_server: object | None = None

    def measure(self, plan: Plan, load_: ClassLoad, mode: str, use: str, rate: float,
                progress: Callable | None = None, replicate: int = 0) -> measure.Measured:
        """One run as :func:`offloadlab.study.measure.measure` makes it, the baseline's
        on the user's server."""
        if traits(mode).engine_thread:
            return measure.measure(plan, load_, mode, use, rate, progress, replicate)
        requests, extra, rate = measure.stream_of(plan, load_, use, rate, replicate)
        rel = os.path.relpath(load_.root, self.root)
        target = replace(self.live.target, prefix=self.live.target.prefix
                         + ("" if rel == "." else f"{rel}/"))
        options = {"timeout_s": measure.TIMEOUT_S, "records": True, **measure.LOAD, **extra}
        try:
            before, cores = self._snapshot()
            if self.hosts is None:
                result = load.run(target, requests, load_.manifest, progress=progress,
                                  cores=measure.generator_cores(plan),
                                  allow_remote=self.server.allow_remote, **options)
            else:
                result = remote.send(self.hosts, target, requests, load_.manifest, **options)
            after, cores_after = self._snapshot()
        except RunError as exc:
            raise measure.failed(load_, mode, use, rate, exc) from None
        used = external.used(before, after)
        core_times = external.core_delta(cores, cores_after)
        done = result.parsed.completed
        cpu = sum(t.cpu_s for t in used)
        if use == "calibration":
            for t in used:
                self.threads[load_.name][t.pid, t.tid, t.name] += t.cpu_s
            self.requests[load_.name] += done
        if result.parsed.duration_s > 0:
            self.most_cores = max(self.most_cores, cpu / result.parsed.duration_s)
        return measure.reduced(
            load_, mode, use, rate, requests.frame["size_bytes"].to_numpy(), result,
            served=done, host_s=cpu / done if done else math.nan, app_s=self.work_s,
            engine_s=math.nan, cores=core_times)

    def _snapshot(self) -> tuple[dict, dict]:
        """The server's threads' CPU and its host's cores' times now, where it runs; a
        RunError if it has gone."""
        if self.user_server is None:
            return self.live.reading()
        return self.user_server.snapshot().result(timeout=remote.STOP_S)

    def describe(self) -> str:
        """Which server was the host alone, for the report's workload line and meta."""
        where = "" if self.hosts is None else f" on host {self.hosts.server_name}"
        return (f"the user's server ({self.server.describe()}, PID {self.live.pid}{where}), "
                "every thread of its process tree from /proc")

    def table(self, study) -> pd.DataFrame:
        """Per class, each thread's CPU seconds per completed request over the class's
        calibration runs and its share of the server's CPU there; then all threads, and
        how the fit splits that: E[X_a], E[X_p] and the fitted wake-up CPU per request at
        those runs' rates (:class:`~offloadlab.calibrate.fit.Wakeup`, as for our server)."""
        wakeup = next(m.wakeup for m in study.fitted.models if m.mode == BASELINE)
        rows = []
        for cls, threads in self.threads.items():
            total, n = sum(threads.values()), max(self.requests[cls], 1)
            for (pid, tid, name), cpu in sorted(threads.items()):
                rows.append({"class": cls, "pid": pid, "tid": tid, "name": name,
                             "cpu_per_request_s": cpu / n,
                             "share": cpu / total if total > 0 else math.nan})
            runs = [m.run for m in study.calibration[cls, BASELINE]]
            fitted = study.fitted.fits[cls, BASELINE]
            woke = sum(r.requests * wakeup.per_run(r, "host") for r in runs)
            rows.append({"class": cls, "name": ALL_THREADS, "cpu_per_request_s": total / n,
                         "share": 1.0, "EXa": fitted.EXa, "EXp": fitted.EXp,
                         "wakeup_s": woke / max(sum(r.requests for r in runs), 1)})
        return pd.DataFrame(rows, columns=list(COLUMNS)).astype({"pid": "Int64", "tid": "Int64"})

    def notes(self, study) -> list[str]:
        """What the reader must know about the host's numbers: a --work larger than the
        CPU the server used (E[X_p] was held at 0), and a server busy on more than one
        core (the model queues one host core)."""
        found = []
        for load_ in study.plan.classes:
            runs = [m.run for m in study.calibration.get((load_.name, BASELINE), [])]
            rest = fit.demand(runs, "host_s") - self.work_s if runs else math.nan
            if rest < 0:
                found.append(
                    f"class {load_.name}: --work declares {us(self.work_s)} µs of application "
                    f"work per request, but the server used {us(rest + self.work_s)} µs in "
                    "all; E[X_p] is held at 0. Give --work no more than the server's own "
                    "application work (det(0) for static files)")
        if self.most_cores > 1:
            found.append(f"the server under test kept {self.most_cores:.2f} cores busy in a "
                         "run; the model queues one host core, so pin it to one core (a "
                         "single worker or thread) for a like-for-like baseline")
        return found

    def section(self, study) -> Section:
        return Section(
            TITLE, "CPU per completed request of each thread of the server under test, "
                   "from /proc/PID/task/TID/schedstat before and after each calibration "
                   "run (the runs the fit saw), and its share of the server's CPU there; "
                   "then all its threads, split as the fit splits them: E[X_a] is what "
                   "--work declares, E[X_p] the per-request rest, and the wake-up CPU at "
                   "those runs' rates what the fit puts on idle periods (the model's "
                   "host demand is their sum).",
            setup=f"Host alone: {self.describe()}. Offload side: {self.offload_side}.",
            table=self.table(study), columns=COLUMNS)

    def summary(self, study) -> dict:
        table = self.table(study).astype(object)
        return {"host": self.describe(), "offload_side": self.offload_side,
                "work_s": self.work_s, "most_cores": self.most_cores,
                "threads": table.where(table.notna(), None).to_dict("records")}
