"""The bottom line for someone choosing an engine, solved with the model: at a given
rate, for each class on its own and for the whole mix, how many host cores offload
saves (or costs), from which rate it pays, the slowest engine at which it still pays,
and the fraction of each class to send.

Offload *pays* where the model calls it beneficial: some requests go to the engine, the
host does less work, no queue saturates, and the mean delay is no longer than the host
alone gives (:mod:`offloadlab.model.result`, ``beneficial``). A class on its own is
judged all offloaded, as the study's verdicts are; the mix with the optimiser's split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from offloadlab.engine_profile import EngineProfile
from offloadlab.model.result import evaluate
from offloadlab.scenario import Scenario

# The speeds the break-even search spans, relative to a host core: an engine 1000
# times slower than the host is no engine, and one 1000 times faster adds no more.
SLOWEST, FASTEST = 1e-3, 1e3
# Bisection steps: the speed to 2^-20 of its span's 13.8 e-folds (1e-5 relative), the
# paying rate to 2^-20 of a grid step.
_STEPS = 20
# Rates the search for the paying rate tries before refining, up to past the host
# alone's saturation.
_RATE_POINTS = 200
# Capacity errors the break-even range tries across its span: the break-even speed need
# not be monotone in the rate, so the ends alone are not enough.
_ERROR_POINTS = 5
MIX = "mix"


@dataclass(frozen=True)
class Answer:
    """One load's bottom line at ``rate`` (requests/s of that load)."""

    load: str
    rate: float
    fraction: float           # of the load's requests to send to the engine (the optimiser's)
    host_cores_saved: float   # host cores freed (negative: taken), all of it offloaded
    pays: bool
    pays_from: float          # from which rate it pays, seen from ``rate`` (nan: none)
    break_even_speed: float   # slowest engine speed that pays (inf: none does)
    # The break-even speed's range were the model's capacities off by ``capacity_error``
    # either way (:func:`break_even_range`); both equal to it without an error.
    break_even_low: float
    break_even_high: float
    capacity_error: float = 0.0


def answers(scenario: Scenario, profile: EngineProfile, rate: float | None = None,
            errors: Mapping[str, float] | None = None) -> list[Answer]:
    """Each class on its own at its share of ``rate`` (default: the scenario's total),
    then the whole mix when there are two or more classes, with ``profile``'s engine.
    ``errors`` gives a load's capacity error by its name (a class's, or ``mix``), for
    the range of its break-even speed; a load without one gets none."""
    rate = scenario.rate if rate is None else rate
    share = np.array([c.rate for c in scenario.classes]) / scenario.rate
    mix = _auto(scenario)
    # The optimiser's split of the mix is each class's recommended fraction.
    fractions = evaluate(profile.apply(mix), [rate]).fractions[0]
    loads = [(c.name, _alone(scenario, i), rate * share[i], fractions[i])
             for i, c in enumerate(scenario.classes)]
    if len(scenario.classes) > 1:
        loads.append((MIX, mix, rate, float(share @ fractions)))
    errors = errors or {}
    return [_answer(name, sc, profile, r, f, errors.get(name, 0.0))
            for name, sc, r, f in loads]


def _answer(name: str, sc: Scenario, profile: EngineProfile, rate: float, f: float,
            error: float) -> Answer:
    row = _row(profile.apply(sc), rate)
    speed = break_even_speed(sc, profile, rate)
    low, high = break_even_range(sc, profile, rate, error) if error > 0 else (speed, speed)
    return Answer(name, rate, float(f), host_cores_saved(row, profile),
                  bool(row["beneficial"]), pays_from(sc, profile, rate), speed,
                  low, high, float(error))


def host_cores_saved(row: dict, profile: EngineProfile) -> float:
    """Host cores freed at one solved point: the host's busy cores alone minus with the
    engine, less the engine's cores when they are host cores (all of a dedicated core;
    the busy share of one it shares with other work)."""
    saved = row["U_noe"] - row["U_cpu"]
    if profile.on_host:
        saved -= row["U_oe_cores"] if profile.shared else profile.cores
    return float(saved)


