"""Fit the model's service times to testbed runs (reference 000 §2.9, improved).

The seed's procedure regresses whole-machine utilisation on the arrival rate and splits
the slope by hand. The testbed measures more directly, so this module uses:

- per-thread CPU clocks (host thread, engine thread less its idle polling), which the
  load generator sharing the cores does not pollute: by the utilisation law a thread's
  CPU seconds over the requests it served is its mean service demand;
- the application's own account of the work it burned for E[X_a], so E[X_p] and E[X_o]
  are what is left of the host's demand, not a guess from a 0-byte object;
- the structural cost model E[X](size) = c0 + c_pkt * packets + c_byte * bytes, fitted
  across classes per side, which both reports per-byte and per-packet costs and gives
  the *shape* of X_p and X_q inside a class: each request's cost follows its object
  size, so the second moment comes from the sizes requested, scaled to the measured
  mean (lognormal and Pareto fits of those costs are reported; the scenario keeps the
  lognormal with the same two moments, all an M/G/1 queue needs);
- d0, the mean delay outside host and engine (loopback, kernel, the client's own
  time, the hop to the engine), as the measured delay less the model's at the
  calibration rates, combined by inverse variance so that a run hit by a rare stall
  counts little.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, stats

from offloadlab import dist, units
from offloadlab.mode_traits import traits
from offloadlab.model import tandem

# TCP/IP headers with timestamps (IPv4 20 + TCP 20 + options 12): MSS = MTU - 52.
_HEADERS = 52
# Response head size, for packet counts (ours is ~150-200 bytes).
_HEAD_BYTES = 200
# Standard errors in a 95% half-width.
Z95 = float(stats.norm.ppf(0.975))


def loopback_mss() -> int:
    """The loopback interface's MSS, which sets the packets per response in the testbed."""
    try:
        with open("/sys/class/net/lo/mtu") as f:
            return int(f.read()) - _HEADERS
    except (OSError, ValueError):
        return 65536 - _HEADERS


def packets(sizes: np.ndarray, mss: int) -> np.ndarray:
    """Data segments per response of ``sizes`` body bytes (head included)."""
    return np.maximum(1, np.ceil((np.asarray(sizes, float) + _HEAD_BYTES) / mss))


@dataclass(frozen=True)
class Run:
    """What calibration needs from one testbed run: per-request means over the run
    (seconds) and the object sizes that were requested."""

    cls: str
    mode: str
    rate: float            # offered, requests/s
    throughput: float      # completed, requests/s
    requests: int          # served by the server
    host_s: float          # host thread CPU per request
    app_s: float           # of which application work X_a
    engine_s: float        # engine busy CPU per request (NaN inline)
    T: float               # mean delay seen by the client
    sizes: np.ndarray      # body bytes of the requests sent
    # Wake-ups per request of the host thread and of the engine, and other CPU work on
    # each one's core per request (NaN where not measured).
    host_wakeups: float = math.nan
    engine_wakeups: float = math.nan
    host_background_s: float = math.nan
    engine_background_s: float = math.nan
    # Turns of the host's loop that found work per request, blocking or not (NaN where
    # not measured): unlike its wake-ups, still counted under overload.
    host_turns: float = math.nan


# Each queue's fields in a Run: CPU per request, wake-ups counted per request, and other
# work on its core per request.
SIDES = {"host": ("host_s", "host_wakeups", "host_background_s"),
         "engine": ("engine_s", "engine_wakeups", "engine_background_s")}
