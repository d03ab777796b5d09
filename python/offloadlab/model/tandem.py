"""Seed 000's queueing model: host alone (M/G/1) against host + offload engine (tandem).

Every class c arrives as a Poisson stream of rate lam_c. Without offload the host
CPU serves each request for S = X_a + X_p (one M/G/1 queue, eqs 3.1-3.10). With
offload, a fraction f_c of class c is sent to the engine: those requests cost the
host X_a + X_o and then the engine X_c + X_q; the rest stay on the host with
X_a + X_p. Host and engine are FCFS M/G/1 queues (Poisson thinning keeps each
stream Poisson); with one class and f = 1 this is exactly eqs 3.11-3.33.

Seed 001's object cache on the engine: a share h_c of the offloaded requests hits it
and is answered by the engine alone, for X_h; the misses go as above. With h = 0 the
model is seed 000's.

Beyond the seed (issue 25), each queue may pay a cost D per wake-up (the request that
finds it idle starts a busy period and pays D on top of its service: Welch's M/G/1 with
exceptional first service) and may share its core with background work B per request of
the scenario, which preempts it (a preemptive-resume priority class), and with a steady
share of the core that other work holds at every rate. :func:`station`
solves one such queue; with D = B = 0 it is the Pollaczek-Khinchine queue. A queue may
also serve in gated rounds whose requests leave together (a thread that drains its
input, then publishes what it produced in one batch): each request then also waits for
the rest of its round. A fixed delay d0 outside host and engine is added to each path's
end-to-end delay.

All functions broadcast: rates and fractions may carry any leading shape (a rate
sweep, a batch of candidate splits) with classes on the last axis.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from offloadlab.results import SATURATED_AT
from offloadlab.scenario import Options, Queue, Scenario


@dataclass(frozen=True)
class Extra:
    """A queue's wake-up cost D (moments d1, d2, seconds and seconds^2), the
    background work B each request of a class brings to its core (b1, b2: arrays over
    classes, or scalars for every class), the ``share`` of the core other work holds at
    every rate, whether its requests leave in ``rounds``, whether the host's answers
    wake it too (``answers_wake``), over how many ``cores`` (each its own queue) its
    requests are spread, and whether it ``polls`` (its D is then in its account of the
    core, but no request waits for it)."""

    d1: float = 0.0
    d2: float = 0.0
    b1: np.ndarray | float = 0.0
    b2: np.ndarray | float = 0.0
    cooling: float = 0.0
    rounds: bool = False
    share: float = 0.0
    answers_wake: bool = False
    cores: int = 1
    polls: bool = False

    @classmethod
    def of(cls, q: Queue, names: list[str]) -> Extra:
        b = [q.background_of(n) for n in names]
        return cls(q.wakeup.mean, q.wakeup.m2, np.array([d.mean for d in b]),
                   np.array([d.m2 for d in b]), q.cooling, q.release == "round",
                   q.background_share, q.answers_wake, q.cores, q.polls)

    def wakeup(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """E[D] and E[D^2] of a wake-up at arrival rate ``lam``. After an idle period I
        the cost is D (1 - e^(-I/c)), c the cooling time; the idle periods of a queue
        fed Poisson arrivals are exponential with rate lam, so E[1 - e^(-I/c)] =
        1 / (1 + lam c) and E[(1 - e^(-I/c))^2] = 2 / ((1 + lam c)(2 + lam c))."""
        x = lam * self.cooling
        return self.d1 / (1 + x), self.d2 * 2 / ((1 + x) * (2 + x))


NONE = Extra()


@dataclass(frozen=True)
class ClassCosts:
    """First and second moments of each class's service times, arrays over classes.

    h: host service of a request that stays on the host, X_a + X_p
    g: host service of an offloaded request, X_a + X_o
    e: engine service of an offloaded request that misses the cache, X_c + X_q
    x: engine service of a cache hit, X_h; ``hit`` is the hit ratio h
    The second moment of a sum of independent X, Y is E[X^2] + E[Y^2] + 2 E[X] E[Y].
    """

    a1: np.ndarray
    a2: np.ndarray
    p1: np.ndarray
    o1: np.ndarray
    o_scv: np.ndarray
    h1: np.ndarray
    h2: np.ndarray
    g1: np.ndarray
    g2: np.ndarray
    e1: np.ndarray
    e2: np.ndarray
    cpu_queue: str
    hit: np.ndarray
    x1: np.ndarray
    x2: np.ndarray
    d0: np.ndarray        # fixed delay outside host and engine, request kept on the host
    d0_sent: np.ndarray   # ... and offloaded
    noe: Extra = NONE     # wake-up and background of the host alone,
    cpu: Extra = NONE     # of the host with the engine,
    oe: Extra = NONE      # and of the engine

    @property
    def sent_host1(self) -> np.ndarray:
        """Mean host time of an offloaded request, hit or miss: (1 - h) E[X_a + X_o]."""
        return (1 - self.hit) * self.g1

    @property
    def sent_engine1(self) -> np.ndarray:
        """Mean engine time of an offloaded request: (1 - h) E[X_c + X_q] + h E[X_h]."""
        return (1 - self.hit) * self.e1 + self.hit * self.x1

    @classmethod
    def of(cls, scenario: Scenario) -> ClassCosts:
        def moments(key: str) -> tuple[np.ndarray, np.ndarray]:
            ds = [getattr(c, key) for c in scenario.classes]
            return np.array([d.mean for d in ds]), np.array([d.m2 for d in ds])

        (a1, a2), (p1, p2), (o1, o2) = moments("app"), moments("host_proto"), moments(
            "host_overhead")
        (c1, c2), (q1, q2) = moments("engine_overhead"), moments("engine_proto")
        o_scv = np.array([c.host_overhead.scv for c in scenario.classes])
        hits = [c.hit_cost for c in scenario.classes]
        g1 = a1 + o1
        return cls(a1=a1, a2=a2, p1=p1, o1=o1, o_scv=o_scv,
                   h1=a1 + p1, h2=a2 + p2 + 2 * a1 * p1,
                   g1=g1, g2=offloaded_host_m2(a1, a2, o1, o2, scenario.options.cpu_queue),
                   e1=c1 + q1, e2=c2 + q2 + 2 * c1 * q1,
                   cpu_queue=scenario.options.cpu_queue,
                   hit=np.array([c.hit_ratio for c in scenario.classes]),
                   x1=np.array([d.mean for d in hits]), x2=np.array([d.m2 for d in hits]),
                   d0=np.array([c.d0 for c in scenario.classes]),
                   d0_sent=np.array([c.d0_sent for c in scenario.classes]),
                   noe=Extra.of(scenario.host_alone, scenario.class_names),
                   cpu=Extra.of(scenario.host, scenario.class_names),
                   oe=Extra.of(scenario.engine, scenario.class_names))

    @classmethod
    def measured(cls, h1, h2, g1, g2, e1, e2) -> ClassCosts:
        """Costs measured per path as wholes (the online estimator's): X_a is folded
        into X_p and X_o, and the host queue takes the measured second moments."""
        h1, g1 = np.asarray(h1, float), np.asarray(g1, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            o_scv = np.where(g1 > 0, np.asarray(g2) / g1**2 - 1, 0.0)
        zero = np.zeros_like(h1)
        return cls(a1=zero, a2=zero, p1=h1, o1=g1, o_scv=o_scv, h1=h1,
                   h2=np.asarray(h2, float), g1=g1, g2=np.asarray(g2, float),
                   e1=np.asarray(e1, float), e2=np.asarray(e2, float), cpu_queue="mg1",
                   hit=zero, x1=zero, x2=zero, d0=zero, d0_sent=zero)


def offloaded_host_m2(a1, a2, o1, o2, cpu_queue: str):
    """E[(X_a + X_o)^2]; the seed's M/M/1 CPU takes X_a + X_o as exponential (2 E[.]^2)."""
    if cpu_queue == "mm1":
        return 2 * (a1 + o1) ** 2
    return a2 + o2 + 2 * a1 * o1


def pk_wait(load2: np.ndarray, util: np.ndarray) -> np.ndarray:
    """Pollaczek-Khinchine mean wait W = sum_c lam_c E[S_c^2] / (2 (1 - U)); inf once the
    queue is saturated (U >= ``SATURATED_AT``, 1 up to rounding).

    ``load2`` is sum_c lam_c E[S_c^2] and ``util`` is U = sum_c lam_c E[S_c].
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(util < SATURATED_AT, load2 / (2 * (1 - util)), np.inf)


@dataclass(frozen=True)
class Station:
    """One solved queue. A class-c request's mean sojourn is ``wait + stretch * s1_c``;
    ``U`` is the queue's own busy share (wake-ups included, background not), ``core``
    its core's (background included), ``W`` the mean sojourn less the request's own
    service (wake-up included), ``wakeups`` its wake-ups per request (the share of its
    epochs that find it idle, times the epochs) and ``wake_cost`` the mean CPU of one
    (cooled by the idle period before it). Served in rounds, ``ahead`` is the mean work
    a request finds waiting behind the gate: its round-mates served before it (0
    otherwise)."""

    U: np.ndarray
    core: np.ndarray
    W: np.ndarray
    wait: np.ndarray
    stretch: np.ndarray
    wakeups: np.ndarray
    wake_cost: np.ndarray
    ahead: np.ndarray | float = 0.0

    def sojourn(self, s1: np.ndarray) -> np.ndarray:
        """Mean sojourn of requests with mean service ``s1`` (classes on the last axis)."""
        return self.wait[..., None] + weighted(s1, self.stretch[..., None])


def station(lam: np.ndarray, load1: np.ndarray, load2: np.ndarray, all_lam: np.ndarray,
            x: Extra, epochs: np.ndarray | float = 1.0) -> Station:
    """A FCFS queue fed ``lam`` requests/s with sum_c lam_c E[S_c] = ``load1`` and
    sum_c lam_c E[S_c^2] = ``load2``, paying wake-up D and preempted by background
    work that every request of the scenario brings, ``all_lam`` (classes last) being
    the scenario's class rates. See docs/model.md, section 15.

    The request that finds the queue idle has an exceptional first service
    S0 = I + C(D + S) (Welch, 1964): C(x) stretches x by the background that arrives
    meanwhile (mean x / (1 - sigma)), and I is its wait for the background it finds
    (:func:`idle_wait`: the queue's idle period began with the core free of background).

    The ``share`` of the core that other work holds at every rate joins sigma as
    background of vanishing grain (no second moment): the queue's work, the wake-ups and
    the per-request background all run at 1 - share of the core's speed.

    Served in gated rounds whose requests leave together, a request also waits for the
    work that joins its round behind it: rho / (1 + rho) of the mean work it found on
    arriving (exact for B = 0; docs/model.md, section 16).

    ``epochs``: moments per request at which the queue may be woken (1: its requests'
    arrivals). An engine that reads the requests from the network and is handed the
    host's answers in batches is woken by both: each epoch that finds it idle pays a
    wake-up, and the epochs without a request of their own add that work alone
    (docs/model.md, section 17).

    A queue that ``polls`` for work is never asleep: the request that finds it idle is
    taken at once. Its core's account still holds D per busy period as Welch's queue
    does, busy through D (io_uring's SQPOLL thread, whose kernel account of its work
    grows with its busy periods; docs/model.md, section 19). U, the core and the
    wake-ups are then that queue's; the delays are those of the same queue without D.
    """
    if x.polls:
        account = station(lam, load1, load2, all_lam, replace(x, polls=False), epochs)
        taken = station(lam, load1, load2, all_lam, replace(x, d1=0.0, d2=0.0, polls=False),
                        epochs)
        return replace(taken, U=account.U, core=account.core, wakeups=account.wakeups,
                       wake_cost=account.wake_cost)
    sigma = (all_lam * x.b1).sum(-1) + x.share
    bg2 = (all_lam * x.b2).sum(-1)  # sum_c lam_c E[B_c^2]
    lam_ep = lam * epochs
    d1, d2 = x.wakeup(lam_ep)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        open_ = sigma + load1 < SATURATED_AT
        k = np.where(sigma < SATURATED_AT, 1 / (1 - sigma), np.inf)  # stretch C(x) / x
        rho = load1 * k
        # sum_c lam_c E[C(S_c)^2]: the stretched services' second moments.
        load2_c = load2 * k**2 + load1 * bg2 * k**3
        i1 = idle_wait(lam_ep, all_lam, x)
        e1 = i1 + d1 * k  # E[S0] - E[C(S)]
        m1 = np.where(lam > 0, load1 / np.where(lam > 0, lam, 1), 0.0)
        i2 = priority_m2(i1, bg2 / 2 * k**2, lam_ep, rho, m1 * k)
        # E[S0^2] - E[C(S)^2], with S of the mean request.
        e2 = (i2 + 2 * i1 * (d1 + m1) * k + (d2 + 2 * d1 * m1) * k**2
              + d1 * bg2 * k**3)
        # P0, the share of epochs that find it idle: wake-ups per epoch.
        idle = np.where(open_, (1 - rho) / (1 + lam_ep * e1), 0.0)
        found = (pk_wait(load2_c, np.where(open_, rho, 1.0))
                 + np.where(open_, lam_ep * e2 / (2 * (1 + lam_ep * e1)), np.inf))
        behind = rho / (1 + rho) * found if x.rounds else 0.0
        wait = found + behind + np.where(open_, idle * e1, np.inf)
        W = np.where(open_, wait + m1 * (k - 1) - idle * d1, np.inf)
    U = load1 + lam_ep * idle * d1
    # Past saturation the core is full: load1 + sigma >= 1 marks it, as U >= 1 did.
    return Station(U=U, core=np.where(open_, U + sigma, np.maximum(load1 + sigma, 1.0)), W=W,
                   wait=wait, stretch=k, wakeups=idle * epochs,
                   wake_cost=np.broadcast_to(d1, np.shape(U)), ahead=behind)


def idle_wait(lam: np.ndarray, all_lam: np.ndarray, x: Extra) -> np.ndarray:
    """E[I]: how long a request that finds the queue idle waits for the background work
    on its core (docs/model.md, section 15).

    The idle period began when the queue's last request was served, so with the core
    free of background (it preempts the queue), and lasted T ~ exp(``lam``). In wall
    time (the core at 1 - share of its speed) the background is an M/G/1 queue of its
    own, fed ``all_lam`` jobs of B_c; its work after T from empty has mean
    E[V] = pi0 - (1 - sigma_b) / lam (Takacs), pi0 = 1 / (lam + lam_b (1 - beta)) being
    the mean time it was idle in T and beta its busy period's Laplace-Stieltjes
    transform at lam. The wait is the busy period V starts, of mean V / (1 - sigma_b).
    It is shorter than what a request arriving at any moment finds,
    lam_b E[B^2] / (2 (1 - sigma_b)^2), which it tends to as the idle periods grow
    (lam -> 0), and is that at lam = 0. Only beta needs more of B than its moments:
    each class's B is taken as the gamma of its mean and variance (deterministic when
    the variance is 0)."""
    b1 = np.broadcast_to(x.b1, np.shape(all_lam)[-1:])
    b2 = np.broadcast_to(x.b2, np.shape(all_lam)[-1:])
    lam = np.asarray(lam, float)
    if not (b1 > 0).any():
        return np.zeros_like(lam)
    wall = 1 / (1 - x.share)
    b1, b2 = b1 * wall, b2 * wall**2
    lam_b = np.sum(all_lam, -1)
    sigma_b = np.sum(all_lam * b1, -1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        var = np.maximum(b2 - b1**2, 0.0)
        gamma = var > 1e-9 * b1**2
        theta = np.where(gamma, var / np.where(b1 > 0, b1, 1), 0.0)
        shape = np.where(gamma, b1**2 / np.where(gamma, var, 1), 0.0)
        weight = np.where(lam_b[..., None] > 0, all_lam / lam_b[..., None], 0.0)

        def lst(z):
            """E[e^(-z B)] and its derivative in z, over the classes' mix."""
            z = z[..., None]
            g = np.where(gamma, (1 + z * theta) ** -shape, np.exp(-z * b1))
            dg = np.where(gamma, -shape * theta * (1 + z * theta) ** (-shape - 1), -b1 * g)
            return (weight * g).sum(-1), (weight * dg).sum(-1)

        # beta = L(lam + lam_b (1 - beta)) by Newton's method from 0, which approaches
        # the root from below: beta - L(...) is increasing and concave in beta.
        beta = np.zeros(np.broadcast_shapes(lam.shape, lam_b.shape))
        for _ in range(50):
            g, dg = lst(lam + lam_b * (1 - beta))
            step = (beta - g) / (1 + lam_b * dg)
            beta = beta - step
            if np.nanmax(np.abs(step), initial=0.0) < 1e-13:
                break
        free = np.where(sigma_b < 1, 1 - sigma_b, np.nan)
        rate = np.where(lam > 0, lam, 1.0)
        found = np.maximum(1 / (rate + lam_b * (1 - beta)) - free / rate, 0.0) / free
        anytime = np.sum(all_lam * b2, -1) / (2 * free**2)
        return np.where(sigma_b < 1, np.where(lam > 0, found, anytime), np.inf)


def priority_m2(i1: np.ndarray, anytime: np.ndarray, lam: np.ndarray, rho: np.ndarray,
                c1: np.ndarray) -> np.ndarray:
    """E[I^2] for a wait for background of mean ``i1`` such that, with no wake-up cost,
    the queue is exactly the preemptive-resume priority queue, whatever the shape of the
    background's jobs. Welch's queue with first service I + C(S) (``c1`` = E[C(S)], own
    load ``rho``, ``lam`` epochs/s) has a mean wait that depends on I only through
    lam (E[I^2] + 2 E[I] c1) / (2 (1 + lam E[I])) + (1 - rho) E[I] / (1 + lam E[I]);
    with E[I] = ``anytime`` (what a request arriving at any moment finds) and
    E[I^2] = 2 E[I]^2 that is the priority queue's, and this keeps it."""
    with np.errstate(divide="ignore", invalid="ignore"):
        target = (lam * (2 * anytime**2 + 2 * anytime * c1) / 2 + (1 - rho) * anytime) / (
            1 + lam * anytime)
        m2 = (2 * (target * (1 + lam * i1) - (1 - rho) * i1) / np.where(lam > 0, lam, 1)
              - 2 * i1 * c1)
    return np.where(lam > 0, np.maximum(m2, i1**2), 2 * i1**2)


def weighted(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """w * x, where a zero weight contributes 0 even if x is infinite (a path no
    request takes must not turn a result into NaN)."""
    with np.errstate(invalid="ignore"):  # 0 * inf on the branch np.where discards
        return np.where(w > 0, w * x, 0.0)


def mix(f: np.ndarray, on_host: np.ndarray, offloaded: np.ndarray) -> np.ndarray:
    """(1 - f) on_host + f offloaded: the mean over a class's two paths."""
    return weighted(1 - f, on_host) + weighted(f, offloaded)


@dataclass(frozen=True)
class Queues:
    """The solved model. Arrays shaped like the input rates: ``*_c`` per class
    (classes last), the rest shared by all classes at that point. The ``T_*_c``
    end-to-end delays include d0; the stations' own sojourns (``T_cpu_c``, ``T_oe_c``)
    do not."""

    noe: Station
    cpu: Station
    oe: Station
    T_noe_c: np.ndarray
    T_cpu_c: np.ndarray
    T_cpu_off_c: np.ndarray
    T_oe_c: np.ndarray
    T_c: np.ndarray
    T_sum_c: np.ndarray

    @property
    def U_noe(self) -> np.ndarray:
        return self.noe.U

    @property
    def U_cpu(self) -> np.ndarray:
        return self.cpu.U

    @property
    def U_oe(self) -> np.ndarray:
        return self.oe.U


def solve(lam: np.ndarray, f: np.ndarray, k: ClassCosts, options: Options) -> Queues:
    """Solve host-alone and host + engine for class rates ``lam`` and fractions ``f``."""
    on_host, offloaded = lam * (1 - f), lam * f
    missed, hits = offloaded * (1 - k.hit), offloaded * k.hit
    noe = station(lam.sum(-1), (lam * k.h1).sum(-1), (lam * k.h2).sum(-1), lam, k.noe)
    cpu = host_station(lam, f, k)
    # One of the engine's cores: each is fed an even share of the offloaded requests
    # (random splitting keeps each share Poisson) and of the background they bring.
    n = k.oe.cores
    oe = station(offloaded.sum(-1) / n, (missed * k.e1 + hits * k.x1).sum(-1) / n,
                 (missed * k.e2 + hits * k.x2).sum(-1) / n, lam / n, k.oe, answer_epochs(
                     offloaded.sum(-1), missed.sum(-1), cpu.wakeups) if k.oe.answers_wake else 1.0)

    T_host_c = cpu.sojourn(k.h1)  # a request of class c that stays on the host
    T_cpu_off_c = cpu.sojourn(k.g1)  # ... one that is offloaded: its host part
    batch = batch_wait(cpu, oe, (on_host * k.h1 + missed * k.g1).sum(-1),
                       (missed * k.e1).sum(-1) / n)
    T_miss_oe_c = oe.sojourn(k.e1) + batch[..., None]  # ... and its engine part
    T_hit_c = oe.sojourn(k.x1)  # ... one the engine's cache answers
    T_sum_off = mix(k.hit, T_cpu_off_c + T_miss_oe_c, T_hit_c)
    T_max_off = mix(k.hit, np.maximum(T_cpu_off_c, T_miss_oe_c), T_hit_c)
    T_off = T_max_off if options.system_delay == "max" else T_sum_off
    # The host's sojourn over the requests that visit it (hits do not).
    visits = (1 - f) + f * (1 - k.hit)
    with np.errstate(divide="ignore", invalid="ignore"):
        sent_share = np.where(visits > 0, f * (1 - k.hit) / visits, 0.0)
    return Queues(
        noe=noe, cpu=cpu, oe=oe,
        T_noe_c=noe.sojourn(k.h1) + k.d0,
        T_cpu_c=mix(sent_share, T_host_c, T_cpu_off_c),
        T_cpu_off_c=T_cpu_off_c,
        T_oe_c=oe.sojourn(k.sent_engine1) + weighted(1 - k.hit, batch[..., None]),
        T_c=mix(f, T_host_c + k.d0, T_off + k.d0_sent),
        T_sum_c=mix(f, T_host_c + k.d0, T_sum_off + k.d0_sent),
    )


def host_station(lam: np.ndarray, f: np.ndarray, k: ClassCosts) -> Station:
    """The host CPU with offload: the requests kept on the host and the offloaded ones
    the engine's cache misses (their host part)."""
    on_host, missed = lam * (1 - f), lam * f * (1 - k.hit)
    return station((on_host + missed).sum(-1), (on_host * k.h1 + missed * k.g1).sum(-1),
                   (on_host * k.h2 + missed * k.g2).sum(-1), lam, k.cpu)


def batch_wait(cpu: Station, oe: Station, host_load: np.ndarray, engine_load: np.ndarray
               ) -> np.ndarray:
    """The engine's extra wait for requests the host hands it in rounds: each waits for
    the engine work of its round-mates served before it on the host. Their host work
    averages ``cpu.ahead``; their engine work is that times the engine's load over the
    host's (``engine_load``: the engine work per second of requests that come from the
    host; ``host_load``: the host's), each stretched by its core's background
    (docs/model.md, section 16)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(host_load > 0, engine_load * oe.stretch
                         / np.where(host_load > 0, host_load * cpu.stretch, 1.0), 0.0)
    return weighted(ratio, np.broadcast_to(cpu.ahead, np.shape(ratio)))


def answer_epochs(sent: np.ndarray, missed: np.ndarray, host_idle: np.ndarray) -> np.ndarray:
    """The engine's wake-up epochs per offloaded request when the host's answers wake it
    too: each request read from the network, and each batch of answers the host hands
    back, one per host busy period that carried a cache miss (the host's wake-ups per
    request ``host_idle`` of the ``missed`` requests it served): 1 + missed x host_idle /
    sent."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 + np.where(sent > 0, missed * host_idle / np.where(sent > 0, sent, 1), 0.0)


def overhead_bound(lam: np.ndarray, f: np.ndarray, k: ClassCosts, q: Queues) -> np.ndarray:
    """EXo_max per class: the largest mean host overhead E[X_o] for which offloading the
    class still relieves the CPU (E[X_o] < E[X_p]) and an offloaded request's host
    sojourn (with its d0) stays within its no-offload delay T_noe (reference 000,
    section 2.8).

    X_o keeps its shape (its scv) as its mean x varies; the other classes stay as they
    are. With one class, f = 1, the M/M/1 CPU and no wake-up, background or d0 this is
    the closed form T_noe / (1 + lam T_noe) - E[X_a], capped at E[X_p]. Never negative:
    0 means no overhead at all would keep the delay.
    """
    bound = np.empty(np.broadcast_shapes(lam.shape, f.shape))
    for c in range(bound.shape[-1]):
        target = q.T_noe_c[..., c]

        def fits(x: np.ndarray, c: int = c, target=target) -> np.ndarray:
            # The offloaded host must also be stable where the host alone is not (T_noe = inf).
            t = _host_sojourn_with_overhead(x, c, lam, f, k) + k.d0_sent[c]
            return np.isfinite(t) & (t <= target)

        lo, hi = np.zeros_like(target), np.full_like(target, k.p1[c])
        fits_hi, fits_lo = fits(hi), fits(lo)
        for _ in range(60):  # bisection: the host sojourn grows with x
            mid = (lo + hi) / 2
            ok = fits(mid)
            lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
        bound[..., c] = np.where(fits_hi, k.p1[c], np.where(fits_lo, lo, 0.0))
    return bound


def _host_sojourn_with_overhead(x, c: int, lam, f, k: ClassCosts):
    """Host sojourn of an offloaded class-c request if its mean overhead E[X_o] were x."""
    shape = np.broadcast_shapes((*np.shape(x), 1), k.g1.shape)
    g1, g2 = np.broadcast_to(k.g1, shape).copy(), np.broadcast_to(k.g2, shape).copy()
    g1[..., c] = k.a1[c] + x
    g2[..., c] = offloaded_host_m2(k.a1[c], k.a2[c], x, (1 + k.o_scv[c]) * x**2, k.cpu_queue)
    # The host's station alone: the bisection needs no engine (solve's T_cpu_off_c).
    return host_station(lam, f, replace(k, g1=g1, g2=g2)).sojourn(g1)[..., c]
