"""Seed 001 on the testbed: a reverse-proxy object cache in front of the application,
under SPECweb2005-like sessions, in three set-ups (runs as ``offload appcache``,
:mod:`offloadlab.cli.appcache`):

- ``A``: the server alone (inline mode, no cache);
- ``B``: the cache on the host thread, in front of the application (inline mode);
- ``C``: the cache on the engine (engine mode): hits never reach the host.

**Two caches** (``proxy``). The *emulated* one is the server's own in-process stand-in
for Squid (``app_offload="cache"``): fast, with no separate process and no socket hop.
With ``squid`` set-ups B and C run a real Squid (:mod:`offloadlab.testbed.squid`) in
front of the server, which then runs as in A, cache off: B has Squid pinned to the
host's core, C to the engine's core (the stand-in for seed 001's XScale core). Squid gets
the emulated cache's size, largest object and policy. ``both`` runs the two side by side;
the points' ``proxy`` column tells them apart (``none`` for A).

**The matrix.** Each point is one set-up, one number of sessions and one cache size (A
has none). The sessions are closed-loop clients walking the page mix, with think times
(:func:`offloadlab.workload.sessions.sessions`), over a SPECweb2005-like site
(:mod:`offloadlab.workload.site`): each page is one dynamic request (never cached) and
its embedded files, some shared by every page, some its own, one item of the scaling
part and, on download pages, a large download.

**The site scales with the sessions**, as SPECweb2005's file set does. A run with ``n``
sessions requests the site for ``n`` sessions: the first files of the site served,
which is built for the largest count (beyond it, runs share the whole site).

**Each run has two parts:**

- **Warm-up.** The same page mix with no think time, ``warm_requests_per_file`` requests
  per file. It is not measured, as SPECweb2005's warm-up phase primes the caches.
- **Measurement.** The sessions with their think times, for ``measure_s``. Server-side
  figures (CPU, cache counts) are the difference between two snapshots, one after the
  warm-up and one when the load ends (before Squid stops, so its shutdown is not counted).

**What a point reports:**

- the hit rate;
- host and engine CPU (utilisation and per request);
- mean request and page times;
- the byte rate;
- SPECweb2005's quality of service: the share of pages done within ``time_good_s`` and
  within ``time_tolerable_s``. A point is *compliant* when these shares are at least 95 %
  and 99 % and at most 0.5 % of requests fail.

**The search.** For each set-up, it finds the most sessions that stay compliant (at
the operating cache size for B and C). It doubles the sessions until a run fails, then
bisects.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from offloadlab.documents import ServerStats
from offloadlab.errors import InputError, require
from offloadlab.mode_traits import traits
from offloadlab.results import Check
from offloadlab.testbed import load, squid
from offloadlab.testbed.server import ServerOptions, running, snapshot
from offloadlab.workload import fileset, site, stream
from offloadlab.workload.classes import MiB
from offloadlab.workload.page_mixes import MIXES
from offloadlab.workload.specs import SpecWeb2005Spec

if TYPE_CHECKING:
    from offloadlab.calibrate.appcache import Costs

SETUPS = ("A", "B", "C")
SETUP_NAMES = {"A": "server alone", "B": "cache on the host", "C": "cache on the engine"}
# Which cache B and C run: the server's in-process stand-in, Squid in front, or both.
PROXIES = ("emulated", "squid", "both")
# SPECweb2005's page QoS: shares of pages within Time_Good and Time_Tolerable, and the
# failed requests a compliant run may have (reference 001 §4.5).
GOOD_SHARE, TOLERABLE_SHARE, MAX_ERROR_SHARE = 0.95, 0.99, 0.005
# Reference 001 does not give Time_Good and Time_Tolerable [gap]; these are our defaults.
TIME_GOOD_S, TIME_TOLERABLE_S = 3.0, 5.0
# Most sessions the search tries.
MAX_SESSIONS = 20_000
# The load generator as in the other testbed experiments, checking each body's length.
_LOAD = {"threads": 1, "verify": "length", "timeout_s": 10.0}
POINT_COLUMNS = ("setup", "proxy", "sessions", "cache_mib", "requests", "rate", "dynamic_share",
                 "pages", "hit_rate",
                 "host_util", "engine_util", "host_cpu_us", "engine_cpu_us",
                 "request_mean_s", "page_mean_s", "byte_rate", "good", "tolerable",
                 "error_share", "compliant", "log_unparsed")


@dataclass(frozen=True)
class Budget:
    """How much to run: the session counts and cache sizes of the matrix, the length of
    each measurement, and how many bisection steps the search takes."""

    name: str
    sessions: tuple[int, ...]
    cache_mib: tuple[float, ...]
    measure_s: float
    search_steps: int


BUDGETS = {
    "quick": Budget("quick", (5, 50), (1, 10), 8.0, 2),
    "standard": Budget("standard", (5, 50, 100, 200), (1, 10, 100, 1000), 20.0, 4),
    "thorough": Budget("thorough", (5, 50, 100, 200, 400), (1, 10, 100, 1000), 60.0, 6),
}


def budget(name: str) -> Budget:
    require(name in BUDGETS, f"budget {name!r}: use one of {', '.join(BUDGETS)}")
    return BUDGETS[name]


@dataclass(frozen=True)
class Experiment:
    """Seed 001's experiment on a site served from ``root``, whose spec is ``site``
    (see the module notes and :func:`read_site`)."""

    root: Path
    site: SpecWeb2005Spec
    budget: Budget
    workload: str = "support"
    think: str = "exp(mean=10s)"
    warm_requests_per_file: float = 3.0
    #: Seed 001's 10 MB (see :attr:`operating`).
    operating_mib: float = 10.0
    cache_policy: str = "lru"
    time_good_s: float = TIME_GOOD_S
    time_tolerable_s: float = TIME_TOLERABLE_S
    work: str | None = None
    host_core: int | None = None
    engine_core: int | None = None
    generator_core: int | None = None
    search: bool = True
    seed: int = 1
    #: B's and C's cache: ``emulated``, ``squid`` or ``both`` (see the module notes).
    proxy: str = "both"

    def check(self) -> None:
        require(self.proxy in PROXIES,
                f"proxy {self.proxy!r}: use emulated (the server's in-process cache), "
                "squid (Squid in front of the server) or both")
        require(self.workload in MIXES,
                f"workload {self.workload!r}: use one of {', '.join(MIXES)}")
        require(self.site.workload == self.workload,
                f"workload {self.workload!r}: the site in {self.root} is built for the "
                f"{self.site.workload} workload; use that workload, or write a site from "
                f"a spec with kind = \"specweb2005\" and workload = \"{self.workload}\" "
                "('offload workload fileset --spec FILE')")
        require(self.warm_requests_per_file >= 0, "warm-up requests per file: use >= 0")
        require(0 < self.time_good_s <= self.time_tolerable_s,
                f"time good {self.time_good_s} s and tolerable {self.time_tolerable_s} s: "
                "give 0 < good <= tolerable")
        for mib in (*self.budget.cache_mib, self.operating_mib):
            require(mib > 0, f"cache size {mib} MiB: use sizes > 0")
        for setup in SETUPS:
            self.options(setup, self.operating_mib).check()
        stream.sessions(self.objects(1), self.workload, clients=1, sessions=1,
                        think=self.think, seed=self.seed)  # checks the think time
        if "squid" in self.proxies:
            squid.binary()  # installed, before any run

    @property
    def proxies(self) -> tuple[str, ...]:
        """The caches B and C run with, in run order."""
        return ("emulated", "squid") if self.proxy == "both" else (self.proxy,)

    def variants(self) -> list[tuple[str, str]]:
        """(set-up, proxy) of each kind of run: A once, B and C with each proxy."""
        return [("A", "none")] + [(setup, proxy) for proxy in self.proxies
                                  for setup in ("B", "C")]

    def plan(self) -> list[tuple[str, str, int, float | None]]:
        """The matrix's runs: (set-up, proxy, sessions, cache MiB or None for A)."""
        return [(setup, proxy, n, mib) for n in self.budget.sessions
                for setup, proxy in self.variants()
                for mib in ((None,) if setup == "A" else self.budget.cache_mib)]

    @property
    def operating(self) -> float:
        """The matrix's cache size nearest ``operating_mib`` (by ratio): where B and C
        are compared with A, and searched."""
        return min(self.budget.cache_mib, key=lambda m: abs(math.log(m / self.operating_mib)))

    @property
    def manifest(self) -> pd.DataFrame:
        """The served site's manifest."""
        return self.objects(self.site.sessions)

    def objects(self, sessions: int) -> pd.DataFrame:
        """The site for ``sessions`` sessions (at most the served site's)."""
        return fileset.generate(replace(self.site, sessions=min(sessions, self.site.sessions))
                                ).frame()

    def options(self, setup: str, cache_mib: float | None) -> ServerOptions:
        mode = "engine" if setup == "C" else "inline"
        cache = {} if setup == "A" else {
            "app_offload": "cache", "cache_policy": self.cache_policy,
            "cache_size": int(cache_mib * MiB)}
        return ServerOptions(self.root, mode=mode, host_core=self.host_core,
                             engine_core=self.engine_core if traits(mode).engine_thread else None,
                             work=self.work, seed=self.seed, **cache)

    def squid_options(self, setup: str, cache_mib: float, origin_port: int
                      ) -> squid.SquidOptions:
        """Squid in front of the origin on ``origin_port``, with the emulated cache's
        size, largest object and policy, on the host's core (B) or the engine's (C)."""
        size, largest = self.options(setup, cache_mib).cache_bytes()
        return squid.SquidOptions(origin_port, size, largest, self.cache_policy,
                                  core=self.engine_core if setup == "C" else self.host_core)

    def generator_cores(self) -> list[int]:
        return [] if self.generator_core is None else [self.generator_core]

    def warm_stream(self, sessions: int) -> stream.Stream | None:
        objects = self.objects(sessions)
        wanted = math.ceil(self.warm_requests_per_file * len(objects))
        if wanted == 0:
            return None
        pages = wanted / site.requests_per_page(self.site)
        clients = min(sessions, 16)
        per_client = math.ceil(pages / clients / MIXES[self.workload].mean_pages)
        return stream.sessions(objects, self.workload, clients=clients,
                               sessions=max(1, per_client), think="det(0)",
                               seed=self.seed + 7)

    def measured_stream(self, sessions: int) -> stream.Stream:
        return stream.sessions(self.objects(sessions), self.workload, clients=sessions,
                               duration_s=self.budget.measure_s, think=self.think,
                               seed=self.seed)

    def describe(self) -> dict:
        return {"workload": self.workload, "think": self.think,
                "site": fileset.spec_to_dict(self.site),
                "warm_requests_per_file": self.warm_requests_per_file,
                "operating_mib": self.operating, "cache_policy": self.cache_policy,
                "proxy": self.proxy,
                "time_good_s": self.time_good_s, "time_tolerable_s": self.time_tolerable_s,
                "work": self.work, "budget": self.budget.name,
                "measure_s": self.budget.measure_s, "files": len(self.manifest),
                "file_bytes": int(self.manifest["size_bytes"].sum())}


