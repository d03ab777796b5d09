"""Seed 000's experiment as a study (``offload study --preset toe-2009``), and its part
of the report: the seed's Tables 4-1, 4-3 and 4-4 (and Fig. 4-11's connections per
minute) with ours beside them.

The preset fixes what the seed measured: size classes 0-4 on seed 000's file sets, each
class on its own, with no offload (inline, the seed's "Non-TOE") and through the engine
(the seed's TOE). Every other flag (budget, run length, cores, ...) still applies.

Ours come from the study's saturation runs (``StudyTables.saturation``); the seed's from
:mod:`offloadlab.study.seed_tables`. Any study on seed 000's file sets gets the section,
for the classes it ran, each offload mode it ran beside the seed's TOE.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from offloadlab.mode_traits import BASELINE, traits
from offloadlab.report.section import Section
from offloadlab.results import Check, jsonable
from offloadlab.study import host_ladder, seed_tables
from offloadlab.study import plan as study_plan
from offloadlab.study_tables import StudyTables
from offloadlab.testbed import host_profile
from offloadlab.workload.classes import CLASSES, class_name

NAME = "toe-2009"
# What --preset toe-2009 studies: every class, with no offload and through the engine.
PRESET_CLASSES = CLASSES
PRESET_MODES = "inline,engine"
# Seed 000's shape (reference 000 §5.3; issue 48's targets): offload hurts or is neutral
# up to this saturation ratio for classes 0-1 and helps above it for classes 2-4, more as
# files grow; connection set-up with the engine is no slower than inline for classes 0-2.
NEUTRAL_RATIO = 1.05
SMALL, LARGE, SETUP = (0, 1), (2, 3, 4), (0, 1, 2)


class Quantity(NamedTuple):
    """One of the seed's quantities: our column in the saturation table, the unit suffix
    its values' column names end with, the seed's (Non-TOE, TOE) per class (None: the seed
    gives only the ratio, seed_tables.conn_per_min_ratio), and its name for people."""

    ours: str
    suffix: str
    seed: dict[int, tuple[float, float]] | None
    label: str


QUANTITIES: dict[str, Quantity] = {
    "saturation": Quantity("measured", "", seed_tables.SATURATION, "saturation"),
    "conn_per_min": Quantity("conn_per_min", "", None, "connections/min"),
    "connect": Quantity("connect_s", "_s", seed_tables.CONNECT_S, "set-up"),
    "goodput": Quantity("goodput_Bps", "_Bps", seed_tables.GOODPUT_BPS, "goodput"),
}
VALUES = ("inline", "offload", "seed_inline", "seed_offload")
RATIOS = ("ratio", "seed_ratio")
# One row per (class, offload mode); per quantity ours inline and in the mode, the
# seed's Non-TOE and TOE, our ratio mode / inline and the seed's TOE / Non-TOE; then
# whether either saturation run was bound by the load generator rather than the
# server, and the saturation ratio the model predicts with the generator on cores of
# its own (what such a run could not measure on this machine).
COLUMNS: tuple[str, ...] = ("class", "mode", *(
    name for q, quantity in QUANTITIES.items()
    for name in (*(f"{side}_{q}{quantity.suffix}" for side in VALUES),
                 *(f"{side}_{q}" for side in RATIOS))),
    "generator_bound", "model_ratio_elsewhere")

_CONN_CHANGES = ", ".join(f"class {c} {change:+.0%}"
                          for c, change in seed_tables.CONN_PER_MIN_CHANGE.items())
# Per section, in the seed's order: the title, the quantity, its unit, how its values
# read (report.section.Section.columns) and the caption.
_SECTIONS = (
    ("saturation (its Table 4-1)", "saturation", "req/s", "number",
     "Per size class, ours at saturation (closed loop, HTTP/1.0, zero think time) inline "
     "and in the offload mode, beside seed 000's Apache 2.2 alone (Non-TOE) and through "
     "its TOE emulator (TOE), and the ratios offload / inline, ours and the seed's; – : "
     "the seed gives no number (its Table 4-1 has classes 2-4). The seed's shape: offload "
     "hurts classes 0-1, helps classes 2-4 more as files grow, and sets connections up "
     "about 3 times faster. The checks below hold ours to that shape. On 2 cores the load "
     "generator shares the engine's core; where it, not the server, bounded a saturation "
     "run, the row says so, and the last column gives the ratio the fitted model predicts "
     "with the generator on cores of its own (the engine's core without its other work)."),
    ("connections per minute (its Fig. 4-11)", "conn_per_min", "", "number",
     "Connections completed per minute in the saturation runs (one request each). The seed "
     f"gives no numbers, only TOE's change ({_CONN_CHANGES}), read as (TOE - Non-TOE) / "
     "TOE as reference 000 reads its goodput's."),
    ("connection set-up (its Table 4-3)", "connect", "ms", "ms",
     "Mean TCP connection set-up time the load generator measured in the saturation runs. "
     "The seed's TOE set connections up about 3 times faster for classes 0-2, and slower "
     "for class 4, where its front-end PC was saturated."),
    ("goodput (its Table 4-4)", "goodput", "MiB/s", "MiBps",
     "Response body bytes per second in the saturation runs, in MiB/s (the seed's MB/s is "
     "1,048,576 B/s and its KB/s 1024 B/s)."),
)


def on_seed_filesets(the_plan: study_plan.Plan) -> bool:
    """The study served seed 000's file sets (no --fileset or --trace), so its classes are
    the seed's classes and their files alike."""
    return the_plan.floors_key == study_plan.SEED_FILESETS


