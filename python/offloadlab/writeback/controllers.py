"""Write-throttling controllers: WICA's two variants (reference 002 §4.5, §4.6), Linux's
own dirty throttling, and none.

Every controller sees the same thing at the end of each of its bins (``bin_s``: 20 ms
for WICA): the pages each writer dirtied in the bin, and a :class:`View` of the system.
It answers with the time each writer must sleep, in seconds (0: carry on). The simulator
puts the writer to sleep; a sleeping writer dirties nothing.

Units: pages and seconds throughout; rates in pages/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Reference 002 §4.3: dirty-page generation is short-range dependent below about 20 ms,
# so both WICA variants sample in 20 ms bins.
BIN_S = 0.020


@dataclass(frozen=True)
class View:
    """What a controller may look at besides the writers' counts.

    ``awake``: the share of the bin each writer was allowed to run (not asleep, not
    waiting for the page daemon); at 0 its zero count says nothing about it. ``dirty``,
    ``writeback`` and ``dirtyable``: pages dirty now, pages being written, and pages that
    could hold dirty data (free plus dirty plus under writeback). ``write_bw``: what the
    disk writes at full speed, pages/s.
    """

    awake: np.ndarray
    dirty: float
    writeback: float
    dirtyable: float
    write_bw: float


class NoControl:
    """Writers are never throttled; only the flusher and the page daemon act."""

    name = "none"
    bin_s = BIN_S

    def reset(self, writers: int) -> None:
        pass

    def step(self, counts: np.ndarray, view: View) -> np.ndarray:
        return np.zeros(len(counts))


@dataclass
class DWica:
    """D-WICA, the rate-based variant (reference 002 §4.5).

    Within a bin the dirty count is taken to grow exponentially, N(T + ΔT) = N(T) e^(R ΔT)
    (T-4.2), where R is smoothed from the per-bin log-growth rates
    r_j = ln(n_j / n_{j-1}) / ΔT by R_j = β r_j + (1 - β) R_{j-1} (T-4.3). At the end of
    each bin the observed count 𝒩 is compared with the prediction N; if 𝒩 > N the writer
    sleeps S = (σ / σ_th) (𝒩 - N) / N · L_max (T-4.7).

    Choices where the thesis is silent:

    - r is a log-growth rate, so that R ΔT is dimensionless in the exponent (§4.5 [mine]).
    - A bin with no dirty page has no logarithm: it leaves the state alone, and the next
      busy bin is compared with the last busy one.
    - A bin the writer was allowed to run for only part of is scaled up to a whole bin;
      otherwise the bin a writer wakes up in would look like a slump and the next one
      like growth, and every penalty would breed the next (the open-loop oscillation
      §4.5 warns of).
    - The learning period (T-4.4/4.5 give its form but not its inputs): no writer is
      judged before the EWMA has ``learn_bins`` rates, from ``learn_bins`` + 1 busy bins.
    - σ rises by 1 on each penalty, up to σ_th, and halves on each busy bin that passes:
      a first offence is damped to 1/σ_th, a writer that offends bin after bin climbs
      to the full sleep, and one that behaves is soon forgiven.
    - S is capped at L_max, the "max sleep" of Table 4.1, so no writer starves.
    """

    beta: float = 0.7
    max_sleep_s: float = 1.5
    sigma_th: float = 30.0
    learn_bins: int = 5
    bin_s: float = BIN_S
    name: str = "d-wica"

    def reset(self, writers: int) -> None:
        self.last = np.zeros(writers)       # the last busy bin's count, n_{j-1}
        self.rate = np.zeros(writers)       # R, smoothed log-growth rate, 1/s
        self.samples = np.zeros(writers, int)
        self.sigma = np.zeros(writers)

    def predict(self) -> np.ndarray:
        """N(T + ΔT): the count each writer is expected to dirty in the next bin."""
        return self.last * np.exp(self.rate * self.bin_s)

    def step(self, counts: np.ndarray, view: View) -> np.ndarray:
        busy = (np.asarray(counts) > 0) & (view.awake > 0)
        n = np.divide(counts, view.awake, out=np.zeros(len(busy)), where=busy)
        judged = busy & (self.samples > self.learn_bins)
        predicted = self.predict()
        over = judged & (n > predicted)
        self.sigma = np.where(over, np.minimum(self.sigma + 1, self.sigma_th),
                              np.where(judged, self.sigma / 2, self.sigma))
        excess = np.divide(n - predicted, predicted, out=np.zeros_like(n), where=over)
        sleep = np.minimum(self.sigma / self.sigma_th * excess * self.max_sleep_s,
                           self.max_sleep_s) * over
        growth = busy & (self.last > 0)
        r = np.log(np.divide(n, self.last, out=np.ones_like(n), where=growth)) / self.bin_s
        self.rate = np.where(growth, self.beta * r + (1 - self.beta) * self.rate, self.rate)
        self.last = np.where(busy, n, self.last)
        self.samples += busy
        return sleep


@dataclass
class PWica:
    """P-WICA, the effective-bandwidth variant (reference 002 §4.6).

    Each writer feeds a virtual buffer of ``buffer_pages`` (B) with overflow target ε, so
    the space parameter is s = -ln ε / B per page (T-4.13). Its effective bandwidth is
    estimated block by block, X_m being the pages dirtied in block m of t = 20 ms
    (T-4.10/4.11, corrected):

        M_m = (1 - 1/m) M_{m-1} + (1/m) e^(s X_m),   α_m = ln(M_m) / (s t)

    and compared with EB_th = R_peak (1 - e^(-s)) (T-4.15). If α > EB_th the writer sleeps
    S = (α - EB_th) / EB_th · L_max.

    Choices where the thesis is silent:

    - M is kept as its logarithm (log-sum-exp), so e^(s X) never overflows.
    - "Set the virtual queue to zero after a penalty" restarts the estimator (m = 0):
      the estimate then describes the writer since its last penalty.
    - Blocks a writer slept through are not samples of its behaviour and are skipped.
    - R_peak, the peak rate of the equivalent Poisson source, is the disk's full write
      bandwidth unless given: a writer is judged against what the disk can clean.
    - B = 16 pages and ε = 0.01 give s = 0.29 per page and EB_th = 0.25 R_peak. B is far
      below the I/O queue (early warning); with s much smaller, 1 - e^(-s) ≈ s would
      push EB_th below the mean rate of all but the lightest writers.
    - S is capped at L_max, as for D-WICA.
    """

    buffer_pages: float = 16.0
    overflow: float = 0.01
    peak_rate: float | None = None
    max_sleep_s: float = 1.5
    bin_s: float = BIN_S
    name: str = "p-wica"

    @property
    def s(self) -> float:
        return -math.log(self.overflow) / self.buffer_pages

    def threshold(self, write_bw: float) -> float:
        """EB_th in pages/s."""
        peak = write_bw if self.peak_rate is None else self.peak_rate
        return peak * -math.expm1(-self.s)

    def reset(self, writers: int) -> None:
        self.m = np.zeros(writers)
        self.log_m = np.zeros(writers)     # ln M_m

    def effective_bandwidth(self) -> np.ndarray:
        """α_m per writer, pages/s (0 before the first block)."""
        return self.log_m / (self.s * self.bin_s)

    def step(self, counts: np.ndarray, view: View) -> np.ndarray:
        awake = view.awake > 0
        self.m = self.m + awake
        m = np.maximum(self.m, 1)
        with np.errstate(divide="ignore"):   # ln(1 - 1/m) is -inf for m = 1: M_0 drops out
            keep = np.log1p(-1 / m) + self.log_m
        updated = np.logaddexp(keep, self.s * np.asarray(counts, float) - np.log(m))
        self.log_m = np.where(awake, updated, self.log_m)
        eb = self.effective_bandwidth()
        th = self.threshold(view.write_bw)
        over = awake & (eb > th)
        sleep = np.minimum((eb - th) / th * self.max_sleep_s, self.max_sleep_s) * over
        self.m = np.where(over, 0, self.m)
        self.log_m = np.where(over, 0, self.log_m)
        return sleep


@dataclass
class LinuxDirty:
    """Linux's own dirty throttling (``balance_dirty_pages``, IO-less since 3.2), on the
    kernel's default ratios.

    With ``dirtyable`` pages, the background threshold is ``background_ratio`` of them
    and the hard limit L is ``dirty_ratio`` of them. Below the freerun point
    F = (background + L) / 2 writers run free. Above it each writer is held to
    ``task_ratelimit = balanced · pos_ratio``, where ``balanced`` shares the disk's write
    bandwidth among the writers dirtying now, and the global control line is
    pos_ratio = 1 + ((setpoint - dirty) / (L - setpoint))^3 with setpoint = (F + L) / 2,
    which is 2 at F, 1 at the setpoint and 0 at L. "Dirty" counts the pages under
    writeback too, as the kernel does. A writer that dirtied n pages in a bin of t seconds pauses
    n / task_ratelimit - t, at most ``max_pause_s`` (200 ms); at or above L it pauses the
    most.

    Simplifications: the kernel checks every few dozen pages, here every ``bin_s``
    (2 ms, the simulator's tick, which at these writers' speeds is 4-16 pages); it
    estimates the write bandwidth, here it is the disk's nominal one; the per-device and
    per-cgroup shares and the dirty_ratelimit feedback loop are left out.
    """

    background_ratio: float = 0.10
    dirty_ratio: float = 0.20
    max_pause_s: float = 0.200
    bin_s: float = 0.002
    name: str = "linux"

    def reset(self, writers: int) -> None:
        pass

    def pos_ratio(self, dirty: float, dirtyable: float) -> float:
        limit = self.dirty_ratio * dirtyable
        freerun = (self.background_ratio * dirtyable + limit) / 2
        setpoint = (freerun + limit) / 2
        return min(max(1 + ((setpoint - dirty) / (limit - setpoint)) ** 3, 0.0), 2.0)

    def step(self, counts: np.ndarray, view: View) -> np.ndarray:
        n = np.asarray(counts, float)
        dirty = view.dirty + view.writeback
        limit = self.dirty_ratio * view.dirtyable
        freerun = (self.background_ratio * view.dirtyable + limit) / 2
        if dirty < freerun:
            return np.zeros(len(n))
        if dirty >= limit:
            return np.where(n > 0, self.max_pause_s, 0.0)
        balanced = view.write_bw / max(int((n > 0).sum()), 1)
        ratelimit = balanced * self.pos_ratio(dirty, view.dirtyable)
        return np.clip(n / ratelimit - self.bin_s, 0, self.max_pause_s)


CONTROLLERS = {"none": NoControl, "d-wica": DWica, "p-wica": PWica, "linux": LinuxDirty}


def make(name: str):
    """A fresh controller by name (one of :data:`CONTROLLERS`), on its defaults."""
    return CONTROLLERS[name]()