# Cooling times tried by the wake-up fit: none, and 10 us to 100 ms. Past lam c >> 1 a
# wake-up costs D / (lam c): a tax on idle time (timer wake-ups of an idle thread), which
# the top of the grid also covers.
COOLING_GRID = (0.0, *np.geomspace(10e-6, 100e-3, 41))
# Shapes tried for the other work on an engine's core (:func:`burst_scv`). The load
# generator beside the engine answers many connections per turn of its own loop, so the
# engine waits behind bursts of it, not behind one request's share at a time.
BURST_SCV_GRID = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Wakeup:
    """A queue's fitted wake-up: ``cost`` D after a long idle period, ``cooling`` the
    time over which an idle queue cools down to it (docs/model.md §15), the R² of the
    fit within classes, and ``counted``: wake-ups the server counted per wake-up of the
    model (a check that its counters follow the model's 1 - U)."""

    cost: float = 0.0
    cooling: float = 0.0
    r2: float = math.nan
    counted: float = math.nan

    def per_run(self, run: Run, side: str) -> float:
        """The model's wake-up CPU per request in ``run``: wake-ups per request times D
        times the mean warmth of its idle periods (:func:`warmth`)."""
        if self.cost == 0:
            return 0.0
        return self.cost * woken(run, side) * warmth(run, side, self.cooling)


def woken(run: Run, side: str) -> float:
    """The model's wake-ups per request in ``run`` from its measured busy shares: with
    the queue's own busy share U and the background's sigma on its core, P0 = (1 -
    U / (1 - sigma)) / (1 + lam E[I]), E[I] the wait for background found busy
    (deterministic background jobs); 1 - U without background. An engine the host's
    answers wake too (the mode trait ``answers_wake_engine``, docs/model.md §17) wakes
    P0 (1 + the host's P0) times: the model's epochs with every request offloaded, as in
    the study's runs. Measured (bench/engine_turns.py, class 0, 660-6,000 req/s): the
    engine's sleeps per request were 0.83-0.96 times (1 - U_e)(1 + the host's rounds per
    request), and 0.92-1.76 times the 1 - U_e of a wake-up per busy period."""
    n = epochs(run, side)
    return _idle(run, side, n) * n


def epochs(run: Run, side: str) -> float:
    """Moments per request at which ``side`` may be woken, as the model counts them: its
    requests' arrivals, and for an engine the host's answers wake too, each batch of
    answers, one per host busy period: 1 + the host's P0."""
    if side == "engine" and traits(run.mode).answers_wake_engine:
        return 1 + _idle(run, "host")
    return 1.0


def warmth(run: Run, side: str, cooling: float) -> float:
    """The mean warmth 1 / (1 + lam_e c) of a wake-up in ``run``: idle periods end at the
    queue's epochs, lam_e = lam x :func:`epochs`, so they are exponential with that
    rate. The model takes the same rate (``tandem.Extra.wakeup``): fitted on the request
    rate alone, an engine's cooling time came out about twice the model's, and its
    light-load CPU per request 16-22% under the runs it was fitted on (29 Nov 2026)."""
    return 1 / (1 + run.throughput * epochs(run, side) * cooling)


def _idle(run: Run, side: str, epochs: float = 1.0) -> float:
    """P0 per epoch (docs/model.md §15): 1 - U / (1 - sigma) over 1 + lam_e E[I], E[I]
    the wait for background of an epoch that ends an idle period, as the model takes it
    (``tandem.idle_wait``)."""
    cpu, _, bg = SIDES[side]
    lam = run.throughput
    b = getattr(run, bg) if math.isfinite(getattr(run, bg)) else 0.0
    b = min(b, 0.99 / lam) if lam > 0 else 0.0
    wait = float(tandem.idle_wait(np.array(lam * epochs), np.array([lam]),
                                  tandem.Extra(b1=b, b2=b**2)))
    return max(1 - getattr(run, cpu) * lam / (1 - lam * b), 0.0) / (1 + lam * epochs * wait)


@dataclass(frozen=True)
class Background:
    """Other work on a queue's core: ``per_class`` CPU seconds per request of each class
    (the part that grows with the rate), ``share``, the part of the core it holds at
    any rate (docs/model.md §15), and ``scv``, the squared coefficient of variation of
    the per-request part (:func:`burst_scv`; 0: as regular as the requests)."""

    per_class: tuple[float, ...] = ()
    share: float = 0.0
    scv: float = 0.0