@dataclass
class Result:
    """The experiment's result (:mod:`offloadlab.experiments.protocol`)."""

    experiment: Experiment
    points: pd.DataFrame
    #: Per kind of run (:func:`name`: ``A``, ``B``, ``C``, ``B squid``, ``C squid``), the
    #: most compliant sessions found (None: not even the first probe) and every probe of
    #: the search.
    most_sessions: dict[str, int | None] = field(default_factory=dict)
    probes: pd.DataFrame | None = None

    def first_failed(self, kind: str) -> int | None:
        """The fewest sessions ``kind`` (a :func:`name`) failed the QoS with in the
        search (None: it never failed, so its most sessions is only a lower bound)."""
        if self.probes is None or self.probes.empty:
            return None
        probes = self.probes
        names = [name(s, p) for s, p in zip(probes["setup"], probes["proxy"], strict=True)]
        failed = probes[(pd.Series(names, index=probes.index) == kind) & ~probes["compliant"]]
        return int(failed["sessions"].min()) if len(failed) else None

    def hit_table(self, setup: str = "C", proxy: str = "emulated") -> pd.DataFrame:
        """Hit rate (%) by sessions (rows) and cache size in MiB (columns) of ``setup``
        with ``proxy``: the analog of seed 001's Table 4.4."""
        rows = self.points[(self.points["setup"] == setup) & (self.points["proxy"] == proxy)]
        return rows.pivot_table(index="sessions", columns="cache_mib", values="hit_rate"
                                ) * 100

    def host_balance(self, proxy: str) -> dict | None:
        """Why B beats A or does not, measured: at the most sessions A, B and C all ran
        at (B and C at the operating cache size), the cache's own host CPU per request
        (B's less C's: both leave the same misses to the origin) against what its hits
        spare the origin (A's less C's). B's host core outlasts A's only if the first is
        the smaller. None when one of the three did not run."""
        p = self.points
        rows = p[(p["setup"] == "A") | ((p["proxy"] == proxy)
                                         & (p["cache_mib"] == self.experiment.operating))]
        cpu = rows.pivot_table(index="sessions", columns="setup", values="host_cpu_us")
        cpu = cpu.reindex(columns=list(SETUPS)).dropna()
        if cpu.empty:
            return None
        n = int(cpu.index.max())
        a, b, c = (float(cpu.loc[n, s]) for s in SETUPS)
        return {"proxy": proxy, "sessions": n, "A_us": a, "B_us": b, "C_us": c,
                "cache_us": b - c, "spared_us": a - c}

    @cached_property
    def model(self) -> tuple[Costs, pd.DataFrame]:
        """The model's costs fitted to the points, and model and simulator beside each
        point (:mod:`offloadlab.calibrate.appcache`)."""
        from offloadlab.calibrate import appcache as fitting

        # The model is the emulated cache's: Squid's runs have other costs.
        points = self.points[self.points["proxy"] != "squid"]
        costs = fitting.fit(points)
        return costs, fitting.compare(points, costs)

    def tables(self) -> dict[str, pd.DataFrame | None]:
        return {"points.csv": self.points, "model.csv": self.model[1],
                "probes.csv": self.probes}

    def summary(self) -> dict:
        costs, versus = self.model
        return {"points": self.points.to_dict("records"),
                "most_sessions": self.most_sessions,
                "first_failed": {s: self.first_failed(s) for s in self.most_sessions},
                "probes": [] if self.probes is None else self.probes.to_dict("records"),
                "host_balance": [b for proxy in self.experiment.proxies
                                 if (b := self.host_balance(proxy)) is not None],
                "model": {"costs": costs.to_json(), "runs": versus.to_dict("records")}}

    def checks(self) -> list[Check]:
        return []  # none: the QoS search and the model comparison are reported as found

    def figures(self) -> dict:
        from offloadlab.report import appcache as figure

        return {"appcache.png": figure.figure(self.points, self.experiment.operating,
                                              self.model[1])}


