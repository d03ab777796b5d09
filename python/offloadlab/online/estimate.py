"""Per-class rates and service-time moments from the server's live accounts.

A :class:`Snapshot` is one reading of the stats document: per class, the count, sum
and sum of squares of the work per request on each path (host alone: X_a + X_p; the
host's part of an offloaded request: X_a + X_o; the engine's part: X_c + X_q), the
engine's pass-through work on connections it gave the host, and both threads' CPU
clocks. The :class:`Estimator` keeps the snapshots of the last ``window_s`` seconds and
differences the newest against the oldest.

The server times the work it can charge to a connection (including, on the engine,
the slowdown's share of it). Epoll waits, wake-ups and the rings belong to no
connection; measured on the testbed they are a nearly constant cost per request on each
side (about 20 us on the engine whether a request is passed on, a 1 KiB file or a
150 KiB one). So each side's uncharged work, its busy CPU time less its charged time in the
window, is spread equally over the requests it handled: every mean on that side
grows by that overhead o, and every second moment by 2 o E[X] + o^2. Charges are
wall-clock time, so a thread preempted by others on its core can be charged more than
its busy CPU time; that excess grows with the time a request takes, so it is taken back
in proportion: every time on that side is scaled by busy / charged.

The host and the engine are CPUs, not threads: whatever else runs on their cores (on
the testbed, the load generator and the kernel's softirq work; elsewhere, other
tenants) is background load the model must see. It is each pinned thread's core busy
time (from ``/proc/stat``) less the thread's own busy time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from offloadlab.documents import ServerStats

# Fewer requests than this on a path in the window: keep the path's last estimate.
MIN_SAMPLES = 20
# Least capacity counted as left by background load (a full core still gets a share).
ROOM_FLOOR = 0.1


@dataclass(frozen=True)
class Snapshot:
    """One reading: ``t_s`` server time; ``n``, ``sum``, ``sumsq`` arrays (path, class);
    ``passed`` (n, sum) of the engine's pass-through work; busy CPU seconds so far."""

    t_s: float
    n: np.ndarray
    sum: np.ndarray
    sumsq: np.ndarray
    passed: np.ndarray
    host_busy_s: float
    engine_busy_s: float
    # Busy time of the host's and the engine's cores by anything else (0: not pinned).
    host_other_s: float = 0.0
    engine_other_s: float = 0.0

    @classmethod
    def of(cls, stats: ServerStats) -> Snapshot:
        """From the stats document of a server with placement on."""
        p = stats.placement
        if not p:
            raise ValueError("the stats document has no placement section; run the server "
                             "in handoff mode with placement on")
        paths = (p.host, p.offloaded_host, p.engine)  # the arrays' rows, in this order

        def field(read) -> np.ndarray:
            return np.array([[read(m) for m in path] for path in paths], dtype=float)

        threads = {t.role: t for t in stats.threads}
        cores = {c.core: c for c in stats.cores}

        def other(role: str) -> float:
            """Busy time of the role's core less the role's thread (all of its CPU
            time: an engine's idle polling is no one else's)."""
            t = threads.get(role)
            core = cores.get(t.core) if t and t.core is not None else None
            if core is None:
                return 0.0
            busy = core.user_s + core.system_s + core.irq_s + core.softirq_s
            return max(busy - t.cpu_s, 0.0)

        cpu = {role: t.cpu_s for role, t in threads.items()}
        return cls(t_s=float(stats.elapsed_s), n=field(lambda m: m.n),
                   sum=field(lambda m: m.sum_s), sumsq=field(lambda m: m.sumsq_s2),
                   passed=np.array([p.passed.n, p.passed.sum_s], dtype=float),
                   host_busy_s=cpu.get("host", 0.0) - stats.host.idle_poll_s,
                   engine_busy_s=cpu.get("engine", 0.0) - stats.engine.idle_poll_s,
                   host_other_s=other("host"), engine_other_s=other("engine"))


