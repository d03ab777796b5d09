"""Evaluate the model over a rate sweep and lay it out in the shared result schema
(:class:`offloadlab.results.Result`, ``source = "model"``).

Model-specific keys: ``EXo_max`` (per class), the saturation rates ``lam_star_noe``,
``lam_star_cpu``, ``lam_star_oe`` (the total rate at which that queue reaches U = 1
with the same class mix and fractions).
"""

from __future__ import annotations

import numpy as np

from offloadlab.model.placement import optimise
from offloadlab.model.tandem import ClassCosts, overhead_bound, solve, weighted
from offloadlab.model.verdict import HURTS, verdicts
from offloadlab.results import SATURATED_AT, Result, operating_points, saturation_flags
from offloadlab.scenario import Scenario


def evaluate(scenario: Scenario, rates=None, fractions=None) -> Result:
    """Solve the model at the given total arrival rates (default: the scenario's own).

    Rates keep the scenario's class mix. ``fractions`` (C,) or (R, C) overrides the
    scenario's offload fractions; otherwise classes marked ``"auto"`` are optimised
    at each rate (see :mod:`offloadlab.model.placement`), except that a class whose
    verdict on its own is "hurts" is kept on the host. Every class row carries that
    ``verdict`` and its ``reason``.
    """
    rates, share, f = operating_points(scenario, rates, fractions)
    k = ClassCosts.of(scenario)
    labels, reasons = verdicts(scenario, rates)
    notes: list[str] = []
    if f is None:
        f, feasible = _fractions(scenario, rates, share, k, labels)
        if not feasible.all():
            notes.append(
                f"at {np.count_nonzero(~feasible)} of {len(rates)} rates no offload split "
                f"keeps host and engine utilisation <= {scenario.options.util_cap:g}; "
                "the split shown moves as much host work to the engine as its cap allows")
    lam = rates[:, None] * share
    q = solve(lam, f, k, scenario.options)
    per = _per_class(q, lam, f, share, k, scenario.options)
    per |= {"verdict": labels, "reason": reasons}
    return Result(scenario, rates, f, _overall(q, per, rates, f, share, k), per, tuple(notes))


def _fractions(scenario: Scenario, rates, share, k: ClassCosts, labels: np.ndarray):
    """The scenario's fractions, with "auto" classes optimised at each rate among those
    whose verdict is not "hurts" (the others stay on the host); whether the caps held."""
    fixed = np.array([np.nan if c.auto else c.offload for c in scenario.classes])
    f = np.broadcast_to(np.nan_to_num(fixed), (len(rates), len(share))).copy()
    feasible = np.ones(len(rates), dtype=bool)
    if not np.isnan(fixed).any():
        return f, feasible
    # Rates with the same hurting classes share one optimisation.
    pinned = np.isnan(fixed) & (labels == HURTS)
    for pattern in np.unique(pinned, axis=0):
        at = (pinned == pattern).all(-1)
        f[at], feasible[at] = optimise(rates[at], share, np.where(pattern, 0.0, fixed), k,
                                       scenario.options)
    return f, feasible


def _per_class(q, lam, f, share, k: ClassCosts, options) -> dict[str, np.ndarray]:
    shape = lam.shape
    offloaded = lam * f
    stable = ((q.cpu.core < SATURATED_AT) & (q.oe.core < SATURATED_AT))[:, None]
    cpu_relieved = np.broadcast_to(k.sent_host1 < k.h1, shape)
    W_oe = np.broadcast_to(q.oe.W[:, None], shape)

    def woken(s, visits):  # each request's share of its queue's wake-ups
        return visits * (s.wakeups * s.wake_cost)[:, None]

    return {
        "lam": lam, "f": f,
        "U_noe": lam * k.h1 + woken(q.noe, lam),
        "W_noe": np.broadcast_to(q.noe.W[:, None], shape), "T_noe": q.T_noe_c,
        "U_cpu": (lam * ((1 - f) * k.h1 + f * k.sent_host1)
                  + woken(q.cpu, lam * (1 - f * k.hit))),
        "W_cpu": np.broadcast_to(q.cpu.W[:, None], shape), "T_cpu": q.T_cpu_c,
        "U_oe": offloaded * k.sent_engine1 + woken(q.oe, offloaded),
        "W_oe": W_oe, "T_oe": q.T_oe_c,
        "T": q.T_c, "T_sum": q.T_sum_c,
        "N_q": weighted(offloaded, W_oe),
        "N_oe": weighted(offloaded, q.T_oe_c),
        "cpu_relieved": cpu_relieved,
        "beneficial": (f > 0) & cpu_relieved & stable & (q.T_c <= q.T_noe_c),
        "EXo_max": overhead_bound(lam, f, k, q),
        **{key: share * v[:, None] for key, v in _saturation_rates(k, f, share).items()},
        **{key: np.broadcast_to(v[:, None], shape) for key, v in _saturated(q).items()},
    }