def run_point(exp: Experiment, setup: str, sessions: int, cache_mib: float | None,
              proxy: str = "emulated") -> dict:
    """One run (see the module notes); a row of :data:`POINT_COLUMNS`. With ``proxy``
    ``squid``, B and C send the load through Squid to the server in A's set-up."""
    measured = exp.measured_stream(sessions)
    warm = exp.warm_stream(sessions)
    with_squid = setup != "A" and proxy == "squid"
    options = exp.options("A" if with_squid else setup, cache_mib)
    cores = exp.generator_cores()
    with running(options) as server, (
            squid.running(exp.squid_options(setup, cache_mib, server.port)) if with_squid
            else contextlib.nullcontext()) as front:
        url = server.url if front is None else front.url
        if warm is not None:
            load.run(url, warm, exp.manifest, cores=cores, **_LOAD)
        before = snapshot(server.control)
        if front is not None:
            mark, squid_cpu = front.mark(), front.cpu_s()
        result = load.run(url, measured, exp.manifest, records=True, cores=cores,
                          max_duration_s=exp.budget.measure_s + 2 * _LOAD["timeout_s"],
                          **_LOAD)
        # Taken before Squid stops: its shutdown must not count as measured time.
        after = snapshot(server.control)
        if front is not None:
            squid_cpu = front.cpu_s() - squid_cpu
    if front is None:
        side = _server_side(before, after)
    else:  # Squid has stopped, and its log is complete
        side = _squid_side(setup, before, after, front.counts(mark), squid_cpu)
    return {"setup": setup, "proxy": "none" if setup == "A" else proxy,
            "sessions": sessions, "cache_mib": None if setup == "A" else cache_mib,
            **side, **_client_side(exp, measured, result)}


