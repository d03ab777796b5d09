"""Choosing offload fractions for classes marked ``offload = "auto"`` (reference 000, section 6,
policy B).

Objective ``delay``: minimise the mean response time over all requests subject to
host and engine utilisation <= ``util_cap``. The mean delay is a smooth but not
convex function of the fractions, and the caps couple them, so the search is a
multi-start line search, vectorised over rate points: from each start (nothing
offloaded, the host-CPU optimum below, everything offloaded) it repeatedly
minimises along every single fraction and along pairwise exchanges that keep the
engine load or the host load constant (the moves needed when a cap binds), each
line searched on a grid of 101 to 201 points, until no move improves. Fractions
are therefore resolved to about 0.01.

Objective ``host_cpu``: minimise host utilisation subject to engine utilisation
<= ``util_cap``. This is a fractional knapsack (CPU time saved E[X_p] - E[X_o]
per unit of engine time E[X_c] + E[X_q]) and is solved exactly by greedy filling.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from offloadlab.model.tandem import ClassCosts, solve
from offloadlab.scenario import Options

GRID = np.linspace(0.0, 1.0, 101)
STEPS = np.linspace(-1.0, 1.0, 201)
_MAX_SWEEPS = 50
_BLOCK_ELEMENTS = 2_000_000  # candidate fractions held at once (memory bound)


def optimise(rates: np.ndarray, share: np.ndarray, fixed: np.ndarray, k: ClassCosts,
             options: Options) -> tuple[np.ndarray, np.ndarray]:
    """Fractions (R, C) at total rates ``rates`` (R,) split over classes by ``share`` (C,);
    ``fixed`` (C,) holds the fractions of the other classes and NaN for the auto ones.
    Also returns, per rate point, whether the caps could be met."""
    auto = np.isnan(fixed)
    lam = rates[:, None] * share
    cap = min(options.util_cap, np.nextafter(1.0, 0.0))
    greedy = _host_cpu_optimum(lam, fixed, auto, k, cap)
    if options.objective == "host_cpu":
        q = solve(lam, greedy, k, options)
        return greedy, (q.U_cpu <= cap) & (q.U_oe <= cap)
    f = np.empty_like(greedy)
    feasible = np.empty(len(lam), dtype=bool)
    per_rate = 3 * len(STEPS) * lam.shape[1]
    block = max(1, _BLOCK_ELEMENTS // per_rate)
    for s in range(0, len(lam), block):
        f[s:s + block], feasible[s:s + block] = _min_delay(
            lam[s:s + block], share, fixed, auto, greedy[s:s + block], k, options, cap)
    return f, feasible


def _host_cpu_optimum(lam, fixed, auto, k, cap):
    """Greedy fill of the engine with the classes that save most host time per engine time."""
    f = np.where(auto, 0.0, np.nan_to_num(fixed))[None, :].repeat(len(lam), 0)
    room = cap - (lam * f * k.e1).sum(-1)
    saves = k.h1 - k.g1  # host time saved per offloaded request: E[X_p] - E[X_o]
    with np.errstate(divide="ignore"):
        ratio = np.where(k.e1 > 0, saves / k.e1, np.inf)
    for c in sorted(np.flatnonzero(auto & (saves > 0)), key=lambda c: -ratio[c]):
        need = lam[:, c] * k.e1[c]  # engine utilisation if all of class c went there
        with np.errstate(divide="ignore", invalid="ignore"):
            part = np.where(need > 0, np.clip(room / need, 0.0, 1.0), 1.0)
        f[:, c] = part
        room = room - part * need
    return f


def _min_delay(lam, share, fixed, auto, greedy, k, options, cap):
    """Multi-start line search for the minimum mean delay over one block of rate points."""
    starts = [np.where(auto, v, np.nan_to_num(fixed)) + 0 * lam for v in (0.0, 1.0)]
    f = np.stack([*starts, greedy])  # (start, rate, class)
    lam_s = np.broadcast_to(lam, f.shape)

    def objective(cand: np.ndarray) -> np.ndarray:  # cand: (start, rate, move, class)
        q = solve(lam_s[:, :, None, :], cand, k, options)
        mean_t = (share * q.T_c).sum(-1)
        within = (q.U_cpu <= cap) & (q.U_oe <= cap)
        return np.where(within, mean_t, np.inf)

    best = objective(f[:, :, None, :])[..., 0]
    auto_idx = np.flatnonzero(auto)
    for _ in range(_MAX_SWEEPS):
        # Exchanges are tried only once single-fraction moves stop improving.
        improved = False
        for moves in (_single_moves, _exchange_moves):
            for cand in moves(f, lam_s, auto_idx, k):
                value = objective(cand)
                pick = value.argmin(-1)
                new = np.take_along_axis(value, pick[..., None], -1)[..., 0]
                better = new < best * (1 - 1e-12)
                if better.any():
                    improved = True
                    chosen = np.take_along_axis(cand, pick[..., None, None], 2)[:, :, 0, :]
                    f = np.where(better[..., None], chosen, f)
                    best = np.where(better, new, best)
            if improved:
                break
        if not improved:
            break
    winner = best.argmin(0)
    rows = np.arange(lam.shape[0])
    found = np.isfinite(best[winner, rows])
    return np.where(found[:, None], f[winner, rows], greedy), found


def _single_moves(f, lam, auto_idx, k):
    """Candidates (start, rate, move, class) along each auto fraction alone."""
    for j in auto_idx:
        cand = np.repeat(f[:, :, None, :], len(GRID), 2)
        cand[..., j] = GRID
        yield cand


def _exchange_moves(f, lam, auto_idx, k):
    """Candidates moving two fractions at once so that the engine load, or the host load,
    stays the same: the way along a binding utilisation cap."""
    for weight in (lam * k.e1, lam * (k.h1 - k.g1)):  # load per unit of fraction
        for i, j in combinations(auto_idx, 2):
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(weight[..., j] != 0, weight[..., i] / weight[..., j], 0.0)
            cand = np.repeat(f[:, :, None, :], len(STEPS), 2)
            cand[..., i] = np.clip(f[..., i, None] + STEPS, 0, 1)
            cand[..., j] = np.clip(f[..., j, None] - STEPS * ratio[..., None], 0, 1)
            yield cand