@dataclass(frozen=True)
class Estimate:
    """Over one window: per class (arrays over classes) the arrival rate and the first
    and second moments of each path's service time (NaN: never seen on that path);
    each side's measured utilisation; the engine's pass-through utilisation; and how
    many requests each path's estimate rests on in this window."""

    span_s: float
    rates: np.ndarray
    m1: np.ndarray          # (path, class)
    m2: np.ndarray          # (path, class)
    samples: np.ndarray     # (path, class)
    u_host: float
    u_engine: float
    u_pass: float
    u_host_other: float = 0.0
    u_engine_other: float = 0.0

    def room(self) -> tuple[float, float]:
        """The capacity the background leaves the host and the engine for requests: the
        other work on their cores, and on the engine its pass-through too."""
        return (max(1 - self.u_host_other, ROOM_FLOOR),
                max(1 - self.u_engine_other - self.u_pass, ROOM_FLOOR))

    def known(self) -> np.ndarray:
        """Per class: every path has an estimate."""
        return np.isfinite(self.m1).all(0)


class Estimator:
    """Sliding-window estimates of the server's per-class costs."""

    def __init__(self, window_s: float = 2.0) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s={window_s!r}: use a time > 0")
        self.window_s = window_s
        self._snaps: deque[Snapshot] = deque()
        self._m1: np.ndarray | None = None
        self._m2: np.ndarray | None = None

    def add(self, snap: Snapshot) -> None:
        self._snaps.append(snap)
        # Keep one snapshot at or before the window's start, to difference against.
        while len(self._snaps) > 2 and snap.t_s - self._snaps[1].t_s >= self.window_s:
            self._snaps.popleft()

    def forget(self) -> None:
        """Drop all but the last period (the two newest snapshots): the next estimate
        rests on fresh data only (after the engine was seen to lag its prediction)."""
        while len(self._snaps) > 2:
            self._snaps.popleft()

    def estimate(self) -> Estimate | None:
        """The window's estimate (None until two snapshots span some time)."""
        if len(self._snaps) < 2:
            return None
        old, new = self._snaps[0], self._snaps[-1]
        span = new.t_s - old.t_s
        if span <= 0:
            return None
        n, s, s2 = new.n - old.n, new.sum - old.sum, new.sumsq - old.sumsq
        passed_n, passed_s = new.passed - old.passed
        host_busy = max(new.host_busy_s - old.host_busy_s, 0.0)
        engine_busy = max(new.engine_busy_s - old.engine_busy_s, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(n >= MIN_SAMPLES, s / n, np.nan)
            square = np.where(n >= MIN_SAMPLES, s2 / n, np.nan)
        # Each side's uncharged work (see the module notes): the host's two paths, then
        # the engine's with its pass-through.
        host = _Side(host_busy, s[0].sum() + s[1].sum(), n[0].sum() + n[1].sum())
        engine = _Side(engine_busy, s[2].sum() + passed_s, n[2].sum() + passed_n)
        m1 = np.vstack([host.mean(mean[:2]), engine.mean(mean[2:])])
        m2 = np.vstack([host.square(square[:2], mean[:2]),
                        engine.square(square[2:], mean[2:])])
        if self._m1 is not None:  # a path seen too little in this window: keep the last
            m1 = np.where(np.isfinite(m1), m1, self._m1)
            m2 = np.where(np.isfinite(m2), m2, self._m2)
        self._m1, self._m2 = m1, m2
        pass_each = float(engine.mean(passed_s / passed_n)) if passed_n > 0 else 0.0
        rates = (n[0] + n[1]) / span
        return Estimate(span_s=span, rates=rates, m1=m1, m2=m2, samples=n,
                        u_host=host_busy / span, u_engine=engine_busy / span,
                        u_pass=passed_n * max(pass_each, 0.0) / span,
                        u_host_other=max(new.host_other_s - old.host_other_s, 0.0) / span,
                        u_engine_other=max(new.engine_other_s - old.engine_other_s, 0.0)
                        / span)


@dataclass(frozen=True)
class _Side:
    """One side's busy CPU time, charged time and requests in a window, and the
    correction they call for: an overhead per request when busy exceeds charged, else
    a scale (see the module notes)."""

    busy: float
    charged: float
    requests: float

    @property
    def overhead(self) -> float:
        extra = self.busy - self.charged
        return extra / self.requests if extra > 0 and self.requests > 0 else 0.0

    @property
    def scale(self) -> float:
        return self.busy / self.charged if 0 < self.busy < self.charged else 1.0

    def mean(self, x):
        return x * self.scale + self.overhead

    def square(self, x2, x):
        o = self.overhead
        return x2 * self.scale**2 + 2 * o * x * self.scale + o**2