@dataclass(frozen=True)
class Comparison:
    """Ours beside the seed's (``table``, :data:`COLUMNS`), measured on ``host_profile``,
    and (the preset) what each of today's host mechanisms takes off E[X_p]."""

    table: pd.DataFrame
    host_profile: str
    ladder: host_ladder.Ladder | None = None

    def checks(self) -> list[Check]:
        """Seed 000's shape, checked on the study's saturation and set-up ratios."""
        return shape_checks(self.table)

    def ladder_checks(self) -> list[Check]:
        """Seed 000's shape on each host at the ends of the ladder."""
        hosts = self.ladder.hosts if self.ladder is not None else None
        if hosts is None:
            return []
        return [check for host, rows in hosts.groupby("host", sort=False)
                for check in shape_checks(rows, f"{host} host, ")]

    def sections(self) -> list[Section]:
        """One section per table of the seed's, in its layout; the first says how ours
        ran and carries the checks of the seed's shape."""
        setup = (f"Host profile: {self.host_profile} "
                 f"({host_profile.named(self.host_profile).about}; --host-profile). Ours "
                 "from the study's saturation runs on seed 000's file sets; the seed's from "
                 "reference 000 §5.")
        return [*(Section(f"Seed 000's experiment: {title}", caption, setup if i == 0 else "",
                          self.table, _columns(q, unit, how), self.checks() if i == 0 else ())
                  for i, (title, q, unit, how, caption) in enumerate(_SECTIONS)),
                *([] if self.ladder is None else self.ladder.sections(self.ladder_checks()))]

    def summary(self) -> dict:
        """summary.json's part: the host profile, the rows and the checks."""
        return jsonable({"host_profile": self.host_profile,
                         "rows": self.table.to_dict("records"),
                         "checks": [vars(c) for c in self.checks() + self.ladder_checks()],
                         "host_ladder": None if self.ladder is None else self.ladder.summary()})


def compare(the_plan: study_plan.Plan, tables: StudyTables,
            ladder: host_ladder.Ladder | None = None) -> Comparison | None:
    """Ours beside the seed's for every class the study ran on seed 000's file sets, in
    each offload mode it ran, with the host ``ladder`` if it ran; None for a study of
    other files."""
    if not on_seed_filesets(the_plan):
        return None
    sat = tables.saturation.set_index(["class", "mode"])
    rows = []
    for c in CLASSES:
        name = class_name(c)
        if (name, BASELINE) not in sat.index:
            continue
        for mode in the_plan.modes:
            if traits(mode).engine_thread and (name, mode) in sat.index:
                rows.append(_row(c, mode, sat.loc[(name, BASELINE)], sat.loc[(name, mode)]))
    return Comparison(pd.DataFrame(rows, columns=list(COLUMNS)), the_plan.host_profile, ladder)


