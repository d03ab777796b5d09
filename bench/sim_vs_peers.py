"""Benchmark: our discrete-event simulator against Ciw and SimPy on M/M/1 and a tandem.

Two models, run by all three simulators in this process with the same parameters:
  mm1     one M/M/1 FCFS queue, lam = 800/s, mean service 1 ms (U = 0.8)
  tandem  two M/M/1 FCFS queues in series (Jackson), lam = 800/s, mean services 1 ms
          and 0.75 ms (U = 0.8 and 0.6)
Ours models them as one class with offload=0 (mm1: the "cpu" queue) and offload=1
(tandem: "cpu" then "oe"); it always simulates the host-alone "noe" queue alongside, so
it does more work per customer than the peers; model events (below) give it no credit.

Speed is counted the same way for every simulator: a model event is an arrival or a
departure at a station, so mm1 has 2 events per customer and the tandem 3 (the departure
from station 1 is the arrival at station 2); events/s = customers/s x events per customer.
Ours' own kernel count (SimResult.events: one arrival plus a departure per queue,
noe included) is shown separately and is not used for the targets.
Ours is timed from Python (wall clock around sim.run) and, for reference, inside Rust.
Each simulator gets a warm-up run, then the median wall time over --repeat runs. Peers
and ours run different numbers of customers; rates per customer make them comparable.
As a sanity check each mean sojourn, pooled over the timed runs, is printed next to the
closed form (M/M/1: 1/(mu - lam); tandem: the sum over stations), so a broken model
cannot inflate a ratio. Last, peak RSS (VmHWM) of ours at N and 10N customers, each in a
fresh process: streaming statistics should keep the ratio near 1.

    .venv/bin/pip install -e '.[test,bench]' && .venv/bin/python bench/sim_vs_peers.py
    .venv/bin/python bench/sim_vs_peers.py [--customers 100000] [--ours-customers 2000000]
        [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import ciw
import simpy
from measure import high_water_kib  # bench/measure.py

from offloadlab import scenario, sim

LAM = 800.0  # arrivals per second
MODELS: dict[str, tuple[float, ...]] = {"mm1": (1e-3,), "tandem": (1e-3, 0.75e-3)}
TARGET_EVENTS_PER_S = 20e6
TARGET_X_CIW = 100.0
SOJOURN_TOL = 0.05  # about 4 standard errors at the default sizes (mm1, U = 0.8)


@dataclass
class Run:
    """One timed run: wall seconds, customers completed, their mean sojourn (s)."""

    wall_s: float
    customers: int
    sojourn_s: float
    rust_wall_s: float = 0.0
    kernel_events: int = 0


def events_per_customer(model: str) -> int:
    return 1 + len(MODELS[model])


def closed_form_sojourn(model: str) -> float:
    """Jackson: each station is an M/M/1 with mean sojourn 1/(mu - lam)."""
    return sum(1.0 / (1.0 / m - LAM) for m in MODELS[model])


def run_ciw(model: str, n: int, seed: int) -> Run:
    means = MODELS[model]
    k = len(means)
    ciw.seed(seed)
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(LAM)] + [None] * (k - 1),
        service_distributions=[ciw.dists.Exponential(1.0 / m) for m in means],
        number_of_servers=[1] * k,
        routing=[[1.0 if j == i + 1 else 0.0 for j in range(k)] for i in range(k)])
    simulation = ciw.Simulation(net)
    start = time.perf_counter()
    simulation.simulate_until_max_customers(n, method="Finish")
    wall = time.perf_counter() - start
    done = simulation.nodes[-1].all_individuals
    total = sum(r.exit_date - r.arrival_date for ind in done for r in ind.data_records)
    return Run(wall, len(done), total / len(done))


def run_simpy(model: str, n: int, seed: int) -> Run:
    """Idiomatic SimPy: a source process, one Resource per station, a process per customer."""
    rng = random.Random(seed)
    env = simpy.Environment()
    stations = [(simpy.Resource(env, capacity=1), 1.0 / m) for m in MODELS[model]]
    finished = env.event()
    count, total = 0, 0.0

    def customer():
        nonlocal count, total
        arrived = env.now
        for res, rate in stations:
            with res.request() as req:
                yield req
                yield env.timeout(rng.expovariate(rate))
        count += 1
        total += env.now - arrived
        if count == n:
            finished.succeed()

    def source():
        while True:
            yield env.timeout(rng.expovariate(LAM))
            env.process(customer())

    env.process(source())
    start = time.perf_counter()
    env.run(until=finished)
    return Run(time.perf_counter() - start, count, total / count)


def ours_scenario(model: str) -> scenario.Scenario:
    """mm1: offload=0 keeps every request on the host (cpu = noe = the M/M/1); tandem:
    offload=1 sends each through cpu (X_a + X_o, mean 1 ms) then oe (X_c + X_q, 0.75 ms)."""
    host_overhead = "exp(mean=1ms)" if model == "tandem" else "det(0)"
    cls = {"name": "c", "rate": LAM, "app": "det(0)", "host_proto": "exp(mean=1ms)",
           "host_overhead": host_overhead, "engine_overhead": "det(0)",
           "engine_proto": "exp(mean=0.75ms)", "offload": 1.0 if model == "tandem" else 0.0}
    return scenario.from_dict({"name": f"bench-{model}", "class": [cls]}, "<bench>")


def run_ours(model: str, n: int, seed: int) -> Run:
    sc = ours_scenario(model)
    start = time.perf_counter()
    res = sim.run(sc, requests=n, seed=seed, replications=1, warmup=0, threads=1)
    wall = time.perf_counter() - start
    sojourn = res.overall["T_sum" if model == "tandem" else "T_cpu"][0]
    return Run(wall, n, float(sojourn), res.wall_s, res.events)


def measure(fn: Callable[[str, int, int], Run], model: str, n: int, repeat: int) -> list[Run]:
    fn(model, n, 0)  # warm-up
    return [fn(model, n, seed) for seed in range(1, repeat + 1)]


def pooled_sojourn(runs: list[Run]) -> float:
    return sum(r.sojourn_s * r.customers for r in runs) / sum(r.customers for r in runs)




def peak_rss_mib(model: str, n: int) -> tuple[float, float]:
    """Peak RSS of a fresh interpreter, MiB: after its imports, and after running ours
    once on n customers."""
    out = subprocess.run([sys.executable, __file__, "--rss-child", model, str(n)],
                         check=True, capture_output=True, text=True).stdout
    base, peak = (int(x) / 1024 for x in out.split())
    return base, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--customers", type=int, default=100_000, help="per run, Ciw and SimPy")
    ap.add_argument("--ours-customers", type=int, default=2_000_000, help="per run, ours")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rss-child", nargs=2, metavar=("MODEL", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        base = high_water_kib()
        run_ours(args.rss_child[0], int(args.rss_child[1]), 1)
        print(base, high_water_kib())
        return

    sims: dict[str, tuple[Callable[[str, int, int], Run], int]] = {
        "ciw": (run_ciw, args.customers), "simpy": (run_simpy, args.customers),
        "ours": (run_ours, args.ours_customers)}
    print(f"lam = {LAM:g}/s; mm1: mean service 1 ms; tandem: 1 ms then 0.75 ms. Events are "
          "arrivals + departures per station (mm1 2, tandem 3 per customer) for every "
          f"simulator. Wall time: warm-up, then median of {args.repeat} runs; one core.")
    print(f"{'simulator':<14}{'model':<8}{'customers':>11}{'median s':>10}{'cust/s':>12}"
          f"{'events/s':>12}  mean sojourn vs closed form")
    rate: dict[tuple[str, str], float] = {}  # customers/s
    kernel: dict[str, float] = {}  # ours' kernel events per customer
    for model in MODELS:
        exact = closed_form_sojourn(model)
        for name, (fn, n) in sims.items():
            runs = measure(fn, model, n, args.repeat)
            walls = {name: statistics.median(r.wall_s for r in runs)}
            if name == "ours":
                walls["ours in Rust"] = statistics.median(r.rust_wall_s for r in runs)
            soj = pooled_sojourn(runs)
            for label, wall in walls.items():
                rate[label, model] = n / wall
                print(f"{label:<14}{model:<8}{n:>11,}{wall:>10.3f}{n / wall:>12.3e}"
                      f"{n / wall * events_per_customer(model):>12.3e}  {soj * 1e3:.4f} ms "
                      f"vs {exact * 1e3:.4f} ms ({(soj / exact - 1) * 100:+.2f}%, "
                      f"{'ok' if abs(soj / exact - 1) <= SOJOURN_TOL else 'OFF'})")
            if name == "ours":
                kernel[model] = runs[0].kernel_events / n
                print(f"{'':<14}ours' kernel counts {kernel[model]:.2f} events per customer "
                      "(one arrival, a departure per queue, noe included): "
                      f"{kernel[model] * rate['ours', model]:.3e} events/s")

    n = args.ours_customers
    (base, rss_n), (_, rss_10n) = peak_rss_mib("tandem", n), peak_rss_mib("tandem", 10 * n)
    print(f"memory, ours, tandem, fresh process ({base:.0f} MiB after imports): peak RSS "
          f"{rss_n:.0f} MiB (+{rss_n - base:.1f}) at {n:,} customers, {rss_10n:.0f} MiB "
          f"(+{rss_10n - base:.1f}) at {10 * n:,}; ratio 10N/N {rss_10n / rss_n:.3f} (flat = 1)")
    tandem_events = rate["ours", "tandem"] * events_per_customer("tandem")
    x_ciw = rate["ours", "tandem"] / rate["ciw", "tandem"]
    print(f"target >= {TARGET_EVENTS_PER_S:.0e} events/s (tandem, ours timed from Python): "
          f"{tandem_events:.3e} model events/s, "
          f"{rate['ours', 'tandem'] * kernel['tandem']:.3e} kernel events/s -> "
          f"{'met' if tandem_events >= TARGET_EVENTS_PER_S else 'NOT met'}")
    print(f"target >= {TARGET_X_CIW:.0f}x Ciw (tandem, customers/s): {x_ciw:.1f}x -> "
          f"{'met' if x_ciw >= TARGET_X_CIW else 'NOT met'}")
    for peer in ("ciw", "simpy"):
        for model in MODELS:
            r = rate["ours", model] / rate[peer, model]
            k = r * kernel[model] / events_per_customer(model)
            print(f"ratio ours/{peer:<5} {model:<6}  customers/s {r:7.1f}  events/s {r:7.1f} "
                  f"(same event definition; with ours' kernel count {k:.1f})")


if __name__ == "__main__":
    main()
