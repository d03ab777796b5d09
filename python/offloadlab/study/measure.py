"""The study's testbed runs: one server per run, in the mode asked, under one load.

Three kinds of run per class and mode: a closed-loop saturation run (zero think time,
HTTP/1.0 as in seed 000; a trace's loads reuse connections as the trace did) for
capacity, connections per minute, connection set-up and goodput; open-loop calibration
runs (Poisson, or windows of a trace); and the open-loop validation sweep.
:class:`Measured` keeps what the comparison needs from each.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from offloadlab.calibrate.fit import Run
from offloadlab.documents import CoreTimes, ServerStats
from offloadlab.errors import RunError
from offloadlab.mode_traits import traits
from offloadlab.model.verdict import MARGIN
from offloadlab.study import judge
from offloadlab.study.plan import ENGINE_WAIT, SATURATION_CLIENTS, ClassLoad, Plan
from offloadlab.testbed import host_profile, remote
from offloadlab.testbed import modes as testbed_modes
from offloadlab.testbed.load import LoadResult
from offloadlab.testbed.server import ServerOptions, emulating
from offloadlab.workload import stream

TIMEOUT_S = 5.0
# One generator thread, on the engine's core, with length checks only. On a small
# machine the generator must share a core: the engine's keeps the host's core to the
# host, which is what the model queues, in every mode alike. Hashing every large body
# (SHA-256 runs near 1-2 GB/s) would make the generator the bottleneck; the testbed's
# own tests check content byte for byte.
LOAD = {"threads": 1, "verify": "length"}
_BATCHES = 10
LATENCY_SAMPLE = 5000
# Saturation capacity is the median completion rate over windows this long.
CAPACITY_WINDOW_S = 0.1


@dataclass(frozen=True)
class Measured:
    """One testbed run, reduced: ``run`` for calibration, the rest for comparison."""

    run: Run
    use: str                 # saturation | calibration | validation
    U_host: float
    U_engine: float
    T_lo: float
    T_hi: float
    p99: float
    errors: int
    error_rate: float
    connections_per_s: float
    connect_s: float
    goodput_Bps: float
    cores: tuple[CoreTimes, ...]
    latency: np.ndarray      # per-request total times (a sample)
    steal: float = 0.0       # share of the cores' time the hypervisor took (steal_share)
    # Share of the cores' time other processes spent in user mode (Foreign.share).
    foreign: float = 0.0

    @property
    def disturbance(self) -> float:
        """The larger share of the run's cores something else took: the hypervisor or
        other processes."""
        return max(self.steal, self.foreign)
    # Engine mode: mean time from the engine passing a request up to its answer coming
    # back (the stats' host_turnaround_s); nan in the other modes.
    host_trip: float = math.nan
    repeats: int = 0         # runs made again for it because of that (study.run)
    # How late the generator started the requests against the plan, s: mean and p99. A
    # generator behind its plan sends in bursts, not the plan's arrivals
    # (bench/results/model_misses.md).
    lag: float = math.nan
    lag_p99: float = math.nan


def options(plan: Plan, load: ClassLoad, mode: str) -> ServerOptions:
    """The server of one run, on the plan's host; an offload mode's engine emulates the
    plan's engine."""
    emulated = (emulating(plan.engine) if plan.engine is not None
                and traits(mode).engine_thread else {})
    server = ServerOptions(root=load.root, mode=mode, host_core=plan.host_core,
                           engine_core=plan.engine_core, work=plan.work, seed=plan.seed,
                           engine_wait=ENGINE_WAIT, **emulated)
    return host_profile.named(plan.host_profile).server(server, plan.netns)


def measure(plan: Plan, load: ClassLoad, mode: str, use: str, rate: float,
            progress: Callable | None = None, replicate: int = 0) -> Measured:
    """One run of ``load``'s class in ``mode``: Poisson at ``rate`` for the budget's run
    length (a traced load: a window of its trace played at ``rate``), or (``use`` =
    "saturation") closed-loop clients with zero think time (:func:`stream_of`)."""
    requests, extra, rate = stream_of(plan, load, use, rate, replicate)
    server = options(plan, load, mode)
    load_options = {"timeout_s": TIMEOUT_S, "records": True, **LOAD, **extra}
    before = Foreign.now()
    try:
        done = (testbed_modes.run_mode(server, requests, load.manifest, progress=progress,
                                       cores=generator_cores(plan), **load_options)
                if plan.hosts is None else
                remote.run_mode(plan.hosts, server, requests, load.manifest, **load_options))
    except RunError as exc:
        raise failed(load, mode, use, rate, exc) from None
    m = _reduce(load, mode, use, rate, requests.frame["size_bytes"].to_numpy(), done)
    if plan.hosts is not None:
        # The client hosts' generators are other processes, here or elsewhere: not a
        # disturbance of this machine's (the server host's cores' steal still counts).
        return m
    return replace(m, foreign=before.share(Foreign.now()))