def _overall(q, per: dict, rates, f, share, k: ClassCosts) -> dict[str, np.ndarray]:
    """All classes together: utilisations and counts add up, delays are request means."""
    sent = share * f
    any_sent = sent.sum(-1) > 0
    # Mean engine sojourn over offloaded requests (over all, as a what-if, if none are).
    oe_weight = np.where(any_sent[:, None], sent, share)
    oe_weight = oe_weight / oe_weight.sum(-1, keepdims=True)
    stable = (q.cpu.core < SATURATED_AT) & (q.oe.core < SATURATED_AT)
    cpu_relieved = (sent * (k.h1 - k.sent_host1)).sum(-1) > 0
    T, T_noe = _wmean(share, q.T_c), _wmean(share, q.T_noe_c)
    # The host's sojourn is a mean over the requests that visit it: cache hits do not.
    visits = share * (1 - f * k.hit)
    total = visits.sum(-1, keepdims=True)
    visits = np.divide(visits, total, out=np.zeros_like(visits), where=total > 0)
    return {
        "lam": rates, "f": sent.sum(-1),
        "U_noe": q.U_noe, "W_noe": q.noe.W, "T_noe": T_noe,
        "U_cpu": q.U_cpu, "W_cpu": q.cpu.W, "T_cpu": _wmean(visits, q.T_cpu_c),
        "U_oe": q.U_oe, "W_oe": q.oe.W, "T_oe": _wmean(oe_weight, q.T_oe_c),
        "T": T, "T_sum": _wmean(share, q.T_sum_c),
        "N_q": per["N_q"].sum(-1), "N_oe": per["N_oe"].sum(-1),
        "cpu_relieved": cpu_relieved,
        "beneficial": any_sent & cpu_relieved & stable & (T_noe >= T),
        **_saturation_rates(k, f, share),
        **_saturated(q),
    }


def _wmean(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Weighted sum over classes where a zero weight ignores an infinite value."""
    return weighted(w, x).sum(-1)


def _saturation_rates(k: ClassCosts, f, share) -> dict[str, np.ndarray]:
    """Total arrival rate at which each queue, with its background, reaches full load at
    this mix and these fractions (wake-ups vanish there: no queue is ever idle): what
    the core's steady background share leaves, over the load per request/s."""
    per_unit_rate = {
        "noe": ((share * (k.h1 + k.noe.b1)).sum(-1), k.noe.share),
        "cpu": ((share * ((1 - f) * k.h1 + f * k.sent_host1 + k.cpu.b1)).sum(-1), k.cpu.share),
        "oe": ((share * (f * k.sent_engine1 + k.oe.b1)).sum(-1) / k.oe.cores, k.oe.share),
    }
    # A vanishing load (a fraction of 1e-309) saturates at a rate beyond float range: inf.
    with np.errstate(divide="ignore", over="ignore"):
        return {f"lam_star_{name}": np.broadcast_to(np.where(u > 0, (1 - held) / u, np.inf),
                                                     f.shape[:-1])
                for name, (u, held) in per_unit_rate.items()}


def _saturated(q) -> dict[str, np.ndarray]:
    return saturation_flags(q.noe.core, q.cpu.core, q.oe.core)
