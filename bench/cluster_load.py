"""``offload load --cluster`` against issue 49's targets, on the test cluster
(``offloadlab.testbed.testcluster``): network namespaces on a private bridge, the testbed's
server in the server host, a Dask worker with ``client=1`` in each of three client hosts.

- **Rate.** A Poisson stream (HTTP/1.0) at ``--rate`` for ``--duration``, split over the
  three hosts, ``--runs`` times: the merged achieved rate against the plan's drawn rate
  and the nominal one (target: within 2 %), and the K-S test of the gaps between the
  merged send times against the exponential at the plan's rate (passes at p > 0.01):
  the intended times as the hosts were dealt them (the split), and the actual ones (the
  split and each generator's lateness, whose p99 is shown).
- **Merge.** The merged total-time histogram against the histogram of every host's
  records pooled, bucket by bucket (the pooled buckets computed here from the raw
  times; target: equal).
- **Start.** The skew of the hosts' actual starts on the scheduler's clock (target:
  under 10 ms).
- **Lost worker.** One more run that kills a client host's worker ``--kill-after``
  seconds into it: the time from the planned start to the partial report (target: the
  run's duration + 5 s), and whether the other hosts' data is whole.

Needs root. All three client hosts share this machine's 2 cores with the server.

    .venv/bin/python bench/cluster_load.py [--rate 600] [--duration 10] [--runs 3]
        [--kill-after 3]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from scipy import stats

from offloadlab.testbed import cluster, testcluster
from offloadlab.workload import fileset, stream
from offloadlab.workload.specs import FileSetSpec

KS_P = 0.01


def bucket(ns: int) -> int:
    """The highest value of the HDR bucket (lowest 1 ns, 3 significant digits) of ``ns``."""
    shift = max(0, ns.bit_length() - 11)
    return ((ns >> shift) << shift) + (1 << shift) - 1


def exact(result) -> tuple[bool, int]:
    """Whether the merged total-time histogram is the pooled records', and the count."""
    merged = cluster.merge_histograms([c["total"] for c in result.parts["classes"]])
    pooled = np.rint(result.records["total_s"].dropna().to_numpy() * 1e9).astype(np.int64)
    values, counts = np.unique([bucket(int(v)) for v in pooled], return_counts=True)
    return merged["buckets"] == [[int(v), int(n)] for v, n in zip(values, counts,
                                                                 strict=True)], len(pooled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=600.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kill-after", type=float, default=3.0)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, testcluster.started() as c:
        root = Path(tmp) / "site"
        fileset.materialise(fileset.generate(
            FileSetSpec(name="site", n_files=50, max_bytes=20_000, seed=1)), root)
        print(f"test cluster up ({time.monotonic() - started:.1f} s): scheduler "
              f"{c.scheduler}, {len(c.clients)} client hosts", flush=True)
        with testcluster.serving(c, root) as target:
            options = dict(allow_remote={c.server.ip}, threads=1, verify="length")
            print(f"\n{'run':>4} {'planned':>8} {'offered/s':>10} {'achieved/s':>11} "
                  f"{'vs offered':>10} {'vs nominal':>10} {'K-S plan':>9} {'K-S sent':>9} "
                  f"{'lag p99 ms':>10} {'skew ms':>8} {'exact':>6} {'failed':>6}")
            rows = []
            for i in range(args.runs):
                requests = stream.poisson(root, args.rate, duration_s=args.duration,
                                          seed=10 + i)
                r = cluster.run(c.scheduler, target, requests, root, records=True,
                                **options)
                plan, p = (stats.kstest(np.diff(np.sort(r.records[col].to_numpy())), "expon",
                                        args=(0, 1 / r["offered_rate"])).pvalue
                           for col in ("intended_s", "sent_s"))
                same, count = exact(r)
                row = (r["achieved_rate"] / r["offered_rate"] - 1,
                       r["achieved_rate"] / args.rate - 1, p,
                       r["cluster"]["start_skew_s"], same, plan)
                rows.append(row)
                print(f"{i + 1:>4} {r['planned']:>8,} {r['offered_rate']:>10.1f} "
                      f"{r['achieved_rate']:>11.1f} {row[0]:>+10.2%} {row[1]:>+10.2%} "
                      f"{plan:>9.3f} {p:>9.3f} {r['lag']['p99_s'] * 1e3:>10.2f} "
                      f"{row[3] * 1e3:>8.2f} {same!s:>6} {r['failed']:>6}", flush=True)
                if not same or count != r["completed"]:
                    print(f"     merge: {count} pooled records, {r['completed']} completed")
            med = np.median(np.array([row[:4] for row in rows], dtype=float), axis=0)
            print("\nissue 49's targets (medians of the runs):")
            print(f"  rate: achieved vs offered {med[0]:+.2%}, vs nominal {med[1]:+.2%}"
                  f"   target within 2 %")
            print(f"  K-S of merged send gaps: intended (the split) "
                  f"{sum(row[5] > KS_P for row in rows)}/{len(rows)} pass, actual p "
                  f"{med[2]:.3f}, {sum(row[2] > KS_P for row in rows)}/{len(rows)} pass"
                  f"   target p > {KS_P}")
            print(f"  start skew: {med[3] * 1e3:.2f} ms (max "
                  f"{max(row[3] for row in rows) * 1e3:.2f})   target < 10 ms")
            print(f"  merge exact bucket for bucket: {sum(row[4] for row in rows)}/"
                  f"{len(rows)} runs   target all")

            requests = stream.poisson(root, args.rate / 3, duration_s=args.duration, seed=99)
            victim = c.clients[-1]
            killer = threading.Timer(cluster.LEAD_S + args.kill_after, c.kill, [victim])
            killer.start()
            try:
                r = cluster.run(c.scheduler, target, requests, root, **options)
            finally:
                killer.cancel()
            reported = time.time() - r["cluster"]["planned_start_unix_s"]
            kept = [h for h in r["cluster"]["hosts"] if not h["lost"]]
            whole = all(h["completed"] == h["planned"] and h["failed"] == 0 for h in kept)
            print(f"  lost worker: {', '.join(r['cluster']['lost']) or 'none'} lost, "
                  f"partial {r['cluster']['partial']}, report {reported:.2f} s after the "
                  f"planned start, others whole {whole}   target <= "
                  f"{args.duration + cluster.GRACE_S:g} s (duration + 5 s)")
    print(f"\nRun time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
