"""What makes engine mode's CPU per request fall as the load rises (issue 25).

The study's model charges each queue a cost per wake-up, once per busy period: 1 - U
wake-ups per request (docs/model.md §15). In engine mode the engine's CPU per request
falls much further than that over a sweep, and the fit from light calibration runs
overcharges it at high load. This benchmark measures the mechanism behind it.

It serves one size class in engine mode (host thread on core 0, engine and load
generator on core 1, idle cores polling as in every study) with Poisson arrivals at
each ``--rates`` point, ``--repeats`` times in turn, and prints per run:

- the engine's CPU per request (its thread clock, the stats document) and its sleeps
  per request: the engine thread's voluntary context switches, read from
  ``/proc/self/task/TID/status`` every 50 ms while the run lasts;
- its busy part (the study's U_engine leaves out the empty turn before each sleep), its
  own busy share U_e, the host's wake-ups (rounds) per request, the mean
  number of other requests in each batch of events the engine publishes and of
  answers (commands) the host publishes, and the mean trip of a request through the
  host (from passing it up to its first command coming back);
- the kernel's network work deferred to each core's ksoftirqd (its schedstat), per
  request: on nobody's thread clock; the engine core's busy share; and how late the
  generator started the requests against its plan (mean and p99 send lag). Near the
  top of a sweep the generator's core fills, it falls behind and sends in bursts, and
  the engine wakes less than a Poisson stream would make it (bench/results/model_misses.md).

Then two fits over all runs, each printed beside its measurements:

1. engine CPU per request = X + D * sleeps per request (least squares, R²): what one
   sleep and wake-up costs the engine;
2. sleeps per request against two predictions from the same runs' busy shares: the
   model's 1 - U_e (a wake-up per busy period, requests arriving one by one), and
   (1 - U_e) (1 + rounds) (the engine wakes for each request from the network and for
   each batch of answers from the host that finds it asleep). The closer the ratio
   measured / predicted stays to a constant over the sweep, the better the prediction's
   shape; its spread is printed.

    .venv/bin/python bench/engine_turns.py [--class 0] [--rates 700,2000,3300,4600,6000]
        [--seconds 3] [--repeats 2] [--work 'exp(mean=100us)'] [--generator-core 1]
        [--out DIR]

About 40 s of load with the defaults, plus the file set (class 0: 1,000 small files).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.results import write_outputs
from offloadlab.study.measure import core_shares
from offloadlab.testbed import modes
from offloadlab.testbed.server import ServerOptions
from offloadlab.workload import fileset, presets, stream

HOST_CORE, ENGINE_CORE = 0, 1
SAMPLE_S = 0.05


class Switches:
    """Samples a thread's voluntary context switches while a run lasts: the first and
    the last reading of each thread named ``name`` in this process, with their times."""

    def __init__(self, name: str):
        self.name, self.first, self.last = name, {}, {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Switches:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def _loop(self) -> None:
        while not self.stop.is_set():
            for task in Path("/proc/self/task").iterdir():
                try:
                    if (task / "comm").read_text().strip() != self.name:
                        continue
                    status = (task / "status").read_text()
                except OSError:  # the thread ended between listing and reading
                    continue
                n = next(int(line.split()[1]) for line in status.splitlines()
                         if line.startswith("voluntary_ctxt_switches"))
                self.first.setdefault(task.name, (time.monotonic(), n))
                self.last[task.name] = (time.monotonic(), n)
            self.stop.wait(SAMPLE_S)

    def per_second(self) -> float:
        """Switches per second over the sampled window (summed over the threads)."""
        span = sum(self.last[t][0] - self.first[t][0] for t in self.first)
        count = sum(self.last[t][1] - self.first[t][1] for t in self.first)
        return count / span if span > 0 else float("nan")


def softirq_threads() -> dict[int, Path]:
    """Each core's ksoftirqd: network work the kernel defers from the threads that raised
    it runs there, on nobody's thread clock."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            name = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if proc.name.isdigit() and name.startswith("ksoftirqd/"):
            found[int(name.split("/")[1])] = proc / "schedstat"
    return found


def runtimes(threads: dict[int, Path]) -> dict[int, float]:
    """Each thread's CPU time so far, s (the first field of its schedstat)."""
    return {core: int(path.read_text().split()[0]) / 1e9 for core, path in threads.items()}


