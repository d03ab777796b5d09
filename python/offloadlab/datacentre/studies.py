"""Seed 003's experiments repeated on the multi-tier model, checked by trend.

The paper's figures survive only as prose, and its 2004 numbers will not carry over, so
each study states the paper's claim and checks its direction on the model (reference
003 §4). Every study starts from a base data centre (the defaults, or the user's file)
and varies one thing. The platforms are seed 003's clusters and the disks its Table 3.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from offloadlab.errors import InputError
from offloadlab.model import protocol_costs, tiers
from offloadlab.results import Check
from offloadlab.workload import fileset, presets

KiB, MiB = 1024, 2**20


@dataclass(frozen=True)
class Platform:
    cpus: int
    speed: float            # clock relative to Cluster 3's 700 MHz, the cost reference
    bandwidth_Mbps: float
    latency_s: float


# Reference 003 §3.1 and Fig. 14 (4-byte latency, peak bandwidth).
PLATFORMS = {
    "cluster1": Platform(2, 2400 / 700, 1748, 27e-6),
    "cluster2": Platform(2, 1000 / 700, 500, 45e-6),
    "cluster3": Platform(4, 1.0, 914, 59e-6),
}
# Table 3's bandwidths; the seek times (average seek plus half a turn) are the drives'
# data sheets [external]: 7,200 rpm IDE, 15,000 rpm SCSI. RAID-0 is three SCSI disks
# striped, at the 120 MB/s Table 3 measured for the array.
DISKS = {
    "IDE": tiers.Disks(1, 35e6, 12.7e-3),
    "SCSI": tiers.Disks(1, 58e6, 5.5e-3),
    "RAID": tiers.Disks(3, 40e6, 5.5e-3, "striped"),
}
# Table 2's classes are the file-set presets dc-2004-1 ... dc-2004-5.
CLASSES = tuple(range(5))


@dataclass(frozen=True)
class Study:
    """A study's points, its checks, and how to draw it: ``y`` against ``x``, one line
    per ``line`` value, one panel per ``panel`` value."""

    name: str
    title: str
    points: pd.DataFrame
    checks: tuple[Check, ...]
    x: str
    y: str
    line: str
    panel: str | None = None
    log_x: bool = False


def site(files: str, clients: int = 64, alpha: float | None = None, name: str = "site",
         seed: int = 1, **options) -> tiers.Site:
    """A site on a file-set preset (Zipf ``alpha`` if given)."""
    spec = presets.preset(files, seed, **({} if alpha is None else {"zipf_alpha": alpha}))
    generated = fileset.generate(spec)
    return tiers.Site(name, generated.sizes, generated.probability, clients, **options)


def fixed_size(size: float, clients: int = 64, files: int = 1000) -> tiers.Site:
    """Seed 003's "average file size" workload: ``files`` alike, equally popular."""
    return tiers.Site(f"{size:g} B", np.full(files, float(size)), np.ones(files), clients)


def on_platform(dc: tiers.DataCentre, name: str, network: bool = True) -> tiers.DataCentre:
    """``dc`` with every tier's CPUs and clock of a seed 003 cluster, and its network
    unless ``network`` is False."""
    p = PLATFORMS[name]

    def tier(t: tiers.Tier) -> tiers.Tier:
        return replace(t, cpus=p.cpus, speed=p.speed)
    dc = replace(dc, proxy=tier(dc.proxy), web=tier(dc.web), db=tier(dc.db))
    if not network:
        return dc
    return replace(dc, network=replace(dc.network, bandwidth_Bps=p.bandwidth_Mbps * 1e6 / 8,
                                       latency_s=p.latency_s))


def _row(dc: tiers.DataCentre, **labels) -> dict:
    r = tiers.solve(dc)
    return {**labels, "throughput": float(r.throughput.sum()),
            "response_ms": float(r.response[0] * 1e3), "proxy_hit": float(r.proxy_hit[0]),
            "page_hit": float(r.page_hit[0]), "bottleneck": r.bottleneck}


