"""Online placement against fixed splits on the testbed, under a workload that shifts.

Runs as ``offload handoff online`` (:mod:`offloadlab.cli.handoff`).

One open-loop HTTP/1.0 Poisson stream (seed 000's setting: a connection per request)
runs through a list of :class:`Phase` s; each phase has its own rate per size class and
its own engine slowdown (a weaker engine, or one another tenant now shares). The same
stream is sent to the server in handoff mode with placement on, under

- ``online``: the :class:`~offloadlab.online.control.Controller` re-solves the model
  every period and sets each class's offload fraction;
- ``fixed:F``: every class offloads the share F all along (``fixed:0`` is all on the
  host, ``fixed:1`` all on the engine).

Open loop at the same offered rate makes throughput equal unless a split saturates a
side, so the policies are compared by mean latency (measured by the load generator from
each request's intended send time), overall and per phase; the controller's decisions
and the latency are kept as time series for the figure.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab import units
from offloadlab.documents import ServerStats
from offloadlab.errors import InputError, RunError, require
from offloadlab.online.control import Controller, Policy
from offloadlab.online.estimate import Snapshot
from offloadlab.results import Check
from offloadlab.testbed import load, modes
from offloadlab.testbed.server import ServerOptions, running, snapshot
from offloadlab.workload import stream
from offloadlab.workload.classes import CLASS_BOUNDS, N_CLASSES

ONLINE = "online"
FIXED = (0.0, 0.25, 0.5, 0.75, 1.0)
# The load generator as in the other testbed experiments (one thread, length checks).
_LOAD = {"threads": 1, "verify": "length", "timeout_s": 5.0}
# Width of the latency series' bins.
BIN_S = 0.5
RUN_COLUMNS = ("policy", "repeat", "mean_s", "p99_s", "throughput", "offered", "errors",
               "engine_share")


@dataclass(frozen=True)
class Phase:
    """``duration_s`` of Poisson arrivals at ``rates[c]`` requests/s of size class c,
    with the engine slowed by ``slowdown``."""

    duration_s: float
    rates: tuple[tuple[int, float], ...]
    slowdown: float = 0.0

    def check(self) -> None:
        require(math.isfinite(self.duration_s) and self.duration_s > 0,
                f"phase duration {self.duration_s!r} s: use a time > 0, e.g. 6s")
        require(len(self.rates) >= 1, "phase: give a rate for at least one size class, "
                                      "e.g. c0=4000")
        for c, rate in self.rates:
            require(c in range(N_CLASSES), f"phase class c{c}: use c0 to c{N_CLASSES - 1}")
            require(math.isfinite(rate) and rate > 0, f"phase rate c{c}={rate!r}: use a "
                                                      "rate > 0 requests/s")
        require(math.isfinite(self.slowdown) and self.slowdown >= 0,
                f"phase slowdown={self.slowdown!r}: use a factor >= 0")

    def label(self) -> str:
        rates = ",".join(f"c{c}={r:g}" for c, r in self.rates)
        return f"{units.format_time(self.duration_s)}:{rates}:slowdown={self.slowdown:g}"


def parse_phase(text: str) -> Phase:
    """``6s:c0=4000:slowdown=6`` (several classes: ``c0=3000,c2=500``; slowdown 0 if
    left out)."""
    parts = [p.strip() for p in text.split(":")]
    usage = (f"phase {text!r}: write DURATION:cC=RATE[,cC=RATE]:slowdown=F, e.g. "
             "6s:c0=4000:slowdown=6")
    if len(parts) not in (2, 3):
        raise InputError(usage)
    duration = units.parse_time(parts[0])
    rates = []
    for item in parts[1].split(","):
        key, _, value = item.strip().partition("=")
        if not (key.startswith("c") and key[1:].isdigit()):
            raise InputError(usage)
        rates.append((int(key[1:]), _number(value, usage)))
    slowdown = 0.0
    if len(parts) == 3:
        key, _, value = parts[2].partition("=")
        if key.strip() != "slowdown":
            raise InputError(usage)
        slowdown = _number(value, usage)
    phase = Phase(duration, tuple(rates), slowdown)
    phase.check()
    return phase


def parse_fractions(text: str) -> tuple[float, ...]:
    """``0,0.5,1`` -> fixed fractions (may be empty: online only)."""
    usage = f"fractions {text!r}: give shares in [0, 1], comma-separated, e.g. 0,0.5,1"
    values = tuple(_number(p, usage) for p in text.split(",") if p.strip())
    if not all(0 <= v <= 1 for v in values):
        raise InputError(usage)
    return values


def _number(text: str, usage: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(usage) from None


# 100 KiB-1 MiB files at a steady rate; the engine is slowed five-fold in the middle
# phase (another tenant takes it), then recovers: the best split moves from
# offloading most to offloading almost nothing and back.
DEFAULT_PHASES = (Phase(6.0, ((3, 4000.0),), 0.0), Phase(6.0, ((3, 4000.0),), 4.0),
                  Phase(6.0, ((3, 4000.0),), 0.0))


@dataclass(frozen=True)
class Experiment:
    """``fixed`` are the fixed fractions compared with the online policy; ``work`` the
    host's application work per request; times in seconds."""

    root: Path
    manifest: pd.DataFrame
    phases: tuple[Phase, ...] = DEFAULT_PHASES
    fixed: tuple[float, ...] = FIXED
    control: Policy = field(default_factory=lambda: Policy(period_s=0.25, window_s=1.0,
                                                           dwell_s=1.0))
    # Enough application work that the host's queue, which the model sees, is most of
    # what placement can change (docs/online.md, "Measured"); medians of 3 rounds.
    work: str = "exp(mean=100us)"
    repeats: int = 3
    host_core: int | None = None
    engine_core: int | None = None
    generator_core: int | None = None
    seed: int = 1
    # An untimed run of the stream's first seconds before the first policy, so that no
    # policy pays for cold caches and clocks.
    warmup_s: float = 1.0

    def check(self) -> None:
        require(len(self.phases) >= 1, "phases: give at least one")
        for phase in self.phases:
            phase.check()
        require(all(math.isfinite(f) and 0 <= f <= 1 for f in self.fixed),
                f"fixed fractions {list(self.fixed)}: each must be in [0, 1]")
        require(self.repeats >= 1, f"repeats={self.repeats!r}: use 1 or more")
        require(math.isfinite(self.warmup_s) and self.warmup_s >= 0,
                f"warmup_s={self.warmup_s!r}: use a time >= 0")
        self.control.check()
        present = set(self.manifest["class"].astype(int))
        for phase in self.phases:
            for c, _ in phase.rates:
                require(c in present, f"phase {phase.label()}: the file set has no class "
                                      f"c{c} files (it has {sorted(present)})")
        self.server(0.0).check()

    @property
    def policies(self) -> tuple[str, ...]:
        return (ONLINE, *(f"fixed:{f:g}" for f in self.fixed))

    @property
    def duration_s(self) -> float:
        return sum(p.duration_s for p in self.phases)

    def server(self, fraction: float) -> ServerOptions:
        return ServerOptions(root=self.root, mode="handoff", handoff="P-N-FCFS",
                             placement=CLASS_BOUNDS, fractions=(fraction,) * N_CLASSES,
                             host_core=self.host_core, engine_core=self.engine_core,
                             work=self.work, seed=self.seed,
                             engine_slowdown=self.phases[0].slowdown)

    def requests(self) -> stream.Stream:
        """The phases' Poisson streams end to end, one connection per request."""
        frames, start = [], 0.0
        for i, phase in enumerate(self.phases):
            for c, rate in phase.rates:
                s = stream.poisson(self.manifest, rate, duration_s=phase.duration_s,
                                   size_class=c, seed=self.seed + 1000 * i + c)
                frame = s.frame.copy()
                frame["time_s"] += start
                frames.append(frame)
            start += phase.duration_s
        frame = pd.concat(frames, ignore_index=True).sort_values("time_s", kind="stable")
        frame["object"] = frame["object"].astype(str)
        frame["conn_id"] = frame["client"] = np.arange(len(frame))
        meta = {"generator": "phases", "seed": self.seed, "duration_s": start,
                "params": {"phases": [p.label() for p in self.phases]}}
        return stream.Stream(frame.reset_index(drop=True), meta)

    def ends_s(self) -> list[float]:
        return np.cumsum([p.duration_s for p in self.phases]).tolist()

    def phase_at(self, t_s: float) -> int:
        index = np.searchsorted(self.ends_s(), t_s, side="right")
        return int(min(index, len(self.phases) - 1))

    def describe(self) -> dict:
        return {"root": str(self.root), "phases": [p.label() for p in self.phases],
                "fixed": list(self.fixed), "control": asdict(self.control),
                "work": self.work, "repeats": self.repeats, "host_core": self.host_core,
                "engine_core": self.engine_core, "generator_core": self.generator_core,
                "seed": self.seed, "warmup_s": self.warmup_s,
                "class_edges_bytes": list(CLASS_BOUNDS)}


