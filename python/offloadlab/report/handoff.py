"""Figures and the summary table of seed 004's connection-handoff experiment matrix
(Kim & Rixner, OSDI '06; reference 004 §6 and §7.2).

Input is the matrix the handoff runner produces: ``results``, one row per simulated
configuration (``setup`` is the paper's shorthand
Workload-Hard_limit-Priority-LoadControl-Selection-MIPS, e.g. ``W-4096-P-L-FCFS-400``,
with each part also in its own column), and ``series``, the 10 ms time series of each
setup keyed by ``setup``. Idle times and shares are fractions in [0, 1]; ``gain`` is
the fractional change of the request rate against the workload's baseline
``<wl>-0-N-N-FCFS-400``.

The figures follow the paper's:

- ``handoff-throughput``: Figure 5, request rate per configuration at 400 MIPS with
  FCFS selection, gain against the baseline written on each bar.
- ``handoff-idle`` and ``handoff-share``: the host and NIC idle times and the shares
  of connections and packets on the NIC the paper reports beside Figure 5 and in Table 1.
- ``handoff-cnum``: Figure 6, ``Cnum`` and ``Soft_limit`` of the load controller over
  time, with ``Qlen`` against the ``Hiwat`` watermark.
- ``handoff-nic-speed``: Figure 8, the 4096-P-L setups at 400/600/800 MIPS.
- ``handoff-selection``: Figure 7, FCFS against threshold selection (T4, T20, …) when
  the NIC holds few connections.

Like :mod:`offloadlab.report.study`, each figure function returns a plain Figure (Agg,
no pyplot) or None when its rows are absent, and PNGs are written atomically.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from offloadlab.mode_traits import BASELINE
from offloadlab.report.plots import ENGINE, HOST, legend_below, numeric, panel_grid

# The paper's Figure 5 and Figure 6 runs are all at the slowest NIC with FCFS selection.
BASE_MIPS = 400
BASE_SELECTION = "FCFS"
# The Figure 6 runs: load control with a NIC that could hold every connection.
CNUM_HARD_LIMIT = 4096
# Figure 7 is about a NIC that holds few connections; always shown when present.
SELECTION_HARD_LIMIT = 256
# Reference 004 §3.2: Qlen is held "under the threshold 1024", read as Hiwat.
HIWAT = 1024

WORKLOADS = {"W": "World Cup", "I": "IBM substitute", "S": "SPECweb99 static",
             "D": "SPECweb99"}
# Policies in the order the paper introduces them: naive handoff, then each fix.
POLICIES = ("N-N", "N-L", "P-N", "P-L")
POLICY_COLORS = {"baseline": "0.6", "N-N": "tab:red", "N-L": "tab:orange",
                 "P-N": "tab:purple", "P-L": "tab:green"}
POLICY_NAMES = {"baseline": "no handoff (baseline)", "N-N": "N-N: FCFS packets, no load control",
                "N-L": "N-L: FCFS packets, load control",
                "P-N": "P-N: host first, no load control",
                "P-L": "P-L: host first, load control"}
SELECTION_COLORS = ("tab:gray", "tab:blue", "tab:orange", "tab:purple", "tab:brown")
# Shares on the NIC and NIC idle, in the idle/share/selection figures.
CONNS, PACKETS, NIC_IDLE = "tab:cyan", ENGINE, "0.55"

# The display table: its column, the results column and how it is shown.
TABLE = (("req/s", "requests_per_s", 1, 0), ("gain %", "gain", 100, 1),
         ("host idle %", "host_idle", 100, 1), ("NIC idle %", "nic_idle", 100, 1),
         ("conns on NIC %", "offloaded_share", 100, 1),
         ("packets on NIC %", "nic_packet_share", 100, 1),
         ("host-pkt NIC delay rx µs", "host_rx_delay_median_s", 1e6, 1),
         ("host-pkt NIC delay tx µs", "host_tx_delay_median_s", 1e6, 1),
         ("response ms", "response_mean_s", 1e3, 1), ("drops", "drops", 1, 0))


# ---------------------------------------------------------------------------------------
# Figures


def throughput_figure(results: pd.DataFrame) -> Figure | None:
    """Figure 5: request rate of each configuration, one panel per workload, with its
    gain against the baseline on the bar and the baseline as a dashed line."""
    rows = _figure5_rows(results)
    if rows.empty:
        return None
    workloads = _workloads(rows)
    fig, axes = panel_grid(len(workloads))
    policies, truncated = set(), False
    for ax, wl in zip(axes[0], workloads, strict=True):
        mine = rows[rows["workload"] == wl]
        kinds = [_policy(r) for r in mine.itertuples()]
        policies |= set(kinds)
        x = np.arange(len(mine))
        cut = mine["truncated"].to_numpy(dtype=bool)
        truncated |= bool(cut.any())
        # A truncated run's numbers are less trustworthy: hatch it rather than hide it.
        ax.bar(x, numeric(mine, "requests_per_s"), 0.7,
               color=[POLICY_COLORS[k] for k in kinds],
               hatch=["//" if c else None for c in cut], edgecolor="white")
        _annotate(ax, x, numeric(mine, "requests_per_s"), numeric(mine, "gain"), _gain)
        base = numeric(mine[mine["hard_limit"] == 0], "requests_per_s")
        if base.size and np.isfinite(base[0]):
            ax.axhline(base[0], color="0.3", linestyle="--", linewidth=1)
        _config_axis(ax, mine, wl, "requests/s")
    handles = [Patch(color=POLICY_COLORS[k], label=POLICY_NAMES[k])
               for k in ("baseline", *POLICIES) if k in policies]
    handles.append(Line2D([], [], color="0.3", linestyle="--", label="baseline request rate"))
    if truncated:
        handles.append(Patch(facecolor="0.6", edgecolor="white", hatch="//",
                             label="run truncated"))
    legend_below(fig, handles)
    # Titles break before the parenthesis: one panel is only 6 inches wide.
    fig.suptitle("Request rate per configuration, gain vs. no handoff on each bar\n"
                 f"(paper's Figure 5; {BASE_MIPS} MIPS NIC, {BASE_SELECTION} selection)")
    return fig


def idle_figure(results: pd.DataFrame) -> Figure | None:
    """Host and NIC idle time (%) of each Figure 5 configuration: where the bottleneck
    is (the host at 0 % idle, or the NIC)."""
    return _percent_figure(
        results, [("host_idle", "host idle", HOST), ("nic_idle", "NIC idle", ENGINE)],
        "idle time (%)",
        "Host and NIC idle time per configuration\n(paper's Figure 5 and Table 1; "
        f"{BASE_MIPS} MIPS, {BASE_SELECTION} selection)")


def share_figure(results: pd.DataFrame) -> Figure | None:
    """Share of connections handed off and of packets processed on the NIC (%), per
    Figure 5 configuration."""
    return _percent_figure(
        results, [("offloaded_share", "connections handed off", CONNS),
                  ("nic_packet_share", "packets of NIC connections", PACKETS)],
        "share on the NIC (%)",
        "Share of connections and packets on the NIC per configuration\n(paper's Figure 5; "
        f"{BASE_MIPS} MIPS, {BASE_SELECTION} selection)")


def cnum_figure(results: pd.DataFrame, series: Mapping[str, pd.DataFrame],
                hiwat: float | None = HIWAT) -> Figure | None:
    """Figure 6: connections on the NIC (Cnum) and the controller's Soft_limit over
    time, one panel per load-controlled 4096-connection setup, with the NIC receive
    queue (Qlen) on the right axis against the Hiwat watermark."""
    rows = _sorted(results[(results["load_control"] == "L")
                           & (results["hard_limit"] == CNUM_HARD_LIMIT)
                           & (results["mips"] == BASE_MIPS)
                           & (results["selection"] == BASE_SELECTION)])
    setups = [s for s in rows["setup"] if s in series and not series[s].empty]
    if not setups:
        return None
    fig, axes = panel_grid(len(setups), height=3.6)
    for ax, setup in zip(axes[0], setups, strict=True):
        ts = series[setup]
        t = numeric(ts, "t_s")
        # Qlen first and behind, so the connection counts stay readable on top of it.
        right = ax.twinx()
        qlen = numeric(ts, "qlen")
        right.plot(t, qlen, color="0.6", linewidth=0.7)
        if hiwat is not None:
            right.axhline(hiwat, color="0.4", linestyle="--", linewidth=1)
        # Room above Hiwat, so the line is not lost in the frame.
        top = max(np.nanmax(qlen, initial=0), hiwat or 0)
        right.set_ylim(0, 1.1 * top if top > 0 else 1)
        right.set_ylabel("Qlen (NIC packets in rx queue)", color="0.4")
        ax.set_zorder(right.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.plot(t, numeric(ts, "soft_limit"), color="tab:orange", drawstyle="steps-post")
        ax.plot(t, numeric(ts, "cnum"), color="tab:blue")
        ax.set_ylim(bottom=0)
        ax.set_title(setup)
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("connections")
        ax.grid(True, alpha=0.3)
    handles = [Line2D([], [], color="tab:blue", label="Cnum (connections on the NIC)"),
               Line2D([], [], color="tab:orange", label="Soft_limit"),
               Line2D([], [], color="0.6", linewidth=0.7, label="Qlen (right axis)")]
    if hiwat is not None:
        handles.append(Line2D([], [], color="0.4", linestyle="--",
                              label=f"Hiwat = {hiwat:g} (right axis)"))
    legend_below(fig, handles)
    fig.suptitle("Load control: connections on the NIC over time\n(paper's Figure 6)")
    return fig


def nic_speed_figure(results: pd.DataFrame) -> Figure | None:
    """Figure 8: request rate, gain against the 400 MIPS no-handoff baseline and share
    of connections handed off, against the NIC's MIPS, for each workload's
    4096-P-L-FCFS setups; None with fewer than two MIPS values."""
    rows = _sorted(results[(results["hard_limit"] == CNUM_HARD_LIMIT)
                           & (results["priority"] == "P") & (results["load_control"] == "L")
                           & (results["selection"] == BASE_SELECTION)])
    mips = sorted(rows["mips"].unique())
    if len(mips) < 2:
        return None
    fig, axes = panel_grid(3, height=3.6)
    panels = (("requests_per_s", 1, "requests/s"),
              ("gain", 100, "gain vs. no handoff at 400 MIPS (%)"),
              ("offloaded_share", 100, "connections handed off (%)"))
    workloads = _workloads(rows)
    colors = dict(zip(workloads, _cycle(len(workloads)), strict=True))
    for ax, (col, scale, label) in zip(axes[0], panels, strict=True):
        for wl in workloads:
            mine = rows[rows["workload"] == wl].sort_values("mips")
            ax.plot(numeric(mine, "mips"), numeric(mine, col) * scale, "o-", color=colors[wl])
        if col == "gain":
            ax.axhline(0, color="0.3", linestyle="--", linewidth=1)
        ax.set_xticks(mips)
        ax.set_xlabel("NIC processor (MIPS)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.set_axisbelow(True)
    legend_below(fig, [Line2D([], [], color=colors[wl], marker="o",
                              label=_workload_name(wl)) for wl in workloads])
    fig.suptitle(f"NIC speed: {CNUM_HARD_LIMIT}-P-L-{BASE_SELECTION} at "
                 f"{', '.join(map(str, mips))} MIPS\n(paper's Figure 8)")
    return fig


def selection_figure(results: pd.DataFrame) -> Figure | None:
    """Figure 7: connection selection policies (FCFS, T4, T20, …) side by side for each
    load-controlled setup that differs only in selection: request rate (top, change
    against FCFS on the bar) and what ended up on the NIC (bottom)."""
    groups = _selection_groups(results)
    if not groups:
        return None
    fig, axes = panel_grid(len(groups), rows=2, height=3.4)
    for (top, bottom), (name, mine) in zip(axes.T, groups, strict=True):
        x = np.arange(len(mine))
        colors = _cycle(len(mine), SELECTION_COLORS)
        rate = numeric(mine, "requests_per_s")
        top.bar(x, rate, 0.7, color=colors)
        fcfs = rate[(mine["selection"] == BASE_SELECTION).to_numpy()]
        if fcfs.size and np.isfinite(fcfs[0]) and fcfs[0] > 0:
            _annotate(top, x, rate, rate / fcfs[0] - 1, _gain)
        _selection_axis(top, mine, "requests/s")
        top.set_title(name)
        _grouped(bottom, mine, [("offloaded_share", CONNS), ("nic_packet_share", PACKETS),
                                ("nic_idle", NIC_IDLE)])
        _selection_axis(bottom, mine, "share (%)")
        bottom.set_ylim(0, 110)
    legend_below(fig, [Patch(color=CONNS, label="connections handed off"),
                       Patch(color=PACKETS, label="packets of NIC connections"),
                       Patch(color=NIC_IDLE, label="NIC idle")])
    fig.suptitle("Connection selection: FCFS vs. handoff at the n-th send (Tn)\n"
                 "(paper's Figure 7; request rate change vs. FCFS on each bar)")
    return fig


def figures(results: pd.DataFrame, series: Mapping[str, pd.DataFrame], *,
            hiwat: float | None = HIWAT) -> dict[str, Figure | None]:
    """Every figure by its file name, ``handoff-<name>.png``, in the order of the paper's
    figures as listed in the module docstring; None where it has no rows to show.
    ``hiwat`` is the watermark drawn on the Qlen axis (None: no line)."""
    return {"handoff-throughput.png": throughput_figure(results),
            "handoff-idle.png": idle_figure(results),
            "handoff-share.png": share_figure(results),
            "handoff-cnum.png": cnum_figure(results, series, hiwat),
            "handoff-nic-speed.png": nic_speed_figure(results),
            "handoff-selection.png": selection_figure(results)}


def testbed_figure(runs: pd.DataFrame, series: pd.DataFrame) -> Figure | None:
    """The testbed experiment (:mod:`offloadlab.experiments.handoff`): throughput and
    latency per policy (median bars, one dot per repeat, change vs. inline on the bar),
    and the engine's Cnum and Soft_limit over the first P-L-FCFS run."""
    if runs.empty:
        return None
    order = list(dict.fromkeys(runs["policy"]))
    grouped = runs.groupby("policy", sort=False)
    med = grouped[["throughput", "mean_s", "p99_s"]].median().loc[order]
    x = np.arange(len(order))
    fig, axes = panel_grid(3)
    ax = axes[0][0]
    colors = [_testbed_color(p) for p in order]
    ax.bar(x, med["throughput"], 0.7, color=colors)
    for i, name in enumerate(order):
        ax.plot(np.full(grouped.size()[name], i), grouped.get_group(name)["throughput"],
                "o", color="0.2", markersize=3)
    inline = med["throughput"].get(BASELINE, np.nan)
    _annotate(ax, x, med["throughput"].to_numpy(), med["throughput"].to_numpy() / inline - 1,
              _gain, "small")
    _policy_axis(ax, order, "responses/s")
    ax.set_title("throughput")
    ax = axes[0][1]
    ax.bar(x - 0.2, med["mean_s"] * 1e3, 0.4, color=colors, label="mean")
    ax.bar(x + 0.2, med["p99_s"] * 1e3, 0.4, color=colors, hatch="//", edgecolor="white",
           label="p99")
    _policy_axis(ax, order, "response time (ms)")
    ax.set_title("latency: mean (plain), p99 (hatched)")
    ax = axes[0][2]
    best = series[series["policy"] == "handoff:P-L-FCFS"]
    if not best.empty:
        first = best[best["repeat"] == best["repeat"].min()]
        ax.plot(first["t_s"], first["held"], color=ENGINE, label="Cnum (engine connections)")
        ax.plot(first["t_s"], first["soft_limit"], color="0.2", linestyle="--",
                label="Soft_limit")
        ax.set_xlabel("time (s)")
        ax.legend(fontsize="small")
        _style(ax, "connections")
        ax.set_title("P-L-FCFS: load control over time")
    else:
        ax.set_axis_off()
    fig.suptitle("Connection handoff on the testbed: a slowed engine under each policy")
    return fig