def alpha(base: tiers.DataCentre) -> Study:
    """Fig. 15: with low alpha most requests miss the proxies and cross the cluster's
    network, so the platforms differ most there."""
    alphas = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2)
    rows = [_row(replace(on_platform(base, p), sites=(site("dc-2004-2", alpha=a),)),
                 alpha=a, platform=p) for a in alphas for p in PLATFORMS]
    frame = pd.DataFrame(rows)
    by = frame.pivot(index="alpha", columns="platform", values="throughput")
    gap = by.max(axis=1) / by.min(axis=1)
    hits = frame.groupby("alpha")["proxy_hit"].first()
    checks = (
        Check("the gap between platforms shrinks as alpha rises",
              bool(gap.iloc[-1] < gap.iloc[0]),
              f"best/worst throughput {gap.iloc[0]:.2f} at alpha {alphas[0]}, "
              f"{gap.iloc[-1]:.2f} at {alphas[-1]}"),
        Check("the proxies' hit ratio rises with alpha", bool(hits.is_monotonic_increasing),
              f"{hits.iloc[0]:.1%} at alpha {alphas[0]}, {hits.iloc[-1]:.1%} at "
              f"{alphas[-1]}"))
    return Study("alpha", "Zipf alpha against the cluster's network (Fig. 15)", frame,
                 checks, "alpha", "throughput", "platform")


def classes(base: tiers.DataCentre) -> Study:
    """Table 2 classes on IDE, SCSI and RAID (Fig. 10): the faster disks gain more as
    the working set outgrows memory (class 0: +6% SCSI, +10% RAID; class 3: +40%, +100%)."""
    rows = [_row(replace(base, sites=(site(f"dc-2004-{c + 1}"),), disks=d),
                 working_set_class=c, disks=name)
            for c in CLASSES for name, d in DISKS.items()]
    frame = pd.DataFrame(rows)
    by = frame.pivot(index="working_set_class", columns="disks", values="throughput")
    gain = by.div(by["IDE"], axis=0) - 1
    checks = (
        Check("the faster disks' gain grows with the working set (classes 0-3)",
              bool(gain.loc[:3, "RAID"].is_monotonic_increasing
                   and gain.loc[:3, "SCSI"].is_monotonic_increasing),
              "RAID over IDE: " + ", ".join(f"class {c} {g:+.0%}" for c, g in
                                            gain["RAID"].items())),
        Check("RAID gains more than SCSI once disks matter (class 3)",
              bool(gain.loc[3, "RAID"] > gain.loc[3, "SCSI"] > 0),
              f"class 3: SCSI {gain.loc[3, 'SCSI']:+.0%}, RAID {gain.loc[3, 'RAID']:+.0%} "
              "(paper: +40%, +100%)"))
    return Study("classes", "Working-set classes against the disks (Fig. 10)", frame,
                 checks, "working_set_class", "throughput", "disks")


def hit_ratio(base: tiers.DataCentre) -> Study:
    """Fig. 9: one request at a time, the page cache's hit ratio set by hand; the disks
    are alike at 100% hits and part in their bandwidth's order as the ratio falls."""
    rows = []
    for size in (4 * KiB, 64 * KiB, MiB):
        for h in (1.0, 0.5, 0.0):
            for name, d in DISKS.items():
                dc = replace(base, sites=(fixed_size(size, clients=1),), disks=d,
                             page_hit=h, proxy_cache_bytes=0)
                rows.append(_row(dc, size_KiB=size / KiB, hit_ratio=h, disks=name))
    frame = pd.DataFrame(rows)
    spread = frame.groupby(["size_KiB", "hit_ratio"])["response_ms"].agg(lambda t: t.max()
                                                                         / t.min())
    at_zero = frame[frame["hit_ratio"] == 0].pivot(index="size_KiB", columns="disks",
                                                  values="response_ms")
    checks = (
        Check("at 100% hits the disks perform alike",
              bool((spread.xs(1.0, level="hit_ratio") < 1.001).all()),
              f"largest spread {spread.xs(1.0, level='hit_ratio').max():.4f}x"),
        Check("as hits fall, the disks part in their bandwidth's order (RAID < SCSI < IDE)",
              bool(((at_zero["RAID"] <= at_zero["SCSI"]) & (at_zero["SCSI"] < at_zero["IDE"])
                    ).all()),
              "at 0% hits, 1 MiB: " + ", ".join(f"{k} {at_zero.loc[1024, k]:.1f} ms"
                                                 for k in DISKS)))
    return Study("hitratio", "Page-cache hit ratio against the disks (Fig. 9)", frame,
                 checks, "hit_ratio", "response_ms", "disks", panel="size_KiB")


