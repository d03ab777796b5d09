"""Seed 000's experiment on today's host and on the seed's, and how much of a request's
protocol work each of today's host mechanisms takes away (issue 48): the host ladder,
from seed 000's host to today's one mechanism at a time.

The steps are :data:`offloadlab.testbed.host_profile.LADDER`, each the step before with
one mechanism more: seed-era (bodies copied through user space, served over a veth
pair with segmentation and transmit checksum offload off), then transmit checksum
offload, then TSO/GSO, then ``sendfile``, then loopback in place of the veth pair
(today's host, ``modern``). Every class runs at saturation (the study's closed-loop
saturation run), inline on every step and in each offload mode on the two ends, in
interleaved rounds, so that a spell of the machine falls on every step alike. The
median over the rounds counts.

- **What each mechanism takes off E[X_p]** (:attr:`Ladder.table`). At saturation the
  host thread never waits for work, so there are no wake-ups in its CPU per request:
  less the application's own account, that is the protocol work E[X_p] the host pays on
  that step, and the step before's less it is what the mechanism took away.
- **Both hosts side by side** (:attr:`Ladder.hosts`): per class and offload mode, the
  saturation and set-up ratios offload / inline on the seed-era host and on today's,
  beside the seed's, from runs made in the same rounds.

The preset ``toe-2009`` runs it after the study; it needs root, ``ip`` and
``ethtool`` (the veth pairs), and says so in the report when it cannot run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from offloadlab.errors import InputError
from offloadlab.mode_traits import BASELINE
from offloadlab.report.section import Section
from offloadlab.results import Check, jsonable
from offloadlab.study import seed_tables
from offloadlab.study.compare import generator_bound
from offloadlab.study.measure import Measured
from offloadlab.study.plan import Plan
from offloadlab.testbed import host_profile, netns

ROUNDS = 3
ENDS = (host_profile.LADDER[0], host_profile.LADDER[-1])
# One row per (class, step): the step's profile and the mechanism it adds, the medians
# over the rounds of the host thread's CPU per request (host_s), of its protocol part
# (EXp_s: less the application's account), of the host thread's busy share and of the
# throughput; removed_s, what the step's mechanism took off E[X_p] (the step before's
# less this one's; NaN on the first step), and removed_share, that as a share of the
# first step's E[X_p].
COLUMNS = ("class", "step", "profile", "adds", "host_s", "EXp_s", "U_host", "throughput",
           "removed_s", "removed_share")
# One row per (class, host at an end of the ladder, offload mode): medians of the
# saturation runs inline and in the mode, their ratio mode / inline and the seed's
# (TOE / Non-TOE connections per minute, one request each), the same for the mean
# connection set-up, and whether either run was bound by the load generator's core.
HOST_COLUMNS = ("class", "host", "mode", "inline_saturation", "offload_saturation",
                "ratio_saturation", "seed_ratio_saturation", "inline_connect_s",
                "offload_connect_s", "ratio_connect", "seed_ratio_connect",
                "generator_bound")
TITLE = "Seed 000's experiment: what today's host takes off E[X_p]"
HOSTS_TITLE = "Seed 000's experiment on both hosts"
CAPTION = (
    "Per size class, inline, at saturation (closed loop, zero think time), on each step "
    "of the host ladder: seed 000's host (bodies copied through user space, sent over a "
    "veth pair with TSO, GSO and transmit checksum offload off), then with each of "
    "today's mechanisms added in turn. E[X_p] is the host thread's CPU per request less "
    "the application's own account of its work; at saturation the thread never waits, so "
    "no wake-up cost is in it. 'Takes off' is what the step's mechanism removed from the "
    "step before's E[X_p], and its share of the seed-era host's. Medians of the rounds.")
HOSTS_CAPTION = (
    "Per size class and offload mode, saturation runs on the seed-era host and on today's, "
    "made in the same interleaved rounds as the ladder above: capacity and mean "
    "connection set-up offload / inline, ours beside the seed's (its connections per "
    "minute TOE / Non-TOE, one request per connection, and its Table 4-3). Where the load "
    "generator's core bounded a run (on 2 cores it shares the engine's), the ratio is the "
    "client's, not the server's. Medians of the rounds.")
SKIPPED = ("Not run: the ladder's steps serve from a network namespace over a veth pair, "
           "which needs root, ip and ethtool ({reason}).")


@dataclass(frozen=True)
class Ladder:
    """The ladder's ``table`` (:data:`COLUMNS`) and ``hosts`` (:data:`HOST_COLUMNS`),
    None when it could not run (``reason`` says why), and the rounds it took."""

    table: pd.DataFrame | None
    hosts: pd.DataFrame | None
    rounds: int
    reason: str = ""

    def sections(self, checks: Sequence[Check] = ()) -> list[Section]:
        """Both hosts side by side (with ``checks``, seed 000's shape on each), then the
        ladder's steps; one section saying why when it did not run."""
        if self.table is None:
            return [Section(TITLE, CAPTION, SKIPPED.format(reason=self.reason))]
        steps = " → ".join(p.name for p in host_profile.LADDER)
        return [
            Section(HOSTS_TITLE, HOSTS_CAPTION, f"{self.rounds} rounds.", self.hosts,
                    {"class": ("class", "text"), "host": ("host", "text"),
                     "mode": ("mode", "text"),
                     "inline_saturation": ("saturation inline (req/s)", "number"),
                     "offload_saturation": ("in the mode (req/s)", "number"),
                     "ratio_saturation": ("× ours", "number"),
                     "seed_ratio_saturation": ("× seed", "number"),
                     "inline_connect_s": ("set-up inline", "ms"),
                     "offload_connect_s": ("in the mode", "ms"),
                     "ratio_connect": ("× ours", "number"),
                     "seed_ratio_connect": ("× seed", "number"),
                     "generator_bound": ("load generator the bottleneck", "text")},
                    checks),
            Section(TITLE, CAPTION, f"Steps: {steps}; {self.rounds} rounds.", self.table,
                    {"class": ("class", "text"), "profile": ("step", "text"),
                     "adds": ("adds", "text"), "EXp_s": ("E[X_p]", "us"),
                     "removed_s": ("takes off", "us"),
                     "removed_share": ("of the seed-era E[X_p]", "share"),
                     "throughput": ("capacity (req/s)", "number"),
                     "U_host": ("host thread busy", "share")})]

    def summary(self) -> dict:
        def rows(frame: pd.DataFrame | None) -> list | None:
            return None if frame is None else frame.to_dict("records")
        return jsonable({"rounds": self.rounds, "reason": self.reason or None,
                         "steps": rows(self.table), "hosts": rows(self.hosts)})


def load_seconds(plan: Plan, rounds: int = ROUNDS) -> float:
    """Seconds of load the ladder takes (without server start-up)."""
    runs = len(host_profile.LADDER) + len(ENDS) * len(plan.offload_modes)
    return rounds * runs * len(plan.classes) * plan.budget.saturation_s


def run(plan: Plan, measure: Callable[..., Measured], rounds: int = ROUNDS,
        progress: Callable[[str, float, float], None] | None = None) -> Ladder:
    """Every class of ``plan`` at saturation, inline on every step and in the plan's
    offload modes on the ends, ``rounds`` rounds (``measure`` as the study's: made
    again when disturbed). A machine that cannot make a network namespace gives a
    :class:`Ladder` that says why instead."""
    try:
        netns.check()
    except InputError as exc:
        return Ladder(None, None, rounds, str(exc))
    tick = progress or (lambda phase, done, total: None)
    total, done = load_seconds(plan, rounds), 0.0
    runs: dict[tuple[str, str, str], list[Measured]] = {}
    for _, step in itertools.product(range(rounds), host_profile.LADDER):
        modes = (BASELINE, *plan.offload_modes) if step in ENDS else (BASELINE,)
        with step.hosting() as namespace:
            on_step = replace(plan, host_profile=step.name,
                              netns=namespace and namespace.name)
            for load, mode in itertools.product(plan.classes, modes):
                tick("host ladder", done, total)
                m = measure(on_step, load, mode, "saturation", 0.0)
                runs.setdefault((load.name, step.name, mode), []).append(m)
                done += plan.budget.saturation_s
    tick("host ladder", total, total)
    return Ladder(table(plan, runs), hosts(plan, runs), rounds)


def ratio(offload: float, inline: float) -> float:
    """offload / inline; NaN where inline is not a positive number."""
    return offload / inline if inline > 0 else np.nan


def _median(ms: list[Measured], value: Callable[[Measured], float]) -> float:
    return float(np.median([value(m) for m in ms]))


def table(plan: Plan, runs: dict) -> pd.DataFrame:
    """The ladder's rows, steps in ladder order."""
    rows = []
    for load in plan.classes:
        first = previous = np.nan
        for i, step in enumerate(host_profile.LADDER):
            ms = runs[load.name, step.name, BASELINE]
            exp = _median(ms, lambda m: m.run.host_s - m.run.app_s)
            first = exp if i == 0 else first
            removed = previous - exp
            rows.append({"class": load.name, "step": i, "profile": step.name,
                         "adds": step.adds, "host_s": _median(ms, lambda m: m.run.host_s),
                         "EXp_s": exp, "U_host": _median(ms, lambda m: m.U_host),
                         "throughput": _median(ms, lambda m: m.run.throughput),
                         "removed_s": removed,
                         "removed_share": removed / first if first > 0 else np.nan})
            previous = exp
    return pd.DataFrame(rows, columns=list(COLUMNS))


def hosts(plan: Plan, runs: dict) -> pd.DataFrame:
    """Offload against inline on each end of the ladder, beside the seed's ratios."""
    rows = []
    for load, step, mode in itertools.product(plan.classes, ENDS, plan.offload_modes):
        inline, offload = runs[load.name, step.name, BASELINE], runs[load.name, step.name, mode]
        values = {}
        for name, value in (("saturation", lambda m: m.run.throughput),
                            ("connect_s", lambda m: m.connect_s)):
            values[f"inline_{name}"] = _median(inline, value)
            values[f"offload_{name}"] = _median(offload, value)
        seed = load.size_class
        connect = seed_tables.CONNECT_S.get(seed, (np.nan, np.nan))
        rows.append({
            "class": load.name, "host": step.name, "mode": mode, **values,
            "ratio_saturation": ratio(values["offload_saturation"], values["inline_saturation"]),
            "seed_ratio_saturation": (seed_tables.conn_per_min_ratio(seed)
                                      if seed in seed_tables.CONN_PER_MIN_CHANGE else np.nan),
            "ratio_connect": ratio(values["offload_connect_s"], values["inline_connect_s"]),
            "seed_ratio_connect": ratio(connect[1], connect[0]),
            "generator_bound": any(generator_bound(m, plan.engine_core)
                                   for m in (*inline, *offload))})
    return pd.DataFrame(rows, columns=list(HOST_COLUMNS))
