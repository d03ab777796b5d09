"""Figures of a study (:class:`~offloadlab.study_tables.StudyTables`): model, simulator
and testbed side by side, one panel per size class.

Each figure function takes the table it draws and returns a Figure, or None when the
table has nothing to draw. Figures are plain :class:`matplotlib.figure.Figure` objects,
never pyplot's, so no GUI backend is touched; PNGs are rendered by Agg. Saturated
(inf) and missing (NaN) values are left out of lines and markers, never drawn
off-scale.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from offloadlab.report.plots import (
    ENGINE,
    HOST,
    HOST_ALONE,
    _ms,
    legend_below,
    numeric,
    panel_grid,
)
from offloadlab.results import DPI, write_atomic
from offloadlab.study_tables import STUDY_MODES, StudyTables

# Inline is the host alone, as in the model figures; the offload modes follow in order.
MODE_COLORS = dict(zip(STUDY_MODES, (HOST_ALONE, HOST, ENGINE, "tab:olive", "tab:cyan"),
                       strict=False))
OTHER_MODE = "tab:gray"
CPU_PARTS = (("user", "tab:blue"), ("system", "tab:orange"), ("softirq", "tab:red"),
             ("irq", "tab:purple"), ("idle", "0.85"))
TARGETS = (0.05, 0.15)  # relative-error bands of the accuracy targets (U, T)
MAPE_CUT = 0.8  # accuracy MAPE counts validation points below this utilisation
# Seed 000's model, the baseline: the same colour and style as the model, faint and thin.
SEED = {"alpha": 0.45, "linewidth": 1.0}


# ---------------------------------------------------------------------------------------
# Figures


def _class_panels(points: pd.DataFrame) -> tuple[Figure, list] | None:
    """A figure with one panel per class and its (axes, class) pairs; None without any."""
    classes = _classes(points)
    if not classes:
        return None
    fig, axes = panel_grid(len(classes))
    return fig, list(zip(axes[0], classes, strict=True))


def utilisation_figure(points: pd.DataFrame) -> Figure | None:
    """Host and engine utilisation against the class's arrival rate, one panel per class:
    model lines, simulator 95% bands, testbed markers."""
    panels = _class_panels(points)
    if panels is None:
        return None
    fig, pairs = panels
    drawn: set[str] = set()
    for ax, klass in pairs:
        top = 1.05
        for mode in _modes(points):
            color = _color(mode)
            model, seed, sim, bed = (_rows(points, source, mode, klass)
                                     for source in ("model", "seed_model", "sim", "testbed"))
            for col, style, hatch, marker in (("U_host", "-", None, "o"),
                                              ("U_engine", "--", "////", "^")):
                if _line(ax, model["rate"], model[col], color=color, linestyle=style):
                    drawn.add(f"model {col}")
                if _line(ax, seed["rate"], seed[col], color=color, linestyle=style, **SEED):
                    drawn.add(f"seed {col}")
                if _band(ax, sim["rate"], sim[col], sim[f"{col}_lo"], sim[f"{col}_hi"], color,
                         hatch):
                    drawn.add(f"sim {col}")
                drawn |= _measured(ax, bed, col, None, color, marker)
                top = max(top, 1.05 * _finite(numeric(bed, col)).max(initial=0))
        ax.set_ylim(0, top)
        _decorate(ax, klass, "utilisation")
    _legend(fig, points, drawn, [
        ("model U_host", Line2D([], [], color="0.4", label="model U_host")),
        ("model U_engine", Line2D([], [], color="0.4", linestyle="--", label="model U_engine")),
        ("seed U_host", Line2D([], [], color="0.4", **SEED, label="seed model U_host")),
        ("seed U_engine", Line2D([], [], color="0.4", linestyle="--", **SEED,
                                 label="seed model U_engine")),
        ("sim U_host", Patch(color="0.4", alpha=0.2, label="sim U_host 95%")),
        ("sim U_engine", Patch(facecolor="none", edgecolor="0.4", hatch="////",
                               label="sim U_engine 95%")),
        *_measured_legend(("U_host", "o"), ("U_engine", "^"))])
    fig.suptitle("Utilisation: model, simulator and testbed")
    return fig


def delay_figure(points: pd.DataFrame) -> Figure | None:
    """Mean delay against the class's arrival rate (log scale), one panel per class:
    model T and T_sum, simulator 95% band, testbed means with 95% intervals."""
    panels = _class_panels(points)
    if panels is None:
        return None
    fig, pairs = panels
    drawn: set[str] = set()
    for ax, klass in pairs:
        for mode in _modes(points):
            color = _color(mode)
            model = _rows(points, "model", mode, klass)
            t, t_sum = numeric(model, "T"), numeric(model, "T_sum")
            if _line(ax, model["rate"], _ms(t), color=color):
                drawn.add("model T")
            seed = _rows(points, "seed_model", mode, klass)
            if _line(ax, seed["rate"], _ms(numeric(seed, "T")), color=color, **SEED):
                drawn.add("seed T")
            # In inline mode T_sum is T: draw it only where the tandem sum says more.
            differs = np.isfinite(t_sum) & ~np.isclose(t_sum, t, rtol=1e-9, atol=0)
            if differs.any() and _line(ax, model["rate"], _ms(t_sum), color=color,
                                       linestyle=":"):
                drawn.add("model T_sum")
            sim = _rows(points, "sim", mode, klass)
            if _band(ax, sim["rate"], _ms(numeric(sim, "T")), _ms(numeric(sim, "T_lo")),
                     _ms(numeric(sim, "T_hi")), color):
                drawn.add("sim T")
            bed = _rows(points, "testbed", mode, klass)
            drawn |= _measured(ax, bed, "T", ("T_lo", "T_hi"), color, "o", scale=1e3)
        if ax.has_data():
            _log(ax, "y")
        _decorate(ax, klass, "mean delay (ms)")
    _legend(fig, points, drawn, [
        ("model T", Line2D([], [], color="0.4", label="model T (max)")),
        ("model T_sum", Line2D([], [], color="0.4", linestyle=":", label="model T_sum")),
        ("seed T", Line2D([], [], color="0.4", **SEED, label="seed model T")),
        ("sim T", Patch(color="0.4", alpha=0.2, label="sim T 95%")),
        *_measured_legend(("T", "o"))])
    fig.suptitle("Mean delay: model, simulator and testbed")
    return fig


def saturation_figure(saturation: pd.DataFrame) -> Figure | None:
    """Saturation throughput per class and mode: measured (closed loop, zero think
    time) against the model's 1 / E[S] of the bottleneck, with the model's error."""
    classes = _classes(saturation)
    if not classes:
        return None
    fig, axes = panel_grid(len(classes), height=3.6)
    modes = _modes(saturation)
    for ax, klass in zip(axes[0], classes, strict=True):
        labels = []
        for i, mode in enumerate(modes):
            row = saturation[(saturation["class"] == klass) & (saturation["mode"] == mode)]
            measured, model, error = (numeric(row, c) for c in ("measured", "model", "error"))
            color = _color(mode)
            if np.isfinite(measured).any():
                ax.bar(i - 0.2, measured[0], 0.4, color=color)
            if np.isfinite(model).any():
                ax.bar(i + 0.2, model[0], 0.4, facecolor="white", edgecolor=color, hatch="//")
                if np.isfinite(error).any():
                    ax.annotate(f"{error[0]:+.0%}", (i + 0.2, model[0]), ha="center",
                                va="bottom", fontsize="small", xytext=(0, 2),
                                textcoords="offset points")
            bottleneck = row["bottleneck"].iloc[0] if len(row) else None
            labels.append(mode if pd.isna(bottleneck) else f"{mode}\n({bottleneck}-bound)")
        ax.set_xticks(range(len(modes)), labels)
        ax.margins(y=0.12)
        _decorate(ax, klass, "saturation throughput (requests/s)", xlabel=None)
    legend_below(fig, [Patch(color="0.4", label="measured"),
                       Patch(facecolor="white", edgecolor="0.4", hatch="//",
                             label="model 1/E[S] of the bottleneck (model error above)")])
    fig.suptitle("Saturation throughput: measured vs model")
    return fig


def cpu_figure(cpu: pd.DataFrame) -> Figure | None:
    """Stacked shares of each core's time during the saturation run, per class, mode
    and core: user, system, softirq, irq, idle."""
    classes = _classes(cpu)
    if not classes:
        return None
    fig, axes = panel_grid(len(classes), height=4.0)
    for ax, klass in zip(axes[0], classes, strict=True):
        rows = cpu[cpu["class"] == klass]
        order = _modes(rows)
        shown = rows.assign(mode=pd.Categorical(rows["mode"], order, ordered=True))
        shown = shown.sort_values(["mode", "core"])
        # One bar per core, a half-bar gap between modes.
        x = np.arange(len(shown)) + 0.5 * shown["mode"].cat.codes.to_numpy()
        labels = [f"{mode}\ncore {_core(core)}\n{_text(role)}"
                  for mode, core, role in zip(shown["mode"], shown["core"], shown["role"],
                                              strict=True)]
        bottom = np.zeros(len(shown))
        for part, color in CPU_PARTS:
            # A part that was not measured adds nothing to the stack.
            share = np.nan_to_num(numeric(shown, part)) * 100
            ax.bar(x, share, 0.8, bottom=bottom, color=color)
            bottom += share
        ax.set_xticks(x, labels, fontsize="small")
        ax.set_ylim(0, max(100.0, bottom.max(initial=0)))
        _decorate(ax, klass, "share of core time (%)", xlabel=None)
    legend_below(fig, [Patch(color=c, label=p) for p, c in CPU_PARTS])
    fig.suptitle("CPU time per core during the saturation run")
    return fig


def latency_figure(latency: pd.DataFrame) -> Figure | None:
    """Empirical CDF of per-request total time, one panel per class, one line per mode."""
    classes = _classes(latency)
    if not classes:
        return None
    fig, axes = panel_grid(len(classes), height=3.6)
    for ax, klass in zip(axes[0], classes, strict=True):
        for mode in _modes(latency):
            rows = latency[(latency["class"] == klass) & (latency["mode"] == mode)]
            t = np.sort(_finite(numeric(rows, "total_s") * 1e3))
            t = t[t > 0]
            if not t.size:
                continue
            rate = numeric(rows, "rate")[0]
            label = mode + (f" at {_rate(rate)}/s" if np.isfinite(rate) else "")
            ax.step(t, np.arange(1, t.size + 1) / t.size, where="post", color=_color(mode),
                    label=label)
        if ax.has_data():
            _log(ax, "x")
            ax.legend(fontsize="small", loc="lower right")
        ax.set_ylim(0, 1.02)
        _decorate(ax, klass, "fraction of requests ≤ t", xlabel="total time t (ms)")
    fig.suptitle("Latency distribution at one sweep rate")
    return fig


def error_figure(points: pd.DataFrame) -> Figure | None:
    """Relative model error (model / measured − 1) of U_host and T at each testbed
    point, against the measured utilisation of the busier resource, with the ±5% and
    ±15% target bands."""
    classes = _classes(points)
    bed = points[points["source"] == "testbed"]
    if not classes or bed.empty:
        return None
    fig, axes = panel_grid(len(classes), rows=2, height=3.2)
    uses = set()
    for r, (row_axes, metric) in enumerate(zip(axes, ("U_host", "T"), strict=True)):
        for ax, klass in zip(row_axes, classes, strict=True):
            for lo, hi in ((-TARGETS[1], TARGETS[1]), (-TARGETS[0], TARGETS[0])):
                ax.axhspan(lo * 100, hi * 100, color="tab:green", alpha=0.12, linewidth=0)
            ax.axvline(MAPE_CUT, color="0.4", linestyle=":", linewidth=1)
            errors = [(mode, *_errors(points, mode, klass, metric)) for mode in _modes(points)]
            limit = _error_limit(np.concatenate([e for _, _, e, _ in errors]))
            for mode, x, err, use in errors:
                uses |= _draw_errors(ax, x, err, use, limit, _color(mode))
            ax.set_ylim(-limit * 100, limit * 100)
            ax.set_xlim(0, 1.05)
            _decorate(ax, klass if r == 0 else None, f"{metric} error (%)",
                      xlabel="measured utilisation (busier of host, engine)" if r else None)
    handles = [*_mode_handles(_modes(bed)),
               Patch(color="tab:green", alpha=0.24, label=f"±{TARGETS[0]:.0%} target"),
               Patch(color="tab:green", alpha=0.12, label=f"±{TARGETS[1]:.0%} target"),
               Line2D([], [], color="0.4", linestyle=":", label="MAPE cut-off")]
    if "validation" in uses:
        handles.append(Line2D([], [], marker="o", color="0.4", linestyle="none",
                              label="validation"))
    if "calibration" in uses:
        handles.append(Line2D([], [], marker="o", color="0.4", mfc="white", linestyle="none",
                              label="calibration"))
    if "off" in uses:
        handles.append(Line2D([], [], marker="^", color="0.4", linestyle="none",
                              label="off the scale (or model saturated)"))
    legend_below(fig, handles)
    fig.suptitle("Model error at each testbed point: model / measured − 1")
    return fig


class FigureKind(NamedTuple):
    tables: tuple[str, ...]  # the StudyTables fields it draws, in the order draw takes them
    draw: Callable[..., Figure | None]
    caption: str  # how to read it, one sentence for the report


FIGURES: dict[str, FigureKind] = {
    "utilisation": FigureKind(("points",), utilisation_figure,
        "Utilisation against the class's arrival rate: lines are the model (solid host, "
        "dashed engine; inline is the host alone), shaded bands the simulator's 95% "
        "interval, markers the testbed (hollow: calibration runs the model was fitted on)."),
    "delay": FigureKind(("points",), delay_figure,
        "Mean delay against arrival rate, log scale: solid is the model's T (max of host "
        "and engine), dotted the tandem sum T_sum, a model line ends where it saturates; "
        "bands are the simulator's 95% interval, bars the testbed's."),
    "saturation": FigureKind(("saturation",), saturation_figure,
        "Saturation throughput per mode: solid bars measured with a closed loop, hatched "
        "bars the model's 1/E[S] of the bottleneck; the label is the model's error."),
    "cpu": FigureKind(("cpu",), cpu_figure,
        "Where each core's time went during the saturation run: a core with little idle "
        "is the bottleneck; softirq and system are protocol work, user the application."),
    "latency": FigureKind(("latency",), latency_figure,
        "Distribution of per-request total time at one sweep rate: a curve further left is "
        "faster, a curve reaching 1 later has a longer tail."),
    "error": FigureKind(("points",), error_figure,
        "Model error at each testbed point against measured utilisation: inside the green "
        "bands the ±5%/±15% targets hold; MAPE counts validation points left of the dotted "
        "line; triangles on the edge are off the scale."),
}


def write_figures(tables: StudyTables, folder: str | Path) -> dict[str, Path]:
    """Write every figure that has data as ``folder/<name>.png``; the written ones, by
    name, in the order of :data:`FIGURES`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, kind in FIGURES.items():
        fig = kind.draw(*(getattr(tables, t) for t in kind.tables))
        if fig is None:
            continue
        path = folder / f"{name}.png"
        write_atomic(path, lambda tmp, fig=fig: fig.savefig(tmp, dpi=DPI, format="png"))
        written[name] = path
    return written


