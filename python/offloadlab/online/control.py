"""The online placement controller: every control period, re-solve the multi-class
model on the window's estimates and set the offload fractions (reference 000 §6.2,
policy B, with its feedback loop).

Each period the :class:`Controller` reads a snapshot of the server's stats and

1. checks the engine against the last prediction: if its utilisation over the period
   beats what the model predicted for it by ``lag_margin`` (relative, plus 0.05), or it
   is saturated, that is a *lag alarm*: the estimator drops its older history, so the
   costs are re-estimated from the last period alone, and the dwell time is waived;
2. solves for the fractions that minimise the mean delay with host and engine under
   ``util_cap`` (:func:`offloadlab.model.placement.optimise`; the tandem sum delay and
   the M/G/1 host, as measured costs are not exponential);
3. applies them only if the current split breaks a cap, the alarm is up, or the new
   split cuts the predicted mean delay by ``hysteresis`` and the current one has been
   in force for ``dwell_s`` — so noise in the estimates does not make it flap.

Every class keeps at least ``probe`` of its connections on each side, so that both of
its paths stay measured (a class never sent to the engine would keep a stale engine
cost for ever). Background load is seen as lost capacity: the optimiser divides each
side's costs by the share of its CPU the background leaves (for the engine, its
pass-through work for the host's connections, accept, first read and pass, and
whatever else runs on its core; for the host, whatever else runs on its core). When
no split meets the caps, it takes the one with the least predicted delay that keeps
both sides stable; and when none is stable, the overload is shared: the split that
minimises the larger of the two utilisations (a linear programme).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import linprog

from offloadlab.errors import require
from offloadlab.model.placement import optimise
from offloadlab.model.tandem import ClassCosts, solve, weighted
from offloadlab.online.estimate import Estimate, Estimator, Snapshot
from offloadlab.scenario import Options

# An engine this busy over a period is saturated, whatever the model said.
SATURATED = 0.95
# Absolute slack of the lag test (utilisation), on top of the relative margin.
LAG_SLACK = 0.05
# The utilisation cap of the fallback when no split meets the policy's caps.
STABLE = 0.99


@dataclass(frozen=True)
class Policy:
    """How the controller behaves; times in seconds."""

    period_s: float = 0.5
    window_s: float = 2.0
    dwell_s: float = 2.0
    hysteresis: float = 0.05
    util_cap: float = 0.85
    probe: float = 0.02
    lag_margin: float = 0.25

    def check(self) -> None:
        for name in ("period_s", "window_s"):
            value = getattr(self, name)
            require(math.isfinite(value) and value > 0, f"{name}={value!r}: use a time > 0")
        require(self.window_s >= self.period_s,
                f"window_s={self.window_s!r}: use at least the period ({self.period_s} s)")
        require(math.isfinite(self.dwell_s) and self.dwell_s >= 0,
                f"dwell_s={self.dwell_s!r}: use a time >= 0")
        require(0 <= self.hysteresis < 1, f"hysteresis={self.hysteresis!r}: use a share "
                                          "in [0, 1), e.g. 0.05")
        require(0 < self.util_cap < 1, f"util_cap={self.util_cap!r}: use a utilisation "
                                       "in (0, 1), e.g. 0.85")
        require(0 <= self.probe < 0.5, f"probe={self.probe!r}: use a share in [0, 0.5)")
        require(self.lag_margin >= 0, f"lag_margin={self.lag_margin!r}: use a share >= 0")

    def model_options(self) -> Options:
        return Options(system_delay="sum", cpu_queue="mg1", objective="delay",
                       util_cap=self.util_cap)


@dataclass(frozen=True)
class Step:
    """One control period: the fractions in force after it and why."""

    t_s: float
    fractions: tuple[float, ...]
    rates: tuple[float, ...]
    u_host: float
    u_engine: float
    u_engine_predicted: float
    delay_current_s: float
    delay_best_s: float
    # The window's costs per class (s): host alone, host part and engine part offloaded.
    host_s: tuple[float, ...]
    offloaded_host_s: tuple[float, ...]
    engine_s: tuple[float, ...]
    changed: bool
    alarm: bool
    reason: str


class Controller:
    """Sets per-class offload fractions from live snapshots (see the module notes)."""

    def __init__(self, classes: int, policy: Policy | None = None,
                 initial: np.ndarray | None = None) -> None:
        self.policy = policy or Policy()
        self.policy.check()
        p = self.policy
        start = np.full(classes, p.probe) if initial is None else np.asarray(initial, float)
        require(start.shape == (classes,), f"initial fractions {start.tolist()}: give one "
                                           f"per class ({classes})")
        self.fractions = np.clip(start, p.probe, 1 - p.probe)
        self.estimator = Estimator(p.window_s)
        self._last_change = -math.inf
        self._last: Snapshot | None = None
        # Engine cost per request of each class and of a pass, as of the last decision.
        self._engine_costs: tuple[np.ndarray, float] | None = None

    def observe(self, snap: Snapshot) -> Step:
        """Take one period's snapshot; returns what was decided."""
        u_engine, predicted, lagging = self._lag(snap)
        self._last = snap
        self.estimator.add(snap)
        if lagging:
            self.estimator.forget()
        est = self.estimator.estimate()
        if est is None or est.rates.sum() <= 0:
            return self._step(snap, est, u_engine, predicted, math.nan, math.nan, False,
                              lagging, "warming up" if est is None else "no traffic")
        k, known = self._costs(est)
        options = self.policy.model_options()
        total = est.rates.sum()
        share = est.rates / total
        fixed = np.where(known, np.nan, self.fractions)
        best, ok = optimise(np.array([total]), share, fixed, k, options)
        if not ok[0]:  # no split meets the caps: the best one that is at least stable
            stable = replace(options, util_cap=STABLE)
            best, ok = optimise(np.array([total]), share, fixed, k, stable)
        lo, hi = self.policy.probe, 1 - self.policy.probe
        if ok[0]:
            best = np.where(known, np.clip(best[0], lo, hi), self.fractions)
        else:
            best = _balanced(est.rates, k, np.where(known, np.nan, self.fractions), lo, hi)
        now = _delay(est.rates, self.fractions, k, options)
        new = _delay(est.rates, best, k, options)
        current_ok = np.isfinite(now[0])
        dwelt = snap.t_s - self._last_change >= self.policy.dwell_s
        gain = current_ok and now[0] - new[0] > self.policy.hysteresis * now[0]
        if not current_ok:
            change, why = True, "the current split breaks a cap"
        elif lagging:
            change, why = True, "the engine lags its prediction"
        elif dwelt and gain:
            change, why = True, "a better split"
        else:
            change, why = False, "hold" if dwelt else "dwell"
        change &= not np.allclose(best, self.fractions, atol=1e-3)
        if change:
            self.fractions = best
            self._last_change = snap.t_s
        self._engine_costs = (np.nan_to_num(est.m1[2]), self._pass_cost(est))
        return self._step(snap, est, u_engine, predicted, now[0], new[0], change, lagging,
                          why)

    def _lag(self, snap: Snapshot) -> tuple[float, float, bool]:
        """The engine's utilisation over the last period, the model's prediction for it,
        and whether the engine lags that prediction (or is saturated)."""
        last = self._last
        if last is None or snap.t_s <= last.t_s:
            return math.nan, math.nan, False
        span = snap.t_s - last.t_s
        u = (snap.engine_busy_s - last.engine_busy_s) / span
        if self._engine_costs is None:
            return u, math.nan, u >= SATURATED
        e1, e_pass = self._engine_costs
        served = snap.n[:2] - last.n[:2]
        rates = served.sum(0) / span
        f = self.fractions
        predicted = float((rates * (f * e1 + (1 - f) * e_pass)).sum())
        lagging = u >= SATURATED or u > predicted * (1 + self.policy.lag_margin) + LAG_SLACK
        return u, predicted, bool(lagging)

    @staticmethod
    def _pass_cost(est: Estimate) -> float:
        host_kept = (est.samples[0].sum()) / est.span_s
        return est.u_pass / host_kept if host_kept > 0 else 0.0

    def _costs(self, est: Estimate) -> tuple[ClassCosts, np.ndarray]:
        """The model's costs from the estimate (a class not yet seen on every path keeps
        its fraction and counts with zero costs where unseen); which classes are known."""
        known = est.known()
        m1, m2 = np.nan_to_num(est.m1), np.nan_to_num(est.m2)
        host, engine = est.room()
        return ClassCosts.measured(h1=m1[0] / host, h2=m2[0] / host**2, g1=m1[1] / host,
                                   g2=m2[1] / host**2, e1=m1[2] / engine,
                                   e2=m2[2] / engine**2), known

    def _step(self, snap, est, u_engine, predicted, now, best, changed, alarm, why) -> Step:
        def floats(x) -> tuple[float, ...]:
            return tuple(float(v) for v in x)

        rates, host, offloaded, engine = ((), (), (), ()) if est is None else (
            floats(est.rates), *(floats(row) for row in est.m1))
        return Step(t_s=snap.t_s, fractions=floats(self.fractions), rates=rates,
                    host_s=host, offloaded_host_s=offloaded, engine_s=engine,
                    u_host=math.nan if est is None else est.u_host,
                    u_engine=u_engine, u_engine_predicted=predicted,
                    delay_current_s=float(now), delay_best_s=float(best),
                    changed=bool(changed), alarm=bool(alarm), reason=why)


