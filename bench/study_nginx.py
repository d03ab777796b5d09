"""Does ``offload study`` measure a user's server's CPU per request? Issue 47's nginx
target: E[X_a] + E[X_p] per class within 10% of nginx's worker CPU per request, measured
independently over the same runs.

Runs one study with nginx (one worker, ``examples/nginx.conf``, on loopback) as the
user's server (``--server-cmd``), inline against engine, on the quick budget trimmed
(``--sweep-points 3 --replicates 3 --steal-repeats 0 --no-handoff --no-mix``: three
replicates of each calibration run, so that the fit's split of nginx's CPU between
wake-ups and requests rests on more than one run per rate). Around
each of its calibration runs on nginx, this script reads nginx's processes' user and
system time from ``/proc/PID/stat`` (clock ticks, as bench/server_vs_nginx.sh's peer
reading; the study reads each thread's schedstat) and counts the requests the run
completed. It prints per class nginx's CPU per request so measured, beside the study's:
the fitted host demand at those runs (E[X_a] + E[X_p] and the fit's wake-up CPU there,
the model's host-alone cost), E[X_a] + E[X_p] alone, their ratios to nginx's, and
whether each is within 10%. Then the same reading over the study's saturation runs.

E[X_a] + E[X_p] is the per-request part of the fit: what a request costs a worker that
never waits for work. The study's saturation runs do not give such a worker on this
2-core machine (the generator, alone on the other core, kept nginx at most 78-84 %
busy), so the target's reference is a run of its own after the study: nginx, started
afresh on the study's file set and core, held by a CFS quota to half a core
(cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``) and driven by 64 closed-loop
clients from the other core. The generator can then outrun it, so whenever the worker
may run it finds requests waiting; its voluntary context switches per request and the
quota periods it was throttled in show that it did. About 9 minutes for classes 0-3
on this 2-core machine.

    .venv/bin/python bench/study_nginx.py [--classes 0,1,2,3] [--run-length 2s] [--replicates 3]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from offloadlab.mode_traits import BASELINE
from offloadlab.study import external as host_server
from offloadlab.study import pipeline
from offloadlab.testbed import cores, external, load
from offloadlab.workload import stream

TARGET = 0.10
QUOTA = 0.5  # of a core: what nginx may use in the never-idle runs
CLIENTS = 64
BUSY_S = 4.0  # one never-idle run
BUSY_REPEATS = 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="0,1,2,3")
    parser.add_argument("--run-length", default=None, help="default: the quick budget's")
    parser.add_argument("--replicates", type=int, default=3)
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
        sweep_points=3, replicates=args.replicates, steal_repeats=0, mix=False,
        handoff_slowdown=None,
        server_cmd=f"{nginx} -c {conf} -p {folder}", target=f"127.0.0.1:{port}")
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"({os.cpu_count()} cores)")
    started = time.monotonic()
    try:
        pipeline.run(pipeline.prepare(config))
        took = time.monotonic() - started
        busy = never_idle(f"{nginx} -c {conf} -p {folder}", port, out / "fileset",
                          list(seen["calibration"]))
    finally:
        shutil.rmtree(tmp if args.keep is None else folder, ignore_errors=True)
    print_table(seen, _last_summary, busy)
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


def never_idle(command: str, port: int, files: Path, classes: list[str]) -> dict:
    """Per class: nginx's /proc/PID/stat CPU seconds, completed requests, voluntary
    context switches and throttled quota periods, summed over :data:`BUSY_REPEATS` runs
    of :data:`CLIENTS` closed-loop clients with nginx held to :data:`QUOTA` of its core."""
    host, generator = cores.choose()
    server = external.ExternalServer(command=command, target=f"127.0.0.1:{port}")
    found = {}
    with quota(QUOTA) as group, external.running(server, files, core=host) as live:
        for p in external.tree(live.pid):
            group.add(p)
        for cls in classes:
            folder = next(files.glob(f"*-{cls}"))
            requests = stream.closed(folder, CLIENTS, requests=500, seed=1)
            totals = [0.0, 0, 0, 0]
            for _ in range(BUSY_REPEATS):
                before = (_stat_cpu_s(live.pid), _switches(live.pid), group.throttled())
                m = load.run(f"http://127.0.0.1:{port}/{folder.name}/", requests, folder,
                             repeat=True, max_duration_s=BUSY_S, threads=1, verify="length",
                             cores=[] if generator is None else [generator])
                after = (_stat_cpu_s(live.pid), _switches(live.pid), group.throttled())
                totals[0] += after[0] - before[0]
                totals[1] += m.parsed.completed
                totals[2] += after[1] - before[1]
                totals[3] += after[2] - before[2]
            found[cls] = tuple(totals)
    return found


class _Group:
    """A CPU cgroup (v2 or v1) with a quota."""

    def __init__(self, path: Path, v2: bool):
        self.path, self.v2 = path, v2

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def throttled(self) -> int:
        for line in (self.path / "cpu.stat").read_text().splitlines():
            if line.startswith("nr_throttled"):
                return int(line.split()[1])
        return 0


@contextlib.contextmanager
def quota(share: float) -> Iterator[_Group]:
    """A cgroup whose processes may use ``share`` of one core in every 100 ms; removed
    on the way out, once its processes have exited (stop them inside the block)."""
    period = 100_000
    root = Path("/sys/fs/cgroup")
    v2 = "cpu" in (root / "cgroup.controllers").read_text().split() \
        if (root / "cgroup.controllers").exists() else False
    base = root if v2 else root / "cpu"
    if not (v2 or (base / "cpu.cfs_quota_us").exists()):
        sys.exit("the never-idle runs need the CPU controller of cgroups "
                 "(/sys/fs/cgroup/cpu.max or /sys/fs/cgroup/cpu/cpu.cfs_quota_us), and root")
    path = base / f"offloadlab-nginx-{os.getpid()}"
    path.mkdir()
    try:
        if v2:
            (path / "cpu.max").write_text(f"{int(share * period)} {period}")
        else:
            (path / "cpu.cfs_period_us").write_text(str(period))
            (path / "cpu.cfs_quota_us").write_text(str(int(share * period)))
        yield _Group(path, v2)
    finally:
        for _ in range(50):  # the stopped server's processes leave the group as they exit
            with contextlib.suppress(OSError):
                path.rmdir()
            if not path.exists():
                break
            time.sleep(0.1)
        else:
            print(f"warning: {path} still holds processes; remove it with rmdir once they "
                  "have exited", file=sys.stderr)


def _switches(pid: int) -> int:
    """Voluntary context switches of every thread of ``pid``'s tree: each is a sleep."""
    total = 0
    for p in external.tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
    return total