def burst(mean: float, scv: float) -> dist.Dist:
    """Other work of ``mean`` CPU per request with squared coefficient of variation
    ``scv`` (a lognormal, or a constant for 0)."""
    return dist.with_moments(mean, mean**2 * (1 + scv))


@dataclass(frozen=True)
class CostModel:
    """E[X](size) = c0 + c_pkt * packets + c_byte * bytes per request for one side of
    one mode, and that side's queue's cost per wake-up."""

    mode: str
    side: str
    c0: float
    c_pkt: float
    c_byte: float
    r2: float
    classes: tuple[str, ...]
    note: str = ""
    wakeup: Wakeup = Wakeup()
    background: Background = Background()

    def cost(self, sizes: np.ndarray, mss: int) -> np.ndarray:
        sizes = np.asarray(sizes, float)
        return self.c0 + self.c_pkt * packets(sizes, mss) + self.c_byte * sizes


def fit_cost_model(mode: str, side: str, classes: Sequence[str], means: Sequence[float],
                   sizes: Sequence[np.ndarray], mss: int) -> CostModel:
    """Non-negative least squares of the class means on mean packets and bytes. With
    fewer than three classes the per-packet term is not identifiable and is left out
    (packets and bytes move together across two classes); with one class the model is
    a constant."""
    y = np.asarray(means, float)
    n = len(y)
    columns = [np.ones(n), np.array([packets(s, mss).mean() for s in sizes]),
               np.array([np.mean(s) for s in sizes])]
    use = [0, 1, 2] if n >= 3 else [0, 2] if n == 2 else [0]
    note = {3: "", 2: "c_pkt needs three or more classes; left at 0",
            1: "one class: a constant cost"}[min(n, 3)]
    a = np.column_stack([columns[i] for i in use])
    scale = np.where(a.max(0) > 0, a.max(0), 1.0)  # columns of 1, ~10, ~1e6: condition them
    coef, _ = optimize.nnls(a / scale, y)
    coef = coef / scale
    full = np.zeros(3)
    full[use] = coef
    residual = y - a @ coef
    spread = ((y - y.mean()) ** 2).sum()
    r2 = 1 - (residual**2).sum() / spread if spread > 0 and n > len(use) else math.nan
    return CostModel(mode, side, float(full[0]), float(full[1]), float(full[2]),
                     float(r2), tuple(classes), note)


def shaped(mean: float, sizes: np.ndarray, model: CostModel | None, mss: int) -> np.ndarray:
    """Per-request costs with the given mean whose spread follows the cost model over
    the requested sizes (a constant without a model or a fixed part only)."""
    if mean <= 0:
        return np.zeros(len(sizes))
    if model is None:
        return np.full(len(sizes), mean)
    raw = model.cost(sizes, mss)
    return raw * (mean / raw.mean()) if raw.mean() > 0 else np.full(len(sizes), mean)


def fits(costs: np.ndarray) -> tuple[str, str]:
    """Lognormal (maximum likelihood) and Pareto (maximum likelihood, k = the minimum)
    fits of per-request costs, as distribution specs; "" where there is no spread."""
    x = np.asarray(costs, float)
    x = x[x > 0]
    if len(x) < 2 or np.ptp(x) <= 1e-12 * x.max():
        return "", ""
    logs = np.log(x)
    lognormal = dist.Lognormal(float(logs.mean()), float(logs.std()))
    k = float(x.min())
    alpha = len(x) / float(np.log(x / k).sum())
    return str(lognormal), f"pareto(alpha={alpha:.4g}, k={units.format_time(k)})"


