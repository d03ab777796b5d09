"""A synthetic testbed for the study's logic: each class's queues are exact M/G/1 queues
with known costs, so calibration, prediction, accuracy and verdicts can be checked
against the truth in seconds, without a server.

Per request of a class (sizes from its manifest):
- inline: the host works ``host_fixed + host_per_byte * size``;
- offload mode: the host works ``overhead`` (a constant: the cost of talking to the
  engine) and the engine ``engine_fixed + engine_per_byte * size``;
- the client sees ``d0`` (per mode) on top of the queues, and in offload mode both
  queues one after the other (T = T_cpu + T_oe, as the server's engine reads, the host
  answers and the engine writes);
- in engine mode the host's answers leave in gated rounds, as the server's host thread
  publishes its commands once per drain of the engine's events.

Utilisation follows the utilisation law, delay the Pollaczek-Khinchine formula, and a
saturation run completes requests at the bottleneck's capacity. A queue whose answers
leave in rounds adds the work that joins a round behind a request: rho / (1 + rho) of
its Pollaczek-Khinchine wait. The engine, handed each round at once, adds the engine
work of the round-mates served before the request on the host: the host's work ahead
of it, rho_h / (1 + rho_h) of its wait, times rho_e / rho_h.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offloadlab.calibrate.fit import Run
from offloadlab.study.measure import Measured
from offloadlab.study.plan import ClassLoad


@dataclass(frozen=True)
class Costs:
    host_fixed: float = 30e-6
    host_per_byte: float = 0.4e-9
    overhead: float = 20e-6
    engine_fixed: float = 25e-6
    engine_per_byte: float = 0.3e-9
    d0_inline: float = 100e-6
    d0_offload: float = 140e-6


def manifest(sizes: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"size_bytes": np.asarray(sizes, np.int64)})


@dataclass(frozen=True)
class Queue:
    """One M/G/1 queue: the first two moments of its service time, and whether its
    answers leave in gated rounds."""

    mean: float
    m2: float
    rounds: bool = False

    def wait(self, lam: float) -> float:
        rho = lam * self.mean
        return lam * self.m2 / (2 * (1 - rho)) if rho < 1 else math.inf

    def ahead(self, lam: float) -> float:
        """The work waiting behind the gate that a request finds: its round-mates."""
        rho = lam * self.mean
        return rho / (1 + rho) * self.wait(lam) if self.rounds else 0.0

    def sojourn(self, lam: float) -> float:
        return self.mean + self.wait(lam) + self.ahead(lam)


@dataclass(frozen=True)
class SyntheticTestbed:
    costs: Costs

    def queues(self, load: ClassLoad, mode: str) -> tuple[Queue, Queue | None]:
        """The host's queue and (offload modes) the engine's, for ``load``'s sizes."""
        c, size = self.costs, load.manifest["size_bytes"].to_numpy(float)

        def queue(work: np.ndarray, rounds: bool = False) -> Queue:
            return Queue(float(work.mean()), float((work**2).mean()), rounds)

        if mode == "inline":
            return queue(c.host_fixed + c.host_per_byte * size), None
        return (queue(np.full(len(size), c.overhead), rounds=mode == "engine"),
                queue(c.engine_fixed + c.engine_per_byte * size))

    def delay(self, load: ClassLoad, mode: str, lam: float) -> float:
        host, engine = self.queues(load, mode)
        if engine is None:
            return self.costs.d0_inline + host.sojourn(lam)
        batch = engine.mean / host.mean * host.ahead(lam)
        return self.costs.d0_offload + host.sojourn(lam) + engine.sojourn(lam) + batch

    def capacity(self, load: ClassLoad, mode: str) -> float:
        host, engine = self.queues(load, mode)
        return 1 / max(host.mean, engine.mean if engine else 0.0)

    def __call__(self, plan, load: ClassLoad, mode: str, use: str, rate: float,
                 progress=None, replicate: int = 0) -> Measured:
        """One run, as :func:`offloadlab.study.measure.measure` returns it; exact queues
        have no noise, so every ``replicate`` reads the same."""
        host, engine = self.queues(load, mode)
        capacity = self.capacity(load, mode)
        lam = capacity if use == "saturation" else min(rate, capacity)
        T = self.delay(load, mode, rate) if use != "saturation" else math.inf
        sizes = load.manifest["size_bytes"].to_numpy()
        run = Run(cls=load.name, mode=mode, rate=rate if use != "saturation" else math.nan,
                  throughput=lam, requests=10_000, host_s=host.mean, app_s=0.0,
                  engine_s=engine.mean if engine else math.nan, T=T, sizes=sizes)
        return Measured(
            run=run, use=use, U_host=lam * host.mean,
            U_engine=lam * engine.mean if engine else math.nan,
            T_lo=0.99 * T, T_hi=1.01 * T, p99=5 * T, errors=0, error_rate=0.0,
            connections_per_s=lam, connect_s=0.0, goodput_Bps=lam * float(sizes.mean()),
            cores=(), latency=np.array([T]) if math.isfinite(T) else np.array([]))