def _cpu(doc: ServerStats, role: str) -> float:
    return sum(t.cpu_s for t in doc.threads if t.role == role)


def _server_side(before: ServerStats, after: ServerStats) -> dict:
    """Hit rate and CPU between two stats documents."""
    elapsed = after.elapsed_s - before.elapsed_s
    requests = after.requests - before.requests  # the application's
    host = _cpu(after, "host") - _cpu(before, "host")
    # The engine's busy time: its spinning while idle is not work.
    idle = after.engine.idle_poll_s - before.engine.idle_poll_s
    engine = _cpu(after, "engine") - _cpu(before, "engine") - idle
    if after.cache is None:
        hit_rate, served = None, requests
    else:
        now, was = after.cache, before.cache
        hits = (now.hits - was.hits) + (now.revalidated - was.revalidated)
        served = hits + (now.misses - was.misses)
        hit_rate = hits / served if served else None
    return {"hit_rate": hit_rate, "host_util": host / elapsed,
            "engine_util": engine / elapsed if engine > 0 else None,
            "host_cpu_us": 1e6 * host / served if served else None,
            "engine_cpu_us": 1e6 * engine / served if served and engine > 0 else None,
            "log_unparsed": None}


def _squid_side(setup: str, before: ServerStats, after: ServerStats,
                counts: squid.LogCounts, squid_cpu_s: float) -> dict:
    """Hit rate from Squid's log, and CPU: the origin's host thread, plus Squid's on
    the host's core in B; Squid's is the engine's in C. Per request Squid served."""
    elapsed = after.elapsed_s - before.elapsed_s
    host = _cpu(after, "host") - _cpu(before, "host") + (squid_cpu_s if setup == "B" else 0)
    engine = squid_cpu_s if setup == "C" else None
    served = counts.served
    return {"hit_rate": counts.hit_rate, "host_util": host / elapsed,
            "engine_util": None if engine is None else engine / elapsed,
            "host_cpu_us": 1e6 * host / served if served else None,
            "engine_cpu_us": 1e6 * engine / served if served and engine is not None
            else None,
            "log_unparsed": counts.unparsed}


