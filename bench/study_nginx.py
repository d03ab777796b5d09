"""Does ``offload study`` measure a user's server's CPU per request? Issue 47's nginx
target: E[X_a] + E[X_p] per class within 10% of nginx's worker CPU per request, measured
independently over the same runs.

Runs one study with nginx (one worker, ``examples/nginx.conf``, on loopback) as the
user's server (``--server-cmd``), inline against engine, on the quick budget trimmed
(``--sweep-points 3 --replicates 1 --steal-repeats 0 --no-handoff --no-mix``). Around
each of its calibration runs on nginx, this script reads nginx's processes' user and
system time from ``/proc/PID/stat`` (clock ticks, as bench/server_vs_nginx.sh's peer
reading; the study reads each thread's schedstat) and counts the requests the run
completed. It prints per class nginx's CPU per request so measured, beside the study's:
the fitted host demand at those runs (E[X_a] + E[X_p] and the fit's wake-up CPU there,
the model's host-alone cost), E[X_a] + E[X_p] alone, their ratios to nginx's, and
whether each is within 10%. Then the same reading over the study's saturation runs,
where a worker kept busy would never sleep and so spend no CPU on waking: its CPU per
request there beside E[X_a] + E[X_p], the per-request part of the fit (on this 2-core
machine the generator kept nginx at most 78 % busy, so some wake-ups remain). About 5 minutes for
classes 0-3 on this 2-core machine.

    .venv/bin/python bench/study_nginx.py [--classes 0,1,2,3] [--run-length 2s] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from offloadlab.mode_traits import BASELINE
from offloadlab.study import external as host_server
from offloadlab.study import pipeline
from offloadlab.testbed import external

TARGET = 0.10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="0,1,2,3")
    parser.add_argument("--run-length", default=None, help="default: the quick budget's")
    parser.add_argument("--keep", type=Path, help="keep the study's folder here")
    args = parser.parse_args()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(nginx, os.X_OK):
        sys.exit("nginx is not installed; apt-get install nginx")
    tmp = Path(tempfile.mkdtemp(prefix="study-nginx-"))
    out = args.keep or tmp / "study"
    folder, port = tmp / "nginx", external.free_port()
    conf = external.nginx_config(folder, out / "fileset", port)
    seen = watch_calibration()
    config = pipeline.StudyConfig(
        out, classes=args.classes, modes="inline,engine", run_length=args.run_length,
        sweep_points=3, replicates=1, steal_repeats=0, mix=False, handoff_slowdown=None,
        server_cmd=f"{nginx} -c {conf} -p {folder}", target=f"127.0.0.1:{port}")
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"({os.cpu_count()} cores)")
    started = time.monotonic()
    try:
        pipeline.run(pipeline.prepare(config))
    finally:
        shutil.rmtree(tmp if args.keep is None else folder, ignore_errors=True)
    took = time.monotonic() - started
    print_table(seen, _last_summary)
    print(f"study time {took:.0f} s; load average after: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


# The study's summary of the user's server, as the study made it (watch_calibration).
_last_summary: dict = {}


def watch_calibration() -> dict:
    """Per run kind ("calibration", "saturation") and class, nginx's /proc/PID/stat CPU
    seconds and completed requests summed over the study's runs of that kind on it; the
    study's summary is kept as it is made."""
    seen: dict = {"calibration": {}, "saturation": {}}
    measure, summary = host_server.HostServer.measure, host_server.HostServer.summary

    def measured(self, plan, load, mode, use, rate, *rest, **options):
        if mode != BASELINE or use not in seen:
            return measure(self, plan, load, mode, use, rate, *rest, **options)
        before = _stat_cpu_s(self.live.pid)
        m = measure(self, plan, load, mode, use, rate, *rest, **options)
        cpu, n = seen[use].get(load.name, (0.0, 0))
        seen[use][load.name] = (cpu + _stat_cpu_s(self.live.pid) - before,
                                n + m.run.requests)
        return m

    def kept(self, study) -> dict:
        _last_summary.update(summary(self, study))
        return _last_summary

    host_server.HostServer.measure = measured
    host_server.HostServer.summary = kept
    return seen


def _stat_cpu_s(pid: int) -> float:
    """User and system seconds of nginx's master and workers (/proc/PID/stat)."""
    total = 0.0
    for p in external.tree(pid):
        with contextlib.suppress(OSError):
            total += external.stat_cpu_s(p)
    return total


def print_table(seen: dict, summary: dict) -> None:
    rows = {t["class"]: t for t in summary["threads"]
            if t["name"] == host_server.ALL_THREADS}
    print("\nnginx (1 worker) as the user's server: CPU per request over the calibration "
          "runs, µs")
    print(f"{'class':6} {'requests':>9} {'nginx stat':>11} {'study demand':>13} "
          f"{'ratio':>6} {'≤10%':>5} {'EXa+EXp':>8} {'ratio':>6} {'≤10%':>5} "
          f"{'wake-ups':>9} {'schedstat':>10}")
    for cls, (cpu, n) in seen["calibration"].items():
        row = rows[cls]
        stat = cpu / n
        bare = row["EXa"] + row["EXp"]
        demand = bare + row["wakeup_s"]
        print(f"{cls:6} {n:>9,} {stat * 1e6:>11.1f} {demand * 1e6:>13.1f} "
              f"{demand / stat:>6.3f} {_within(demand, stat):>5} {bare * 1e6:>8.1f} "
              f"{bare / stat:>6.3f} {_within(bare, stat):>5} {row['wakeup_s'] * 1e6:>9.1f} "
              f"{row['cpu_per_request_s'] * 1e6:>10.1f}")
    # Where nginx's worker never sleeps, its CPU per request has no wake-ups in it: the
    # per-request part alone, which E[X_a] + E[X_p] is. Only if the closed loop keeps it
    # busy: "most cores" below says how busy it was.
    print("\nnginx's CPU per request over the saturation runs (closed loop, zero think "
          "time), µs")
    print(f"{'class':6} {'requests':>9} {'nginx stat':>11} {'EXa+EXp':>8} {'ratio':>6} "
          f"{'≤10%':>5}")
    for cls, (cpu, n) in seen["saturation"].items():
        stat, bare = cpu / n, rows[cls]["EXa"] + rows[cls]["EXp"]
        print(f"{cls:6} {n:>9,} {stat * 1e6:>11.1f} {bare * 1e6:>8.1f} {bare / stat:>6.3f} "
              f"{_within(bare, stat):>5}")
    print(f"most cores nginx kept busy in one run: {summary['most_cores']:.2f}")


def _within(ours: float, peer: float) -> str:
    return "yes" if abs(ours / peer - 1) <= TARGET else "no"


if __name__ == "__main__":
    main()
