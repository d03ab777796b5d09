"""The figure of seed 001's experiment (:mod:`offloadlab.experiments.appcache`):

- the hit rate against the cache size, one line per session count (the graph of Table
  4.4);
- by sessions, for set-ups A, B and C (B and C at the operating cache size), the
  emulated cache solid and Squid dashed:
  - the host's CPU utilisation, with the engine's for C (Figures 4.4-4.6, averaged);
  - the mean page time (Figure 4.7);
  - the byte rate (Figure 4.8);
- model and simulator against the testbed: every run's host and engine utilisation,
  predicted against measured (:mod:`offloadlab.calibrate.appcache`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from offloadlab.report.plots import ENGINE, HOST, HOST_ALONE

COLORS = {"A": HOST_ALONE, "B": "tab:orange", "C": HOST}
# Line styles of the two caches (A has none).
STYLES = {"none": "o-", "emulated": "o-", "squid": "s--"}


def figure(points: pd.DataFrame, operating_mib: float,
           versus: pd.DataFrame | None = None) -> Figure | None:
    if points.empty:
        return None
    fig = Figure(figsize=(16, 8), layout="constrained")
    (hits, cpu, fit), (page, rate, engine_fit) = fig.subplots(2, 3)
    _hits(hits, points)
    at = points[(points["setup"] == "A") | (points["cache_mib"] == operating_mib)]
    _by_sessions(cpu, at, "host_util", 100, "host CPU (%)")
    for proxy, style in (("emulated", "s-"), ("squid", "s--")):
        engine = at[(at["setup"] == "C") & (at["proxy"] == proxy)].sort_values("sessions")
        if len(engine):
            cpu.plot(engine["sessions"], engine["engine_util"] * 100, style, color=ENGINE,
                     label=f"C: engine{', Squid' if proxy == 'squid' else ''}")
    cpu.legend(fontsize="small")
    _by_sessions(page, at, "page_mean_s", 1e3, "mean page time (ms)")
    _by_sessions(rate, at, "byte_rate", 1e-6, "byte rate (MB/s)")
    versus = versus if versus is not None else pd.DataFrame()
    _predicted(fit, versus, "host_util", "host CPU (%)")
    _predicted(engine_fit, versus[versus["setup"] == "C"] if len(versus) else versus,
               "engine_util", "engine CPU, C (%)")
    fig.suptitle(f"Object cache: A server alone, B cache on the host, C cache on the "
                 f"engine (B and C at {operating_mib:g} MiB; Squid dashed)")
    return fig


def _hits(ax: Axes, points: pd.DataFrame) -> None:
    for setup, proxy, style in (("C", "emulated", "o-"), ("B", "emulated", "x:"),
                                ("C", "squid", "s--"), ("B", "squid", "+-.")):
        rows = points[(points["setup"] == setup) & (points["proxy"] == proxy)]
        what = f"{setup}{' Squid' if proxy == 'squid' else ''}"
        for i, (n, g) in enumerate(rows.groupby("sessions")):
            g = g.sort_values("cache_mib")
            ax.plot(g["cache_mib"], g["hit_rate"] * 100, style, color=f"C{i}",
                    label=f"{what}, {n} sessions")
    ax.set_xscale("log")
    ax.set_xlabel("cache size (MiB)")
    ax.set_ylabel("hit rate (%)")
    ax.set_title("hit rate (Table 4.4)")
    ax.legend(fontsize="x-small", ncol=2)
    ax.grid(True, alpha=0.3)


def _predicted(ax: Axes, versus: pd.DataFrame, column: str, label: str) -> None:
    """Model and simulator against the testbed, one point per run, on log axes."""
    ax.set_title(f"{label}: predicted against measured")
    if versus.empty:
        ax.text(0.5, 0.5, "no fitted costs", ha="center", transform=ax.transAxes)
        return
    measured = versus[column].astype(float) * 100
    for source, marker in (("model", "o"), ("sim", "x")):
        ax.scatter(measured, versus[f"{source}_{column}"].astype(float) * 100, marker=marker,
                   label=source)
    finite = measured[np.isfinite(measured) & (measured > 0)]
    if len(finite):
        lo, hi = finite.min() / 2, finite.max() * 2
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=0.8, label="equal")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("testbed")
    ax.set_ylabel("predicted")
    ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)


def _by_sessions(ax: Axes, points: pd.DataFrame, column: str, scale: float,
                 label: str) -> None:
    for (setup, proxy), rows in points.groupby(["setup", "proxy"]):
        rows = rows.sort_values("sessions")
        values = rows[column].astype(float) * scale
        if np.isfinite(values).any():
            ax.plot(rows["sessions"], values, STYLES[proxy], color=COLORS[setup],
                    label=f"{setup}{' Squid' if proxy == 'squid' else ''}")
    ax.set_xscale("log")
    ax.set_xticks(sorted(points["sessions"].unique()))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("sessions")
    ax.set_ylabel(label)
    ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
