"""Polling against interrupts on the testbed: the offload engine's wait strategy.

Runs as ``offload driver testbed`` (:mod:`offloadlab.cli.driver`).

The engine (engine mode) is the testbed's receive CPU. With ``engine_wait="poll"`` it
spins on its rings and never sleeps, like a busy-polling driver; with ``"adaptive"``
it spins 50 µs and then sleeps in epoll until the host or a socket wakes it, like a
driver that waits for an interrupt. Seed 002's model (:mod:`offloadlab.model.polling`)
prices both with two costs: t_pkt, the engine's work per request, and t_int, what one
sleep and wake-up costs (the spin before it and the system calls around it).

:func:`run` serves a small file set in engine mode with each strategy at each request
rate (Poisson, keep-alive, the same stream for both), interleaved, and measures the
engine thread's CPU per second of run, split into busy work and idle polling (the
stats' ``engine.idle_poll_s``), and the latency clients saw. :func:`fit` finds t_int
and t_pkt, and t_wake (the part of a wake-up the server's account calls busy), by
least squares from all runs together: the adaptive runs' CPU share, and the busy share
of both; :func:`compare` puts each run beside the fitted model: CPU,
busy share, and the engine's part of the latency. The model's latency is only what the
engine adds (wake-up, queueing behind other requests, the request's own work); the
measured HTTP latency also holds the host, the sockets, the load generator and the
scheduler, so :func:`compare` sets the model's difference between the strategies
against the measured difference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize

from offloadlab.errors import require
from offloadlab.model import polling
from offloadlab.results import Check
from offloadlab.testbed import modes
from offloadlab.testbed.server import ServerOptions
from offloadlab.workload import fileset, stream

# The engine drains its rings whole in one turn, so its "bulk" has no cap to speak of.
ENGINE_BULK_CAP = 1 << 20
# The waits seed 002's model prices: a busy-polling driver and one woken by interrupts.
# The server's third wait, sleep, has no spin, so its wake-ups cost a different t_int
# and land in its busy share; the model has no term for that.
STRATEGIES = ("poll", "adaptive")
_TIMEOUT_S = 5.0


@dataclass(frozen=True, kw_only=True)
class Experiment(modes.Rounds):
    """``rates`` in requests/s; ``keep_alive`` requests per connection."""

    root: Path
    rates: tuple[float, ...] = (500.0, 2000.0, 8000.0)
    strategies: tuple[str, ...] = STRATEGIES
    keep_alive: int = 20
    repeats: int = 1
    run_s: float = 2.0

    def check(self) -> None:
        require(bool(self.rates) and all(np.isfinite(r) and r > 0 for r in self.rates),
                f"rates {list(self.rates)}: give request rates > 0, e.g. 500,2000,8000")
        bad = [s for s in self.strategies if s not in STRATEGIES]
        require(bool(self.strategies) and not bad,
                f"strategies {list(self.strategies)}: use {' and/or '.join(STRATEGIES)}, "
                "the waits seed 002's model prices")
        require(self.keep_alive >= 1, f"keep_alive={self.keep_alive}: use 1 or more "
                                      "requests per connection")
        self.check_rounds()
        self.options("poll").check()

    def describe(self) -> dict:
        return {"root": str(self.root), "rates": list(self.rates),
                "strategies": list(self.strategies), "keep_alive": self.keep_alive,
                **self.describe_rounds()}

    def options(self, strategy: str) -> ServerOptions:
        return ServerOptions(root=self.root, mode="engine", engine_wait=strategy,
                             host_core=self.host_core, engine_core=self.engine_core,
                             seed=self.seed)


def run(exp: Experiment, progress: Callable[[str, int, int], None] | None = None
        ) -> Result:
    """Every strategy at every rate, and the model fitted to the runs."""
    exp.check()
    manifest = fileset.read_manifest(exp.root)
    rows = []
    per_rate = len(exp.strategies) * exp.repeats
    for i, rate in enumerate(exp.rates):
        # Connections arrive as a Poisson stream, each with keep_alive requests back to back.
        requests = stream.poisson(manifest, rate / exp.keep_alive, duration_s=exp.run_s,
                                  keep_alive=exp.keep_alive, seed=exp.seed)

        def one(strategy: str, _rep: int, requests=requests):
            # The generator stays off the engine's core, which busy polling wants whole.
            return modes.run_mode(exp.options(strategy), requests, manifest, threads=1,
                                  verify="length", timeout_s=_TIMEOUT_S,
                                  cores=() if exp.host_core is None else (exp.host_core,))

        # Counted over the whole experiment, not per rate.
        say = None if progress is None else (
            lambda name, done, _total, rate=rate, first=i * per_rate: progress(
                f"{rate:g} requests/s, {name}" if name else "", first + done,
                per_rate * len(exp.rates)))
        for strategy, rep, done in modes.rounds(exp.strategies, exp.repeats, one,
                                                f"{rate:g} requests/s", say):
            rows.append({"strategy": strategy, "rate": rate, "repeat": rep,
                         **measure(done)})
    runs = pd.DataFrame(rows)
    return Result(exp, runs, fit(runs))


def measure(done: modes.ModeRun) -> dict:
    """A run's numbers: per second of the server's life, so they are shares of a core."""
    doc, report = done.stats, done.load.parsed
    elapsed = doc.elapsed_s
    cpu = sum(t.cpu_s for t in doc.threads if t.role == "engine") / elapsed
    idle = doc.engine.idle_poll_s / elapsed
    return {"served": doc.requests / elapsed, "cpu": cpu, "idle_poll": idle,
            "busy": cpu - idle, "failed": report.failed,
            "mean_s": report.total.mean_s, "p50_s": report.total.p50_s,
            "p99_s": report.total.p99_s}


@dataclass(frozen=True)
class WaitFit:
    """t_int and t_pkt (seconds), the root-mean-square error of the fit (share of a
    core), and t_wake, the part of t_int the server counts as busy: the idle account
    stops at the turn that finds work, so the return from the sleep and the cold caches
    after it land in the busy share."""

    t_int: float
    t_pkt: float
    rms: float
    t_wake: float = 0.0

    def shares(self, strategy: str, lam) -> tuple[np.ndarray, np.ndarray]:
        """The model's (CPU, busy) shares of a core at ``lam`` requests/s. A busy-polling
        engine uses the whole core and is busy with the requests' own work, lam t_pkt.
        An adaptive one sleeps when idle and pays t_int for each wake-up, as a driver
        pays for an interrupt (seed 002's interrupt mode with an unbounded bulk); its
        busy share adds t_wake per wake-up."""
        lam = np.asarray(lam, float)
        work = lam * self.t_pkt
        if strategy == "poll":
            return np.ones_like(lam), np.minimum(work, 1.0)
        cpu = np.minimum(polling.cpu_load(lam, self.t_int, self.t_pkt, ENGINE_BULK_CAP), 1.0)
        wakeups = (cpu - work) / self.t_int if self.t_int > 0 else np.zeros_like(lam)
        return cpu, np.minimum(work + wakeups * self.t_wake, 1.0)

    def latency(self, strategy: str, lam) -> np.ndarray:
        """The model's mean time a request spends in the engine at ``lam`` requests/s
        (seconds): seed 002's M/G/1 queue with set-up times
        (:func:`offloadlab.model.polling.setup_latency`). Adaptive: a request that finds
        the engine asleep waits for the wake-up t_int, and later ones queue behind it;
        with exponential wake-ups that adds exactly E[U] = t_int (1 - 1/cap) to the
        mean at every rate. Busy polling: no wake-up, an M/M/1 queue of the requests'
        work t_pkt. inf once lam t_pkt >= 1."""
        t_int = 0.0 if strategy == "poll" else self.t_int
        return polling.setup_latency(lam, t_int, self.t_pkt, ENGINE_BULK_CAP)


@dataclass(frozen=True)
class Result:
    """The experiment's result (:mod:`offloadlab.experiments.protocol`). ``runs`` has one
    row per run: strategy, rate, repeat, requests/s served, the engine's CPU, busy and
    idle-poll shares of a core, and client latency (seconds)."""

    experiment: Experiment
    runs: pd.DataFrame
    fitted: WaitFit

    def compared(self) -> pd.DataFrame:
        return compare(self.runs, self.fitted)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"runs.csv": self.runs, "compare.csv": self.compared()}

    def summary(self) -> dict:
        # The settings at the top as well, where summary.json had them before.
        return {**self.experiment.describe(), "t_int_s": self.fitted.t_int,
                "t_pkt_s": self.fitted.t_pkt,
                "t_wake_s": self.fitted.t_wake, "fit_rms": self.fitted.rms,
                "compare": self.compared().to_dict("records")}

    def checks(self) -> list[Check]:
        return []  # none: the fit is set beside the runs in compare.csv, not judged

    def figures(self) -> dict:
        return {}


def fit(runs: pd.DataFrame) -> WaitFit:
    """Least squares over t_int, t_pkt >= 0 and t_wake in [0, t_int] of the busy share
    (CPU less idle polling) of every strategy and rate and the adaptive engine's CPU
    share against the model's: each the median of its runs, as :func:`compare` shows
    them, so one run the machine disturbed does not pull the fit."""
    runs = runs.groupby(["strategy", "rate"], sort=False).median(numeric_only=True
                                                                 ).reset_index()
    adaptive = runs[runs["strategy"] == "adaptive"]

    def guess(x: np.ndarray) -> WaitFit:
        # x: t_int and t_pkt in µs, and t_wake as a share of t_int.
        return WaitFit(x[0] * 1e-6, x[1] * 1e-6, 0.0, x[0] * x[2] * 1e-6)

    def residual(x: np.ndarray) -> np.ndarray:
        model = guess(x)
        busy = [model.shares(strategy, group["served"])[1] - group["busy"].to_numpy()
                for strategy, group in runs.groupby("strategy", sort=False)]
        cpu = model.shares("adaptive", adaptive["served"])[0] - adaptive["cpu"].to_numpy()
        return np.concatenate([*busy, cpu])

    per_request_us = 1e6 * float(np.median(runs["busy"] / runs["served"]))
    best = optimize.least_squares(residual, [per_request_us, per_request_us, 0.5],
                                  bounds=([0, 0, 0], [np.inf, np.inf, 1]))
    x = np.where(best.active_mask == -1, 0.0, best.x)  # at a lower bound: on it
    return replace(guess(x), rms=float(np.sqrt(np.mean(best.fun**2))))


def compare(runs: pd.DataFrame, fitted: WaitFit) -> pd.DataFrame:
    """Per strategy and rate: the median run measured, and the fitted model beside it.

    CPU and busy shares of a core with their errors; latency in seconds:
    ``model_latency_s`` the engine's part by the model; ``model_vs_poll_s`` the model's
    latency less busy polling's at the same served rate (t_int for adaptive, 0 for
    poll); ``mean_vs_poll_s`` and ``p50_vs_poll_s`` the measured mean and median less
    the busy-polling runs' at the same rate (NaN without a poll run at that rate)."""
    med = runs.groupby(["strategy", "rate"], sort=False).median(numeric_only=True)
    poll = {rate: m for (strategy, rate), m in med.iterrows() if strategy == "poll"}
    rows = []
    for (strategy, rate), m in med.iterrows():
        cpu, busy = (float(x) for x in fitted.shares(strategy, m["served"]))
        latency = float(fitted.latency(strategy, m["served"]))
        base = poll.get(rate)
        rows.append({"strategy": strategy, "rate": rate, "served": m["served"],
                     "cpu": m["cpu"], "busy": m["busy"], "idle_poll": m["idle_poll"],
                     "model_cpu": cpu, "model_busy": busy, "cpu_error": cpu - m["cpu"],
                     "busy_error": busy - m["busy"], "mean_s": m["mean_s"],
                     "p50_s": m["p50_s"], "p99_s": m["p99_s"],
                     "model_latency_s": latency,
                     "model_vs_poll_s": latency - float(fitted.latency("poll", m["served"])),
                     "mean_vs_poll_s": np.nan if base is None else m["mean_s"] - base["mean_s"],
                     "p50_vs_poll_s": np.nan if base is None else m["p50_s"] - base["p50_s"]})
    return pd.DataFrame(rows)