def _testbed_color(name: str) -> str:
    if name == BASELINE:
        return POLICY_COLORS["baseline"]
    parts = name.removeprefix("handoff:").split("-")
    return POLICY_COLORS.get("-".join(parts[:2]), "tab:blue")


def _policy_axis(ax: Axes, order: list[str], ylabel: str) -> None:
    """Policies on two lines (mode, then policy) so they fit unrotated."""
    labels = [n.replace(":", "\n") for n in order]
    ax.set_xticks(np.arange(len(order)), labels, fontsize="small")
    _style(ax, ylabel)


# ---------------------------------------------------------------------------------------
# Table


def table(results: pd.DataFrame) -> pd.DataFrame:
    """Every configuration as a display table, by workload (W, I, S, D) then in figure
    order: setup, req/s, gain % against the baseline, host and NIC idle %, % of
    connections handed off and of packets on the NIC, median NIC transit of host packets
    (receive and send, µs), mean response time (ms) and receive-queue drops; rounded."""
    rows = _sorted(results)
    out = {"setup": rows["setup"].to_numpy(dtype=object)}
    for name, col, scale, digits in TABLE:
        values = pd.Series(numeric(rows, col) * scale).round(digits)
        # Counts and request rates read better without a trailing ".0" in the CSV.
        out[name] = values.astype("Int64") if digits == 0 else values
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------------------
# Selecting and ordering rows


