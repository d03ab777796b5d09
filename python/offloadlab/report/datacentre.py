"""The figures of the data-centre commands: a study on the model
(:mod:`offloadlab.datacentre.studies`: its ``y`` against its ``x``, one line per ``line``
value, one panel per ``panel`` value), and the hybrid placement on the testbed
(:mod:`offloadlab.experiments.hybrid`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from offloadlab.datacentre.studies import Study

LABELS = {
    "throughput": "throughput (requests/s)", "response_ms": "mean response time (ms)",
    "gain": "gain", "ratio": "Cluster 3 / Cluster 1 throughput", "alpha": "Zipf alpha",
    "working_set_class": "working-set class (Table 2)", "hit_ratio": "page-cache hit ratio",
    "placement": "placement", "background_class": "background site's class",
    "stall_share": "share of per-request CPU that is memory stall",
    "size_KiB": "message size (KiB)",
}


def figure(study: Study) -> Figure:
    panels = [None] if study.panel is None else sorted(study.points[study.panel].unique())
    fig = Figure(figsize=(5.5 * len(panels), 4.2), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, value in zip(axes, panels, strict=True):
        part = study.points if value is None else study.points[study.points[study.panel]
                                                               == value]
        for name, line in part.groupby(study.line, sort=True):
            line = line.dropna(subset=[study.y])
            ax.plot(line[study.x].astype(str) if study.x == "placement" else line[study.x],
                    line[study.y], "o-", label=f"{study.line} {name}")
        if study.log_x:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(LABELS.get(study.x, study.x))
        ax.set_ylabel(LABELS.get(study.y, study.y))
        if value is not None:
            ax.set_title(f"{study.panel} {value:g}" if isinstance(value, float)
                         else f"{study.panel} {value}", fontsize="medium")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"{study.title}: the multi-tier model")
    return fig


def hybrid(summary: pd.DataFrame) -> Figure:
    """Throughput with every file from disk and with the hybrid placement, per class,
    and the mean response time."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    rate, delay = fig.subplots(1, 2)
    x = np.arange(len(summary))
    for ax, column, label in ((rate, "throughput", "throughput (requests/s)"),
                              (delay, "mean_ms", "mean response time (ms)")):
        for offset, placement in ((-0.2, "disk"), (0.2, "hybrid")):
            ax.bar(x + offset, summary[f"{placement}_{column}"], 0.4, label=placement)
        ax.set_xticks(x, [f"class {c}" for c in summary["class"]])
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize="small")
    for i, gain in enumerate(summary["gain"]):
        rate.annotate(f"{gain:+.0%}", (x[i], summary["hybrid_throughput"].iloc[i]),
                      ha="center", va="bottom", fontsize="small")
    fig.suptitle("Hybrid placement on the testbed: popular files in memory, the rest "
                 "from disk")
    return fig


def nic(savings: pd.DataFrame) -> Figure:
    """Host CPU per request against the message size for each offload setting, and
    the share that segmentation and checksum offload save."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    cost, share = fig.subplots(1, 2)
    kib = savings["size"] / 1024
    for column in [c for c in savings.columns if c.endswith("_us")]:
        cost.plot(kib, savings[column], "o-", label=column[:-3])
    cost.set_xscale("log", base=2)
    cost.set_yscale("log")
    cost.set_xlabel("message size (KiB)")
    cost.set_ylabel("host CPU per request (µs)")
    for column, label in (("segmentation_saves", "segmentation offload"),
                          ("checksum_saves", "checksum offload"),
                          ("both_save", "both")):
        share.plot(kib, savings[column] * 100, "o-", label=label)
    share.set_xscale("log", base=2)
    share.set_xlabel("message size (KiB)")
    share.set_ylabel("host CPU saved (%)")
    for ax in (cost, share):
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("What the NIC's offloads save the server (veth pair, measured)")
    return fig