@dataclass(frozen=True)
class Foreign:
    """A snapshot for telling how much of the machine other processes used while a run
    went: the user-mode CPU seconds of the cores this process may use (``/proc/stat``'s
    user and nice, which count every process) and of this process (``/proc/self/stat``'s
    utime: the server's threads, the load generator's and Python's), and the time.
    Kernel time is left out: the kernel's own threads work for the run's traffic too. A
    test suite or a build beside a study took up to 31% of the host's core and made
    calibration runs read 60% high (29 Nov 2026)."""

    machine_s: float
    own_s: float
    at: float
    cores: int

    @classmethod
    def now(cls) -> Foreign:
        allowed = os.sched_getaffinity(0)
        tick = os.sysconf("SC_CLK_TCK")
        machine = 0
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in allowed:
                    machine += int(fields[0]) + int(fields[1])
        with open("/proc/self/stat") as f:
            # After the command name in brackets, utime is the 12th field.
            own = int(f.read().rsplit(")", 1)[1].split()[11])
        return cls(machine / tick, own / tick, time.monotonic(), len(allowed))

    def share(self, later: Foreign) -> float:
        """The share of the cores' time between the snapshots other processes used."""
        wall = (later.at - self.at) * self.cores
        other = (later.machine_s - self.machine_s) - (later.own_s - self.own_s)
        return max(other, 0.0) / wall if wall > 0 else 0.0


def stream_of(plan: Plan, load: ClassLoad, use: str, rate: float,
              replicate: int = 0) -> tuple[stream.Stream, dict, float]:
    """The requests of one run, the load generator's options for them, and the run's
    rate. Each ``replicate`` of a rate draws its own arrivals (a trace: its own window),
    so that a point's mean averages the streams' own spread too (a request count drawn
    for 2 s at 1,000/s is off by 2%) and its replicates' spread includes it."""
    # Another stream at every rate and replicate.
    seed = plan.seed + int(rate * 1000) % 100_000 + 100_000 * replicate
    extra = {"discard": plan.discard}
    if use == "saturation":
        # A traced load's clients reuse connections as much as the trace's did.
        keep_alive = load.trace.keep_alive if load.trace is not None else False
        requests = stream.closed(load.manifest, SATURATION_CLIENTS, think="det(0)",
                                 requests=1000, keep_alive=keep_alive,
                                 size_class=load.size_class, seed=seed)
        extra |= {"repeat": True, "max_duration_s": plan.budget.saturation_s}
    elif load.trace is not None:
        requests = load.trace.window(rate, plan.budget.run_s, seed)
        # The run's rate is what its window offers: the trace's own swings move it off
        # the asked rate, and the model and the sweep's stop rule compare with it.
        rate = len(requests) / plan.budget.run_s
    else:
        requests = stream.poisson(load.manifest, rate, duration_s=plan.budget.run_s,
                                  size_class=load.size_class, seed=seed)
    return requests, extra, rate


def failed(load: ClassLoad, mode: str, use: str, rate: float, exc: RunError) -> RunError:
    """A run's failure, saying which run it was."""
    return RunError(f"class {load.name}, {mode} mode, {use} run at {rate:g}/s: {exc}")


# A point is scored below this share of the busier core's time: past it the delay
# turns up steeply, and any model's small error in capacity becomes a large one in delay.
BELOW_UTIL = 0.8
# The values of a run that a point's replicates average: per request, per second, and
# the p99 and error rate of each run.
_RUN_MEANS = ("throughput", "host_s", "app_s", "engine_s", "T", "host_wakeups",
              "engine_wakeups", "host_background_s", "engine_background_s", "host_turns")