def _client_side(exp: Experiment, measured: stream.Stream, result: load.LoadResult) -> dict:
    """Request and page times, the byte rate and the QoS shares, from the records."""
    rec = result.records.sort_values("request")
    frame = measured.frame
    dynamic = frame["dynamic"].to_numpy(bool)
    client = frame["client"].to_numpy(np.int64)
    # A page is a dynamic request and the static ones after it on the same client.
    page = pd.Series(dynamic).groupby(client).cumsum().to_numpy() + client * len(frame)
    rows = rec["request"].to_numpy()
    start = rec["intended_s"].to_numpy()
    end = start + rec["total_s"].to_numpy()
    pages = pd.DataFrame({"page": page[rows], "start": start, "end": end,
                          "failed": rec["error"].to_numpy() != ""})
    per = pages.groupby("page").agg(start=("start", "min"), end=("end", "max"),
                                    failed=("failed", "any"), n=("start", "size"))
    # Pages the end of the run cut short are left out, as SPECweb2005's ramp-down is.
    expected = pd.Series(page).value_counts()
    whole = per[(per["n"] == expected.reindex(per.index).to_numpy())]
    times = (whole["end"] - whole["start"]).where(~whole["failed"], np.inf)
    done = rec[rec["error"] == ""]
    # A failed request has no end; the run spans from the first start to the last end.
    ended = np.isfinite(end)
    span = max(float(end[ended].max() - start.min()), 1e-9) if ended.any() else 1.0
    failed = int((rec["error"] != "").sum())
    good = float((times <= exp.time_good_s).mean()) if len(times) else None
    tolerable = float((times <= exp.time_tolerable_s).mean()) if len(times) else None
    error_share = failed / len(rec) if len(rec) else None
    compliant = (good is not None and error_share is not None and good >= GOOD_SHARE
                 and tolerable >= TOLERABLE_SHARE and error_share <= MAX_ERROR_SHARE)
    return {"requests": len(rec), "rate": len(rec) / span,
            "dynamic_share": float(dynamic[rows].mean()) if len(rows) else None,
            "pages": len(whole),
            "request_mean_s": float(done["total_s"].mean()) if len(done) else None,
            "page_mean_s": float(times[np.isfinite(times)].mean()) if len(times) else None,
            "byte_rate": float(done["bytes"].sum()) / span,
            "good": good, "tolerable": tolerable, "error_share": error_share,
            "compliant": compliant}


