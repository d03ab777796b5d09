"""Benchmark: evaluating seed 000's model over a rate sweep, ours against a peer.

The peer is the obvious implementation: the reference's solver-ready equations
written as scalar Python, one rate point and one class at a time. Both run in this
process on the same scenario (examples/five-classes.toml with the fractions ours
chooses at its own rate, so the peer need not optimise). The script checks that
both agree, then prints medians over repeated runs and the ratio ours/peer last.

    .venv/bin/python bench/model_sweep.py [--points 10000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from measure import median_seconds  # bench/measure.py

from offloadlab import model, scenario

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "five-classes.toml"


def peer_mean_delay(sc: scenario.Scenario, rate: float, f: list[float]) -> float:
    """Mean delay T over all requests at one total rate, scalar arithmetic only."""
    total = sc.rate
    host_u = host_a = eng_u = eng_a = 0.0
    legs = []
    for c, fc in zip(sc.classes, f, strict=True):
        lam = rate * c.rate / total
        a, p, o = c.app, c.host_proto, c.host_overhead
        h1, h2 = a.mean + p.mean, a.m2 + p.m2 + 2 * a.mean * p.mean
        g1 = a.mean + o.mean
        g2 = 2 * g1 * g1 if sc.options.cpu_queue == "mm1" else a.m2 + o.m2 + 2 * a.mean * o.mean
        e1 = c.engine_overhead.mean + c.engine_proto.mean
        e2 = (c.engine_overhead.m2 + c.engine_proto.m2
              + 2 * c.engine_overhead.mean * c.engine_proto.mean)
        host_u += lam * ((1 - fc) * h1 + fc * g1)
        host_a += lam * ((1 - fc) * h2 + fc * g2)
        eng_u += lam * fc * e1
        eng_a += lam * fc * e2
        legs.append((c.rate / total, fc, h1, g1, e1))
    if host_u >= 1 or eng_u >= 1:
        return math.inf
    w_cpu = host_a / (2 * (1 - host_u))
    w_oe = eng_a / (2 * (1 - eng_u))
    mean = 0.0
    for share, fc, h1, g1, e1 in legs:
        off = max(w_cpu + g1, w_oe + e1) if sc.options.system_delay == "max" else (
            w_cpu + g1 + w_oe + e1)
        mean += share * ((1 - fc) * (w_cpu + h1) + fc * off)
    return mean




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    sc = scenario.load(EXAMPLE)
    f = model.evaluate(sc).fractions[0].tolist()
    fixed = scenario.Scenario(sc.name, tuple(
        type(c)(**{**c.__dict__, "offload": fc}) for c, fc in zip(sc.classes, f, strict=True)),
        sc.options)
    top = model.evaluate(fixed).overall["lam_star_cpu"][0]
    rates = np.linspace(0, 0.99 * top, args.points)

    ours = model.evaluate(fixed, rates).overall["T"]
    peer = np.array([peer_mean_delay(fixed, r, f) for r in rates])
    worst = float(np.max(np.abs(ours - peer) / peer))
    print(f"scenario: {sc.name}, {len(sc.classes)} classes, {args.points} rate points; "
          f"max relative difference ours vs peer: {worst:.1e}")
    assert worst < 1e-9, "ours and the peer disagree"

    t_ours = median_seconds(lambda: model.evaluate(fixed, rates), args.repeat)
    t_peer = median_seconds(lambda: [peer_mean_delay(fixed, r, f) for r in rates], args.repeat)
    auto_rates = rates[:: max(1, args.points // 100)]
    t_auto = median_seconds(lambda: model.evaluate(sc, auto_rates), max(3, args.repeat // 2))
    print(f"ours, full result schema: {t_ours * 1e3:8.1f} ms median of {args.repeat}")
    print(f"peer, mean delay only:    {t_peer * 1e3:8.1f} ms median of {args.repeat}")
    print(f"ours with offload=auto at {len(auto_rates)} rates: {t_auto * 1e3:.1f} ms "
          f"({t_auto / len(auto_rates) * 1e3:.2f} ms per rate)")
    print(f"ratio ours/peer (time): {t_ours / t_peer:.3f}")


if __name__ == "__main__":
    main()