def placement(base: tiers.DataCentre) -> Study:
    """Table 4 and Fig. 13: three SCSI disks per web server. For class 1 spreading the
    files matches striping; for class 3 striping wins."""
    scsi = DISKS["SCSI"]
    rows = []
    for c in (1, 3):
        for how in tiers.PLACEMENTS:
            disks = (DISKS["RAID"] if how == "striped"
                     else replace(scsi, count=1 if how == "single" else 3, placement=how))
            rows.append(_row(replace(base, sites=(site(f"dc-2004-{c + 1}"),), disks=disks),
                             working_set_class=c, placement=how))
    frame = pd.DataFrame(rows)
    by = frame.pivot(index="working_set_class", columns="placement", values="throughput")
    spread = by[["random", "popularity", "size"]]
    checks = (
        Check("class 1: spreading files over the disks is within 10% of striping",
              bool((abs(spread.loc[1] / by.loc[1, "striped"] - 1) <= 0.10).all()),
              ", ".join(f"{k} {v / by.loc[1, 'striped']:.2f}x" for k, v in
                        spread.loc[1].items())),
        Check("class 3: striping beats every spreading placement",
              bool(by.loc[3, "striped"] > spread.loc[3].max()),
              f"striped {by.loc[3, 'striped']:,.0f}/s, best spread "
              f"{spread.loc[3].max():,.0f}/s, single {by.loc[3, 'single']:,.0f}/s"))
    return Study("placement", "File placement over three disks (Fig. 13)", frame, checks,
                 "placement", "throughput", "working_set_class")


def memory_fs(base: tiers.DataCentre) -> Study:
    """Fig. 7: two sites share the web servers; the foreground site's files under 1 MiB
    on the memory file system. Its gain grows with the background's working set and
    shrinks as its own grows."""
    rows = []
    for fg in (0, 1):
        for bg in CLASSES:
            background = site(f"dc-2004-{bg + 1}", clients=32, name="background", seed=2)
            for memory in (False, True):
                fore = site(f"dc-2004-{fg + 1}", clients=32, name="foreground")
                if memory:
                    fore = tiers.with_memory_fs(fore, below_bytes=MiB)
                r = tiers.solve(replace(base, sites=(fore, background)))
                rows.append({"foreground_class": fg, "background_class": bg,
                             "memory_fs": memory, "throughput": float(r.throughput[0]),
                             "response_ms": float(r.response[0] * 1e3),
                             "page_hit": float(r.page_hit[0]), "bottleneck": r.bottleneck})
    frame = pd.DataFrame(rows)
    by = frame.pivot_table(index=["foreground_class", "background_class"],
                           columns="memory_fs", values="throughput")
    gain = (by[True] / by[False] - 1).rename("gain").reset_index()
    frame = frame.merge(gain, on=["foreground_class", "background_class"])
    per_fg = gain.pivot(index="background_class", columns="foreground_class", values="gain")
    checks = (
        Check("the gain grows with the background's working set",
              bool((per_fg.diff().dropna() > -0.005).all().all()),
              "foreground class 0: " + ", ".join(f"{g:+.0%}" for g in per_fg[0])),
        Check("the gain shrinks as the foreground's working set grows",
              bool((per_fg[1] <= per_fg[0] + 1e-9).all()),
              f"with background class 4: class 0 {per_fg.loc[4, 0]:+.0%}, "
              f"class 1 {per_fg.loc[4, 1]:+.0%} (paper: up to +40%)"))
    return Study("memfs", "Small files on a memory file system, two sites (Fig. 7)",
                 frame[frame["memory_fs"]].drop(columns="memory_fs"), checks,
                 "background_class", "gain", "foreground_class")