def one_run(root: Path, manifest: pd.DataFrame, cls: int, rate: float, args) -> dict:
    requests = stream.poisson(manifest, rate, duration_s=args.seconds, size_class=cls,
                              seed=int(rate))
    options = ServerOptions(root=str(root), mode="engine", host_core=HOST_CORE,
                            engine_core=ENGINE_CORE, work=args.work, seed=1,
                            engine_wait="sleep")
    kthreads = softirq_threads()
    before = runtimes(kthreads)
    with Switches("offload-engine") as switches:
        run = modes.run_mode(options, requests, manifest, timeout_s=5.0,
                             cores=[args.generator_core], threads=1, verify="length")
    deferred = {core: s - before[core] for core, s in runtimes(kthreads).items()}
    per, served = run.stats.per_request, run.load.parsed.throughput
    requests_served = run.stats.requests
    busy = {c.core: 1 - core_shares(c).get("idle", np.nan) for c in run.stats.cores}
    return {"rate": rate, "served": served,
            "engine_us": per.engine_cpu_s * 1e6,
            "busy_us": per.engine_busy_cpu_s * 1e6,
            "sleeps": switches.per_second() / served,
            "U_e": per.engine_busy_cpu_s * served,
            "rounds": per.host_wakeups,
            "event_mates": per.event_batch_others,
            "command_mates": per.command_batch_others,
            "trip_us": per.host_turnaround_s * 1e6,
            "ksoft_engine_us": deferred.get(ENGINE_CORE, np.nan) / requests_served * 1e6,
            "ksoft_host_us": deferred.get(HOST_CORE, np.nan) / requests_served * 1e6,
            "U_host": per.host_busy_cpu_s * served,
            "engine_core_busy": busy.get(ENGINE_CORE, np.nan),
            "lag_us": (run.load.parsed.lag.mean_s or np.nan) * 1e6,
            "lag99_us": (run.load.parsed.lag.p99_s or np.nan) * 1e6,
            "T_us": run.load.parsed.total.mean_s * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--class", dest="cls", type=int, default=0)
    parser.add_argument("--rates", default="700,2000,3300,4600,6000")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--work", default="exp(mean=100us)")
    parser.add_argument("--generator-core", type=int, default=ENGINE_CORE,
                        help="the core the load generator shares (default: the engine's)")
    parser.add_argument("--out", type=Path, help="also write DIR/engine_turns.csv")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        spec = presets.preset("toe-2009")[args.cls]
        fileset.materialise(fileset.generate(spec), tmp)
        manifest = fileset.read_manifest(tmp)
        runs = []
        for repeat in range(args.repeats):
            for rate in rates:
                runs.append(one_run(Path(tmp), manifest, args.cls, rate, args))
                r = runs[-1]
                print(f"repeat {repeat + 1} rate {rate:6.0f}: engine {r['engine_us']:5.1f} us/req"
                      f" ({r['busy_us']:5.1f} busy), {r['sleeps']:.2f} sleeps/req, ksoftirqd"
                      f" {r['ksoft_engine_us']:.1f} us/req", flush=True)
    frame = pd.DataFrame(runs).sort_values(["rate", "served"], kind="stable")
    report(frame)
    print(f"Run time: {time.monotonic() - started:.0f} s")
    if args.out:
        write_outputs(args.out, {"engine_turns.csv": frame})


def line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, np.ndarray, float]:
    """Least-squares y = a + b x: a, b, the fitted values and R²."""
    b, a = np.polyfit(x, y, 1)
    fitted = a + b * x
    return a, b, fitted, 1 - ((y - fitted) ** 2).sum() / ((y - y.mean()) ** 2).sum()


def report(frame: pd.DataFrame) -> None:
    x = frame["sleeps"].to_numpy()
    intercept, slope, fitted, r2 = line(x, frame["engine_us"].to_numpy())
    busy = line(x, frame["busy_us"].to_numpy())
    p0 = 1 - frame["U_e"].to_numpy()
    busy_periods = x / p0
    epochs = x / (p0 * (1 + frame["rounds"].to_numpy()))
    print("\nper run (sorted by rate)")
    print(f"{'req/s':>7} {'engine us':>9} {'fit us':>7} {'busy us':>7} {'sleeps':>6} {'U_e':>5} "
          f"{'rounds':>6} "
          f"{'events+':>7} {'cmds+':>6} {'trip us':>7} {'T us':>6} "
          f"{'/(1-U_e)':>8} {'/(1-U_e)(1+rounds)':>18} {'ksoftirqd e/h us':>16} "
          f"{'core e':>6} {'lag us':>6} {'lag p99':>7}")
    for i, r in enumerate(frame.itertuples()):
        print(f"{r.served:7.0f} {r.engine_us:9.1f} {fitted[i]:7.1f} {r.busy_us:7.1f}"
              f" {r.sleeps:6.2f} {r.U_e:5.3f} {r.rounds:6.2f} {r.event_mates:7.2f}"
              f" {r.command_mates:6.2f} {r.trip_us:7.0f} {r.T_us:6.0f} {busy_periods[i]:8.2f}"
              f" {epochs[i]:18.2f} {r.ksoft_engine_us:8.1f}/{r.ksoft_host_us:<7.1f}"
              f" {r.engine_core_busy:6.2f} {r.lag_us:6.0f} {r.lag99_us:7.0f}")
    print(f"\n1. engine CPU per request = {intercept:.1f} us + {slope:.1f} us x sleeps per "
          f"request (R² {r2:.3f}, {len(frame)} runs); its busy part (without the empty turns "
          f"before each sleep, the study's U_engine) = {busy[0]:.1f} us + {busy[1]:.1f} us x "
          f"sleeps (R² {busy[3]:.3f})")
    print("2. sleeps per request / prediction, over the sweep (a constant is the right shape):")
    for name, ratio in (("1 - U_e (the model's wake-ups)", busy_periods),
                        ("(1 - U_e)(1 + rounds)", epochs)):
        print(f"   {name:32s} median {statistics.median(ratio):.2f}, range "
              f"{ratio.min():.2f}-{ratio.max():.2f} (max/min {ratio.max() / ratio.min():.2f})")


if __name__ == "__main__":
    main()
