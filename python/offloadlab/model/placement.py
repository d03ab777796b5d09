"""Choosing offload fractions for classes marked ``offload = "auto"`` (reference 000, section 6,
policy B).

Objective ``delay``: minimise the mean response time over all requests subject to
host and engine utilisation <= ``util_cap``. The mean delay is a smooth but not
convex function of the fractions, and the caps couple them, so the search is a
multi-start line search, vectorised over rate points: from each start (nothing
offloaded, the host-CPU optimum below, everything offloaded) it repeatedly
minimises along every single fraction and along pairwise exchanges that keep the
engine load or the host load constant (the moves needed when a cap binds), each
line searched coarse-then-fine, until no move improves. Fractions are resolved to
about 0.01.

Objective ``host_cpu``: minimise host utilisation subject to engine utilisation
<= ``util_cap``. This is a fractional knapsack (CPU time saved E[X_p] - E[X_o]
per unit of engine time E[X_c] + E[X_q]) and is solved exactly by greedy filling.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from offloadlab.model.tandem import ClassCosts, solve, weighted
from offloadlab.scenario import Options

# Each line search looks at a coarse grid over the whole line, then a fine one around the
# best point: 11 + 21 (or 21 + 21) evaluations instead of 101 (or 201) for step 0.01.
COARSE_GRID = np.linspace(0.0, 1.0, 11)
COARSE_STEPS = np.linspace(-1.0, 1.0, 21)
FINE_STEPS = np.linspace(-0.1, 0.1, 21)
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
        return greedy, (q.cpu.core <= cap) & (q.oe.core <= cap)
    f = np.empty_like(greedy)
    feasible = np.empty(len(lam), dtype=bool)
    per_rate = 3 * len(COARSE_STEPS) * lam.shape[1]
    block = max(1, _BLOCK_ELEMENTS // per_rate)
    for s in range(0, len(lam), block):
        f[s:s + block], feasible[s:s + block] = _min_delay(
            lam[s:s + block], share, fixed, auto, greedy[s:s + block], k, options, cap)
    return f, feasible


def _host_cpu_optimum(lam, fixed, auto, k, cap):
    """Greedy fill of the engine with the classes that save most host time per engine time."""
    f = np.where(auto, 0.0, np.nan_to_num(fixed))[None, :].repeat(len(lam), 0)
    engine = k.sent_engine1  # engine time per offloaded request
    room = cap - (lam * f * engine).sum(-1)
    saves = k.h1 - k.sent_host1  # host time saved per offloaded request
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(engine > 0, saves / engine, np.inf)
    for c in sorted(np.flatnonzero(auto & (saves > 0)), key=lambda c: -ratio[c]):
        need = lam[:, c] * engine[c]  # engine utilisation if all of class c went there
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
        mean_t = weighted(share, q.T_c).sum(-1)  # a class with no share adds nothing
        within = (q.cpu.core <= cap) & (q.oe.core <= cap)
        return np.where(within, mean_t, np.inf)

    best = objective(f[:, :, None, :])[..., 0]

    def improve(cand: np.ndarray) -> bool:
        """Move each (start, rate) to its best candidate if that lowers the objective."""
        nonlocal f, best
        value = objective(cand)
        pick = value.argmin(-1)
        new = np.take_along_axis(value, pick[..., None], -1)[..., 0]
        better = new < best * (1 - 1e-12)
        chosen = np.take_along_axis(cand, pick[..., None, None], 2)[:, :, 0, :]
        f = np.where(better[..., None], chosen, f)
        best = np.where(better, new, best)
        return bool(better.any())

    auto_idx = np.flatnonzero(auto)
    pairs = [(w, i, j) for w in (lam_s * k.sent_engine1, lam_s * (k.h1 - k.sent_host1))
             for i, j in combinations(auto_idx, 2)]
    for _ in range(_MAX_SWEEPS):
        # Every move is built from the current f: a coarse look along the whole line,
        # then a fine one around the point it moved to. Exchanges, the slower moves,
        # are tried only once single-fraction moves stop improving.
        improved = False
        for j in auto_idx:
            improved |= improve(_along(f, j))
            improved |= improve(_moved(f, {j: FINE_STEPS}))
        if not improved:
            for weight, i, j in pairs:
                for steps in (COARSE_STEPS, FINE_STEPS):
                    improved |= improve(_exchanged(f, weight, i, j, steps))
        if not improved:
            break
    winner = best.argmin(0)
    rows = np.arange(lam.shape[0])
    found = np.isfinite(best[winner, rows])
    return np.where(found[:, None], f[winner, rows], greedy), found


def _along(f: np.ndarray, j: int) -> np.ndarray:
    """Candidates (start, rate, move, class) with fraction j set to each coarse grid point."""
    cand = np.repeat(f[:, :, None, :], len(COARSE_GRID), 2)
    cand[..., j] = COARSE_GRID
    return cand


def _exchanged(f: np.ndarray, weight: np.ndarray, i: int, j: int,
               steps: np.ndarray) -> np.ndarray:
    """Candidates moving f_i and f_j together so that the load ``weight`` puts on one
    queue stays the same: the way along a binding utilisation cap."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(weight[..., j] != 0, weight[..., i] / weight[..., j], 0.0)
    return _moved(f, {i: steps, j: -steps * ratio[..., None]})


def _moved(f: np.ndarray, steps: dict[int, np.ndarray]) -> np.ndarray:
    """Copies of f with fraction c shifted by each of steps[c], clipped to [0, 1]."""
    n = max(np.shape(s)[-1] for s in steps.values())
    cand = np.repeat(f[:, :, None, :], n, 2)
    for c, step in steps.items():
        cand[..., c] = np.clip(f[..., c, None] + step, 0.0, 1.0)
    return cand