@dataclass(frozen=True)
class ClassFit:
    """The fitted service times of one class in one mode (seconds; NaN: not measured)."""

    cls: str
    mode: str
    EXa: float
    EXp: float = math.nan
    EXp_m2: float = math.nan
    EXo: float = math.nan
    EXc: float = math.nan
    EXq: float = math.nan
    EXq_m2: float = math.nan
    lognormal: str = ""
    pareto: str = ""
    d0: float = math.nan
    d0_hw: float = math.nan  # half-width of d0's 95% interval
    # Other work on the host's and on the engine's core: per request (background), and
    # the share of the core it holds at any rate.
    host_bg: float = 0.0
    engine_bg: float = 0.0
    host_share: float = 0.0
    engine_share: float = 0.0

    @property
    def host(self) -> float:
        """Host demand per request in this mode."""
        return self.EXa + (self.EXo if traits(self.mode).engine_thread else self.EXp)

    @property
    def engine(self) -> float:
        return self.EXc + self.EXq

    @property
    def capacities(self) -> dict[str, float]:
        """Requests/s at which each queue's core, its background included, is full."""
        def full(demand: float, share: float) -> float:
            return (1 - share) / demand if demand > 0 else math.inf

        host = {"host": full(self.host + self.host_bg, self.host_share)}
        if not traits(self.mode).engine_thread:
            return host
        return host | {"engine": full(self.engine + self.engine_bg, self.engine_share)}

    @property
    def saturation(self) -> float:
        """Requests/s at which the bottleneck's core is full."""
        return min(self.capacities.values())

    @property
    def client_elsewhere(self) -> ClassFit:
        """This fit on a machine whose load generator has cores of its own: the engine's
        core without its other work (the study gives the generator the engine's core,
        docs/study.md). An upper bound: interrupt work counted there leaves too."""
        return replace(self, engine_bg=0.0, engine_share=0.0)

    @property
    def bottleneck(self) -> str:
        capacities = self.capacities
        return min(capacities, key=capacities.get)


def demand(runs: Sequence[Run], field: str) -> float:
    """Mean per-request value over runs, weighted by requests (the utilisation law over
    all of them: total CPU seconds over total requests)."""
    n = np.array([r.requests for r in runs], float)
    x = np.array([getattr(r, field) for r in runs], float)
    return float((n * x).sum() / n.sum()) if n.sum() > 0 else math.nan


def per_request(runs: Sequence[Run], side: str, wakeup: Wakeup) -> float:
    """The per-request part of a queue's demand over ``runs``: the wake-ups' share taken
    out (request-weighted, as :func:`demand`)."""
    n = np.array([r.requests for r in runs], float)
    woke = np.array([wakeup.per_run(r, side) for r in runs])
    return demand(runs, SIDES[side][0]) - float((n * woke).sum() / n.sum())


def woken_part(run: Run, side: str) -> float:
    """The CPU per request of ``side`` that its wake-ups can change: the host's less
    the application's own account of its work (a request's application work is the
    same whoever woke the thread), the engine's as it is."""
    cpu = getattr(run, SIDES[side][0])
    return cpu - run.app_s if side == "host" else cpu


