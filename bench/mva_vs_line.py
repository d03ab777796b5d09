"""Our mean value analysis against LINE's (the line-solver package) on the same closed
networks: per-class throughput and response time, and solve time.

LINE pins pandas below 3, so it lives in a venv of its own (docs: bench/README.md):

    python3 -m venv .venv-line && .venv-line/bin/pip install -e . line-solver
    .venv-line/bin/python bench/mva_vs_line.py [--repeat 5]

Networks: the two-class, three-station example of docs/model.md; a one-class and a
two-class network with multi-server stations (ours: Seidmann's approximation; LINE's
exact MVA handles m servers exactly); and seed 003's default data centre from
offloadlab.model.tiers (40 stations, two CPUs per node).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from line_solver import (
    MVA,
    ClosedClass,
    Delay,
    Disabled,
    Exp,
    GlobalConstants,
    Network,
    Queue,
    SchedStrategy,
    VerboseLevel,
)

from offloadlab.datacentre import config
from offloadlab.model import mva, tiers

# A think time of 0 is a delay LINE needs as its reference station: make it negligible.
_NO_THINK_S = 1e-12


def line_model(net: mva.Network) -> Network:
    """``net`` in LINE's terms: a think station, then every station in order, PS
    queues with their servers and delay stations. LINE refuses a station no class
    visits; such a station changes nothing, so it is left out."""
    model = Network("offloadlab")
    think = Delay(model, "think")
    nodes = []
    used = np.flatnonzero(net.demands.sum(0) > 0)
    for k in used:
        name = net.stations[k]
        if net.delay[k]:
            nodes.append(Delay(model, name))
        else:
            nodes.append(Queue(model, name, SchedStrategy.PS))
            nodes[-1].set_number_of_servers(int(net.servers[k]))
    for c, name in enumerate(net.classes):
        job = ClosedClass(model, name, int(net.population[c]), think)
        think.set_service(job, Exp(1 / max(net.think[c], _NO_THINK_S)))
        for k, node in zip(used, nodes, strict=True):
            d = net.demands[c, k]
            node.set_service(job, Exp(1 / d) if d > 0 else Disabled())
    model.link(Network.serial_routing(think, *nodes))
    return model


def line_solve(net: mva.Network) -> tuple[np.ndarray, np.ndarray]:
    """LINE's exact MVA: per-class throughput and response time (thinking excluded)."""
    table = MVA(line_model(net), method="exact").avg_table()
    x = np.array([table[(table["Station"] == "think") & (table["JobClass"] == c)]["Tput"]
                  .iloc[0] for c in net.classes], float)
    stations = table[table["Station"] != "think"]
    r = np.array([stations[stations["JobClass"] == c]["ResidT"].sum() for c in net.classes])
    return x, r


def networks() -> dict[str, mva.Network]:
    two = ([[0.020, 0.010, 0.005], [0.004, 0.030, 0.012]], [3, 2], [0.1, 0.05])
    return {
        "2 classes, 3 stations": mva.Network.of(*two[:2], think=two[2],
                                                delay=[False, False, True]),
        "1 class, m = 4 at the knee": mva.Network.of([[0.01, 0.004]], [8], think=[0.01],
                                                      servers=[4, 1]),
        "2 classes, m = 2": mva.Network.of(*two[:2], think=two[2],
                                           delay=[False, False, True], servers=[1, 2, 1]),
        "seed 003 data centre (64 clients)": tiers.solve(config.load(None)).net,
    }


def timed(fn, repeat: int):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    GlobalConstants.set_verbose(VerboseLevel.SILENT)
    print(f"{'network':36} {'X ours/LINE - 1':>16} {'R ours/LINE - 1':>16} "
          f"{'ours s':>9} {'LINE s':>9} {'LINE/ours':>10}")
    for name, net in networks().items():
        ours, ours_s = timed(lambda n=net: mva.exact(n), args.repeat)
        (x, r), line_s = timed(lambda n=net: line_solve(n), args.repeat)
        dx = np.abs(ours.throughput / x - 1).max()
        dr = np.abs(ours.response / r - 1).max()
        print(f"{name:36} {dx:16.2e} {dr:16.2e} {ours_s:9.4f} {line_s:9.4f} "
              f"{line_s / ours_s:10.1f}")


if __name__ == "__main__":
    main()
