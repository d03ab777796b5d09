"""Terminal tables and figures of a workload analysis (:mod:`offloadlab.workload.analyze`)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from rich import box
from rich.markup import escape
from rich.table import Table

from offloadlab.results import write_figure
from offloadlab.workload.analyze import Analysis
from offloadlab.workload.fits import SizeFit, empirical_ccdf
from offloadlab.workload.stats import Arrivals, ConnectionSkew

# ---------------------------------------------------------------------------------------
# Analysis: tables

def analysis_tables(a: Analysis) -> list[Table]:
    """Rich tables: sizes and fits, popularity, size classes, connections, arrivals."""
    tables = [_sizes_table(a)]
    if a.popularity is not None:
        tables.append(_popularity_table(a))
    tables.append(_classes_table(a))
    if a.connections is not None:
        tables.append(_connections_table(a.connections))
    if a.arrivals is not None:
        tables.append(_arrivals_table(a.arrivals))
    if a.notes:
        tables[-1].caption = "\n".join(filter(None, [tables[-1].caption,
                                                      *map(escape, a.notes)]))
    return tables


def _sizes_table(a: Analysis) -> Table:
    s = a.sizes
    what = "objects" if a.source == "requests" else "files"
    title = f"[bold]sizes[/] of {s.n:,} {what}"
    if s.n:
        x = s.sample
        title += (f": min {_bytes(x[0])}, median {_bytes(np.median(x))}, mean "
                  f"{_bytes(x.mean())}, max {_bytes(x[-1])}")
    table = _table(title, ("family", "parameters", "ln L", "AIC", "K-S D", "p", ""))
    for f in s.fits:
        mark = "[green]chosen[/]" if f.family == s.chosen else ""
        table.add_row(f.family, _params(f), f"{f.loglik:.1f}", f"{f.aic:.1f}",
                      f"{f.ks_D:.4f}", f"{f.ks_p:.2g}", mark,
                      style="bold" if f.family == s.chosen else None)
    table.caption = s.verdict + ("\nK-S p-values are optimistic: the parameters were fitted "
                                 "to the same sizes." if s.fits else "")
    return table


def _params(f: SizeFit) -> str:
    def one(k: str, v: float) -> str:
        text = _bytes(v) if k in ("k", "lo", "hi", "xmin") else f"{v:.4g}"
        se = f.se.get(k, math.nan)
        return f"{k}={text}" + (f"±{se:.2g}" if math.isfinite(se) else "")
    return ", ".join(one(k, v) for k, v in f.params.items())


def _popularity_table(a: Analysis) -> Table:
    p = a.popularity
    z = p.zipf
    table = _table("[bold]popularity[/]", ("top", "share of requests"))
    for k, v in p.top.items():
        table.add_row(f"{k} of objects" if k.endswith("%") else
                      f"{k} object" + ("s" if k != "1" else ""), f"{v:.1%}")
    lines = []
    if z is not None:
        se = f" ± {z.se:.3f}" if math.isfinite(z.se) else ""
        lines.append(f"Zipf alpha = {z.alpha:.3f}{se} over {z.n_objects:,} objects")
    if a.top_objects:
        lines.append("most requested: "
                     + ", ".join(escape(o) for o, _, _ in a.top_objects[:3]))
    table.caption = "\n".join(lines)
    return table


def _classes_table(a: Analysis) -> Table:
    table = _table("[bold]size classes[/] (seed 000)",
                   ("class", "sizes", "objects", "requests", "bytes"))
    for c in a.classes:
        table.add_row("?" if c.klass < 0 else str(c.klass), c.label, f"{c.objects:,}",
                      _pct(c.requests), _pct(c.bytes))
    return table


def _connections_table(c: ConnectionSkew) -> Table:
    table = _table(f"[bold]connections[/] ({c.connections:,})",
                   ("least-loaded", "share of requests", "share of bytes"))
    for p, r, b in c.lorenz:
        table.add_row(f"{p:.0%}", _pct(r), _pct(b))
    table.caption = (f"{c.requests_per_conn:.2f} requests per connection on average; "
                     f"the top {c.top_fraction:.0%} of connections carry {_pct(c.top_requests)} "
                     f"of requests and {_pct(c.top_bytes)} of bytes (seed 004 Figure 4, on "
                     "packets: < 10 % of connections carry > 45 %; the least-loaded half "
                     f"carries < 10 %); Gini {c.gini_requests:.2f} (requests), "
                     f"{c.gini_bytes:.2f} (bytes)")
    return table


def _arrivals_table(r: Arrivals) -> Table:
    table = _table(f"[bold]arrivals[/] of {r.of} ({r.gaps:,} gaps)",
                   ("rate/s", "mean gap", "CV", "K-S D", "p", "Lilliefors p", "dispersion",
                    "p"))
    table.add_row(f"{r.rate:.4g}", f"{r.mean_gap_s:.3g} s", f"{r.cv:.3f}", f"{r.ks_D:.4f}",
                  f"{r.ks_p:.2g}", f"{r.lilliefors_p:.2g}", f"{r.dispersion:.3g}",
                  f"{r.dispersion_p:.2g}")
    table.caption = ("Poisson arrivals: CV ≈ 1, large p-values, dispersion ≈ 1 (Var/mean of "
                     f"requests per {r.bin_s:g} s bin). The plain K-S p is optimistic (rate "
                     "fitted to the same gaps); the Lilliefors p corrects for it.")
    return table


def _table(title: str, headers: tuple[str, ...]) -> Table:
    """A compact table that fits 80 columns: numbers right-aligned, names left."""
    table = Table(title=title, box=box.SIMPLE_HEAD, caption_justify="left", pad_edge=False,
                  collapse_padding=True)
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 or header in ("parameters", "sizes")
                         else "right", no_wrap=header != "parameters")
    return table


def _pct(v: float) -> str:
    return "–" if math.isnan(v) else f"{v:.1%}"


def _bytes(v: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.4g} B"


# ---------------------------------------------------------------------------------------
# Analysis: figure

_FIT_STYLE = {"lognormal": "tab:blue", "pareto": "tab:red", "bpareto": "tab:orange",
              "lognormal+pareto": "tab:green"}


def plot_analysis(a: Analysis, path: str | Path) -> None:
    """One figure: the size CCDF on log-log axes with every fitted CCDF (the chosen one
    bold), the rank-frequency curve on log-log axes with the Zipf fit, and, when the
    input has them, the connections' Lorenz curves and the request rate over time."""
    panels = ["sizes", "ranks"] + (["conns"] if a.connections else []) + (
        ["rate"] if a.arrivals else [])
    rows = 1 if len(panels) <= 2 else 2
    fig = Figure(figsize=(11, 4.3 * rows))
    axes = fig.subplots(rows, 2, squeeze=False).ravel()
    draw = {"sizes": _plot_sizes, "ranks": _plot_ranks, "conns": _plot_conns,
            "rate": _plot_rate}
    for ax, panel in zip(axes, panels, strict=False):
        draw[panel](ax, a)
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    write_figure(fig, path)