def print_table(seen: dict, summary: dict, busy: dict) -> None:
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
    print(f"\nnginx held to {QUOTA:.0%} of its core and never idle ({CLIENTS} clients, "
          f"{BUSY_REPEATS} runs of {BUSY_S:.0f} s per class): the target's reference, µs")
    print(f"{'class':6} {'requests':>9} {'nginx stat':>11} {'EXa+EXp':>8} {'ratio':>6} "
          f"{'≤10%':>5} {'sleeps/request':>15} {'throttled':>10} {'busy':>5}")
    for cls, (cpu, n, sleeps, throttled) in busy.items():
        stat, bare = cpu / n, rows[cls]["EXa"] + rows[cls]["EXp"]
        print(f"{cls:6} {n:>9,} {stat * 1e6:>11.1f} {bare * 1e6:>8.1f} {bare / stat:>6.3f} "
              f"{_within(bare, stat):>5} {sleeps / n:>15.3f} {throttled:>10} "
              f"{cpu / (BUSY_S * BUSY_REPEATS):>5.2f}")
    met = sum(_within(rows[c]["EXa"] + rows[c]["EXp"], v[0] / v[1]) == "yes"
              for c, v in busy.items())
    print(f"target (E[X_a] + E[X_p] within {TARGET:.0%} of the never-idle worker's CPU per "
          f"request): {'met' if met == len(busy) else 'missed'}, {met} of {len(busy)} classes")


def _within(ours: float, peer: float) -> str:
    return "yes" if abs(ours / peer - 1) <= TARGET else "no"


if __name__ == "__main__":
    main()