def break_even_speed(sc: Scenario, profile: EngineProfile, rate: float) -> float:
    """The slowest engine speed (relative to a host core, the profile otherwise kept)
    at which offload pays at ``rate``: inf if none up to 1000 does, SLOWEST if even a
    1000 times slower one does. Paying is monotone in the speed: a faster engine only
    shortens the engine's part of each offloaded request."""
    def pays(speed: float) -> bool:
        return bool(_row(profile.at_speed(speed).apply(sc), rate)["beneficial"])

    if not pays(FASTEST):
        return math.inf
    if pays(SLOWEST):
        return SLOWEST
    lo, hi = math.log(SLOWEST), math.log(FASTEST)
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if pays(math.exp(mid)) else (mid, hi)
    return math.exp(hi)


def break_even_range(sc: Scenario, profile: EngineProfile, rate: float, error: float
                     ) -> tuple[float, float]:
    """The least and greatest break-even speed at ``rate`` were every service time of
    the model 1 + d times its own, for d across [-error, error]. Queues whose service
    times all grow by 1 + d behave at rate lam as the model's do at (1 + d) lam, with
    every time 1 + d longer, and paying compares times with times, so each d is the
    model's break-even speed at (1 + d) lam. The fixed delay outside host and engine (d0)
    does not scale; it is small beside the queues where the range is wide, near
    saturation. A capacity measured only to within a few per cent leaves the break-even
    speed that uncertain: near the host's saturation, by far more than that."""
    speeds = [break_even_speed(sc, profile, rate * (1 + d))
              for d in np.linspace(-error, error, _ERROR_POINTS)]
    return min(speeds), max(speeds)


def pays_from(sc: Scenario, profile: EngineProfile, rate: float | None = None) -> float:
    """From which total rate (the scenario's mix kept) offload pays with this engine, as
    seen from ``rate`` (default: the scenario's): where it pays at ``rate``, the start
    of the stretch of rates around it where it pays (0: from the lightest load on);
    where it does not, the lowest rate above ``rate`` from which it does, nan if none
    below twice the host alone's saturation. Paying need not be one stretch of rates:
    at light load the engine's hop can cost more than the host's relief, a heavier load
    can saturate a slow engine, and a split can pay at both ends and not between."""
    rate = sc.rate if rate is None else rate
    engined = profile.apply(sc)
    top = 2 * float(evaluate(sc, [sc.rate]).overall["lam_star_noe"][0])
    rates = np.linspace(top / _RATE_POINTS, top, _RATE_POINTS)
    paying = evaluate(engined, rates).overall["beneficial"]
    if _row(engined, rate)["beneficial"]:
        below = np.flatnonzero((rates < rate) & ~paying)
        if not len(below):
            return 0.0 if _row(engined, min(rate, rates[0]) * 1e-3)["beneficial"] else (
                _edge(engined, 0.0, min(rate, rates[0])))
        after = rates[below[-1] + 1] if below[-1] + 1 < len(rates) else rate
        return _edge(engined, rates[below[-1]], min(after, rate))
    above = np.flatnonzero((rates > rate) & paying)
    if not len(above):
        return math.nan
    first = above[0]
    return _edge(engined, max(rate, rates[first - 1]) if first else rate, rates[first])


def _edge(sc: Scenario, lo: float, hi: float) -> float:
    """The rate between ``lo`` (does not pay) and ``hi`` (pays) where paying begins."""
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _row(sc, mid)["beneficial"] else (mid, hi)
    return float(hi)


def _row(sc: Scenario, rate: float) -> dict:
    """The model's overall row at total ``rate``, with the engine's busy cores summed."""
    result = evaluate(sc, [rate])
    row = {key: value[0] for key, value in result.overall.items()}
    row["U_oe_cores"] = float(result.per_class["U_oe"][0].sum())
    return row


def _alone(sc: Scenario, i: int) -> Scenario:
    """Class ``i`` on its own, all of it offloaded (as the study's verdicts judge it)."""
    return replace(sc, classes=(replace(sc.classes[i], offload=1.0),))


def _auto(sc: Scenario) -> Scenario:
    """Every class's fraction left to the optimiser."""
    return replace(sc, classes=tuple(replace(c, offload="auto") for c in sc.classes))
