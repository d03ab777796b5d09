"""Reference 004 §7.4's acceptance checks against a matrix's results.

Each check compares signs and orderings, which must match the paper, and, where the
paper gives a relative gain, the magnitude with its tolerance (±5 percentage points).
A check whose configurations were not run is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from offloadlab.handoff.paper import TOLERANCE, stated


@dataclass(frozen=True)
class Check:
    id: str
    what: str
    paper: str
    needs: tuple[str, ...]
    holds: Callable[[dict], bool]
    ours: Callable[[dict], str]
    # The setup whose gain the paper states (paper.stated), compared within TOLERANCE.
    gain: str | None = None


def _g(r: dict, label: str) -> float:
    return r[label]["gain"]


def _rate(r: dict, label: str) -> float:
    return r[label]["requests_per_s"]


def _vs(r: dict, label: str, other: str) -> str:
    """Request rate of ``label`` relative to ``other``."""
    return f"{_rate(r, label) / _rate(r, other) - 1:+.1%}"


def _pct(x: float) -> str:
    return f"{x:+.0%}"


CHECKS = (
    Check("A1", "baseline: host saturated, NIC mostly idle (calibrated)",
          "host idle 0 %, NIC idle 62 %", ("W-0-N-N-FCFS-400",),
          lambda r: r["W-0-N-N-FCFS-400"]["host_idle"] < 0.02,
          lambda r: f"host idle {r['W-0-N-N-FCFS-400']['host_idle']:.0%}, NIC idle "
                    f"{r['W-0-N-N-FCFS-400']['nic_idle']:.0%}"),
    Check("A2", "a small NIC helps a little", "+4 %", ("W-256-N-N-FCFS-400",),
          lambda r: _g(r, "W-256-N-N-FCFS-400") > 0,
          lambda r: _pct(_g(r, "W-256-N-N-FCFS-400")), gain="W-256-N-N-FCFS-400"),
    Check("A3", "naive handoff (FCFS, 1024 connections) loses", "-30 %",
          ("W-1024-N-N-FCFS-400",),
          lambda r: _g(r, "W-1024-N-N-FCFS-400") < 0,
          lambda r: _pct(_g(r, "W-1024-N-N-FCFS-400")), gain="W-1024-N-N-FCFS-400"),
    Check("A3b", "FCFS delays host packets on the NIC by orders of magnitude",
          "median 301-679 µs vs 6-10 µs host-first",
          ("W-1024-N-N-FCFS-400", "W-1024-P-N-FCFS-400"),
          lambda r: r["W-1024-N-N-FCFS-400"]["host_rx_delay_median_s"]
          > 10 * r["W-1024-P-N-FCFS-400"]["host_rx_delay_median_s"],
          lambda r: f"{r['W-1024-N-N-FCFS-400']['host_rx_delay_median_s'] * 1e6:.0f} µs vs "
                    f"{r['W-1024-P-N-FCFS-400']['host_rx_delay_median_s'] * 1e6:.0f} µs"),
    Check("A4", "host-first recovers and beats the baseline", "+16 %",
          ("W-1024-P-N-FCFS-400", "W-1024-N-N-FCFS-400"),
          lambda r: _g(r, "W-1024-P-N-FCFS-400") > max(0, _g(r, "W-1024-N-N-FCFS-400")),
          lambda r: _pct(_g(r, "W-1024-P-N-FCFS-400")), gain="W-1024-P-N-FCFS-400"),
    Check("A5", "host-first without load control overloads the NIC", "-44 %, host 64 % idle",
          ("W-4096-P-N-FCFS-400",),
          lambda r: _g(r, "W-4096-P-N-FCFS-400") < 0
          and r["W-4096-P-N-FCFS-400"]["host_idle"] > 0.3,
          lambda r: f"{_pct(_g(r, 'W-4096-P-N-FCFS-400'))}, host "
                    f"{r['W-4096-P-N-FCFS-400']['host_idle']:.0%} idle",
          gain="W-4096-P-N-FCFS-400"),
    Check("A6", "load control finds the limit by itself", "+12 %, near 1024-P-N",
          ("W-4096-P-L-FCFS-400", "W-4096-P-N-FCFS-400"),
          lambda r: _g(r, "W-4096-P-L-FCFS-400") > max(0, _g(r, "W-4096-P-N-FCFS-400")),
          lambda r: _pct(_g(r, "W-4096-P-L-FCFS-400")), gain="W-4096-P-L-FCFS-400"),
    *(Check(f"A10-{w}", f"{w}: host-first plus load control beats the baseline", paper,
            (f"{w}-4096-P-L-FCFS-400",),
            lambda r, w=w: _g(r, f"{w}-4096-P-L-FCFS-400") > 0,
            lambda r, w=w: _pct(_g(r, f"{w}-4096-P-L-FCFS-400")),
            gain=f"{w}-4096-P-L-FCFS-400")
      for w, paper in (("W", "+12 %"), ("I", "+23 %"), ("S", "+31 %"), ("D", "+28 %"))),
    Check("A12", "with a small NIC, T20 selection beats FCFS", "+6 %, 24 % vs 12 % of packets",
          ("W-256-P-L-T20-400", "W-256-P-L-FCFS-400"),
          lambda r: _rate(r, "W-256-P-L-T20-400") > _rate(r, "W-256-P-L-FCFS-400")
          and r["W-256-P-L-T20-400"]["nic_packet_share"]
          > r["W-256-P-L-FCFS-400"]["nic_packet_share"],
          lambda r: f"{_vs(r, 'W-256-P-L-T20-400', 'W-256-P-L-FCFS-400')}, "
                    f"{r['W-256-P-L-T20-400']['nic_packet_share']:.0%} vs "
                    f"{r['W-256-P-L-FCFS-400']['nic_packet_share']:.0%} of packets"),
    Check("A13", "with a large NIC, T20 does not help", "negligible or negative",
          ("W-4096-P-L-T20-400", "W-4096-P-L-FCFS-400"),
          lambda r: _rate(r, "W-4096-P-L-T20-400") < 1.01 * _rate(r, "W-4096-P-L-FCFS-400"),
          lambda r: _vs(r, "W-4096-P-L-T20-400", "W-4096-P-L-FCFS-400")),
    Check("A14", "a faster NIC takes more connections and gains more",
          "45 / 85 % of connections, +12 / +59 %",
          ("W-4096-P-L-FCFS-400", "W-4096-P-L-FCFS-800"),
          lambda r: _rate(r, "W-4096-P-L-FCFS-800") > _rate(r, "W-4096-P-L-FCFS-400")
          and r["W-4096-P-L-FCFS-800"]["offloaded_share"]
          > r["W-4096-P-L-FCFS-400"]["offloaded_share"],
          lambda r: f"{r['W-4096-P-L-FCFS-400']['offloaded_share']:.0%} / "
                    f"{r['W-4096-P-L-FCFS-800']['offloaded_share']:.0%} of connections, "
                    f"{_pct(_g(r, 'W-4096-P-L-FCFS-400'))} / "
                    f"{_pct(_g(r, 'W-4096-P-L-FCFS-800'))}",
          gain="W-4096-P-L-FCFS-800"),
)


def evaluate(results: pd.DataFrame) -> pd.DataFrame:
    """One row per check whose configurations were run: the paper's value, ours, whether
    the sign/order holds, and whether the magnitude is within tolerance (None when the
    paper gives no gain to compare)."""
    by = {row["setup"]: row for row in results.to_dict("records")}
    rows = []
    for c in CHECKS:
        if not all(n in by for n in c.needs):
            continue
        magnitude = None
        if c.gain is not None and c.gain in by:
            magnitude = abs(by[c.gain]["gain"] - stated(c.gain)) <= TOLERANCE
        rows.append({"check": c.id, "what": c.what, "paper": c.paper, "ours": c.ours(by),
                     "holds": bool(c.holds(by)), "magnitude_ok": magnitude})
    return pd.DataFrame(rows, columns=["check", "what", "paper", "ours", "holds",
                                       "magnitude_ok"])
