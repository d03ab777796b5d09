"""Named scenarios after reference 002 §4.8, and every controller run on them.

The thesis ran one reader against one, three and twenty Postmark writers on a 7,200 rpm
disk. Its Postmark parameters do not map onto page rates, so the scenarios keep its
shapes instead: light and smooth, heavy and bursty, and so many writers that the page
daemon must run. Each is a :class:`~offloadlab.writeback.sim.Setup`; with the same seed
every controller faces the same writers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from offloadlab.errors import InputError
from offloadlab.writeback import controllers
from offloadlab.writeback.sim import Readers, Run, Setup, Writers, simulate

SCENARIOS: dict[str, tuple[str, Setup]] = {
    "light-smooth": (
        "two readers, one writer dirtying a steady 4 MB/s in long runs",
        Setup(Writers(1, peak=1000, burst_pages=4000, off_s=0.2), Readers(2))),
    "heavy-bursty": (
        "two readers, three writers with heavy-tailed bursts (Pareto 1.5, mean 6 MB) "
        "at 32 MB/s and 3 s pauses",
        Setup(Writers(3, peak=8000, burst_pages=1500, off_s=3.0, burst_alpha=1.5),
              Readers(2))),
    "many-writers": (
        "two readers, twenty of light-smooth's writers: together far more than the "
        "disk can write",
        Setup(Writers(20, peak=1000, burst_pages=4000, off_s=0.2), Readers(2))),
}


@dataclass(frozen=True)
class Row:
    """One controller on one scenario; ``reader_gain`` is against no control and
    ``reader_loss`` against the readers alone (no writer)."""

    scenario: str
    run: Run
    reader_alone_tps: float
    reader_none_tps: float

    @property
    def reader_gain(self) -> float:
        return self.run.reader_tps / self.reader_none_tps - 1

    @property
    def reader_loss(self) -> float:
        return 1 - self.run.reader_tps / self.reader_alone_tps

    def record(self) -> dict:
        return {"scenario": self.scenario, **self.run.summary(),
                "reader_gain": self.reader_gain, "reader_loss": self.reader_loss,
                "reader_alone_tps": self.reader_alone_tps}


def parse(names: str, known, what: str, flag: str) -> list[str]:
    """``all`` or comma-separated names out of ``known``; errors name the flag."""
    if names.strip() == "all":
        return list(known)
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    bad = [n for n in chosen if n not in known]
    if not chosen or bad:
        raise InputError(f"{flag} {names!r}: unknown {what} {', '.join(bad) or '(none)'}; "
                         f"use all or some of {', '.join(known)}, comma-separated")
    return chosen


def setup(name: str, duration_s: float | None = None) -> Setup:
    s = SCENARIOS[name][1]
    return s if duration_s is None else replace(s, duration_s=duration_s)


def alone(s: Setup, seed: int) -> float:
    """The readers' throughput with no writer at all."""
    return simulate(replace(s, writers=replace(s.writers, count=0)),
                    controllers.NoControl(), seed).reader_tps


def compare(names: list[str], controller_names: list[str], seed: int = 1,
            duration_s: float | None = None, progress=None) -> list[Row]:
    """Every controller in ``controller_names`` on every scenario in ``names``."""
    rows = []
    for name in names:
        s = setup(name, duration_s)
        base = alone(s, seed)
        none = simulate(s, controllers.NoControl(), seed)
        for c in controller_names:
            if progress:
                progress(name, c)
            run = none if c == "none" else simulate(s, controllers.make(c), seed)
            rows.append(Row(name, run, base, none.reader_tps))
    return rows
