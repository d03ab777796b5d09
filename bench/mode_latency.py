"""Every study mode's latency at a low rate, its threads pinned and not (issue 45).

At 20 requests/s each request is answered alone, so its latency is the server's path
through one request, plus whatever it waits for a core. Each mode (inline, engine,
uring, handoff) serves a small file set in this process while the load generator
(not pinned, one thread) sends an open-loop Poisson stream of ``--requests`` requests,
each on a new connection, once with the server's threads left to the scheduler and
once pinned as every experiment pins them (host on the first core, engine or SQPOLL
thread on the second: ``testbed/cores.py``). The two runs of a mode follow each other,
in alternating order over ``--repeats`` rounds, so drift on a shared machine hits both
alike. Prints each mode's median and p90 latency per placement (medians over the
rounds), and last the ratio unpinned/pinned of the medians: 1 means the scheduler's
placement costs nothing.

Peer: the same mode pinned; inline is the floor. About 2 minutes with the defaults
(8 runs of 6 s per round, 3 rounds). Needs 2 cores.

    .venv/bin/python bench/mode_latency.py [--requests 120] [--rate 20] [--repeats 3]
                                           [--modes inline,engine,uring,handoff]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from offloadlab.errors import RunError
from offloadlab.testbed import cores, modes
from offloadlab.testbed.server import ServerOptions
from offloadlab.workload import fileset, stream
from offloadlab.workload.specs import FileSetSpec

PLACEMENTS = ("unpinned", "pinned")


def run(root: Path, manifest, requests, mode: str, placement: str) -> tuple[float, float]:
    """One run: the median and p90 latency (seconds) the load generator saw."""
    host, engine = cores.choose() if placement == "pinned" else (None, None)
    options = ServerOptions(root, mode=mode, host_core=host, engine_core=engine)
    for attempt in range(3):
        try:
            done = modes.run_mode(options, requests, manifest, threads=1)
            break
        except RunError as exc:  # e.g. an engine starved by other work and taken over
            print(f"{mode} {placement}, attempt {attempt + 1}: {exc}", file=sys.stderr)
    else:
        raise SystemExit(f"{mode} {placement}: three runs failed")
    total = done.load.parsed.total
    if done.load.parsed.failed:
        raise SystemExit(f"{mode} {placement}: {done.load.parsed.failed} requests failed")
    return total.p50_s, total.p90_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=120)
    parser.add_argument("--rate", type=float, default=20.0, help="Requests per second.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="inline,engine,uring,handoff")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs 2 cores: pinned runs put host and engine on cores of their own")
    names = args.modes.split(",")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mode-latency-") as tmp:
        root = Path(tmp)
        spec = FileSetSpec(name="small", n_files=20, max_bytes=1024, seed=3)
        fileset.materialise(fileset.generate(spec), root)
        manifest = fileset.read_manifest(root)
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for rep in range(args.repeats):
            requests = stream.poisson(manifest, args.rate, count=args.requests, seed=rep + 1)
            for mode in names:
                order = PLACEMENTS if rep % 2 == 0 else PLACEMENTS[::-1]
                for placement in order:
                    results.setdefault((mode, placement), []).append(
                        run(root, manifest, requests, mode, placement))
        load = os.getloadavg()[0]
    print(f"{args.requests} requests at {args.rate:g}/s, a connection each, files up to 1 KiB; "
          f"medians of {args.repeats} rounds; load average {load:.2f} at the end; "
          f"{time.monotonic() - started:.0f} s")
    print(f"{'mode':8} {'unpinned p50':>13} {'p90':>7} {'pinned p50':>11} {'p90':>7}  "
          "ratio unpinned/pinned p50")
    ratios = []
    for mode in names:
        cells = []
        for placement in PLACEMENTS:
            runs = results[(mode, placement)]
            cells += [statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)]
        ratios.append(cells[0] / cells[2])
        print(f"{mode:8} {cells[0] * 1e3:10.2f} ms {cells[1] * 1e3:7.2f} "
              f"{cells[2] * 1e3:8.2f} ms {cells[3] * 1e3:7.2f}  {ratios[-1]:.2f}")
    print("ratio unpinned/pinned p50 "
          + " ".join(f"{m}={r:.2f}" for m, r in zip(names, ratios, strict=True)))


if __name__ == "__main__":
    main()