def fit_wakeup(runs_by_class: Sequence[Sequence[Run]], side: str) -> Wakeup:
    """A queue's wake-up cost D and cooling time c, from CPU per request y (less the
    application's work, :func:`woken_part`) against the
    model's wake-ups per request x (:func:`woken`) over every class's runs: y = S_c +
    D x / (1 + lam_e c) (:func:`warmth`), S_c one per class, by non-negative least
    squares at each c of :data:`COOLING_GRID`, the c with the least squared error
    kept. So the fitted protocol work per class, S_c, is never below 0: a D that would
    leave less than the application's measured work is not a fit. Lighter runs wake the
    queue for more of their requests, and after longer idle periods; D and c are what
    their higher CPU per request says that costs. With too few runs, or no spread of
    wake-ups within a class, there is no wake-up cost."""
    cpu, counted, _ = SIDES[side]
    rows = [(c, r) for c, runs in enumerate(runs_by_class) for r in runs
            if math.isfinite(getattr(r, cpu)) and r.throughput > 0]
    x = np.array([woken(r, side) for _, r in rows])
    cls = np.array([c for c, _ in rows])
    spread_x = max((np.ptp(x[cls == c]) for c in set(cls)), default=0.0)
    if len(rows) <= len(runs_by_class) + 1 or spread_x <= 1e-3:  # slope not identifiable
        return Wakeup()
    y = np.array([woken_part(r, side) for _, r in rows])
    onehot = [(cls == c).astype(float) for c in range(len(runs_by_class))]
    best = None
    for cooling in COOLING_GRID:
        a = np.column_stack([*onehot, x * [warmth(r, side, cooling) for _, r in rows]])
        coef, norm = optimize.nnls(a, y)
        if best is None or norm < best[0] - 1e-15:
            best = (norm, cooling, coef[-1])
    norm, cooling, cost = best
    within = y - np.array([y[cls == c].mean() for c in cls])  # spread inside each class
    spread = (within**2).sum()
    n = np.array([r.requests for _, r in rows], float)
    w = np.array([getattr(r, counted) for _, r in rows])
    seen = np.isfinite(w)
    return Wakeup(float(cost), float(cooling) if cost > 0 else 0.0,
                  float(1 - norm**2 / spread) if spread > 0 else math.nan,
                  float((n * w)[seen].sum() / (n * x)[seen].sum())
                  if seen.any() and (n * x)[seen].sum() > 0 else math.nan)


def fit_background(runs_by_class: Sequence[Sequence[Run]], side: str) -> Background:
    """Other work on a queue's core, from each run's background CPU per second lam b
    (b per request, measured) against its rate: lam b = a_c lam + share, a_c one per
    class and the share one for the core, by non-negative least squares weighted by the
    runs' requests. A neighbour such as the load generator spends a steady part of the
    core on its timers and polling whatever the rate, so its CPU per request falls as
    the rate rises; its mean per request over light calibration runs overcharges a
    loaded queue. With no spread of rates within a class the share is not identifiable:
    it is 0 and a_c is the class's mean."""
    _, _, field = SIDES[side]
    means = [_background(runs, field) for runs in runs_by_class]
    rows = [(c, r) for c, runs in enumerate(runs_by_class) for r in runs
            if math.isfinite(getattr(r, field)) and r.throughput > 0]
    lam = np.array([r.throughput for _, r in rows])
    cls = np.array([c for c, _ in rows])
    seen = set(cls.tolist())
    spread = max((np.ptp(lam[cls == c]) / lam[cls == c].max() for c in seen), default=0.0)
    if len(rows) <= len(runs_by_class) or spread < 0.2:
        return Background(tuple(means))
    y = lam * np.array([getattr(r, field) for _, r in rows])
    per_class = [(cls == c) * lam for c in range(len(runs_by_class))]
    a = np.column_stack([*per_class, np.ones(len(rows))])
    w = np.sqrt([r.requests for _, r in rows])
    scale = a.max(0)  # columns of rates (~1e3) and of ones
    scale[scale == 0] = 1.0
    coef, _ = optimize.nnls(a * w[:, None] / scale, y * w)
    coef = coef / scale
    # A share near the whole core would leave the queue nothing at any rate: not a
    # neighbour the runs could have measured, so it is held below 0.9.
    return Background(tuple(float(x) if c in seen else means[c]
                            for c, x in enumerate(coef[:-1])), float(min(coef[-1], 0.9)))