# ---------------------------------------------------------------------------------------
# Selecting data


def _finite(a: np.ndarray) -> np.ndarray:
    return a[np.isfinite(a)]


def _classes(frame: pd.DataFrame) -> list[str]:
    return sorted(frame["class"].dropna().unique())


def _modes(frame: pd.DataFrame) -> list[str]:
    """Modes present, inline first, then as the testbed orders them."""
    def key(mode: str) -> tuple[int, str]:
        return (STUDY_MODES.index(mode) if mode in STUDY_MODES else len(STUDY_MODES), mode)
    return sorted(frame["mode"].dropna().unique(), key=key)


def _color(mode: str) -> str:
    return MODE_COLORS.get(mode, OTHER_MODE)


def _rows(points: pd.DataFrame, source: str, mode: str, klass: str) -> pd.DataFrame:
    rows = points[(points["source"] == source) & (points["mode"] == mode)
                  & (points["class"] == klass)]
    return rows.sort_values("rate")


def _rate(lam: float) -> str:
    """``2,400`` rather than ``2.4e+03``; 3 significant digits below 100."""
    return f"{lam:,.0f}" if lam >= 100 else f"{lam:.3g}"


def _core(core) -> str:
    """``3``, not ``3.0`` from a float column."""
    if isinstance(core, (int, float, np.number)) and np.isfinite(core):
        return str(int(core))
    return _text(core)


