"""Benchmark: the FastFlow detector against Space-Saving on traces with planted heavy
hitters.

Two synthetic traces (offloadlab.workload.flows.synthetic), each with a known set of
heavy flows spread over the whole trace among bursty short flows:
  easy  20 heavy flows carrying 50 % of the packets; short flows of 1-100 packets;
  hard  100 heavy flows carrying 30 %; short flows of 1-1000 packets, so the largest
        short flows outgrow the smallest heavy ones.
On the same trace in the same run:
  ours  the detector with its defaults (no threshold given: the entropy rule decides);
  peer  Space-Saving with --k counters (Rust, the same hash map), reporting the flows
        whose guaranteed count exceeds half the smallest planted share: it is told
        what size to look for, the detector is not.
Both loops are timed inside Rust (no Python in the loop): a warm-up, then the median of
--repeat runs. Memory is what each holds at its peak (hash-map buckets counted at their
capacity): per tracked flow and in total. Precision and recall are against the planted
set; ratios are ours/peer.

    .venv/bin/python bench/flows_vs_sketch.py [--short-flows 200000] [--k 1024] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics

from offloadlab.workload import flows

TRACES = {"easy": {"heavy": 20, "heavy_share": 0.5, "max_short": 100},
          "hard": {"heavy": 100, "heavy_share": 0.3, "max_short": 1000}}


def smallest_share(keys, heavy: set[int]) -> float:
    counts = [int((keys == h).sum()) for h in heavy]
    return min(counts) / len(keys)


def bench(name: str, spec: dict, short_flows: int, k: int, repeat: int) -> None:
    keys, heavy = flows.synthetic(short_flows=short_flows, seed=1, **spec)
    threshold = int(smallest_share(keys, heavy) / 2 * len(keys))
    flows.detect(keys[:100_000])  # warm-up
    flows.space_saving(keys[:100_000], k, threshold)
    ours = [flows.detect(keys) for _ in range(repeat)]
    peer = [flows.space_saving(keys, k, threshold) for _ in range(repeat)]
    o, p = ours[0], peer[0]
    o_rate = len(keys) / statistics.median(r.seconds for r in ours)
    p_rate = len(keys) / statistics.median(r["seconds"] for r in peer)
    o_pr = flows.precision_recall(o.flows, heavy)
    p_pr = flows.precision_recall(p["flows"], heavy)
    p_per_flow = p["bytes"] / k
    print(f"\n{name}: {len(keys):,} packets, {len(heavy)} heavy flows, "
          f"{short_flows:,} short ones; Space-Saving k={k}, threshold {threshold:,} packets")
    print(f"{'':24}{'ours':>14}{'peer':>14}")
    print(f"{'precision':24}{o_pr[0]:>14.3f}{p_pr[0]:>14.3f}")
    print(f"{'recall':24}{o_pr[1]:>14.3f}{p_pr[1]:>14.3f}")
    print(f"{'flows reported':24}{len(o.flows):>14,}{len(p['flows']):>14,}")
    print(f"{'Mpackets/s (median)':24}{o_rate / 1e6:>14.1f}{p_rate / 1e6:>14.1f}")
    print(f"{'bytes per tracked flow':24}{o.bytes_per_flow:>14.1f}{p_per_flow:>14.1f}")
    print(f"{'peak bytes':24}{o.peak_bytes:>14,}{p['bytes']:>14,}")
    print(f"ratio ours/peer {name}: throughput {o_rate / p_rate:.2f}, "
          f"bytes per flow {o.bytes_per_flow / p_per_flow:.2f}, "
          f"total bytes {o.peak_bytes / p['bytes']:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short-flows", type=int, default=200_000)
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    for name, spec in TRACES.items():
        bench(name, spec, a.short_flows, a.k, a.repeat)


if __name__ == "__main__":
    main()