def cpus(base: tiers.DataCentre) -> Study:
    """Figs. 20-21: small files gain more from added CPUs than large ones, whose
    network binds first; and for small files more slower CPUs beat fewer faster ones
    when enough of the per-request work is memory stalls, which no clock shortens.
    The duel compares the clusters' CPUs alone, on the base network."""
    rows = []
    for size in (4 * KiB, MiB):
        for n in (1, 2, 3, 4):
            dc = replace(base, sites=(fixed_size(size),))
            dc = replace(dc, proxy=replace(dc.proxy, cpus=n), web=replace(dc.web, cpus=n),
                         db=replace(dc.db, cpus=n))
            rows.append(_row(dc, size_KiB=size / KiB, cpus=n, stall_share=np.nan,
                             platform="base"))
        for share in (0.0, 0.2, 0.4, 0.6, 0.8):
            for p in ("cluster1", "cluster3"):
                dc = replace(on_platform(base, p, network=False), sites=(fixed_size(size),))
                dc = replace(dc, proxy=_stalled(dc.proxy, share), web=_stalled(dc.web, share),
                             db=_stalled(dc.db, share))
                rows.append(_row(dc, size_KiB=size / KiB, cpus=PLATFORMS[p].cpus,
                                 stall_share=share, platform=p))
    frame = pd.DataFrame(rows)
    count = frame[frame["platform"] == "base"].pivot(index="cpus", columns="size_KiB",
                                                      values="throughput")
    scaling = count.loc[4] / count.loc[1]
    duel = frame[frame["platform"] != "base"].pivot_table(
        index=["size_KiB", "stall_share"], columns="platform", values="throughput")
    ratio = (duel["cluster3"] / duel["cluster1"]).rename("ratio")
    small, large = ratio.xs(4.0, level="size_KiB"), ratio.xs(1024.0, level="size_KiB")
    checks = (
        Check("small files gain more from added CPUs than large files",
              bool(scaling[4.0] > scaling[1024.0]),
              f"1 to 4 CPUs: 4 KiB {scaling[4.0]:.2f}x, 1 MiB {scaling[1024.0]:.2f}x "
              f"(bound by {_bottleneck(frame, 1024.0)} at 4 CPUs)"),
        Check("small files: 4 x 700 MHz beats 2 x 2.4 GHz once stalls are a large share",
              bool(small.iloc[-1] > 1 > small.iloc[0]),
              "Cluster 3 / Cluster 1 CPUs, throughput by stall share: "
              + ", ".join(f"{s:.0%} {v:.2f}" for s, v in small.items())),
        Check("large files: the CPUs hardly matter (within 5%)",
              bool((abs(large - 1) < 0.05).all()),
              f"ratio {large.min():.2f}-{large.max():.2f}"))
    frame = frame.merge(ratio.reset_index(), on=["size_KiB", "stall_share"], how="left")
    return Study("cpus", "CPU count against CPU speed (Figs. 20-21)",
                 frame[frame["platform"] == "cluster3"], checks, "stall_share", "ratio",
                 "size_KiB")


def _bottleneck(frame: pd.DataFrame, size_kib: float) -> str:
    at = frame[(frame["platform"] == "base") & (frame["size_KiB"] == size_kib)]
    return str(at.loc[at["cpus"].idxmax(), "bottleneck"])


def _stalled(t: tiers.Tier, share: float) -> tiers.Tier:
    """The tier's per-request CPU, ``share`` of it turned into clock-independent stall."""
    total = t.request_s + t.stall_s
    return replace(t, request_s=total * (1 - share), stall_s=total * share)