def _text(value) -> str:
    return "" if pd.isna(value) else str(value)


# ---------------------------------------------------------------------------------------
# Drawing


def _decorate(ax: Axes, klass: str | None, ylabel: str,
              xlabel: str | None = "arrival rate of the class (requests/s)") -> None:
    if klass is not None:
        ax.set_title(f"class {klass}")
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    ax.set_axisbelow(True)


def _log(ax: Axes, which: str) -> None:
    """A log scale on the ``which`` ("x" or "y") axis labelled as plain numbers: 1, 2,
    5, 10, … over up to two decades, 1, 10, 100, … beyond (where 2 and 5 would collide)."""
    ax.set(**{f"{which}scale": "log"})
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = axis.get_view_interval()
    subs = (1, 2, 5) if hi <= 100 * lo else (1,)
    axis.set_major_locator(LogLocator(subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _line(ax: Axes, x, y, **style) -> bool:
    """A line through the finite points; False when there are none."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return False
    ax.plot(x[ok], y[ok], **style)
    return True


def _band(ax: Axes, x, mean, lo, hi, color: str, hatch: str | None = None) -> bool:
    """The 95% interval as a shaded band; points without an interval (or a band of one
    point, which fill_between cannot show) as crosses at the mean."""
    x, mean, lo, hi = (np.asarray(a, dtype=float) for a in (x, mean, lo, hi))
    band = np.isfinite(x) & np.isfinite(lo) & np.isfinite(hi)
    if band.sum() < 2:
        band[:] = False
    if band.any():
        if hatch:
            ax.fill_between(x[band], lo[band], hi[band], facecolor="none", edgecolor=color,
                            hatch=hatch, linewidth=0, alpha=0.5)
        else:
            ax.fill_between(x[band], lo[band], hi[band], color=color, alpha=0.2, linewidth=0)
    alone = np.isfinite(x) & np.isfinite(mean) & ~band
    if alone.any():
        ax.plot(x[alone], mean[alone], "x", color=color)
    return bool(band.any() or alone.any())


def _measured(ax: Axes, rows: pd.DataFrame, col: str, interval: tuple[str, str] | None,
              color: str, marker: str, scale: float = 1.0) -> set[str]:
    """Testbed points of ``col``, filled for validation and hollow for calibration, with
    error bars where ``interval`` columns hold one; the kinds drawn, e.g. "testbed T
    calibration"."""
    drawn = set()
    for use, face in (("validation", color), ("calibration", "white")):
        part = rows[rows["use"] == use]
        x, y = numeric(part, "rate"), numeric(part, col) * scale
        ok = np.isfinite(x) & np.isfinite(y)
        if not ok.any():
            continue
        yerr = None
        if interval:
            lo, hi = (numeric(part, c)[ok] * scale for c in interval)
            # No bar where the interval was not measured (NaN) or is inconsistent.
            yerr = np.nan_to_num(np.maximum([y[ok] - lo, hi - y[ok]], 0))
        ax.errorbar(x[ok], y[ok], yerr=yerr, fmt=marker, color=color, mfc=face, mec=color,
                    ms=5, capsize=2, elinewidth=1, zorder=3)
        drawn.add(f"testbed {col} {use}")
    return drawn


def _measured_legend(*kinds: tuple[str, str]) -> list[tuple[str, Line2D]]:
    """Legend entries of :func:`_measured`'s kinds, for columns and their markers."""
    return [(f"testbed {col} {use}",
             Line2D([], [], marker=marker, color="0.4", mfc=face, linestyle="none",
                    label=f"testbed {col}" + (" (calibration)" if face == "white" else "")))
            for col, marker in kinds
            for use, face in (("validation", "0.4"), ("calibration", "white"))]


def _mode_handles(modes: list[str]) -> list[Patch]:
    return [Patch(color=_color(m), label=m) for m in modes]


def _legend(fig: Figure, points: pd.DataFrame, drawn: set[str],
            entries: list[tuple[str, Line2D | Patch]]) -> None:
    """One legend below the panels: colours are modes, styles are sources; only the
    kinds that were drawn are listed."""
    handles = [*_mode_handles(_modes(points)), *(h for key, h in entries if key in drawn)]
    legend_below(fig, handles)


def _errors(points: pd.DataFrame, mode: str, klass: str,
            metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the testbed points of one class and mode: measured utilisation of the busier
    resource, the model's relative error in ``metric`` (inf where the model saturates),
    and the run's use."""
    bed = _rows(points, "testbed", mode, klass)
    model = _rows(points, "model", mode, klass)
    rate, measured = numeric(bed, "rate"), numeric(bed, metric)
    predicted = _model_at(numeric(model, "rate"), numeric(model, metric), rate)
    err = np.full(rate.shape, np.nan)
    ok = np.isfinite(measured) & (measured > 0) & ~np.isnan(predicted)
    err[ok] = predicted[ok] / measured[ok] - 1
    busy = np.fmax(numeric(bed, "U_host"), numeric(bed, "U_engine"))
    return busy, err, bed["use"].to_numpy()


def _model_at(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The model curve (x, y) linearly interpolated at ``at``: inf from its first
    saturated (inf) rate on, NaN outside the rates it was evaluated at."""
    out = np.full(at.shape, np.nan)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.any():
        order = np.argsort(x[ok])
        xs, ys = x[ok][order], y[ok][order]
        inside = (at >= xs[0]) & (at <= xs[-1])
        out[inside] = np.interp(at[inside], xs, ys)
    saturated = x[np.isinf(y)]
    if saturated.size:
        out[at >= saturated.min()] = np.inf
    return out


def _error_limit(errors: np.ndarray) -> float:
    """Symmetric y range: at least the ±15% band and a margin, at most ±100%."""
    finite = np.abs(_finite(errors))
    return float(np.clip(1.15 * finite.max(initial=0), 1.4 * TARGETS[1], 1.0))


def _draw_errors(ax: Axes, x: np.ndarray, err: np.ndarray, use: np.ndarray, limit: float,
                 color: str) -> set[str]:
    """Error points in %, hollow for calibration runs; beyond ``limit`` (or inf) as a
    triangle on the edge. The kinds drawn: "validation", "calibration", "off"."""
    drawn = set()
    for kind, face in (("validation", color), ("calibration", "white")):
        mine = (use == kind) & np.isfinite(x) & ~np.isnan(err)
        inside = mine & (np.abs(err) <= limit)
        if inside.any():
            ax.plot(x[inside], err[inside] * 100, "o", color=color, mfc=face, ms=5)
            drawn.add(kind)
        for sign, marker in ((1, "^"), (-1, "v")):
            off = mine & ~inside & (np.sign(err) == sign)
            if off.any():
                # Just inside the axes, so the marker is not cut in half.
                ax.scatter(x[off], np.full(off.sum(), sign * limit * 97), marker=marker,
                           color=color, zorder=3)
                drawn |= {kind, "off"}
    return drawn
