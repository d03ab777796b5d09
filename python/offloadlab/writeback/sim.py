"""The page cache flushing process with readers and bursty writers, time-stepped.

The pieces (reference 002 §4.1; units are pages of 4 KiB and seconds):

- **Writers** alternate bursts and pauses. In a burst a writer dirties pages at its own
  ``peak`` rate (Poisson within a tick) until the burst's pages are written; bursts are
  exponential or Pareto (heavy-tailed) in size, pauses exponential. A writer that is
  asleep (throttled) or waiting for a free page makes no progress, and finishes its
  burst later: writers are closed loops, so throttling costs them throughput.
- **Readers** are closed loops too: think (CPU) for ``think_s``, then one synchronous
  read that misses the cache and goes to the disk.
- **Memory** holds ``pages`` pages for the page cache: free, dirty, or under writeback.
  Dirty pages leave in the order they were dirtied (oldest first) through three paths:
  the *flusher*, from ``flush_ratio`` of memory dirty on, writes the excess; the
  *syncer*, every ``sync_period_s``, writes the pages dirty for ``expire_s`` or longer;
  the *page daemon* wakes when free pages fall below ``free_low``, stalls every
  allocation (readers and writers) and launders dirty pages, bypassing the I/O queue's
  limit, until ``free_high`` of memory is free again. Flusher and syncer submit only
  as far as the I/O queue (``queue_pages``) has room.
- **The disk** is one arm with a read-priority scheduler (NetBSD's RPRIO, §4.2): reads
  FCFS, writes in sorted batches of up to ``write_batch`` pages (one positioning, then
  transfer), the two served in turn while both wait, reads up to ``read_batch`` at a
  time. A batch is not preempted: a read that arrives while a flush batch is on the disk
  waits for it. That is the write congestion: readers stall behind flush bursts.

The controllers (:mod:`offloadlab.writeback.controllers`) see every writer's dirty
count each 20 ms bin and put writers to sleep. Workloads are drawn in advance per writer
(burst sizes, pauses, start times), so every controller faces the same writers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from offloadlab.errors import require
from offloadlab.writeback.controllers import BIN_S, View

PAGE_BYTES = 4096


@dataclass(frozen=True)
class Disk:
    """Reference 002 Table 4.3's 7,200 rpm SATA disk: 7.4 ms average seek plus 4.17 ms
    average rotational latency per positioning; 50 MB/s media transfer [assumed]."""

    position_s: float = 0.0074 + 0.00417
    page_s: float = PAGE_BYTES / 50e6
    write_batch: int = 128
    read_batch: int = 4

    @property
    def read_s(self) -> float:
        """One random read: a positioning and a page."""
        return self.position_s + self.page_s

    @property
    def write_bw(self) -> float:
        """Pages/s the disk writes in full batches, with no reads in between."""
        return self.write_batch / (self.position_s + self.write_batch * self.page_s)


@dataclass(frozen=True)
class Memory:
    """Page-cache memory and the flushing policy. The ratios are shares of ``pages``."""

    pages: int = 32768              # 128 MiB
    flush_ratio: float = 0.10       # Linux's dirty_background_ratio
    queue_pages: int = 1024         # 4 MiB of writes may wait in the I/O queue
    sync_period_s: float = 1.0      # NetBSD's syncer runs every second
    expire_s: float = 5.0           # Linux waits 30 s; shorter, so 30 s runs see it work
    free_low: float = 0.05
    free_high: float = 0.10


@dataclass(frozen=True)
class Writers:
    """``count`` alike writers. ``burst_alpha`` None: exponential bursts; else Pareto
    with that shape (> 1) and mean ``burst_pages``."""

    count: int
    peak: float                     # pages/s while in a burst
    burst_pages: float
    off_s: float                    # mean pause between bursts
    burst_alpha: float | None = None

    @property
    def mean_rate(self) -> float:
        """Pages/s of one writer left alone."""
        return self.burst_pages / (self.burst_pages / self.peak + self.off_s)


@dataclass(frozen=True)
class Readers:
    count: int = 1
    think_s: float = 0.002


@dataclass(frozen=True)
class Setup:
    """One simulated system. ``tick_s`` must divide the 20 ms controller bin."""

    writers: Writers
    readers: Readers = field(default_factory=Readers)
    disk: Disk = field(default_factory=Disk)
    memory: Memory = field(default_factory=Memory)
    duration_s: float = 30.0
    tick_s: float = 0.002
    start_s: float = 1.0            # writers start at uniform times in [0, start_s)

    def check(self) -> None:
        w, m = self.writers, self.memory
        require(w.count >= 0 and w.peak > 0 and w.burst_pages >= 1 and w.off_s >= 0,
                "writers: give count >= 0, peak > 0, burst_pages >= 1, off_s >= 0")
        require(w.burst_alpha is None or w.burst_alpha > 1,
                f"writers: burst_alpha={w.burst_alpha}: a Pareto burst needs a shape > 1 "
                "for a finite mean")
        require(self.readers.count >= 0 and self.readers.think_s >= 0,
                "readers: give count >= 0 and think_s >= 0")
        require(0 < m.free_low < m.free_high < 1 and 0 < m.flush_ratio < 1 - m.free_high,
                "memory: need 0 < free_low < free_high < 1 and 0 < flush_ratio < "
                "1 - free_high")
        bins = BIN_S / self.tick_s
        require(self.tick_s > 0 and abs(bins - round(bins)) < 1e-9,
                f"tick_s={self.tick_s}: use a tick that divides 20 ms, e.g. 0.002")
        require(self.duration_s >= 10 * BIN_S,
                f"duration_s={self.duration_s}: simulate at least 0.2 s")


@dataclass(frozen=True)
class Run:
    """One simulation's totals and its 20 ms series.

    Totals are over the whole run: ``reader_tps`` reads/s of all readers together,
    ``writer_pps`` pages/s dirtied by all writers together. ``series`` has one row per
    bin: ``t`` (bin end, s), ``dirty``, ``writeback``, ``free`` (pages at the bin's end),
    ``reads``, ``dirtied`` and ``written`` (in the bin) and ``daemon`` (the page daemon
    ran in it).
    """

    controller: str
    reader_tps: float
    writer_pps: float
    daemon_activations: int
    daemon_s: float
    sleep_s: float                  # sleep the controller commanded, summed over writers
    dirtied: int                    # pages dirtied in the run
    written: int                    # pages the disk wrote
    dirty_end: int
    writeback_end: int
    read_busy_s: float
    write_busy_s: float
    written_busy_s: float           # disk time of the completed write batches
    max_tick_busy_s: float          # the most disk time spent in any one tick
    series: dict[str, np.ndarray]

    def summary(self) -> dict:
        return {"controller": self.controller, "reader_tps": self.reader_tps,
                "writer_pps": self.writer_pps, "daemon_activations": self.daemon_activations,
                "daemon_s": self.daemon_s, "writer_sleep_s": self.sleep_s,
                "max_dirty": float(self.series["dirty"].max()),
                "mean_dirty": float(self.series["dirty"].mean())}


class _Disk:
    """The disk arm, advanced tick by tick; a job runs across ticks until it is done."""

    def __init__(self, disk: Disk):
        self.d = disk
        self.reads = 0                     # reads waiting
        self.queued = 0                    # write pages waiting for a batch
        self.kind = ""                     # "r", "w" or "" (idle)
        self.left = 0.0                    # time the current job still needs
        self.pages = 0                     # pages of the current write batch
        self.reads_in_turn = 0
        self.last = "w"

    def _next(self) -> None:
        want_read = self.reads and (not self.queued or self.last == "w"
                                    or self.reads_in_turn < self.d.read_batch)
        if want_read:
            self.reads -= 1
            self.kind, self.left = "r", self.d.read_s
            self.reads_in_turn = self.reads_in_turn + 1 if self.last == "r" else 1
        elif self.queued:
            self.pages = min(self.queued, self.d.write_batch)
            self.queued -= self.pages
            self.kind, self.left = "w", self.d.position_s + self.pages * self.d.page_s
        else:
            self.kind = ""
            return
        self.last = self.kind

    def advance(self, now: float, dt: float) -> tuple[list[float], int, float, float, float]:
        """Run the arm for ``dt`` from ``now``: completion times of reads, pages written,
        read and write busy time, and the disk time of the write batches completed."""
        done: list[float] = []
        written, busy_r, busy_w, batch_s = 0, 0.0, 0.0, 0.0
        budget = dt
        while budget > 1e-12:
            if not self.kind:
                self._next()
                if not self.kind:
                    break
            use = min(budget, self.left)
            self.left -= use
            budget -= use
            if self.kind == "r":
                busy_r += use
            else:
                busy_w += use
            if self.left <= 1e-12:
                if self.kind == "r":
                    done.append(now + dt - budget)
                else:
                    written += self.pages
                    batch_s += self.d.position_s + self.pages * self.d.page_s
                self.kind = ""
        return done, written, busy_r, busy_w, batch_s


def _draws(w: Writers, duration_s: float, rng: np.random.Generator
           ) -> tuple[np.ndarray, np.ndarray]:
    """Each writer's burst sizes (pages, >= 1) and pauses, more than a run can use."""
    cycles = math.ceil(duration_s / (w.burst_pages / w.peak + w.off_s)) * 4 + 16
    shape = (w.count, cycles)
    if w.burst_alpha is None:
        sizes = rng.exponential(w.burst_pages, shape)
    else:
        scale = w.burst_pages * (w.burst_alpha - 1) / w.burst_alpha
        sizes = scale * (1 + rng.pareto(w.burst_alpha, shape))
    return np.maximum(np.rint(sizes), 1).astype(np.int64), rng.exponential(w.off_s, shape)


def simulate(setup: Setup, controller, seed: int = 1) -> Run:
    """Run ``setup`` under ``controller`` (see :mod:`~offloadlab.writeback.controllers`)."""
    setup.check()
    rng = np.random.default_rng(seed)
    w, mem, disk = setup.writers, setup.memory, setup.disk
    dt, n = setup.tick_s, round(setup.duration_s / setup.tick_s)
    bin_ticks = round(BIN_S / dt)
    sizes, pauses = _draws(w, setup.duration_s, rng)
    cycles = sizes.shape[1]
    ids = np.arange(w.count)
    cycle = np.zeros(w.count, np.int64)
    left = np.zeros(w.count, np.int64)                 # pages left in the burst; 0: pausing
    resume = rng.uniform(0, setup.start_s, w.count)    # end of the current pause
    sleep_until = np.zeros(w.count)
    ctl_counts = np.zeros(w.count, np.int64)           # pages dirtied in the controller's bin
    awake_ticks = np.zeros(w.count)                    # ticks of the bin each could run
    ctl_ticks = max(1, round(controller.bin_s / dt))
    controller.reset(w.count)

    arm = _Disk(disk)
    ready = list(rng.uniform(0, setup.readers.think_s + disk.read_s, setup.readers.count))
    dirty = writeback = 0
    cum_dirtied = np.zeros(n + 1, np.int64)            # pages dirtied before tick i
    submitted = sync_target = 0
    daemon = False
    activations = reads = written = 0
    daemon_ticks = 0
    sleep_s = read_busy = write_busy = batch_busy = max_busy = 0.0
    bins = n // bin_ticks
    series = {k: np.zeros(bins) for k in ("t", "dirty", "writeback", "free", "reads",
                                          "dirtied", "written", "daemon")}
    bin_reads = bin_dirtied = bin_written = 0
    bin_daemon = False
    flush_at = mem.flush_ratio * mem.pages
    free_low, free_high = mem.free_low * mem.pages, math.ceil(mem.free_high * mem.pages)
    sync_every = round(mem.sync_period_s / dt)
    expire = round(mem.expire_s / dt)

    for i in range(n):
        now = i * dt
        free = mem.pages - dirty - writeback
        if not daemon and free < free_low:
            daemon, activations = True, activations + 1
        elif daemon and free >= free_high:
            daemon = False
        daemon_ticks += daemon
        bin_daemon |= daemon

        # Writers: start bursts that are due, then dirty pages if allowed to run.
        starting = (left == 0) & (resume <= now)
        if starting.any():
            left[starting] = sizes[ids[starting], cycle[starting] % cycles]
        runnable = (sleep_until <= now) & (not daemon)
        awake_ticks += runnable
        k = np.minimum(rng.poisson(w.peak * dt, w.count), left) * (runnable & (left > 0))
        if k.sum() > free:  # a page is dirtied only into a free page: the first ones win
            k = np.minimum(k, np.maximum(free - (np.cumsum(k) - k), 0))
        left -= k
        done = (left == 0) & (k > 0)
        if done.any():
            resume[done] = now + dt + pauses[ids[done], cycle[done] % cycles]
            cycle[done] += 1
        step_dirtied = int(k.sum())
        dirty += step_dirtied
        ctl_counts += k
        bin_dirtied += step_dirtied
        cum_dirtied[i + 1] = cum_dirtied[i] + step_dirtied

        # Flushing, oldest pages first: the page daemon, else flusher and syncer.
        if i % sync_every == 0 and i >= expire:
            sync_target = int(cum_dirtied[i - expire])
        if daemon:          # it launders what it needs, past the I/O queue's limit
            want = free_high - free - writeback
        else:
            want = min(max(dirty - flush_at, sync_target - submitted),
                       mem.queue_pages - writeback)
        submit = int(max(0, min(want, dirty)))
        dirty -= submit
        writeback += submit
        submitted += submit
        arm.queued += submit

        # Readers that finished thinking ask for a read; each needs a free page.
        if not daemon:
            due = [r for r in ready if r <= now]
            if due:
                ready = [r for r in ready if r > now]
                arm.reads += len(due)
        done_reads, pages, busy_r, busy_w, batch_s = arm.advance(now, dt)
        ready.extend(t + setup.readers.think_s for t in done_reads)
        reads += len(done_reads)
        bin_reads += len(done_reads)
        writeback -= pages
        written += pages
        bin_written += pages
        read_busy += busy_r
        write_busy += busy_w
        batch_busy += batch_s
        max_busy = max(max_busy, busy_r + busy_w)

        if (i + 1) % ctl_ticks == 0:
            view = View(awake=awake_ticks / ctl_ticks, dirty=dirty, writeback=writeback,
                        dirtyable=mem.pages, write_bw=disk.write_bw)
            sleep = controller.step(ctl_counts, view)
            sleep_s += float(sleep.sum())
            sleep_until = np.where(sleep > 0, np.maximum(sleep_until, now + dt + sleep),
                                   sleep_until)
            ctl_counts[:] = 0
            awake_ticks[:] = 0
        if (i + 1) % bin_ticks == 0:
            b = (i + 1) // bin_ticks - 1
            for key, value in (("t", round((i + 1) * dt, 9)), ("dirty", dirty),
                               ("writeback", writeback),
                               ("free", mem.pages - dirty - writeback), ("reads", bin_reads),
                               ("dirtied", bin_dirtied), ("written", bin_written),
                               ("daemon", bin_daemon)):
                series[key][b] = value
            bin_reads = bin_dirtied = bin_written = 0
            bin_daemon = False

    span = n * dt
    dirtied = int(cum_dirtied[-1])
    return Run(controller=controller.name, reader_tps=reads / span,
               writer_pps=dirtied / span, daemon_activations=activations,
               daemon_s=daemon_ticks * dt, sleep_s=sleep_s, dirtied=dirtied, written=written,
               dirty_end=dirty, writeback_end=writeback, read_busy_s=read_busy,
               write_busy_s=write_busy, written_busy_s=batch_busy, max_tick_busy_s=max_busy,
               series=series)
