"""Does offloading help? A verdict per class, in words, from one objective.

The objective is the mean delay, d0 included, that the optimiser minimises. Each class
is judged on its own: served alone at its rate, entirely by the host or entirely through
the engine (what the testbed measures, mode against inline). The rules follow seed 000:
offload must relieve the host CPU (E[X_o] < E[X_p]) and must not raise the delay
(T <= T_noe) or saturate a queue that was not saturated before. Differences within
``MARGIN`` (5%, the hysteresis of reference 000 section 6) count as neutral. The
optimiser never offloads a class whose verdict is "hurts" (see :mod:`.result`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from offloadlab.model.tandem import ClassCosts, solve
from offloadlab.results import SATURATED_AT
from offloadlab.scenario import Scenario

HELPS, HURTS, NEUTRAL = "helps", "hurts", "neutral"
LABELS = (HELPS, HURTS, NEUTRAL)
MARGIN = 0.05


def verdict(row: dict, EXp: float, EXo: float, margin: float = MARGIN) -> tuple[str, str]:
    """(label, reason) for one class at one rate from a row with all of it offloaded.
    ``EXp`` and ``EXo`` are the class's mean host protocol time and mean host overhead,
    in seconds."""
    if EXo >= EXp:
        return HURTS, f"E[X_o] {_ms(EXo)} >= E[X_p] {_ms(EXp)}: offload adds host work"
    offload_saturated = row["saturated_cpu"] or row["saturated_oe"]
    if offload_saturated and row["saturated_noe"]:
        return NEUTRAL, "saturated with and without offload"
    if offload_saturated:
        where = "engine" if row["saturated_oe"] else "host CPU"
        return HURTS, f"the {where} saturates with offload (U = {_util(row, where)})"
    relieved = f"E[X_o] {_ms(EXo)} < E[X_p] {_ms(EXp)}"
    delay = f"delay {_ms(row['T_noe'])} -> {_ms(row['T'])}"
    if row["T"] > row["T_noe"] * (1 + margin):
        return HURTS, f"{relieved}, but {delay}"
    if row["T"] < row["T_noe"] * (1 - margin):
        return HELPS, f"{relieved}; host CPU {row['U_noe']:.3g} -> {row['U_cpu']:.3g}, {delay}"
    return NEUTRAL, f"{relieved}; {delay}, within {margin:.0%}"


def alone(scenario: Scenario, rates: np.ndarray) -> list[list[dict]]:
    """rows[r][c]: class c served alone at its share of total rate ``rates[r]``, all of
    it offloaded: host-alone and offload utilisations, delays (with d0) and flags."""
    rates = np.asarray(rates, float)
    share = np.array([c.rate for c in scenario.classes]) / scenario.rate
    out = [[{} for _ in scenario.classes] for _ in rates]
    for i, cls in enumerate(scenario.classes):
        k = ClassCosts.of(replace(scenario, classes=(replace(cls, offload=1.0),)))
        lam = rates[:, None] * share[i]
        q = solve(lam, np.ones_like(lam), k, scenario.options)
        for r in range(len(rates)):
            out[r][i] = {
                "lam": float(lam[r, 0]), "T_noe": float(q.T_noe_c[r, 0]),
                "T": float(q.T_c[r, 0]), "U_noe": float(q.U_noe[r]),
                "U_cpu": float(q.U_cpu[r]), "U_oe": float(q.U_oe[r]),
                **{f"saturated_{name}": bool(s.core[r] >= SATURATED_AT)
                   for name, s in (("noe", q.noe), ("cpu", q.cpu), ("oe", q.oe))}}
    return out


def verdicts(scenario: Scenario, rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels and reasons, (R, C) arrays of strings: each class on its own at its share
    of every total rate."""
    pairs = [[verdict(row[c], cls.host_proto.mean, cls.host_overhead.mean)
              for c, cls in enumerate(scenario.classes)] for row in alone(scenario, rates)]
    shape = (len(pairs), len(scenario.classes))
    labels = np.array([[label for label, _ in row] for row in pairs], dtype=str)
    reasons = np.array([[reason for _, reason in row] for row in pairs], dtype=str)
    return labels.reshape(shape), reasons.reshape(shape)


def _util(row: dict, where: str) -> str:
    return f"{row['U_oe'] if where == 'engine' else row['U_cpu']:.2f}"


def _ms(seconds: float) -> str:
    return "inf" if seconds == float("inf") else f"{seconds * 1e3:.3g} ms"