@dataclass(frozen=True)
class Result:
    """The experiment's result (:mod:`offloadlab.experiments.protocol`)."""

    experiment: Experiment
    runs: pd.DataFrame      # RUN_COLUMNS plus mean_s per phase (phase0_mean_s, ...)
    steps: pd.DataFrame     # the online controller's periods (policy "online")
    latency: pd.DataFrame   # policy, repeat, t_s (bin start), mean_s, requests

    def medians(self) -> pd.DataFrame:
        """Per policy: medians over repeats; ``vs_online`` is the mean latency over the
        online policy's."""
        cols = [c for c in self.runs.columns if c.endswith("_s") or c in (
            "throughput", "offered", "engine_share")]
        grouped = self.runs.groupby("policy", sort=False)
        table = grouped[cols].median()
        table["errors"] = grouped["errors"].sum()
        table["vs_online"] = table["mean_s"] / table["mean_s"].get(ONLINE, math.nan)
        return table.reset_index()

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"runs.csv": self.runs, "steps.csv": self.steps, "latency.csv": self.latency}

    def summary(self) -> dict:
        return {"summary": self.medians().to_dict("records")}

    def checks(self) -> list[Check]:
        return checks(self.medians())

    def figures(self) -> dict:
        from offloadlab.report import online as figure

        exp = self.experiment
        return {"handoff-online.png": figure.figure(
            self.runs, self.steps, self.latency, [p.label() for p in exp.phases],
            exp.ends_s())}