def _balanced(rates: np.ndarray, k: ClassCosts, fixed: np.ndarray, lo: float,
              hi: float) -> np.ndarray:
    """The split (fractions of the classes where ``fixed`` is NaN, within [lo, hi]) that
    minimises max(U_host, U_engine); both are linear in the fractions."""
    n = len(rates)
    c = np.r_[np.zeros(n), 1.0]  # minimise z
    host = np.r_[rates * (k.sent_host1 - k.h1), -1.0]  # U_host - z <= 0, less its constant part
    engine = np.r_[rates * k.sent_engine1, -1.0]
    bounds = [(lo, hi) if np.isnan(f) else (f, f) for f in fixed] + [(0, None)]
    out = linprog(c, A_ub=np.vstack([host, engine]), b_ub=[-(rates * k.h1).sum(), 0.0],
                  bounds=bounds, method="highs")
    return out.x[:n] if out.success else np.where(np.isnan(fixed), lo, fixed)


def _delay(rates: np.ndarray, f: np.ndarray, k: ClassCosts, options: Options) -> np.ndarray:
    """Predicted mean delay at split ``f`` (inf where a cap is broken), shape (1,)."""
    q = solve(rates[None, :], f[None, :], k, options)
    mean = weighted(rates, q.T_c).sum(-1) / rates.sum()
    within = (q.U_cpu <= options.util_cap) & (q.U_oe <= options.util_cap)
    return np.where(within, mean, np.inf)