def _plot_sizes(ax, a: Analysis) -> None:
    s = a.sizes
    xs, ccdf = empirical_ccdf(s.sample)
    if xs.size:
        # at most ~3000 points: evenly through the body, every one of the largest sizes
        tail = xs.size - np.unique(np.geomspace(1, xs.size, 1500).astype(int))
        pick = np.unique(np.r_[np.arange(0, xs.size, max(1, xs.size // 1500)), tail])
        ax.loglog(xs[pick], ccdf[pick], ".", color="black", markersize=3, label="data")
        grid = np.geomspace(xs[0], s.sample[-1], 200)
        for f in s.fits:
            y = f.ccdf(grid)
            y = np.where(y > 0, y, np.nan)
            chosen = f.family == s.chosen
            ax.loglog(grid, y, color=_FIT_STYLE[f.family], linewidth=2.2 if chosen else 1,
                      linestyle="-" if chosen else "--",
                      label=f.family + (" (chosen)" if chosen else ""))
        ax.legend(fontsize="small", loc="lower left")
        ax.set_ylim(0.3 / s.n, 1.5)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("P[size > x]")
    ax.set_title(f"size CCDF, {s.n:,} " + ("objects" if a.source == "requests" else "files"))


def _plot_ranks(ax, a: Analysis) -> None:
    p = a.popularity
    ax.set_xlabel("rank")
    ax.set_title("rank-frequency")
    if p is None or p.frequency.size == 0:
        ax.text(0.5, 0.5, "no popularity data", ha="center", transform=ax.transAxes)
        return
    freq = p.frequency / p.frequency.sum()
    ranks = np.arange(1, freq.size + 1)
    pick = np.unique(np.geomspace(1, freq.size, 3000).round().astype(int)) - 1
    keep = freq[pick] > 0
    ax.loglog(ranks[pick][keep], freq[pick][keep], ".", color="black", markersize=3,
              label="data")
    if p.zipf is not None:
        ax.loglog(ranks[pick], p.zipf.pmf(ranks[pick]), color="tab:red",
                  label=f"Zipf alpha={p.zipf.alpha:.3f}")
    ax.set_ylabel("share of requests")
    ax.legend(fontsize="small", loc="lower left")


def _plot_conns(ax, a: Analysis) -> None:
    c = a.connections
    for i, (label, color) in enumerate((("requests", "tab:blue"), ("bytes", "tab:orange"))):
        ax.plot(c.curve[0], c.curve[i + 1], color=color, label=label)
    ax.plot([0, 1], [0, 1], color="gray", linewidth=0.8, linestyle=":")
    ax.axvline(1 - c.top_fraction, color="gray", linewidth=0.8, linestyle="--")
    ax.set_xlabel("fraction of connections, least-loaded first")
    ax.set_ylabel("share carried")
    ax.set_title(f"connection lifetimes (Lorenz), {c.connections:,} connections")
    ax.legend(fontsize="small", loc="upper left")


def _plot_rate(ax, a: Analysis) -> None:
    r = a.arrivals
    counts = r.counts[:-1] if r.counts.size > 1 else r.counts     # the last bin is partial
    t = np.arange(counts.size) * r.bin_s
    ax.step(t, counts / r.bin_s, where="post", color="tab:blue", linewidth=0.8)
    ax.axhline(r.rate, color="tab:red", linewidth=0.8, linestyle="--", label="mean rate")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("requests/s")
    ax.set_title(f"arrival rate per {r.bin_s:g} s bin")
    ax.legend(fontsize="small", loc="lower left")
