"""A discrete-event simulation of the closed networks that :mod:`offloadlab.model.mva`
solves, to check it, and to measure the error of Seidmann's approximation for
multi-server stations.

The simulated network (``crates/offload-sim/src/closed.rs``): each class-c customer
thinks Exp(mean Z_c), then its request visits every station k with D[c, k] > 0 once, in
station order, needing Exp(mean D[c, k]) of work at each. A queueing station with m
servers is processor sharing, each of its n jobs served at rate min(1, m/n); a delay
station serves every job at rate 1. That is a product-form network, so exact MVA is
exact for it when m = 1 everywhere.

After an MSER-5 warm-up, ``requests`` completions (all classes together) are measured
in 20 batches; ``throughput_hw`` and ``response_hw`` are 95% batch-means half-widths.
The method is in docs/sim.md §12.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offloadlab import _core
from offloadlab.errors import require
from offloadlab.model import mva
from offloadlab.sim.run import check_options


@dataclass(frozen=True)
class ClosedResult:
    """The fields of :class:`mva.Solution`, simulated: per class ``throughput``
    (requests/s) and ``response`` time (s, thinking excluded); per class and station the
    mean ``residence`` per request and the time-averaged number present, ``queue``; per
    station the ``utilisation`` (busy fraction of its servers; of a delay station, its
    mean number present). A class without customers has NaN response and residence.

    ``throughput_hw`` and ``response_hw`` are 95% half-widths; ``requests`` completions
    were measured after ``warmup`` were discarded, in ``events`` simulation events and
    ``wall_s`` seconds (the warm-up pilot included).
    """

    throughput: np.ndarray
    response: np.ndarray
    residence: np.ndarray
    queue: np.ndarray
    utilisation: np.ndarray
    throughput_hw: np.ndarray
    response_hw: np.ndarray
    requests: int
    warmup: int
    events: int
    wall_s: float


def simulate(net: mva.Network, requests: int = 200_000, seed: int = 1) -> ClosedResult:
    """Simulate ``net`` for ``requests`` measured completions (at least 1000) from the
    random stream ``seed``; the same seed gives the same result bit for bit."""
    require(isinstance(net, mva.Network),
            f"net: give an mva.Network (mva.Network.of(...)), not {type(net).__name__}")
    check_options(requests=requests, seed=seed)
    require(net.population.sum() > 0, "population: give at least one class a customer")
    out = _core.closed_simulate(
        net.demands.tolist(), net.population.tolist(), net.think.tolist(),
        net.delay.tolist(), net.servers.tolist(), requests, seed)
    return ClosedResult(
        **{key: np.array(out[key], float) for key in (
            "throughput", "response", "residence", "queue", "utilisation",
            "throughput_hw", "response_hw")},
        requests=out["requests"], warmup=out["warmup"], events=out["events"],
        wall_s=out["wall_s"])