def fit_class(runs: Sequence[Run], mss: int, host_model: CostModel | None = None,
              engine_model: CostModel | None = None, host_wakeup: Wakeup = Wakeup()
              ) -> ClassFit:
    """Service times of one class in one mode from its calibration runs, per request
    (the wake-ups' share taken out at the queues' costs per wake-up: ``host_wakeup``,
    the engine model's). ``host_model`` (inline: the host protocol side) and
    ``engine_model`` (offload modes) give the spread of X_p and X_q over the requested
    sizes; the engine model's c0 is X_c. Other work on the cores is fitted over every
    class at once (:func:`fit_background`) and left at 0 here."""
    first = runs[0]
    sizes = np.concatenate([r.sizes for r in runs])
    EXa = demand(runs, "app_s")
    other = max(per_request(runs, "host", host_wakeup) - EXa, 0.0)
    if not traits(first.mode).engine_thread:
        costs = shaped(other, sizes, host_model, mss)
        lognormal, pareto = fits(costs)
        return ClassFit(first.cls, first.mode, EXa, EXp=other, EXp_m2=float((costs**2).mean()),
                        lognormal=lognormal, pareto=pareto)
    wakeup = engine_model.wakeup if engine_model is not None else Wakeup()
    engine = max(per_request(runs, "engine", wakeup), 0.0)
    EXc = min(engine_model.c0, engine) if engine_model is not None else 0.0
    # X_q spreads as what the model adds to X_c: its per-packet and per-byte part.
    rest = replace(engine_model, c0=engine_model.c0 - EXc) if engine_model else None
    costs = shaped(engine - EXc, sizes, rest, mss)
    lognormal, pareto = fits(costs)
    return ClassFit(first.cls, first.mode, EXa, EXo=other, EXc=EXc, EXq=engine - EXc,
                    EXq_m2=float((costs**2).mean()), lognormal=lognormal, pareto=pareto)


def _background(runs: Sequence[Run], field: str) -> float:
    """Mean background per request over the runs; 0 where it was not measured."""
    value = demand(runs, field)
    return max(value, 0.0) if math.isfinite(value) else 0.0


def mixture(fits: Sequence[ClassFit], shares: Sequence[float], name: str) -> ClassFit:
    """The mean costs of a mix of classes (all in one mode) with these request shares:
    what the utilisation law and the mix's saturation rate depend on."""
    w = np.asarray(shares, float) / np.sum(shares)

    def mean(attr: str) -> float:
        return float(sum(wi * getattr(f, attr) for wi, f in zip(w, fits, strict=True)))

    return ClassFit(name, fits[0].mode, mean("EXa"), EXp=mean("EXp"), EXp_m2=mean("EXp_m2"),
                    EXo=mean("EXo"), EXc=mean("EXc"), EXq=mean("EXq"), EXq_m2=mean("EXq_m2"),
                    d0=mean("d0"), host_bg=mean("host_bg"), engine_bg=mean("engine_bg"),
                    host_share=mean("host_share"), engine_share=mean("engine_share"))


def combine(values: np.ndarray, half_widths: np.ndarray) -> tuple[float, float]:
    """Inverse-variance weighted mean of estimates with 95% half-widths, and its own
    half-width. A run whose mean delay carries a rare stall has a wide interval and so
    little weight. Estimates without an interval count only if none has one.

    Runs that disagree by more than their intervals allow (the machine drifts between
    runs, which no single run's interval sees) widen the half-width by the square root
    of the reduced chi-square, the Particle Data Group's scale factor."""
    v, hw = np.asarray(values, float), np.asarray(half_widths, float)
    ok = np.isfinite(v) & np.isfinite(hw) & (hw > 0)
    if not ok.any():
        finite = v[np.isfinite(v)]
        return (float(finite.mean()) if len(finite) else math.nan), math.nan
    w = 1 / hw[ok] ** 2
    mean = float((w * v[ok]).sum() / w.sum())
    dof = int(ok.sum()) - 1
    scale = math.sqrt(max(1.0, chi_square(v[ok], hw[ok]) / dof)) if dof else 1.0
    return mean, scale / math.sqrt(w.sum())