def _figure5_rows(results: pd.DataFrame) -> pd.DataFrame:
    return _sorted(results[(results["mips"] == BASE_MIPS)
                           & (results["selection"] == BASE_SELECTION)])


def _selection_groups(results: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Load-controlled setups alike but for their selection policy, as (title, rows)
    with FCFS first; a group with one policy only counts at the paper's small NIC, and
    only when some group compares policies at all."""
    rows = _sorted(results[results["load_control"] == "L"])
    keys = ["workload", "hard_limit", "priority", "mips"]
    groups = []
    for (wl, limit, prio, mips), mine in rows.groupby(keys, sort=False):
        if mine["selection"].nunique() > 1 or limit == SELECTION_HARD_LIMIT:
            groups.append((f"{wl}-{limit}-{prio}-L-*-{mips}", mine))
    if all(mine["selection"].nunique() < 2 for _, mine in groups):
        return []
    return groups


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows by workload (the paper's W, I, S, D), then the figure order: the baseline,
    then N-N, N-L, P-N, P-L each by hard limit, then selection (FCFS, T4, T20, …) and
    MIPS."""
    keys = [(_workload_key(r.workload), r.hard_limit > 0, _policy_key(r), r.hard_limit,
             _selection_key(r.selection), r.mips) for r in frame.itertuples()]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return frame.iloc[order]


def _workloads(frame: pd.DataFrame) -> list[str]:
    return sorted(frame["workload"].unique(), key=_workload_key)


def _workload_key(wl: str) -> tuple[int, str]:
    names = list(WORKLOADS)
    return (names.index(wl) if wl in names else len(names), wl)


def _policy(row) -> str:
    return "baseline" if row.hard_limit == 0 else f"{row.priority}-{row.load_control}"


def _policy_key(row) -> int:
    policy = _policy(row)
    return POLICIES.index(policy) if policy in POLICIES else len(POLICIES)


def _selection_key(selection: str) -> tuple[int, int, str]:
    """FCFS, then thresholds by n (T4 before T20), then anything else by name."""
    if selection == BASE_SELECTION:
        return (0, 0, "")
    m = re.fullmatch(r"T(\d+)", selection)
    return (1, int(m.group(1)), "") if m else (2, 0, selection)


def _workload_name(wl: str) -> str:
    return f"{wl}: {WORKLOADS[wl]}" if wl in WORKLOADS else wl


# ---------------------------------------------------------------------------------------
# Drawing


def _percent_figure(results: pd.DataFrame, bars: list[tuple[str, str, str]], ylabel: str,
                    title: str) -> Figure | None:
    """Grouped bars of fractions shown as %, per Figure 5 configuration, one panel per
    workload; ``bars`` are (column, legend label, colour)."""
    rows = _figure5_rows(results)
    if rows.empty:
        return None
    workloads = _workloads(rows)
    fig, axes = panel_grid(len(workloads))
    for ax, wl in zip(axes[0], workloads, strict=True):
        mine = rows[rows["workload"] == wl]
        _grouped(ax, mine, [(col, color) for col, _, color in bars])
        ax.set_ylim(0, 110)
        _config_axis(ax, mine, wl, ylabel)
    legend_below(fig, [Patch(color=color, label=label) for _, label, color in bars])
    fig.suptitle(title)
    return fig


def _grouped(ax: Axes, rows: pd.DataFrame, bars: list[tuple[str, str]]) -> None:
    """Side-by-side bars of fraction columns in %, each labelled with its value."""
    width = 0.8 / len(bars)
    x = np.arange(len(rows))
    # Past a dozen bars a panel's bars get narrower than "100" at the usual size.
    size = "xx-small" if len(rows) * len(bars) > 12 else "x-small"
    for i, (col, color) in enumerate(bars):
        at = x + (i - (len(bars) - 1) / 2) * width
        values = numeric(rows, col) * 100
        ax.bar(at, values, width, color=color)
        _annotate(ax, at, values, values, lambda v: f"{v:.0f}", size)


def _annotate(ax: Axes, x: np.ndarray, heights: np.ndarray, values: np.ndarray,
              text: Callable[[float], str], size: str = "x-small") -> None:
    """``text(value)`` just above each bar; nothing where the bar or value is missing."""
    for xi, h, v in zip(x, heights, values, strict=True):
        if np.isfinite(h) and np.isfinite(v):
            ax.annotate(text(v), (xi, h), xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", fontsize=size)
    ax.margins(y=0.12)


def _gain(g: float) -> str:
    """A change as a whole percentage, signed unless it rounds to none."""
    return "0%" if round(g * 100) == 0 else f"{g:+.0%}"


def _config_axis(ax: Axes, rows: pd.DataFrame, wl: str, ylabel: str) -> None:
    """Configurations on two lines (hard limit, then policy) so they fit unrotated."""
    labels = ["0\nbaseline" if r.hard_limit == 0 else
              f"{r.hard_limit}\n{r.priority}-{r.load_control}" for r in rows.itertuples()]
    ax.set_xticks(np.arange(len(rows)), labels, fontsize="small")
    ax.set_title(_workload_name(wl))
    ax.set_xlabel("NIC connections (Hard_limit), priority-load control")
    _style(ax, ylabel)


def _selection_axis(ax: Axes, rows: pd.DataFrame, ylabel: str) -> None:
    ax.set_xticks(np.arange(len(rows)), list(rows["selection"]))
    ax.set_xlabel("selection policy")
    _style(ax, ylabel)


def _style(ax: Axes, ylabel: str) -> None:
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _cycle(n: int, colors: tuple[str, ...] = ("tab:blue", "tab:orange", "tab:green",
                                              "tab:red", "tab:purple", "tab:brown")
           ) -> list[str]:
    return [colors[i % len(colors)] for i in range(n)]