def checksum(base: tiers.DataCentre) -> Study:
    """Fig. 17b: one request at a time; what checksum offload saves in response time by
    message size, with Table 5's micro-benchmark and data-centre costs. Fig. 18: per
    packet offload pays only with most of it in hardware."""
    rows = []
    for costs in ("micro", "datacenter"):
        for size in (2 ** k * KiB for k in range(0, 11)):
            times = []
            for offload in (False, True):
                net = replace(base.network, bytes=protocol_costs.byte_costs(costs),
                              checksum_offload=offload)
                dc = replace(base, sites=(fixed_size(size, clients=1),), network=net,
                             proxy_cache_bytes=0)
                times.append(tiers.solve(dc).response[0])
            rows.append({"costs": costs, "size_KiB": size / KiB,
                         "response_ms": times[0] * 1e3, "offload_ms": times[1] * 1e3,
                         "gain": 1 - times[1] / times[0]})
    frame = pd.DataFrame(rows)
    gain = frame.pivot(index="size_KiB", columns="costs", values="gain")
    receive = {name: 1 - c.receive(True) / c.receive(False)
               for name, c in protocol_costs.TABLE5.items()}
    engine = protocol_costs.PacketOffload(1.0, 0.0, PLATFORMS["cluster3"].speed * 700 / 132)
    path = {}
    for h in np.linspace(0, 1, 21):
        net = replace(base.network, engine=replace(engine, hardware=float(h)))
        dc = replace(base, sites=(fixed_size(4 * KiB, clients=1),), network=net)
        path[round(float(h), 2)] = tiers.solve(dc).response[0]
    plain = tiers.solve(replace(base, sites=(fixed_size(4 * KiB, clients=1),))).response[0]
    better = [h for h, t in path.items() if t < plain]
    rising = gain.loc[:16, "datacenter"]
    checks = (
        Check("the receiver's checksum offload saves more in the data centre than in a "
              "micro-benchmark (Table 5)",
              bool(receive["datacenter"] > receive["micro"]),
              f"per byte received: data centre {receive['datacenter']:.0%}, micro "
              f"{receive['micro']:.0%}"),
        Check("the response-time gain grows with the message size up to 16 KiB",
              bool(rising.is_monotonic_increasing),
              f"data-centre costs: {rising.iloc[0]:.1%} at 1 KiB, {rising.iloc[-1]:.1%} at "
              "16 KiB (paper: up to 15% at 16 KB)"),
        Check("per-packet offload to firmware slows the path; it pays only above the "
              "break-even hardware share",
              bool(path[0.0] > plain and better
                   and abs(min(better) - engine.break_even_hardware) <= 0.05 + 1e-9),
              f"4 KiB: {path[0.0] * 1e3:.3f} ms all firmware, {plain * 1e3:.3f} ms without; "
              f"faster from h = {min(better) if better else float('nan'):.2f} "
              f"(1 - 1/r = {engine.break_even_hardware:.2f})"))
    return Study("checksum", "Checksum offload by message size (Fig. 17b)", frame, checks,
                 "size_KiB", "gain", "costs", log_x=True)


STUDIES: dict[str, Callable[[tiers.DataCentre], Study]] = {
    "alpha": alpha, "classes": classes, "hitratio": hit_ratio, "placement": placement,
    "memfs": memory_fs, "cpus": cpus, "checksum": checksum}


def parse(names: str) -> tuple[str, ...]:
    """``"all"`` or names of :data:`STUDIES`, comma-separated."""
    chosen = tuple(STUDIES) if names.strip() == "all" else tuple(
        n.strip() for n in names.split(",") if n.strip())
    bad = [n for n in chosen if n not in STUDIES]
    if bad or not chosen:
        raise InputError(f"--preset {names!r}: use all or some of {', '.join(STUDIES)}, "
                         "comma-separated")
    return chosen
