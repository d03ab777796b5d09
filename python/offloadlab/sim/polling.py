"""Event-by-event simulations that check the polling-driver model
(:mod:`offloadlab.model.polling`).

- :func:`bulk_queue` runs the M^X/M/1/K queue itself (Poisson bulks, exponential
  service, partial acceptance into a ring of K): a peer of the closed forms for Q2.
- :func:`receive` runs the mechanism the model abstracts: Poisson packets into a ring
  of ``ring`` descriptors and one CPU. A packet that finds the CPU idle raises an
  interrupt, which costs t_int before the CPU takes packets; while busy, the CPU takes
  packets one at a time (t_pkt each) and pays t_int for a new poll after every
  ``bulk_cap`` packets that arrived while it was busy; a full ring drops. With
  ``wait="poll"`` there are no interrupts: the CPU spins and each packet costs t_pkt.
  Costs are exponential.

Both are plain Python loops (a few hundred thousand events per second); they exist to
be a peer, not to be fast. Results carry the standard error of the mean latency from
batch means.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from offloadlab.model.polling import Driver


@dataclass(frozen=True)
class QueueStats:
    """Time-average number in system, P(empty), share of packets lost."""

    queue: float
    empty: float
    loss: float


def bulk_queue(load: float, pmf: np.ndarray, capacity: int, events: int = 200_000,
               seed: int = 1) -> QueueStats:
    """Simulate Q2 with service rate 1 and bulk rate ``load / E[X]``."""
    rng = np.random.default_rng(seed)
    sizes = np.arange(len(pmf))
    lam_b = load / (pmf @ sizes)
    bulks = rng.choice(sizes, size=events, p=pmf)
    draws = rng.random(events)
    n, t_total, area, empty, offered, lost = 0, 0.0, 0.0, 0.0, 0, 0
    for k in range(events):
        rate = lam_b + (1.0 if n else 0.0)
        dt = rng.exponential(1 / rate)
        t_total += dt
        area += n * dt
        empty += dt if n == 0 else 0.0
        if draws[k] * rate < lam_b:
            x = int(bulks[k])
            offered += x
            lost += max(0, n + x - capacity)
            n = min(n + x, capacity)
        else:
            n -= 1
    return QueueStats(area / t_total, empty / t_total, lost / max(offered, 1))


@dataclass(frozen=True)
class ReceiveStats:
    """The mechanism's measured CPU busy share, interrupts and polls per second, loss,
    mean latency and its standard error (seconds)."""

    busy: float
    interrupts_s: float
    loss: float
    latency_s: float
    latency_se: float


def receive(driver: Driver, lam: float, packets: int = 100_000, seed: int = 1
            ) -> ReceiveStats:
    """Simulate ``packets`` arrivals at ``lam`` packets/s (see the module notes)."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / lam, packets))
    ring: deque[tuple[float, int]] = deque()  # (arrival time, packet), oldest first
    latencies = np.full(packets, np.nan)
    cpu_free = busy = 0.0                     # when the CPU ends what it started; busy s
    polls = seen_busy = lost = 0

    def cost(mean: float) -> float:
        return rng.exponential(mean) if mean > 0 else 0.0

    def work_until(t: float) -> None:
        nonlocal cpu_free, busy
        while ring and cpu_free <= t:
            arrived, i = ring.popleft()
            spent = cost(driver.t_pkt)
            cpu_free = max(cpu_free, arrived) + spent
            busy += spent
            latencies[i] = cpu_free - arrived

    def poll(t: float) -> None:
        nonlocal cpu_free, busy, polls
        spent = cost(driver.t_int)
        cpu_free = max(cpu_free, t) + spent
        busy += spent
        polls += 1

    for i, t in enumerate(arrivals):
        work_until(t)
        if len(ring) >= driver.ring:
            lost += 1
            continue
        if driver.wait == "interrupt":
            if not ring and cpu_free <= t:
                poll(t)                           # the interrupt that wakes the CPU
            else:
                seen_busy += 1
                if seen_busy % driver.bulk_cap == 0:
                    poll(t)                       # a new poll after a full bulk
        ring.append((t, i))
    work_until(np.inf)
    span = max(cpu_free, arrivals[-1])
    done = latencies[~np.isnan(latencies)]
    means = np.array([b.mean() for b in np.array_split(done, 20)])
    return ReceiveStats(busy=busy / span, interrupts_s=polls / span, loss=lost / packets,
                        latency_s=float(done.mean()),
                        latency_se=float(means.std(ddof=1) / np.sqrt(len(means))))
