"""Figures of model results (matplotlib, written atomically), and what every report's
figures share: colours, resolution, panel grids, the legend below them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from offloadlab.results import Result, write_figure

HOST_ALONE, HOST, ENGINE = "tab:red", "tab:blue", "tab:green"
# Panels per line of a figure: more panels wrap onto further lines.
_COLUMNS = 3


def plot_model(result: Result, path: str | Path) -> None:
    """Utilisation (top) and mean delay (bottom) against the total arrival rate, host
    alone against host + engine; one column for all classes and, with several
    classes, one per class. Dotted lines mark where each system saturates."""
    s = result.scenario
    names = ["all"] + (s.class_names if len(s.classes) > 1 else [])
    fig = Figure(figsize=(max(4.2 * len(names) + 1, 7.0), 7.5))
    axes = fig.subplots(2, len(names), squeeze=False, sharex=True)
    x = result.rates
    stars = _saturation_rates(result)
    for col, name in enumerate(names):
        v = result.overall if name == "all" else {
            k: a[:, s.class_names.index(name)] for k, a in result.per_class.items()}
        top, bottom = axes[0, col], axes[1, col]
        top.plot(x, v["U_noe"], color=HOST_ALONE, label="host alone")
        top.plot(x, v["U_cpu"], color=HOST, label="host, with engine")
        top.plot(x, v["U_oe"], color=ENGINE, label="engine")
        top.set_ylim(0, 1.05)
        top.set_title(f"class {name}" if name != "all" else
                      "all classes" if len(names) > 1 else f"class {s.class_names[0]}")
        bottom.plot(x, _ms(v["T_noe"]), color=HOST_ALONE, label="host alone")
        bottom.plot(x, _ms(v["T"]), color=HOST, label=f"with engine ({s.options.system_delay})")
        if s.options.system_delay != "sum":
            bottom.plot(x, _ms(v["T_sum"]), color=HOST, linestyle="--", label="with engine (sum)")
        bottom.set_yscale("log")
        bottom.set_xlabel("total arrival rate (requests/s)")
        for ax in (top, bottom):
            for star, color in stars:
                ax.axvline(star, color=color, linestyle=":", linewidth=1)
            ax.grid(True, alpha=0.3)
    axes[0, 0].set_ylabel("utilisation")
    axes[1, 0].set_ylabel("mean delay (ms)")
    axes[0, 0].legend(loc="upper left", fontsize="small")
    axes[1, 0].legend(loc="upper left", fontsize="small")
    fig.suptitle(f"{s.name}: host alone vs host + offload engine (model)\n"
                 "dotted lines: saturation rates")
    fig.tight_layout()
    write_figure(fig, path)


def _ms(seconds: np.ndarray) -> np.ndarray:
    """Milliseconds; saturated points (inf) are left out of the line, not drawn off-scale."""
    return np.where(np.isfinite(seconds), seconds * 1e3, np.nan)


def _saturation_rates(result: Result) -> list[tuple[float, str]]:
    """Rates inside the sweep where the host alone and the offloaded system saturate.

    With fixed fractions this is the exact lam_star; an auto split changes along the
    sweep, so there it is the first swept rate at which the system is saturated.
    """
    o, x = result.overall, result.rates
    fixed = bool(np.all(result.fractions == result.fractions[0]))
    marks = []
    for color, stars, flags in (
            (HOST_ALONE, o["lam_star_noe"], o["saturated_noe"]),
            (HOST, np.minimum(o["lam_star_cpu"], o["lam_star_oe"]),
             o["saturated_cpu"] | o["saturated_oe"])):
        star = stars[0] if fixed else (x[flags.argmax()] if flags.any() else np.inf)
        if x[0] <= star <= x[-1]:
            marks.append((float(star), color))
    return marks


# ---------------------------------------------------------------------------------------
# Shared by the reports' figures


def panel_grid(n: int, rows: int = 1, height: float = 3.8) -> tuple[Figure, np.ndarray]:
    """``rows`` × ``n`` panels as an array of that shape, each row of ``n`` wrapped onto
    lines of at most three; unused grid cells are hidden. The layout keeps room for a
    legend below."""
    cols = min(n, _COLUMNS)
    lines = -(-n // cols)
    fig = Figure(figsize=(max(4.2 * cols, 6.0), height * rows * lines + 0.9),
                 layout="constrained")
    grid = fig.subplots(rows * lines, cols, squeeze=False)
    for r in range(rows):
        for ax in grid[r * lines:(r + 1) * lines].flat[n:]:
            ax.set_visible(False)
    axes = np.array([[grid[r * lines + i // cols, i % cols] for i in range(n)]
                     for r in range(rows)])
    return fig, axes


def legend_below(fig: Figure, handles: list) -> None:
    """A legend under the panels, in as many columns as the figure's width holds."""
    width = fig.get_figwidth()
    longest = max(len(h.get_label()) for h in handles)
    # About 0.075 inch per character at the small font, plus the handle and padding.
    fits = int(width // (0.075 * longest + 0.8))
    fig.legend(handles=handles, loc="outside lower center", ncols=max(1, min(len(handles), fits)),
               fontsize="small", frameon=False)


def numeric(frame: pd.DataFrame, col: str) -> np.ndarray:
    """A column as floats; None in an all-missing object column becomes NaN."""
    return frame[col].to_numpy(dtype=float, na_value=np.nan)
