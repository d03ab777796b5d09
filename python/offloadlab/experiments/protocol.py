"""What every experiment is, and the one writer of its output folder.

An experiment is a frozen dataclass of its settings with ``describe()`` (the settings
for ``summary.json``) and ``check()`` (its inputs and what the machine must have, before
any run). Its module's ``run(exp, progress)`` returns a result with ``tables()`` (file
name -> DataFrame, or a JSON document under a ``.json`` name that other commands read;
None for one not made), ``summary()`` (what ``summary.json`` holds besides the
settings, the checks and the figures' names), ``checks()`` (a paper's claims against
the numbers) and ``figures()`` (file name -> Figure, None where there was nothing to
draw). :func:`write` turns that into the folder. A result that a report shows (the
study's, :mod:`offloadlab.study.pipeline`) also has ``section()``: its title, what it
shows, how the experiment ran, the table, the checks and the figures with their
captions as a :class:`~offloadlab.report.section.Section`, which the report renders as
it renders any experiment's.

Every testbed experiment follows it: :mod:`~offloadlab.experiments.handoff`,
:mod:`~offloadlab.experiments.online`, :mod:`~offloadlab.experiments.wait`,
:mod:`~offloadlab.experiments.hybrid`, :mod:`~offloadlab.experiments.multitier`,
:mod:`~offloadlab.experiments.appcache` and :mod:`~offloadlab.experiments.nic`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pandas as pd

from offloadlab.results import Check, write_outputs

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class Experiment(Protocol):
    def describe(self) -> dict: ...

    def check(self) -> None: ...


class Result(Protocol):
    def tables(self) -> dict[str, pd.DataFrame | dict | None]: ...

    def summary(self) -> dict: ...

    def checks(self) -> list[Check]: ...

    def figures(self) -> dict[str, Figure | None]: ...


def write(out_dir: str | Path, exp: Experiment, result: Result) -> list[str]:
    """Every table and figure of ``result``, then ``summary.json`` (last, so that it
    exists only once what it describes does); returns the names written."""
    figures = result.figures()
    summary = {"experiment": exp.describe(), **result.summary(),
               "checks": [vars(c) for c in result.checks()],
               "figures": [name for name, fig in figures.items() if fig is not None]}
    return write_outputs(out_dir, {**result.tables(), **figures, "summary.json": summary})
