"""Run the Rust simulator on a scenario and lay its output out in the shared result schema."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from offloadlab import _core, dist, model
from offloadlab.background import watched
from offloadlab.errors import InputError
from offloadlab.results import METRICS, Result, operating_points, saturation_flags
from offloadlab.scenario import COST_FIELDS, Queue, Scenario

if tuple(_core.METRICS) != METRICS:  # a stale build of the extension
    raise ImportError("offloadlab._core reports other metrics than offloadlab.results; "
                      "rebuild it: pip install -e .")

# The simulator's columns: the schema's metrics, then time-averaged numbers of requests
# at the host alone (N_noe) and at the host with the engine (N_cpu), and wake-ups per
# request at each station (wakeups_noe, wakeups_cpu, wakeups_oe).
COLUMNS = (*METRICS, *_core.SIM_ONLY)
# The simulator's stations, in its order, by their queue in the scenario.
STATIONS = {"noe": "host_alone", "cpu": "host", "oe": "engine"}
# Sojourn-time quantiles reported from the histograms, and their column suffixes.
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999, "max": 1.0}
_POLL_S = 0.1


@dataclass(frozen=True)
class SimResult(Result):
    """A :class:`~offloadlab.results.Result` with ``source = "sim"``.

    Besides the metrics and ``N_noe``, ``N_cpu`` (mean number of requests at the host
    alone, and at the host with the engine) and ``wakeups_noe``, ``wakeups_cpu``,
    ``wakeups_oe`` (share of a station's requests that found no other request there,
    i.e. its wake-ups per request), ``overall`` and ``per_class`` carry ``<metric>_hw``,
    the half-width of the 95% confidence interval (batch means with one replication,
    across replications otherwise; NaN where it cannot be estimated). ``overall`` also
    has the sojourn-time quantiles ``T_noe_p50 ... T_noe_max`` (host alone) and
    ``T_sum_p50 ... T_sum_max`` (host + engine, end to end), and per rate the run facts
    ``events``, ``wall_s``, ``requests`` (measured per replication) and ``warmup``.
    ``per_replication`` has one row per (rate, replication, class) with the metrics.
    """

    per_replication: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def events(self) -> int:
        return int(self.overall["events"].sum())

    @property
    def wall_s(self) -> float:
        return float(self.overall["wall_s"].sum())

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else math.nan


def run(scenario: Scenario, *, rates=None, fractions=None, requests: int = 200_000,
        seed: int = 1, replications: int = 1, warmup: int | str = "mser5",
        ci: float | None = None, ci_metric: str = "T", batches: int = 20,
        threads: int | None = None,
        progress: Callable[[int, int], None] | None = None) -> SimResult:
    """Simulate ``scenario`` at each total arrival rate in ``rates`` (default: its own).

    ``requests`` are measured per replication and rate, after the warm-up (``"mser5"``
    or a count of requests to discard). With ``replications`` = 1 the confidence
    intervals come from ``batches`` batch means; with more, from the replications,
    which run on ``threads`` threads (default: all cores). ``ci`` = 0.01 stops a run
    once the 95% half-width of ``ci_metric`` (all classes) is within 1% of its
    estimate; ``requests`` is then the most it may use. Fractions are the scenario's,
    or ``fractions`` (C,) or (R, C); classes with ``offload = "auto"`` take the model's
    choice at each rate. ``progress(done, planned)`` is called every 0.1 s with
    requests simulated so far. The same seed gives the same result bit for bit.
    """
    check_options(requests=requests, seed=seed, replications=replications, warmup=warmup,
                  ci=ci, ci_metric=ci_metric, batches=batches, threads=threads)
    if scenario.engine.cores != 1:
        raise InputError(f"[engine] cores = {scenario.engine.cores}: the simulator has one "
                         "engine core; solve a many-core engine with 'offload model', or "
                         "simulate one of its cores (cores = 1, rates divided by the cores)")
    rates, share, f = operating_points(scenario, rates, fractions, positive=True)
    notes: list[str] = []
    if f is None:
        # The model's fractions: the scenario's own, or its optimiser's for "auto" classes.
        f = model.evaluate(scenario, rates).fractions
        if any(c.auto for c in scenario.classes):
            notes.append('classes with offload = "auto" use the model\'s fractions at each rate')
    notes.extend(_heavy_tail_notes(scenario))
    costs = [(*(to_core(getattr(c, key)) for key in COST_FIELDS), c.hit_ratio,
              to_core(c.hit_cost)) for c in scenario.classes]
    queues = [_queue(getattr(scenario, queue), scenario) for queue in STATIONS.values()]
    d0 = [(c.d0, c.d0_sent) for c in scenario.classes]
    planned = len(rates) * replications * requests
    base = 0
    outputs = []
    for r, rate in enumerate(rates):
        classes = [(float(s), float(fr), *cost)
                   for s, fr, cost in zip(share, f[r], costs, strict=True)]
        args = dict(rate=float(rate), classes=classes,
                    delay_max=scenario.options.system_delay == "max", requests=requests,
                    seed=seed, replications=replications,
                    warmup=None if warmup == "mser5" else int(warmup), batches=batches,
                    precision=ci, precision_metric=METRICS.index(ci_metric),
                    threads=threads or os.cpu_count() or 1, queues=queues, d0=d0)
        on_tick = None if progress is None else (
            lambda control, base=base: progress(base + control.done, planned))
        out = watched(_core.simulate, args, _core.Control(), on_tick, _POLL_S)
        base += sum(out["measured"]) + sum(out["warmup"])
        notes.extend(f"rate {rate:g}/s: {n}" for n in out["notes"])
        if ci is not None and not out["precision_met"]:
            notes.append(f"rate {rate:g}/s: the {ci:.1%} precision on {ci_metric} was not "
                         f"reached within {requests:,} requests; raise --requests")
        outputs.append(out)
    return _result(scenario, rates, f, share, outputs, seed, replications, tuple(notes))


def check_options(*, requests: int = 200_000, seed: int = 1, replications: int = 1,
                  warmup: int | str = "mser5", ci: float | None = None, ci_metric: str = "T",
                  batches: int = 20, threads: int | None = None) -> None:
    """Raise :class:`InputError` naming every option of :func:`run` that is out of range
    (defaults as in :func:`run`)."""
    problems = []
    if not _is_int(batches) or batches < 2:
        problems.append(f"batches={batches!r}: use an integer >= 2, e.g. 20")
    elif not _is_int(requests) or requests < max(batches, 1000):
        problems.append(f"requests={requests!r}: use an integer >= {max(batches, 1000)}")
    if not _is_int(seed) or not 0 <= seed < 2**64:
        problems.append(f"seed={seed!r}: use an integer in [0, 2^64)")
    if not _is_int(replications) or not 1 <= replications < 2**32:
        problems.append(f"replications={replications!r}: use an integer >= 1")
    if warmup != "mser5" and (not _is_int(warmup) or warmup < 0):
        problems.append(f"warmup={warmup!r}: use \"mser5\" or a number of requests >= 0")
    if ci is not None:
        if not (isinstance(ci, float | int) and 0 < ci < 1):
            problems.append(f"ci={ci!r}: use a relative half-width in (0, 1), e.g. 0.01")
        elif replications != 1:
            problems.append("ci: the precision target uses batch means; set replications=1")
    if ci_metric not in METRICS:
        problems.append(f"ci_metric={ci_metric!r}: use one of {', '.join(METRICS)}")
    if threads is not None and (not _is_int(threads) or threads < 1):
        problems.append(f"threads={threads!r}: use an integer >= 1")
    if problems:
        raise InputError("; ".join(problems))


def _heavy_tail_notes(scenario: Scenario) -> list[str]:
    """Waiting times have a finite variance only if service times (wake-ups and
    background included) have a finite third moment; a Pareto with alpha <= 3 lacks it,
    and then no interval estimate of a mean delay is valid (the sample mean converges,
    slowly, but its spread is unbounded)."""
    costs = [(f'class "{c.name}": {key}', getattr(c, key))
             for c in scenario.classes for key in COST_FIELDS]
    for table in STATIONS.values():
        q = getattr(scenario, table)
        costs += [(f"{table}: wakeup", q.wakeup), (f"{table}: background", q.background)]
        costs += [(f"{table}: background: {name}", d) for name, d in q.per_class]
    return [f"{where} = {d} has no finite third moment, so the confidence intervals of "
            "mean delays are not valid; use alpha > 3 or bpareto"
            for where, d in costs if isinstance(d, dist.Pareto) and d.alpha <= 3]


def _is_int(x: object) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def _queue(q: Queue, scenario: Scenario
           ) -> tuple[_core.Dist, _core.Dist, float, float, bool, bool, bool]:
    """A queue's wake-up, background, cooling time, steady background share, rounds,
    whether the requests' arrivals wake it too (``answers_wake``: the simulator's engine
    already wakes for the host's answers, its jobs) and whether it polls, for the
    simulator. Background jobs arrive at the total rate, each of a class drawn by the
    class mix: a mixture of the classes' own."""
    names = scenario.class_names
    background = (to_core(q.background) if not q.per_class else _core.Dist.mixture(
        [c.rate for c in scenario.classes], [to_core(q.background_of(n)) for n in names]))
    return (to_core(q.wakeup), background, q.cooling, q.background_share, q.release == "round",
            q.answers_wake, q.polls)