_MEANS = ("U_host", "U_engine", "p99", "error_rate", "connections_per_s", "connect_s",
          "goodput_Bps", "host_trip", "lag", "lag_p99")


def mean_of(runs: Sequence[Measured]) -> Measured:
    """The replicates of one point as one :class:`Measured`: the mean of each value per
    request or per second (delay, demands, utilisations, throughput; and p99 and error
    rate); the delay's interval is Student's t interval of the mean over the replicates'
    delays (their spread is the machine's spells, which a run's own batch means do not
    see), and a single run keeps its own; the requests, sizes and latency samples of all
    replicates together; errors and repeats summed; the worst steal and foreign work;
    each core's times
    summed."""
    if len(runs) == 1:
        return runs[0]

    def mean(values) -> float:
        return float(np.mean(list(values)))

    first = runs[0]
    run = replace(first.run, requests=sum(m.run.requests for m in runs),
                  sizes=np.concatenate([m.run.sizes for m in runs]),
                  **{f: mean(getattr(m.run, f) for m in runs) for f in _RUN_MEANS})
    delays = np.array([m.run.T for m in runs])
    # No interval past saturation, where a run's delay grows without bound.
    half = (stats.t.ppf(0.5 + judge.CONFIDENCE / 2, len(runs) - 1) * delays.std(ddof=1)
            / math.sqrt(len(runs)) if np.isfinite(delays).all() else math.nan)
    return replace(first, run=run, T_lo=run.T - half, T_hi=run.T + half,
                   errors=sum(m.errors for m in runs),
                   latency=np.sort(np.concatenate([m.latency for m in runs])),
                   steal=max(m.steal for m in runs), foreign=max(m.foreign for m in runs),
                   repeats=sum(m.repeats for m in runs),
                   cores=_summed(m.cores for m in runs),
                   **{f: mean(getattr(m, f) for m in runs) for f in _MEANS})


def _summed(cores) -> tuple[CoreTimes, ...]:
    """Each core's times summed over runs, in the order the cores first appear."""
    total: dict[int, CoreTimes] = {}
    for c in itertools.chain.from_iterable(cores):
        was = total.get(c.core)
        total[c.core] = c if was is None else replace(was, **{
            f"{p}_s": _seconds(was, p) + _seconds(c, p) for p in (*CPU_PARTS, "steal")})
    return tuple(total.values())


def scored(points: Sequence[Measured]) -> np.ndarray:
    """Which of a sweep's points a row is scored on (:func:`scorable`), each point's
    busier core with everything on it counted (:func:`core_busy`)."""
    return scorable(np.array([core_busy(m) for m in points]),
                    np.array([m.run.throughput for m in points]),
                    np.array([m.run.rate for m in points]))


def behind_plan(m: Measured) -> bool:
    """Whether the load generator ran behind its plan in an open-loop run: its requests
    started, on average, later than the mean time between them, so they went out in
    bursts, not as the plan's Poisson arrivals the model takes (near the top of a sweep
    the core the generator shares fills: bench/results/model_misses.md)."""
    return bool(m.lag * m.run.rate > 1)


