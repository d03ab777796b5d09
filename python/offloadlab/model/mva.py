"""Closed queueing networks by mean value analysis: the core of the multi-tier model of
seed 003 (proxy, web and database tiers, their disks and the offload engine as
stations, clients as the population).

A network has C classes and K stations:

- Class c has N_c customers (clients) who think Z_c seconds between requests.
- D[c, k] is its service demand at station k: visits times service time per request.
- A *queueing* station serves one request at a time, FCFS with exponential service or
  processor sharing (the same means). A *delay* station makes every request wait its
  demand, with no queue, like a pool of threads that never runs short.

Exact MVA (Reiser and Lavenberg) walks every population vector n <= N:

    R[c, k](n) = D[c, k] (1 + Q[k](n - e_c))     queueing
    R[c, k](n) = D[c, k]                         delay
    X[c](n)    = n_c / (Z_c + sum_k R[c, k](n))
    Q[k](n)    = sum_c X[c](n) R[c, k](n)

That is prod_c (N_c + 1) vectors. :func:`approximate` is Schweitzer's fixed point
instead, Q[j, k](N - e_c) ~ Q[j, k](N) (N_j - [j = c]) / N_j, for populations too
large to walk.

A queueing station may have m > 1 servers (a tier's CPUs). Both solvers then use
Seidmann's approximation: a single server of demand D/m in series with a delay of
D (m - 1)/m. It is exact at both ends (one customer: delay D; saturation: capacity
m/D) and errs a little between; the closed-network simulator measures by how much
(docs/sim.md §12). Its utilisation is per server, X D / m.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from offloadlab.errors import InputError

# Most population vectors exact MVA walks.
MAX_STATES = 200_000


@dataclass(frozen=True)
class Network:
    """``demands[c][k]`` seconds; ``delay[k]`` marks delay stations; ``think[c]`` and
    ``population[c]`` per class. ``stations`` and ``classes`` name them in results."""

    demands: np.ndarray
    population: np.ndarray
    think: np.ndarray
    delay: np.ndarray
    stations: tuple[str, ...]
    classes: tuple[str, ...]
    servers: np.ndarray     # per station; 1 unless a queueing station has several

    @classmethod
    def of(cls, demands, population, think=None, delay=None, stations=None,
           classes=None, servers=None) -> Network:
        """Checks and builds a network; every problem is an :class:`InputError` naming
        the argument."""
        d = np.atleast_2d(np.asarray(demands, float))
        n_classes, n_stations = d.shape
        pop = np.asarray(population)
        think = np.zeros(n_classes) if think is None else np.asarray(think, float)
        delay = np.zeros(n_stations, bool) if delay is None else np.asarray(delay, bool)
        servers = np.ones(n_stations, int) if servers is None else np.asarray(servers)
        stations = tuple(stations or (f"station {k}" for k in range(n_stations)))
        classes = tuple(classes or (f"class {c}" for c in range(n_classes)))
        problems = []
        if not (np.isfinite(d).all() and (d >= 0).all()):
            problems.append("demands: every demand must be a finite number of seconds >= 0")
        if pop.shape != (n_classes,) or not np.issubdtype(pop.dtype, np.integer) \
                or (pop < 0).any():
            problems.append(f"population: give one whole number >= 0 per class "
                            f"({n_classes})")
        if think.shape != (n_classes,) or not (np.isfinite(think).all() and (think >= 0).all()):
            problems.append(f"think: give one time >= 0 per class ({n_classes})")
        if delay.shape != (n_stations,):
            problems.append(f"delay: give one flag per station ({n_stations})")
        if servers.shape != (n_stations,) or not np.issubdtype(servers.dtype, np.integer) \
                or (servers < 1).any():
            problems.append(f"servers: give one whole number >= 1 per station ({n_stations})")
        if len(stations) != n_stations or len(classes) != n_classes:
            problems.append("stations and classes: give one name each")
        if not problems:
            stuck = (pop > 0) & (d.sum(1) + think == 0)
            if stuck.any():
                problems.append(f"class {classes[int(np.flatnonzero(stuck)[0])]}: no demand "
                                "and no think time, so its throughput is unbounded; give it "
                                "one")
        if problems:
            raise InputError("\n".join(problems))
        return cls(d, pop.astype(int), think, delay, stations, classes,
                   np.where(delay, 1, servers).astype(int))

    def single_server(self) -> Network:
        """Seidmann's split of every multi-server station: its queueing part stays in
        place, the delay parts are appended as extra stations."""
        many = np.flatnonzero(self.servers > 1)
        m = self.servers[many]
        demands = np.hstack([self.demands / self.servers, self.demands[:, many] * (m - 1) / m])
        return Network(demands, self.population, self.think,
                       np.concatenate([self.delay, np.ones(len(many), bool)]),
                       self.stations + tuple(f"{self.stations[k]} (delay)" for k in many),
                       self.classes, np.ones(demands.shape[1], int))


@dataclass(frozen=True)
class Solution:
    """Per class: ``throughput`` (requests/s) and ``response`` time (s, thinking
    excluded); per class and station: ``residence`` time and mean number ``queue``; per
    station: ``utilisation`` (of a delay station: its mean number in service)."""

    throughput: np.ndarray
    response: np.ndarray
    residence: np.ndarray
    queue: np.ndarray
    utilisation: np.ndarray
    iterations: int = 0


def exact(net: Network) -> Solution:
    """Exact multi-class MVA (see the module notes; multi-server stations by Seidmann)."""
    if (net.servers > 1).any():
        return _fold(net, exact(net.single_server()))
    states = math.prod(int(n) + 1 for n in net.population)
    if states > MAX_STATES:
        raise InputError(f"population {net.population.tolist()}: exact MVA would walk "
                         f"{states:,} population vectors (at most {MAX_STATES:,}); use "
                         "approximate()")
    n_classes, n_stations = net.demands.shape
    # Q[k] at every population vector, indexed by its mixed-radix number.
    radix = np.cumprod([1, *(net.population[:-1] + 1)])
    queue = np.zeros((states, n_stations))
    last = None
    for n in itertools.product(*(range(int(p) + 1) for p in net.population)):
        n = np.array(n)
        index = int(n @ radix)
        residence = np.zeros((n_classes, n_stations))
        for c in np.flatnonzero(n):
            before = queue[index - radix[c]]
            residence[c] = np.where(net.delay, net.demands[c], net.demands[c] * (1 + before))
        x = _throughput(n, net.think, residence)
        queue[index] = (x[:, None] * residence).sum(0)
        last = (x, residence)
    x, residence = last
    return _solution(net, x, residence)


def approximate(net: Network, tolerance: float = 1e-10, max_iterations: int = 100_000
                ) -> Solution:
    """Schweitzer's approximate MVA: a fixed point at the full population only."""
    if (net.servers > 1).any():
        return _fold(net, approximate(net.single_server(), tolerance, max_iterations))
    n = net.population.astype(float)
    n_classes, n_stations = net.demands.shape
    per_class = np.where(n[:, None] > 0, n[:, None] / n_stations, 0.0)  # start even
    for i in range(1, max_iterations + 1):
        total = per_class.sum(0)
        residence = np.zeros((n_classes, n_stations))
        for c in np.flatnonzero(n):
            seen = total - per_class[c] / n[c]  # one of class c less
            residence[c] = np.where(net.delay, net.demands[c], net.demands[c] * (1 + seen))
        x = _throughput(n, net.think, residence)
        new = x[:, None] * residence
        if np.abs(new - per_class).max() <= tolerance * max(1.0, new.max()):
            return _solution(net, x, residence, i)
        per_class = new
    raise InputError(f"approximate MVA did not settle within {max_iterations:,} iterations "
                     f"(tolerance {tolerance:g}); raise max_iterations")


def _throughput(n: np.ndarray, think: np.ndarray, residence: np.ndarray) -> np.ndarray:
    cycle = think + residence.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, n / cycle, 0.0)


def _solution(net: Network, x: np.ndarray, residence: np.ndarray, iterations: int = 0
              ) -> Solution:
    return Solution(throughput=x, response=residence.sum(1), residence=residence,
                    queue=x[:, None] * residence,
                    utilisation=(x[:, None] * net.demands).sum(0), iterations=iterations)


def _fold(net: Network, split: Solution) -> Solution:
    """A solution of ``net.single_server()`` told per station of ``net``: each delay part
    added back to its station, utilisation per server."""
    k = len(net.stations)
    many = np.flatnonzero(net.servers > 1)
    residence, queue = split.residence[:, :k].copy(), split.queue[:, :k].copy()
    residence[:, many] += split.residence[:, k:]
    queue[:, many] += split.queue[:, k:]
    busy = (split.throughput[:, None] * net.demands).sum(0) / net.servers
    return Solution(split.throughput, split.response, residence, queue, busy,
                    split.iterations)
