"""The figure of the online placement experiment (:mod:`offloadlab.experiments.online`):
over time, the online policy's offload fraction per size class and the engine's
measured utilisation against the model's prediction; the mean latency of every policy
in 0.5 s bins; and each policy's mean latency per phase. Phases are shaded and labelled
along the top."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from offloadlab.report.plots import ENGINE

ONLINE_COLOR = "black"


def figure(runs: pd.DataFrame, steps: pd.DataFrame, latency: pd.DataFrame,
           phases: list[str], ends_s: list[float]) -> Figure | None:
    """``phases`` are the phases' labels, ``ends_s`` their end times."""
    if runs.empty:
        return None
    fig = Figure(figsize=(11, 9.5), layout="constrained")
    grid = fig.add_gridspec(3, 2, width_ratios=(2.2, 1))
    top, mid, low = (fig.add_subplot(grid[i, 0]) for i in range(3))
    mid.sharex(top)
    low.sharex(top)
    bars = fig.add_subplot(grid[:, 1])
    first = steps[steps["repeat"] == steps["repeat"].min()] if not steps.empty else steps
    _fractions(top, first)
    _engine(mid, first)
    _latency(low, latency)
    for ax in (top, mid, low):
        _shade(ax, ends_s)
    for i, (label, end) in enumerate(zip(phases, ends_s, strict=True)):
        start = ends_s[i - 1] if i else 0.0
        top.annotate(label.split(":", 1)[1], ((start + end) / 2, 1.02),
                     xycoords=("data", "axes fraction"), ha="center", fontsize="small")
    low.set_xlabel("time (s)")
    _per_phase(bars, runs, len(phases))
    return fig


def _fractions(ax: Axes, steps: pd.DataFrame) -> None:
    cols = [c for c in steps.columns if c.startswith("f") and c[1:].isdigit()]
    rates = steps[[f"rate{c[1:]}" for c in cols if f"rate{c[1:]}" in steps]].fillna(0)
    for col in cols:
        c = col[1:]
        if f"rate{c}" in rates and rates[f"rate{c}"].max() > 0:
            ax.step(steps["t_s"], steps[col], where="post", label=f"class {c}")
    alarms = steps[steps["alarm"]]
    if not alarms.empty:
        ax.plot(alarms["t_s"], np.full(len(alarms), 1.05), "v", color="tab:red",
                label="lag alarm")
    ax.set_ylim(-0.05, 1.12)
    ax.set_ylabel("offloaded share")
    ax.set_title("online policy: offload fraction per class", pad=16)
    ax.legend(fontsize="small", loc="center right")
    ax.grid(True, alpha=0.3)


def _engine(ax: Axes, steps: pd.DataFrame) -> None:
    ax.plot(steps["t_s"], steps["u_engine"], color=ENGINE, label="engine, measured")
    ax.plot(steps["t_s"], steps["u_engine_predicted"], color=ENGINE, linestyle="--",
            label="engine, predicted last period")
    ax.plot(steps["t_s"], steps["u_host"], color="tab:blue", label="host, measured (window)")
    ax.set_ylabel("utilisation")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize="small", loc="upper right")
    ax.grid(True, alpha=0.3)


def _latency(ax: Axes, latency: pd.DataFrame) -> None:
    for name, rows in latency.groupby("policy", sort=False):
        first = rows[rows["repeat"] == rows["repeat"].min()]
        style = {"color": ONLINE_COLOR, "linewidth": 2.2} if name == "online" else {
            "linewidth": 1.0, "alpha": 0.8}
        ax.plot(first["t_s"], first["mean_s"] * 1e3, label=name, **style)
    ax.set_yscale("log")
    ax.set_ylabel("mean response time (ms)")
    ax.legend(fontsize="small", ncol=3)
    ax.grid(True, which="both", alpha=0.3)


def _shade(ax: Axes, ends_s: list[float]) -> None:
    for i, end in enumerate(ends_s):
        if i % 2:
            ax.axvspan(ends_s[i - 1], end, color="0.92", zorder=0)


def _per_phase(ax: Axes, runs: pd.DataFrame, phases: int) -> None:
    cols = ["mean_s", *(f"phase{i}_mean_s" for i in range(phases))]
    med = runs.groupby("policy", sort=False)[cols].median()
    y = np.arange(len(med))
    height = 0.8 / len(cols)
    for j, col in enumerate(cols):
        label = "whole run" if col == "mean_s" else f"phase {col[5:-7]}"
        ax.barh(y + (j - (len(cols) - 1) / 2) * height, med[col] * 1e3, height,
                label=label, color="0.2" if col == "mean_s" else None)
    ax.set_yticks(y, med.index)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("mean response time (ms), median of repeats")
    ax.set_title("mean latency per policy")
    ax.legend(fontsize="small")
    ax.grid(True, axis="x", which="both", alpha=0.3)