def scorable(busy: np.ndarray, throughput: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Points whose busier core was below :data:`BELOW_UTIL` busy and whose server kept
    up with the offered rate within the verdicts' margin."""
    return (np.asarray(busy) < BELOW_UTIL) & (np.asarray(throughput)
                                              >= (1 - MARGIN) * np.asarray(rate))


def core_busy(m: Measured) -> float:
    """The busier server core's share of work in a run: its thread's busy share (U_host,
    or U_engine less any idle polling) plus the other work on that core, the load
    generator's included (``*_background_s`` per request). On two cores the generator
    shares the engine's: about 90% of it was busy at the top of a class 0 sweep whose
    engine thread was 34% busy (29 Nov 2026). A core's raw busy time would not do: an
    SQPOLL thread that spins while idle keeps its core busy at any load."""
    lam = m.run.throughput

    def on_core(own: float, background: float) -> float:
        return np.nan_to_num(own) + lam * np.nan_to_num(background)

    return float(max(on_core(m.U_host, m.run.host_background_s),
                     on_core(m.U_engine, m.run.engine_background_s)))


def pair_ratio(pairs: Sequence[tuple[Measured, Measured]]) -> tuple[float, float, float, int]:
    """(ratio, low, high, pairs) of paired (inline, offload mode) runs: the geometric
    mean of their delay ratios, its interval (:func:`judge.paired_ratio`), and how many
    pairs it rests on; (NaN, 0, inf, 0) without pairs."""
    ratio, low, high = judge.paired_ratio(np.array([m.run.T for _, m in pairs]),
                                          np.array([i.run.T for i, _ in pairs]))
    return ratio, low, high, len(pairs)


def operating_ratio(study, cls: str, mode: str) -> tuple[float, float, float, int]:
    """The measured delay ratio ``mode`` / inline of class ``cls`` at its operating rate,
    from the study's paired runs there: (ratio, low, high, pairs) as :func:`pair_ratio`
    gives it; no pairs (the sweep did not reach the rate stably) give (NaN, 0, inf, 0)."""
    return pair_ratio(study.operating.get((cls, mode), []))


def generator_core(plan: Plan) -> int | None:
    """The server's core the load generator shares: the engine's; None when the
    generator is not pinned, or runs on other hosts (``plan.hosts``)."""
    return None if plan.hosts is not None else plan.engine_core


def generator_cores(plan: Plan) -> list[int]:
    core = generator_core(plan)
    return [] if core is None else [core]


def _reduce(load: ClassLoad, mode: str, use: str, rate: float, sizes: np.ndarray,
            done: testbed_modes.ModeRun) -> Measured:
    server = done.stats
    per = server.per_request
    # Busy time: a host that polls its completion ring (uring) spends idle CPU too.
    host_s = per.host_busy_cpu_s
    # uring's SQPOLL thread spins between submissions; the kernel's own account of its
    # work (SqWorkTime) is its busy time where the kernel gives it.
    engine_busy = per.engine_sq_work_s or per.engine_busy_cpu_s
    offloaded = traits(mode).engine_thread
    engine = engine_busy if offloaded and engine_busy is not None else math.nan
    return reduced(
        load, mode, use, rate, sizes, done.load, served=server.requests,
        host_s=host_s or math.nan, app_s=per.app_cpu_s or 0.0, engine_s=engine,
        cores=server.cores, host_wakeups=_number(per.host_wakeups),
        engine_wakeups=(_number(per.engine_wakeups) if traits(mode).counts_engine_wakeups
                        else math.nan),
        host_background_s=background(server, "host"),
        engine_background_s=background(server, "engine") if offloaded else math.nan,
        host_trip=_number(per.host_turnaround_s), host_turns=_number(per.host_turns))


def reduced(load: ClassLoad, mode: str, use: str, rate: float, sizes: np.ndarray,
            result: LoadResult, served: int, host_s: float, app_s: float, engine_s: float,
            cores: tuple[CoreTimes, ...], host_trip: float = math.nan,
            **counts: float) -> Measured:
    """A run as :class:`Measured`, from the load generator's ``result`` and the server
    side's account: requests ``served``, host and engine CPU and the application's work
    per request, the cores' times; ``counts``, the :class:`Run`'s wake-ups and
    background per request."""
    report = result.parsed
    seconds = report.duration_s
    records = result.records
    total = records.loc[records["error"] == "", "total_s"].to_numpy(float)
    total = total[np.isfinite(total)]
    lo, hi = _batch_interval(total)
    throughput = capacity(records) if use == "saturation" else report.throughput
    run = Run(cls=load.name, mode=mode, rate=rate if use != "saturation" else math.nan,
              throughput=throughput if math.isfinite(throughput) else report.throughput,
              requests=served, host_s=host_s, app_s=app_s, engine_s=engine_s,
              T=float(total.mean()) if len(total) else math.nan, sizes=sizes, **counts)
    rng = np.random.default_rng(0)
    sample = total if len(total) <= LATENCY_SAMPLE else rng.choice(total, LATENCY_SAMPLE,
                                                                   replace=False)
    return Measured(
        run=run, use=use,
        U_host=(host_s if math.isfinite(host_s) else 0.0) * served / seconds
        if seconds > 0 else math.nan,
        U_engine=engine_s * served / seconds if seconds > 0 else math.nan,
        T_lo=lo, T_hi=hi, p99=report.total.p99_s or math.nan,
        errors=report.failed, error_rate=result.error_rate,
        connections_per_s=report.connections / seconds if seconds > 0 else math.nan,
        connect_s=report.connect_mean_s, goodput_Bps=report.goodput_Bps,
        cores=cores, latency=np.sort(sample), steal=steal_share(cores), host_trip=host_trip,
        lag=_number(report.lag.mean_s), lag_p99=_number(report.lag.p99_s))


def _number(value) -> float:
    return math.nan if value is None else float(value)


def background(server: ServerStats, role: str) -> float:
    """CPU per request on the core of ``role``'s thread spent by everything but the
    server's threads there: the load generator, and interrupts the threads' clocks do
    not see. NaN when the thread is not pinned or nothing was served."""
    threads = server.threads
    core = next((t.core for t in threads if t.role == role and t.core is not None), None)
    stats = next((c for c in server.cores if c.core == core), None)
    if stats is None or not server.requests:
        return math.nan
    busy = sum(_seconds(stats, k) for k in BUSY_PARTS)
    own = sum(t.cpu_s for t in threads if t.core == core)
    return max(busy - own, 0.0) / server.requests


def steal_share(cores: tuple[CoreTimes, ...]) -> float:
    """The share of the cores' time in which the hypervisor ran something else
    (``/proc/stat``'s steal). Nothing of the run, server or load generator, moves then,
    so requests in flight wait it out: on this 2-core VM runs that lost 9-14% of their
    cores' time had mean delays 4-10 times an undisturbed run's. 0 on bare metal."""
    total = sum(_seconds(c, p) for c in cores for p in (*CPU_PARTS, "steal"))
    return sum(c.steal_s for c in cores) / total if total > 0 else 0.0


def capacity(records: pd.DataFrame) -> float:
    """A saturation run's capacity: the median completion rate over windows of
    :data:`CAPACITY_WINDOW_S`, the first (connections opening) and the last (cut off)
    left out. On the shared 2-core machine two runs' mean rates differed by up to 17%;
    the median of the windows is not moved by a stall in part of a run. NaN when the
    run is too short for five windows."""
    ok = records[records["error"] == ""]
    done = (ok["intended_s"] + ok["total_s"]).to_numpy(float)
    done = done[np.isfinite(done)]
    if len(done) == 0:
        return math.nan
    edges = np.arange(0.0, done.max() + CAPACITY_WINDOW_S, CAPACITY_WINDOW_S)
    counts = np.histogram(done, bins=edges)[0][1:-1]
    return float(np.median(counts) / CAPACITY_WINDOW_S) if len(counts) >= 5 else math.nan


def _batch_interval(values: np.ndarray) -> tuple[float, float]:
    """95% interval of the mean from batch means (consecutive requests are correlated
    under load, so the plain standard error would be too narrow)."""
    if len(values) < 2 * _BATCHES:
        return math.nan, math.nan
    means = np.array([b.mean() for b in np.array_split(values, _BATCHES)])
    half = stats.t.ppf(0.975, _BATCHES - 1) * means.std(ddof=1) / math.sqrt(_BATCHES)
    return float(values.mean() - half), float(values.mean() + half)


BUSY_PARTS = ("user", "system", "softirq", "irq")
CPU_PARTS = (*BUSY_PARTS, "idle")


def _seconds(core: CoreTimes, part: str) -> float:
    """A core's seconds in one of :data:`CPU_PARTS`."""
    return getattr(core, f"{part}_s")


def core_shares(core: CoreTimes) -> dict[str, float]:
    """One core's time in a run (a stats document's ``cores`` entry) as shares of its
    wall time; empty if the core saw no time."""
    parts = {k: _seconds(core, k) for k in CPU_PARTS}
    wall = sum(parts.values())
    return {k: v / wall for k, v in parts.items()} if wall > 0 else {}


def cpu_rows(cls: str, mode: str, m: Measured, plan: Plan) -> list[dict]:
    """Per-core shares of wall time in a run (the seed's CPU breakdown figures)."""
    rows = []
    for core in m.cores:
        shares = core_shares(core)
        if not shares:
            continue
        role = ("host" if core.core == plan.host_core else
                "engine" if core.core == plan.engine_core and traits(mode).engine_thread
                else "shared")
        rows.append({"class": cls, "mode": mode, "core": int(core.core), "role": role,
                     **shares})
    return rows