def run(exp: Experiment, progress: Callable[[str, int, int], None] | None = None) -> Result:
    """Every policy ``repeats`` times, online first in each round."""
    exp.check()
    requests = exp.requests()
    cores = [] if exp.generator_core is None else [exp.generator_core]
    rows, steps, bins = [], [], []
    if exp.warmup_s > 0:
        head = requests.frame[requests.frame["time_s"] < exp.warmup_s]
        warm = stream.Stream(head.reset_index(drop=True), requests.meta)
        _run_policy(exp, "fixed:0.5", warm, cores)
    done = modes.rounds(exp.policies, exp.repeats,
                        lambda name, _rep: _run_policy(exp, name, requests, cores),
                        "online placement", progress)
    for name, rep, (result, stats, decided) in done:
        rows.append(_row(exp, name, rep, result, stats))
        bins.append(_latency(name, rep, result.records))
        steps.extend({"policy": name, "repeat": rep, **s} for s in decided)
    return Result(exp, pd.DataFrame(rows), pd.DataFrame(steps),
                  pd.concat(bins, ignore_index=True))


def _run_policy(exp: Experiment, name: str, requests: stream.Stream, cores: list[int]):
    online = name == ONLINE
    fraction = exp.control.probe if online else float(name.partition(":")[2])
    with running(exp.server(fraction)) as server:
        supervisor = _Supervisor(exp, server.control, online)
        supervisor.start()
        try:
            result = load.run(server.url, requests, exp.manifest, records=True,
                              cores=cores, **_LOAD)
        finally:
            supervisor.stop()
    return result, server.final, supervisor.decided


