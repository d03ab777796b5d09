"""Seed 002's receive path of a polling (NAPI) device driver, in closed form.

Packets of B bytes arrive as a Poisson stream of lam packets/s and pass four stages:

1. **rxFIFO** on the NIC, n1 = rx_fifo_bytes // B packets. A packet is lost when the
   FIFO is full because the NIC cannot get the bus.
2. **Bus** (PCI/PCI-X), shared by the receive FIFO and the transmit queue (n3 packets,
   fed at lam2 = lam1' since the host forwards every packet). One DMA of p packets
   takes 1/mu_pci = 8 B p / (w f_io) (T-3.10). The joint occupancy is product form
   (T-3.8) and the FIFO is blocked with probability b1 = sum_j P(n1, j) (T-3.9). b1
   depends on the carried rate lam1' = (1 - b1) lam (T-3.4), so b1 is a fixed point.
   Two forms: ``"thesis"`` weights (i, j) by rho1^i rho2^j / (i! j!), which on the
   rectangle factorises into the truncated Poisson of T-3.3 (b1 is Erlang's B);
   ``"ps"``, one processor-shared bus, weights it by C(i + j, i) rho1^i rho2^j.
3. **Polling** (Q2: the descriptor ring and the CPU's work queue, ``ring`` packets).
   Each poll moves a bulk X of packets, at most ``bulk_cap``, and the CPU handles them
   one at a time. That is a bulk-arrival M^X/M/1 queue. Its infinite-buffer mean
   (corrected T-3.17, with the thesis's missing factor 1/2) is
   E[N] = rho/(1 - rho) (E[X^2] + E[X]) / (2 E[X]); with a finite ring a bulk that does
   not fit loses its excess (partial acceptance), which is the ring's loss.
4. **CPU** (T-3.26, T-3.27): rho_cpu = N_int t_int + lam1' t_pkt, where t_int is the
   cost of an interrupt or poll invocation and t_pkt the work per packet. The thesis
   leaves the mode probabilities open; here a packet that finds the CPU idle raises an
   interrupt (p_int = 1 - rho_cpu, PASTA) and one that finds it busy is picked up by a
   poll that takes up to ``bulk_cap`` packets (p_poll = rho_cpu, L = bulk_cap). Then
   rho_cpu = lam (t_int + t_pkt) / (1 + lam t_int (1 - 1/bulk_cap)), which for
   bulk_cap -> inf is the busy fraction of an M/G/1 queue whose busy periods start
   with a set-up time t_int. Polls per second are N_int = lam (1 - rho + rho/bulk_cap),
   so the mean bulk is E[X] = lam / N_int and the CPU's rate per packet mu_e = lam/rho.
   Alternatively (``Driver.modes``, a :class:`ModeCurve`) p_int is a calibrated
   function of the packet rate, p_int = 1 / (1 + (lam/lam0)^k), p_poll = 1 - p_int,
   and rho_cpu = lam (t_int (p_int + p_poll/bulk_cap) + t_pkt) (T-3.26, T-3.27 as
   written): a regression fitted to the thesis's tables, not a consequence of the
   mechanism (docs/driver.md §6).

A packet's latency is its DMA plus its sojourn in Q2. The bulk queue spreads the
interrupt's cost over every packet and so overstates the wait below saturation; there
the sojourn of the M/G/1 queue with set-up times is used (:func:`setup_latency`),
bounded by the finite bulk queue's (Little: E[N] over the carried rate), which holds
near and past saturation. Loss is 1 - (1 - b1)(1 - ring loss). Everything broadcasts
over rates. ``docs/driver.md`` lists the thesis's equations this corrects.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from offloadlab.errors import require

BUS_FORMS = ("thesis", "ps")
BULKS = ("constant", "rayleigh")
WAITS = ("interrupt", "poll")


@dataclass(frozen=True)
class ModeCurve:
    """The share of packets that raise an interrupt as a function of the packet rate,
    p_int(lam) = 1 / (1 + (lam/lam0)^k): a logistic in log rate, 1 at light load, 1/2 at
    lam0 packets/s, falling like (lam0/lam)^k past it. The rest, p_poll = 1 - p_int,
    are taken by polls of ``bulk_cap`` packets. Two parameters, fitted to the thesis's
    tables (:func:`offloadlab.model.driver_tables.fit_curve`)."""

    lam0: float
    k: float

    def check(self) -> ModeCurve:
        require(np.isfinite(self.lam0) and self.lam0 > 0,
                f"modes.lam0={self.lam0!r}: use a packet rate > 0, e.g. 1.2e5")
        require(np.isfinite(self.k) and self.k > 0,
                f"modes.k={self.k!r}: use a slope > 0, e.g. 2")
        return self

    def p_int(self, lam) -> np.ndarray:
        """p_int at packet rates ``lam`` (>= 0); in [0, 1], non-increasing in lam."""
        ratio = np.asarray(lam, float) / self.lam0
        with np.errstate(over="ignore"):  # (huge)^k -> inf -> p_int 0, as it should
            return 1 / (1 + ratio**self.k)


@dataclass(frozen=True)
class Driver:
    """The driver's and the platform's parameters (Table 3.1), SI units.

    Defaults are the thesis's platform: an Intel 82546EB with a 32 KiB rxFIFO on 64-bit
    66 MHz PCI-X, 1024 receive descriptors, NAPI's bulk cap (weight) 64. ``t_int`` and
    ``t_pkt`` are the costs fitted to the thesis's tables
    (:func:`offloadlab.model.driver_tables.fit_tables`); the tables leave t_pkt at 0, too
    small to resolve next to t_int (docs/driver.md §6).
    ``wait`` is how an idle CPU waits: ``"interrupt"`` (NAPI: sleep until the NIC
    interrupts) or ``"poll"`` (busy-poll: the CPU never sleeps, a full core always,
    and no packet pays t_int).
    ``modes`` is how packets split between interrupts and polls: ``None``, the mode
    model (p_int = 1 - rho_cpu), or a fitted :class:`ModeCurve` of the packet rate.
    """

    rx_fifo_bytes: int = 32 * 1024
    tx_fifo_bytes: int = 32 * 1024
    ring: int = 1024
    bulk_cap: int = 64
    bus_width_bits: int = 64
    bus_hz: float = 66e6
    dma_packets: int = 1
    t_int: float = 10.6e-6
    t_pkt: float = 0.0
    bus: str = "thesis"
    bulk: str = "constant"
    wait: str = "interrupt"
    modes: ModeCurve | None = None

    def check(self) -> Driver:
        """Raise :class:`InputError` naming the first field that cannot work."""
        for name in ("rx_fifo_bytes", "tx_fifo_bytes", "ring", "bulk_cap", "bus_width_bits",
                     "dma_packets"):
            value = getattr(self, name)
            require(isinstance(value, int | np.integer) and value >= 1,
                    f"{name}={value!r}: use a whole number >= 1")
        require(np.isfinite(self.bus_hz) and self.bus_hz > 0,
                f"bus_hz={self.bus_hz!r}: use a bus clock > 0, e.g. 66e6")
        for name in ("t_int", "t_pkt"):
            value = getattr(self, name)
            require(np.isfinite(value) and value >= 0,
                    f"{name}={value!r}: use a time >= 0 in seconds")
        require(self.bus in BUS_FORMS, f"bus={self.bus!r}: use thesis or ps")
        require(self.bulk in BULKS, f"bulk={self.bulk!r}: use constant or rayleigh")
        require(self.wait in WAITS, f"wait={self.wait!r}: use interrupt or poll")
        if self.modes is not None:
            self.modes.check()
        return self

    def replace(self, **changes) -> Driver:
        return replace(self, **changes)


@dataclass(frozen=True)
class Solution:
    """The receive path at each rate (arrays broadcast over rates and sizes).

    lam: offered packets/s; lam_carried: packets/s the CPU handles; b1: bus blocking;
    cpu: CPU utilisation (1 when it busy-polls); busy: the share of it spent on
    interrupts, polls that find work and packets; interrupts_s: interrupts and polls
    per second; bulk_mean: packets per poll E[X]; queue: mean packets in Q2 E[N];
    latency_s: DMA plus Q2 sojourn (the set-up form, bounded by the ring's);
    latency_bulk_s: the same by the thesis's bulk queue alone (E[N] over the carried
    rate); loss: share of offered packets lost (FIFO and ring).
    """

    lam: np.ndarray
    lam_carried: np.ndarray
    b1: np.ndarray
    cpu: np.ndarray
    busy: np.ndarray
    interrupts_s: np.ndarray
    bulk_mean: np.ndarray
    queue: np.ndarray
    latency_s: np.ndarray
    latency_bulk_s: np.ndarray
    loss: np.ndarray

    def rows(self) -> list[dict]:
        arrays = np.broadcast_arrays(*(getattr(self, f.name) for f in fields(self)))
        names = [f.name for f in fields(self)]
        return [{n: float(a.flat[i]) for n, a in zip(names, arrays, strict=True)}
                for i in range(arrays[0].size)]


def packet_rate(rate_bps, size_bytes) -> np.ndarray:
    """lam1 = R / (8 B): the thesis's convention (no preamble or inter-frame gap)."""
    return np.asarray(rate_bps, float) / (8 * np.asarray(size_bytes, float))


