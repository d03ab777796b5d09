"""The figure of ``offload writeback run``: dirty pages and reader throughput over time,
under the chosen controller and under none (:mod:`offloadlab.writeback`)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from offloadlab.writeback.controllers import BIN_S
from offloadlab.writeback.sim import Run, Setup

# Reader throughput is drawn per half second: 20 ms bins hold one or two reads.
WINDOW_S = 0.5


def _windowed(series: dict[str, np.ndarray], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-second rate of ``key`` in windows of WINDOW_S, stamped at each window's end."""
    per = round(WINDOW_S / BIN_S)
    whole = len(series["t"]) // per * per
    sums = series[key][:whole].reshape(-1, per).sum(axis=1)
    return series["t"][per - 1:whole:per], sums / WINDOW_S


def figure(setup: Setup, run: Run, none: Run, scenario: str, alone_tps: float) -> Figure:
    fig = Figure(figsize=(8, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    flush_at = setup.memory.flush_ratio * setup.memory.pages
    for r, style in ((none, "--"), (run, "-")):
        s = r.series
        top.plot(s["t"], s["dirty"], style, label=f"dirty, {r.controller}")
        top.plot(s["t"], s["writeback"], style, alpha=0.6, label=f"under writeback, "
                                                                  f"{r.controller}")
        t, tps = _windowed(s, "reads")
        bottom.plot(t, tps, style, label=r.controller)
    top.axhline(flush_at, color="0.5", lw=0.8, ls=":", label="flush threshold")
    daemon = run.series["daemon"] > 0
    if daemon.any():
        top.fill_between(run.series["t"], 0, 1, where=daemon, color="tab:red", alpha=0.15,
                         transform=top.get_xaxis_transform(), label="page daemon runs")
    bottom.axhline(alone_tps, color="0.5", lw=0.8, ls=":", label="readers alone")
    top.set_ylabel("pages")
    top.set_title(f"{scenario}: {run.controller} against none")
    top.legend(fontsize="small", ncols=2)
    bottom.set_ylabel(f"reader throughput (reads/s, {WINDOW_S:g} s windows)")
    bottom.set_xlabel("time (s)")
    bottom.set_ylim(bottom=0)
    bottom.legend(fontsize="small")
    return fig