class _Supervisor(threading.Thread):
    """While the load runs: sets each phase's slowdown on time and, for the online
    policy, runs the controller every period and applies its fractions."""

    def __init__(self, exp: Experiment, control, online: bool) -> None:
        super().__init__(name="offload-online", daemon=True)
        self.exp, self.server_control = exp, control
        self.controller = Controller(N_CLASSES, exp.control) if online else None
        self.decided: list[dict] = []
        self._done = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # reported by stop(), on the caller's thread
            self.failure = exc

    def _loop(self) -> None:
        start = time.monotonic()
        phase = 0
        while not self._done.wait(self.exp.control.period_s):
            t = time.monotonic() - start
            now = self.exp.phase_at(t)
            if now != phase:
                phase = now
                self.server_control.set_slowdown(self.exp.phases[phase].slowdown)
            if self.controller is None:
                continue
            stats = snapshot(self.server_control)
            if stats is None:
                continue
            step = self.controller.observe(Snapshot.of(stats))
            if step.changed:
                self.server_control.set_fractions(list(step.fractions))
            self.decided.append({"t_s": t, "phase": phase, **_flat(asdict(step))})

    def stop(self) -> None:
        self._done.set()
        self.join()
        if self.failure is not None:
            raise RunError(f"the online controller failed: {self.failure!r}")


def _flat(step: dict) -> dict:
    """A step as columns: one per class for fractions and rates."""
    per_class = ("fractions", "rates", "host_s", "offloaded_host_s", "engine_s")
    out = {k: v for k, v in step.items() if k not in (*per_class, "t_s")}
    out["server_t_s"] = step["t_s"]
    for key, prefix in zip(per_class, ("f", "rate", "host_s", "offloaded_host_s", "engine_s"),
                           strict=True):
        for c, v in enumerate(step[key]):
            out[f"{prefix}{c}"] = v
    return out


def _row(exp: Experiment, name: str, rep: int, result: load.LoadResult,
         stats: ServerStats) -> dict:
    report, records = result.parsed, result.records
    served = stats.requests
    engine = stats.handoff.engine_requests if stats.handoff else 0
    row = {"policy": name, "repeat": rep, "mean_s": report.total.mean_s,
           "p99_s": report.total.p99_s, "throughput": report.throughput,
           "offered": len(records) / exp.duration_s, "errors": report.failed,
           "engine_share": engine / served if served else math.nan}
    ok = records[records["error"] == ""]
    phase = np.array([exp.phase_at(t) for t in ok["intended_s"]], dtype=int)
    for i in range(len(exp.phases)):
        row[f"phase{i}_mean_s"] = float(ok["total_s"][phase == i].mean())
    return row


def _latency(name: str, rep: int, records: pd.DataFrame) -> pd.DataFrame:
    ok = records[records["error"] == ""]
    t = (ok["intended_s"] // BIN_S) * BIN_S
    g = ok.groupby(t)["total_s"]
    frame = pd.DataFrame({"t_s": g.mean().index, "mean_s": g.mean().to_numpy(),
                          "requests": g.size().to_numpy()})
    frame.insert(0, "repeat", rep)
    frame.insert(0, "policy", name)
    return frame


def checks(summary: pd.DataFrame) -> list[Check]:
    """The issue's claim: the online policy beats every fixed split in mean latency."""
    by = summary.set_index("policy")
    if ONLINE not in by.index:
        return []
    online = float(by.at[ONLINE, "mean_s"])
    fixed = by.drop(ONLINE)
    if fixed.empty:
        return []
    best = fixed["mean_s"].idxmin()
    return [Check("online placement beats every fixed split in mean latency",
                  bool(online < fixed["mean_s"].min()),
                  f"online {online * 1e3:.3f} ms; best fixed {best} "
                  f"{fixed.at[best, 'mean_s'] * 1e3:.3f} ms; all inline "
                  f"{_ms(fixed, 'fixed:0')}; all offloaded {_ms(fixed, 'fixed:1')}")]


def _ms(table: pd.DataFrame, name: str) -> str:
    return f"{table.at[name, 'mean_s'] * 1e3:.3f} ms" if name in table.index else "not run"