def bus_service_s(size_bytes, driver: Driver) -> np.ndarray:
    """1/mu_pci = 8 B p / (w f_io), one DMA burst of ``dma_packets`` packets (T-3.10)."""
    return (8 * np.asarray(size_bytes, float) * driver.dma_packets
            / (driver.bus_width_bits * driver.bus_hz))


def bus_blocking(rho1, rho2, n1: int, n3: int, form: str = "thesis") -> np.ndarray:
    """b1 = sum_j P(n1, j) of the product form (T-3.8, T-3.9) on 0 <= i <= n1,
    0 <= j <= n3, in log space (the factorials of a 512-packet FIFO overflow floats)."""
    from scipy import special  # scipy loads when solved, not when the CLI starts

    rho1 = np.asarray(rho1, float)[..., None, None]
    rho2 = np.asarray(rho2, float)[..., None, None]
    i = np.arange(n1 + 1)[:, None]
    j = np.arange(n3 + 1)[None, :]
    with np.errstate(divide="ignore"):
        log_w = i * np.log(rho1) + j * np.log(rho2) - special.gammaln(i + 1) \
            - special.gammaln(j + 1)
    if form == "ps":
        log_w = log_w + special.gammaln(i + j + 1)
    total = special.logsumexp(log_w, axis=(-2, -1))
    full = special.logsumexp(log_w[..., n1, :], axis=-1)
    return np.exp(full - total)