def _row(c: int, mode: str, inline: pd.Series, offload: pd.Series) -> dict:
    row: dict = {"class": class_name(c), "mode": mode}
    for q, (ours, suffix, seed, _) in QUANTITIES.items():
        values = (float(inline[ours]), float(offload[ours]),
                  *((math.nan, math.nan) if seed is None else seed.get(c, (math.nan,) * 2)))
        row |= {f"{side}_{q}{suffix}": v for side, v in zip(VALUES, values, strict=True)}
        row |= {f"ratio_{q}": host_ladder.ratio(values[1], values[0]),
                f"seed_ratio_{q}": (seed_tables.conn_per_min_ratio(c) if seed is None
                                    else host_ladder.ratio(values[3], values[2]))}
    return row | {"generator_bound": bool(inline["generator_bound"] or offload["generator_bound"]),
                  "model_ratio_elsewhere": host_ladder.ratio(
                      float(offload["model_elsewhere"]), float(inline["model_elsewhere"]))}


def _of(ratios: dict[str, float], classes: tuple[int, ...]) -> dict[str, float]:
    """The finite ratios of ``classes``, in class order."""
    return {class_name(c): ratios[class_name(c)] for c in classes
            if math.isfinite(ratios.get(class_name(c), math.nan))}


def shape_checks(table: pd.DataFrame, where: str = "") -> list[Check]:
    """Seed 000's shape, checked on ``table``'s saturation and set-up ratios (columns
    ``ratio_saturation``, ``ratio_connect``) per offload mode, where it has the classes
    a claim is about; ``where`` starts each check's name."""
    found = []
    for mode, rows in table.groupby("mode", sort=False):
        saturation = dict(zip(rows["class"], rows["ratio_saturation"], strict=True))
        setup = dict(zip(rows["class"], rows["ratio_connect"], strict=True))
        if small := _of(saturation, SMALL):
            found.append(Check(
                f"{where}{mode}: offload hurts or is neutral for classes 0-1 (saturation × "
                f"at most {NEUTRAL_RATIO:g})",
                all(r <= NEUTRAL_RATIO for r in small.values()), _listed(small)))
        if large := _of(saturation, LARGE):
            values = list(large.values())
            found.append(Check(
                f"{where}{mode}: offload helps classes 2-4, more as files grow (saturation × "
                f"above {NEUTRAL_RATIO:g}, rising with class)",
                all(r > NEUTRAL_RATIO for r in values)
                and all(a < b for a, b in itertools.pairwise(values)),
                _listed(large)))
        if quick := _of(setup, SETUP):
            found.append(Check(
                f"{where}{mode}: connection set-up no slower than inline for classes 0-2 "
                "(the seed's: about 3 times faster)",
                all(r <= 1 for r in quick.values()), _listed(quick)))
    return found


def _listed(ratios: dict[str, float]) -> str:
    return ", ".join(f"{name} ×{r:.2f}" for name, r in ratios.items())


def _columns(q: str, unit: str, how: str) -> dict[str, tuple[str, str]]:
    """The section's columns of quantity ``q``: the seed's beside ours, then the ratios."""
    label, suffix = QUANTITIES[q].label, QUANTITIES[q].suffix
    heading = f"{label} ({unit})" if unit else label
    columns = {"class": ("class", "text"), "mode": ("mode", "text"),
               f"inline_{q}{suffix}": (f"{heading}, ours inline", how),
               f"seed_inline_{q}{suffix}": (f"{heading}, seed Non-TOE", how),
               f"offload_{q}{suffix}": (f"{heading}, ours in the mode", how),
               f"seed_offload_{q}{suffix}": (f"{heading}, seed TOE", how),
               f"ratio_{q}": ("× ours (mode / inline)", "number"),
               f"seed_ratio_{q}": ("× seed (TOE / Non-TOE)", "number")}
    if q == "saturation":
        columns |= {"generator_bound": ("load generator the bottleneck", "text"),
                    "model_ratio_elsewhere": ("× model, generator on its own cores",
                                              "number")}
    return columns
