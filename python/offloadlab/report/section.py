"""An experiment's part of a report, in terms the report shows for any experiment.

A result that a report shows makes its :class:`Section` (``section()``, beside the
protocol's ``tables()``, ``summary()``, ``checks()`` and ``figures()``:
:mod:`offloadlab.experiments.protocol`); :func:`offloadlab.report.html.write_report`
renders every section it is handed alike, and names no experiment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from offloadlab.results import Check

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Section:
    """A heading and what it shows; how the experiment ran (a sentence or two, "" for
    none); its ``table``, None when it did not run (the section says so); ``columns``,
    the table's columns shown, in order, each with its header and how its values read
    (``text``; ``number``, 3 significant digits; ``ms`` and ``us`` from seconds;
    ``share``, a fraction as %; ``change``, a ratio as a signed % change; ``count``;
    ``MiBps``, bytes/s as MiB/s);
    the paper's claims checked; ``figures``, file name -> the figure (None: nothing
    drawn) and its caption, shown among the report's figures."""

    title: str
    caption: str
    setup: str = ""
    table: pd.DataFrame | None = None
    columns: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    checks: Sequence[Check] = ()
    figures: Mapping[str, tuple[Figure | None, str]] = field(default_factory=dict)