def carried_by_bus(lam, size_bytes, driver: Driver, tol: float = 1e-13,
                   max_iterations: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """(b1, lam1'): the fixed point b1 = f((1 - b1) lam), from b1 = 0. The transmit side
    carries what the receive side does (the host forwards every packet)."""
    lam, size = np.broadcast_arrays(np.asarray(lam, float), np.asarray(size_bytes, float))
    b1 = np.zeros(lam.shape)
    for k in np.ndindex(lam.shape):  # n1 and n3 differ with the packet size
        n1 = int(driver.rx_fifo_bytes // size[k])
        n3 = int(driver.tx_fifo_bytes // size[k])
        require(n1 >= 1, f"rx_fifo_bytes={driver.rx_fifo_bytes}: holds no packet of "
                         f"{size[k]:g} bytes; use a FIFO at least one packet long")
        rho = lam[k] * bus_service_s(size[k], driver)
        b = 0.0
        for _ in range(max_iterations):
            new = float(bus_blocking(rho * (1 - b), rho * (1 - b), n1, n3, driver.bus))
            if abs(new - b) <= tol:
                break
            b = new
        b1[k] = new
    return b1, (1 - b1) * lam


def cpu_load(lam, t_int: float, t_pkt: float, bulk_cap: int) -> np.ndarray:
    """Offered CPU load rho_cpu (T-3.27 with the mode model of the module notes). Past
    1 every packet finds the CPU busy and costs t_pkt + t_int / bulk_cap, and the load
    is that times lam (the two meet at 1); the ring then fills and drops."""
    lam = np.asarray(lam, float)
    light = lam * (t_int + t_pkt) / (1 + lam * t_int * (1 - 1 / bulk_cap))
    return np.where(light < 1, light, lam * (t_pkt + t_int / bulk_cap))


def curve_load(lam, t_int: float, t_pkt: float, bulk_cap: int,
               modes: ModeCurve) -> np.ndarray:
    """Offered CPU load with p_int from a fitted curve (T-3.26, T-3.27):
    rho_cpu = N_int t_int + lam t_pkt, N_int = lam (p_int + (1 - p_int) / bulk_cap).
    Unlike :func:`cpu_load` it may exceed 1; the ring then fills and drops."""
    lam = np.asarray(lam, float)
    return interrupt_rate_curve(lam, bulk_cap, modes) * t_int + lam * t_pkt


def interrupt_rate_curve(lam, bulk_cap: int, modes: ModeCurve) -> np.ndarray:
    """N_int = lam (p_int + p_poll / L) with p_int from ``modes`` and L = bulk_cap."""
    p = modes.p_int(lam)
    return np.asarray(lam, float) * (p + (1 - p) / bulk_cap)


def setup_latency(lam, t_int: float, t_pkt: float, bulk_cap: int) -> np.ndarray:
    """Mean packet latency in Q2 with exponential costs, as an M/G/1 queue whose busy
    periods start with a set-up U (the interrupt, less the share of a poll every
    packet pays) and whose packets cost S = t_pkt plus a t_int poll once in bulk_cap:

        T = lam E[S^2] / (2 (1 - lam E[S])) + (2 E[U] + lam E[U^2]) / (2 (1 + lam E[U]))
            + E[S]

    (the M/G/1 wait plus the set-up's share, Takagi). Its busy share is cpu_load's.
    inf once lam E[S] >= 1."""
    lam = np.asarray(lam, float)
    u1 = t_int * (1 - 1 / bulk_cap)
    s1 = t_pkt + t_int / bulk_cap
    s2 = 2 * t_pkt**2 + 2 * t_pkt * t_int / bulk_cap + 2 * t_int**2 / bulk_cap
    rho = lam * s1
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.where(rho < 1, lam * s2 / (2 * (1 - rho)), np.inf)
    return wait + (2 * u1 + lam * 2 * u1**2) / (2 * (1 + lam * u1)) + s1


def interrupt_rate(lam, rho, bulk_cap: int) -> np.ndarray:
    """N_int = lam (p_int + p_poll / L) with p_int = 1 - rho, p_poll = rho, L = bulk_cap
    (T-3.26); rho is capped at 1."""
    rho = np.minimum(np.asarray(rho, float), 1.0)
    return np.asarray(lam, float) * (1 - rho + rho / bulk_cap)


def bulk_pmf(mean: float, cap: int, kind: str = "constant") -> np.ndarray:
    """P(X = k) for k = 0..cap (entry 0 is 0) with E[X] = ``mean`` in [1, cap].

    ``constant``: the bulk is the mean, split between its floor and ceiling when it is
    not whole. ``rayleigh``: the thesis's high-rate shape (T-3.20) made a proper
    distribution on 1..cap, X = min(max(ceil(R), 1), cap) with R Rayleigh(sigma), sigma
    chosen to give the mean (a poll takes at most ``cap``: the tail is folded there).
    """
    from scipy import optimize

    mean = float(np.clip(mean, 1.0, cap))
    pmf = np.zeros(cap + 1)
    if kind == "constant":
        lo = int(np.floor(mean))
        pmf[lo] = 1 - (mean - lo)
        if mean > lo:  # then lo < cap
            pmf[lo + 1] = mean - lo
        return pmf
    if mean >= cap - 1e-9:
        pmf[cap] = 1.0
        return pmf
    if mean <= 1 + 1e-9:
        pmf[1] = 1.0
        return pmf
    sigma = optimize.brentq(lambda s: _rayleigh(s, cap) @ np.arange(cap + 1) - mean,
                            1e-3, 1e6, xtol=1e-12)
    return _rayleigh(sigma, cap)


def _rayleigh(sigma: float, cap: int) -> np.ndarray:
    below = 1 - np.exp(-np.arange(cap) ** 2 / (2 * sigma**2))  # P(R <= k), k = 0..cap-1
    cdf = np.concatenate([[0.0], below[1:], [1.0]])            # P(X <= k); X >= 1
    return np.diff(cdf, prepend=0.0)


def mx_m1_mean(rho, m1, m2) -> np.ndarray:
    """E[N] of the infinite M^X/M/1 queue (corrected T-3.17):
    rho/(1 - rho) (E[X^2] + E[X]) / (2 E[X]); inf at rho >= 1."""
    rho = np.asarray(rho, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rho < 1, rho / (1 - rho) * (m2 + m1) / (2 * m1), np.inf)


def bulk_queue(load: float, pmf: np.ndarray, capacity: int) -> np.ndarray:
    """Stationary distribution of Q2, an M^X/M/1/K queue with partial acceptance:
    ``load`` = rho = lam_b E[X] / mu, bulk sizes ``pmf``, K = ``capacity``.

    The flow across the cut between n and n + 1 balances:
    mu pi(n+1) = lam_b sum_{m <= n} pi(m) P(X > n - m). These are the infinite queue's
    equations up to K, so pi is that recursion (a linear filter) truncated and
    normalised. When rho > 1 it grows like r^n; the filter runs on pi(n) / r^n, r the
    growth rate, so nothing overflows.
    """
    from scipy import optimize, signal

    m1 = pmf @ np.arange(len(pmf))
    tail = 1 - np.cumsum(pmf)[:-1]            # P(X > j), j = 0..cap-1
    a = load / m1                             # lam_b / mu
    r = 1.0
    if load > 1:  # growth rate 1/z of a z Q(z) = 1, Q(z) = sum_j P(X > j) z^j
        powers = np.arange(len(tail))  # Q(z) as a dot product: np.polyval loops in Python
        z = optimize.brentq(lambda z: a * z * (tail @ z**powers) - 1, 1e-12, 1.0)
        r = 1 / z
    scaled = a * tail / r ** np.arange(1, len(tail) + 1)
    impulse = np.zeros(capacity + 1)
    impulse[0] = 1.0
    psi = signal.lfilter([1.0], np.concatenate([[1.0], -scaled]), impulse)
    log_pi = np.log(np.maximum(psi, 1e-300)) + np.arange(capacity + 1) * np.log(r)
    # Normalised in the log domain by hand: scipy's logsumexp costs ten times the
    # rest of this function, and a curve fit calls it some 20,000 times.
    pi = np.exp(log_pi - log_pi.max())
    return pi / pi.sum()


def solve(driver: Driver, lam, size_bytes) -> Solution:
    """The receive path at offered rates ``lam`` (packets/s, > 0) of ``size_bytes``
    packets (see the module notes)."""
    driver.check()
    lam, size = np.broadcast_arrays(np.asarray(lam, float), np.asarray(size_bytes, float))
    require(bool(np.all(np.isfinite(lam) & (lam > 0))), "rates: use packet rates > 0")
    require(bool(np.all(size >= 1)), "size: use packet sizes of at least 1 byte")
    b1, carried_in = carried_by_bus(lam, size, driver)
    return receive(driver, lam, size, b1, carried_in)


def receive(driver: Driver, lam, size, b1, lam1) -> Solution:
    """The path past the bus, given its blocking ``b1`` and carried rate ``lam1`` (from
    :func:`carried_by_bus`, which does not depend on the CPU's costs)."""
    cap = driver.bulk_cap
    if driver.wait == "poll":
        # The CPU spins on the ring, so each packet is taken as it lands: bulks of one,
        # no interrupts, and t_pkt is all a packet costs.
        rho = lam1 * driver.t_pkt
        bulk_mean = np.ones(lam1.shape)
    elif driver.modes is not None:
        rho = curve_load(lam1, driver.t_int, driver.t_pkt, cap, driver.modes)
        bulk_mean = np.clip(lam1 / interrupt_rate_curve(lam1, cap, driver.modes), 1, cap)
    else:
        rho = cpu_load(lam1, driver.t_int, driver.t_pkt, cap)
        bulk_mean = np.clip(lam1 / interrupt_rate(lam1, rho, cap), 1, cap)
    busy, carried, queue = (np.empty(lam1.shape) for _ in range(3))
    for k in np.ndindex(lam1.shape):
        pi = bulk_queue(rho[k], bulk_pmf(bulk_mean[k], cap, driver.bulk), driver.ring)
        busy[k] = 1 - pi[0]
        # Each handled packet costs rho / lam1 of CPU, so the CPU's busy share is
        # carried * rho / lam1 (= rho without loss).
        carried[k] = busy[k] * lam1[k] / rho[k] if rho[k] > 0 else lam1[k]
        queue[k] = pi @ np.arange(driver.ring + 1)
    if driver.wait == "poll":
        cpu, interrupts = np.ones(lam1.shape), np.zeros(lam1.shape)
        setup = setup_latency(lam1, 0.0, driver.t_pkt, cap)
    elif driver.modes is not None:
        # Polls per carried packet as the curve says at the offered rate.
        cpu, interrupts = busy, carried / bulk_mean
        setup = setup_latency(lam1, driver.t_int, driver.t_pkt, cap)
    else:
        cpu, interrupts = busy, interrupt_rate(carried, busy, cap)
        setup = setup_latency(lam1, driver.t_int, driver.t_pkt, cap)
    ring_loss = np.clip(1 - carried / lam1, 0, 1)
    dma = bus_service_s(size, driver)
    bulk_latency = queue / carried
    # A full ring bounds the wait, so near and past saturation the finite bulk queue
    # holds; below it the set-up form is the closer (docs/driver.md §5).
    return Solution(lam=lam, lam_carried=carried, b1=b1, cpu=cpu, busy=busy,
                    interrupts_s=interrupts, bulk_mean=bulk_mean, queue=queue,
                    latency_s=dma + np.minimum(setup, bulk_latency),
                    latency_bulk_s=dma + bulk_latency, loss=1 - (1 - b1) * (1 - ring_loss))