def by_replicates(keys: np.ndarray, values: np.ndarray, half_widths: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """One estimate per group of replicate runs (the runs with the same key, e.g. the
    same offered rate), for :func:`combine`: the group's plain mean and its 95 %
    half-width from the replicates' spread, never narrower than the runs' own intervals
    allow.

    Why not weigh each run by its own interval: a stall of a few milliseconds raises a
    run's mean delay and widens its interval together, so those weights favour the runs
    the stalls missed and put d0 under the mean of replicates, which is what a point of
    the sweep is. Equal weights within a group keep d0 on the footing of the points it
    is judged with; the groups are still weighed by their spread. With one run per
    group this is the runs as they are."""
    keys, v, hw = np.asarray(keys), np.asarray(values, float), np.asarray(half_widths, float)
    means, widths = [], []
    for key in dict.fromkeys(keys.tolist()):
        i = (keys == key) & ~np.isnan(v)
        n = int(i.sum())
        if n == 0:
            continue
        spread = float(v[i].std(ddof=1)) / math.sqrt(n) if n > 1 else math.nan
        own = math.sqrt(float(np.mean((hw[i] / Z95) ** 2)) / n)
        means.append(float(v[i].mean()))
        widths.append(Z95 * float(np.fmax(spread, own)))
    return np.array(means), np.array(widths)


def chi_square(values: np.ndarray, half_widths: np.ndarray) -> float:
    """How far estimates with 95% half-widths disagree about their :func:`combine`d
    mean, in standard errors squared (the estimates with an interval; 0 if none has
    one). An infinite estimate (a model saturated at a rate the testbed served) is an
    infinite disagreement."""
    v, hw = np.asarray(values, float), np.asarray(half_widths, float)
    ok = ~np.isnan(v) & np.isfinite(hw) & (hw > 0)
    if not np.isfinite(v[ok]).all():
        return math.inf
    if not ok.any():
        return 0.0
    w = 1 / hw[ok] ** 2
    mean = (w * v[ok]).sum() / w.sum()
    # Half-widths are 1.96 standard errors; chi-square counts in standard errors.
    return Z95**2 * float((w * (v[ok] - mean) ** 2).sum())


def burst_scv(gaps: Callable[[float], Iterable[tuple[np.ndarray, np.ndarray]]]) -> float:
    """The shape of other work on an engine's core that best explains the calibration
    runs' delays: the squared coefficient of variation of its CPU per request, from
    :data:`BURST_SCV_GRID`, whose ``gaps`` (per class, the runs' delays less the
    model's without d0, with the background in that shape, and their 95% half-widths)
    disagree least about the d0 each class's runs then give (their :func:`chi_square`
    summed over the classes); the smaller on a tie."""
    return min(BURST_SCV_GRID, key=lambda scv: sum(chi_square(*g) for g in gaps(scv)))


def ks(model: Sequence[float], measured: Sequence[float]) -> tuple[float, float]:
    """Two-sample Kolmogorov-Smirnov D and p between two curves' values, with the exact
    small-sample distribution (as R's ks.test without ties, which seed 000 used). A NaN
    is a point the curve does not have and is left out; an infinite value (a saturated
    model) is a point above every finite one and stays in."""
    a = np.asarray(model, float)
    b = np.asarray(measured, float)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if len(a) == 0 or len(b) == 0:
        return math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            result = stats.ks_2samp(a, b, method="exact")
        except RuntimeWarning:  # scipy's exact recursion fails for some samples (5 + 5)
            result = stats.ks_2samp(a, b, method="asymp")
    return float(result.statistic), float(result.pvalue)


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean absolute percentage error of ``predicted`` against ``measured`` (finite,
    non-zero measurements only), as a fraction. A prediction that is not finite where
    the measurement is (a model saturated where the testbed was not) is an infinite
    error, never a point left out."""
    p, m = np.asarray(predicted, float), np.asarray(measured, float)
    ok = np.isfinite(m) & (m != 0)
    if not ok.any():
        return math.nan
    if not np.isfinite(p[ok]).all():
        return math.inf
    return float(np.mean(np.abs(p[ok] / m[ok] - 1)))
