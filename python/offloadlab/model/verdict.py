"""Does offloading help? A verdict in words, from one row of the result schema.

The rules follow seed 000: offload must relieve the host CPU (E[X_o] < E[X_p]) and
must not raise the delay (T <= T_noe) or saturate a queue that was not saturated
before. Differences within ``margin`` (default 5%, the hysteresis of reference 000
section 6) count as neutral.
"""

from __future__ import annotations

HELPS, HURTS, NEUTRAL = "helps", "hurts", "neutral"


def verdict(row: dict, EXp: float, EXo: float, margin: float = 0.05) -> tuple[str, str]:
    """(label, reason) for one class at one rate. ``EXp`` and ``EXo`` are the class's
    mean host protocol time and mean host overhead, in seconds."""
    if EXo >= EXp:
        return HURTS, f"E[X_o] {_ms(EXo)} >= E[X_p] {_ms(EXp)}: offload adds host work"
    if row["f"] == 0:
        return NEUTRAL, "not offloaded at this rate"
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


def _util(row: dict, where: str) -> str:
    return f"{row['U_oe'] if where == 'engine' else row['U_cpu']:.2f}"


def _ms(seconds: float) -> str:
    return "inf" if seconds == float("inf") else f"{seconds * 1e3:.3g} ms"