def to_core(d: dist.Dist) -> _core.Dist:
    """The simulator's copy of a distribution (same parameters, same meaning)."""
    if isinstance(d, dist.Exponential):
        return _core.Dist.exp(d.scale)
    if isinstance(d, dist.Deterministic):
        return _core.Dist.det(d.value)
    if isinstance(d, dist.Lognormal):
        return _core.Dist.lognormal(d.nu, d.sigma)
    if isinstance(d, dist.Pareto):
        return _core.Dist.pareto(d.alpha, d.k)
    if isinstance(d, dist.BoundedPareto):
        return _core.Dist.bpareto(d.alpha, d.lo, d.hi)
    if isinstance(d, dist.Empirical):
        return _core.Dist.empirical(d.values.tolist())
    raise TypeError(f"no simulator counterpart for {type(d).__name__}")


def _result(scenario: Scenario, rates, f, share, outputs: list[dict], seed: int,
            replications: int, notes: tuple[str, ...]) -> SimResult:
    names = scenario.class_names
    metrics = np.array([o["metrics"] for o in outputs])  # (R, C + 1, columns)
    half = np.array([o["half_width"] for o in outputs])
    overall = {m: metrics[:, 0, j] for j, m in enumerate(COLUMNS)}
    overall |= {f"{m}_hw": half[:, 0, j] for j, m in enumerate(COLUMNS)}
    per_class = {m: metrics[:, 1:, j] for j, m in enumerate(COLUMNS)}
    per_class |= {f"{m}_hw": half[:, 1:, j] for j, m in enumerate(COLUMNS)}
    lam = rates[:, None] * share
    overall |= {"lam": rates, "f": (share * f).sum(-1)}
    per_class |= {"lam": lam, "f": f}
    # Saturation is a property of a queue, shared by every class that uses it. U is the
    # requests' own work; the background's load (each class's own, and the steady share)
    # counts too.
    flags = saturation_flags(*(overall[f"U_{station}"] + lam @ np.array(
                                   [getattr(scenario, queue).background_of(n).mean for n in names])
                               + getattr(scenario, queue).background_share
                               for station, queue in STATIONS.items()))
    for station in ("noe", "cpu", "oe"):  # a saturated U is the offered load: no interval
        saturated = flags[f"saturated_{station}"]
        overall[f"U_{station}_hw"] = np.where(saturated, np.nan, overall[f"U_{station}_hw"])
        per_class[f"U_{station}_hw"] = np.where(saturated[:, None], np.nan,
                                                per_class[f"U_{station}_hw"])
    overall |= _verdicts(overall, flags)
    per_class |= _verdicts(per_class, {k: v[:, None] for k, v in flags.items()})
    for system, key in (("T_noe", "sojourn_noe"), ("T_sum", "sojourn_system")):
        values = np.array([o[key] for o in outputs])
        # A saturated system's sojourns grow without bound, whatever was recorded.
        values[np.isinf(overall[system])] = np.inf
        overall |= {f"{system}_{q}": values[:, i] for i, q in enumerate(QUANTILES)}
    overall |= {
        "events": np.array([o["events"] for o in outputs]),
        "wall_s": np.array([o["wall_s"] for o in outputs]),
        "requests": np.array([o["measured"][0] for o in outputs]),
        "warmup": np.array([np.mean(o["warmup"]) for o in outputs]),
        "batches": np.array([o["batches"] for o in outputs]),
        "batch_size": np.array([o["batch_size"] for o in outputs]),
    }
    rows = [
        {"rate": float(rate), "replication": rep, "class": label,
         **dict(zip(COLUMNS, values, strict=True))}
        for rate, o in zip(rates, outputs, strict=True)
        for rep, table in enumerate(o["replications"])
        for label, values in zip(["all", *names], table, strict=True)
    ]
    meta = {"replications": replications}
    return SimResult(scenario, rates, np.asarray(f, dtype=float), overall, per_class, notes,
                     source="sim", seed=seed, meta=meta, per_replication=pd.DataFrame(rows))


def _verdicts(m: dict[str, np.ndarray], flags: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The verdicts from measured values: offloading relieves the CPU if some requests
    went to the engine and the host was less busy than alone; it is beneficial if the
    system with the engine is also stable and its mean delay T is no higher."""
    relieved = (m["f"] > 0) & (m["U_cpu"] < m["U_noe"])
    stable = ~(flags["saturated_cpu"] | flags["saturated_oe"])
    return {"cpu_relieved": relieved,
            "beneficial": relieved & stable & (m["T"] <= m["T_noe"]),
            **{k: np.broadcast_to(v, m["f"].shape) for k, v in flags.items()}}