def run(exp: Experiment, progress: Callable[[str, int, int], None] | None = None) -> Result:
    """The matrix, then the search (see the module notes). ``progress(what, done,
    total)`` before each run of the matrix and each probe of the search."""
    exp.check()
    plan = exp.plan()
    rows = []
    for i, (setup, proxy, n, mib) in enumerate(plan):
        if progress is not None:
            progress(_label(setup, proxy, n, mib), i, len(plan))
        rows.append(run_point(exp, setup, n, mib, proxy))
    result = Result(exp, pd.DataFrame(rows, columns=POINT_COLUMNS))
    if exp.search:
        probes = []
        for setup, proxy in exp.variants():
            result.most_sessions[name(setup, proxy)] = most_sessions(exp, setup, probes,
                                                                     progress, proxy)
        result.probes = pd.DataFrame(probes, columns=POINT_COLUMNS)
    if progress is not None:
        progress("", len(plan), len(plan))
    return result


def most_sessions(exp: Experiment, setup: str, probes: list[dict],
                  progress: Callable[[str, int, int], None] | None = None,
                  proxy: str = "emulated") -> int | None:
    """The most sessions ``setup`` serves compliantly with ``proxy``: double from the
    matrix's largest count until a run fails, then bisect ``search_steps`` times. Every
    run is appended to ``probes``. None if the first probe already fails."""
    mib = None if setup == "A" else exp.operating
    good, bad = None, None
    n = max(exp.budget.sessions)
    steps = 0
    while bad is None and n <= MAX_SESSIONS:
        if progress is not None:
            progress(f"search {_label(setup, proxy, n, mib)}", len(probes),
                     len(probes) + 1)
        probes.append(run_point(exp, setup, n, mib, proxy))
        if probes[-1]["compliant"]:
            good, n = n, 2 * n
        else:
            bad = n
    while good is not None and bad is not None and steps < exp.budget.search_steps \
            and bad - good > 1:
        n = (good + bad) // 2
        if progress is not None:
            progress(f"search {_label(setup, proxy, n, mib)}", len(probes),
                     len(probes) + 1)
        probes.append(run_point(exp, setup, n, mib, proxy))
        good, bad = (n, bad) if probes[-1]["compliant"] else (good, n)
        steps += 1
    return good


def name(setup: str, proxy: str) -> str:
    """A kind of run's short name: ``A``, ``B`` and ``C`` (the emulated cache), ``B
    squid`` and ``C squid``."""
    return f"{setup} squid" if proxy == "squid" else setup


def _label(setup: str, proxy: str, sessions: int, mib: float | None) -> str:
    cache = "" if mib is None else f", {mib:g} MiB"
    what = SETUP_NAMES[setup] + (", Squid" if proxy == "squid" else "")
    return f"{setup} ({what}), {sessions} sessions{cache}"


def generated_site(folder: Path, sessions: Sequence[int], workload: str, seed: int) -> Path:
    """Writes the default site of ``workload`` for the largest session count. Returns
    its folder."""
    spec = SpecWeb2005Spec(name="appcache", workload=workload, sessions=max(sessions),
                           seed=seed, description="seed 001's SPECweb2005-like site")
    fileset.materialise(fileset.generate(spec), folder)
    return folder


def read_site(folder: Path) -> SpecWeb2005Spec:
    """The spec of the site materialised in ``folder``."""
    spec = fileset.spec_from_dict(fileset.read_info(folder).get("spec", {}), str(folder))
    if not isinstance(spec, SpecWeb2005Spec):
        raise InputError(f"{folder}: not a SPECweb2005-like site; write one with "
                         "'offload workload fileset --preset specweb2005'")
    return spec
