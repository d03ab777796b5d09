"""Run seed 004's packet-level handoff model: the paper's configuration shorthand,
settings over the Rust defaults, calibration on the paper's numbers, and the experiment
matrix.

A configuration is written as in the paper, ``Workload-NICconns-P|N-L|N-FCFS|Tn|LLF-MIPS``:
``W-4096-P-L-FCFS-400`` is World Cup-like clients, ``Hard_limit`` 4096, host-first
priority, load control, FCFS selection, a 400 MIPS NIC. ``NICconns`` 0 is the baseline
without handoff. Calibration (:func:`calibrate`) solves one cost knob on each number of
:data:`offloadlab.handoff.paper.FITTED` (Table 1 and §6.2); the rest of the paper's
numbers are predictions (:mod:`offloadlab.handoff.paper` says which are which).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd

from offloadlab import _core, handoff_policy
from offloadlab.errors import InputError
from offloadlab.handoff import paper
from offloadlab.handoff import workloads as wl
from offloadlab.inputs import read_toml

SHORTHAND = re.compile(
    rf"^(?P<w>[A-Za-z])-(?P<limit>\d+)-{handoff_policy.PATTERN}-(?P<mips>\d+)$")
# Host costs calibration scales together; the application's are also scaled against
# the network stack's, to the paper's share of host cycles below the system calls.
APP_COSTS = ("host.request", "host.copy_per_byte")
HOST_COSTS = ("host.packet", "host.connection", "host.bypass", "host.handoff", *APP_COSTS)
FIT_KEYS = (*HOST_COSTS, "host.dynamic", "nic.host_packet", "nic.packet",
            "hardware.tx_capacity", "nic.miss")
METRICS = ("requests_per_s", "packets_per_s", "connections_per_s", "http_bps", "host_idle",
           "host_stack", "nic_idle", "offloaded_share", "nic_packet_share",
           "host_rx_delay_median_s", "host_rx_delay_mean_s", "host_tx_delay_median_s",
           "host_tx_delay_mean_s", "response_mean_s", "response_p99_s", "drops", "timeouts",
           "handoffs_accepted", "handoffs_refused", "measured_s", "truncated")


@dataclass(frozen=True)
class Setup:
    """One configuration in the paper's terms."""

    workload: str
    hard_limit: int
    host_first: bool
    load_control: bool
    threshold: int | None  # T(n); None is FCFS selection
    mips: int
    long_lived: bool = False  # LLF selection: the host's flow detector picks

    @property
    def switches(self) -> handoff_policy.Policy:
        return handoff_policy.Policy(self.host_first, self.load_control, self.threshold,
                                     self.long_lived)

    @property
    def label(self) -> str:
        return f"{self.workload}-{self.hard_limit}-{self.switches.label}-{self.mips}"

    @property
    def baseline(self) -> Setup:
        return Setup(self.workload, 0, False, False, None, 400)


def parse_setup(text: str) -> Setup:
    """``W-4096-P-L-FCFS-400`` -> :class:`Setup`, or an InputError that says the form."""
    m = SHORTHAND.match(text.strip())
    if not m:
        raise InputError(
            f"configuration {text!r}: write it as Workload-NICconns-P|N-L|N-FCFS|Tn|LLF-MIPS, "
            "e.g. W-4096-P-L-FCFS-400")
    name = m["w"].upper()
    if name not in wl.WORKLOADS:
        raise InputError(f"configuration {text!r}: workload {name!r} is not one of "
                         f"{', '.join(wl.WORKLOADS)}")
    mips = int(m["mips"])
    if mips <= 0:
        raise InputError(f"configuration {text!r}: MIPS must be >= 1")
    p = handoff_policy.from_match(m, f"configuration {text!r}")
    return Setup(name, int(m["limit"]), p.host_first, p.load_control, p.threshold, mips,
                 p.long_lived)


@dataclass(frozen=True)
class Watermarks:
    """Load control's parameters (reference 004 §3.2; lowat and steps are our choice)."""

    hiwat: int = 1024
    lowat: int = 256
    step_down: int = 32
    step_up: int = 32

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.hiwat, self.lowat, self.step_down, self.step_up)


@dataclass(frozen=True)
class Settings:
    """Overrides of the model's defaults (``section.name`` keys; see
    :func:`defaults`), load control's watermarks, the workload's size, and a WC98 or
    CLF log that W replays instead of its synthetic trace."""

    values: dict[str, float] = field(default_factory=dict)
    watermarks: Watermarks = Watermarks()
    connections: int = 20_000
    seed: int = 0
    trace: str | None = None

    def with_values(self, **more: float) -> Settings:
        return replace(self, values={**self.values, **more})


def defaults() -> dict[str, float]:
    """The model's default settings, from the Rust core (the one place they live)."""
    return dict(_core.handoff_defaults())


def check_values(values: dict[str, float], where: str) -> None:
    known = defaults()
    for key, v in values.items():
        if key not in known:
            raise InputError(f"{where}: unknown setting {key!r}; known sections are hardware, "
                             "host, nic, tcp, run and flows (see `offload handoff defaults`)")
        if key == "hardware.nic_ips":
            raise InputError(f"{where}: the NIC's speed comes from each configuration's "
                             "MIPS (its last part), not from hardware.nic_ips")
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InputError(f"{where}: {key} must be a number, got {v!r}")


@functools.lru_cache(maxsize=8)
def connections(name: str, n: int, seed: int) -> wl.Connections:
    """The workload's connections, built once per (name, n, seed): a matrix runs each
    workload many times."""
    return wl.build(name, connections=n, seed=seed)


@functools.lru_cache(maxsize=2)
def replayed(path: str, n: int) -> tuple[wl.Connections, wl.Replayed]:
    """A log's connections (:func:`workloads.replay`), read once per (path, n)."""
    return wl.replay(path, n)


def workload(name: str, settings: Settings) -> wl.Connections:
    """The connections a configuration's clients replay: W's come from the log when
    the settings name one."""
    if name == "W" and settings.trace is not None:
        return replayed(settings.trace, settings.connections)[0]
    return connections(name, settings.connections, settings.seed)


def run_setup(setup: Setup, settings: Settings = Settings()) -> dict:
    """Simulate one configuration; returns the metrics and the time series."""
    work = workload(setup.workload, settings)
    values = {"run.clients": work.clients, "run.seed": settings.seed, **settings.values,
              "hardware.nic_ips": setup.mips * 1e6}
    try:
        out = _core.handoff_run(
            list(values.items()), setup.hard_limit, setup.host_first,
            asdict(settings.watermarks) if setup.load_control else None, setup.threshold,
            work.offsets.tolist(), work.sizes.tolist(), work.dynamic.tolist(),
            None if work.client_kbps is None else work.client_kbps * 1e3,
            long_lived=setup.long_lived)
    except ValueError as e:
        raise InputError(f"{setup.label}: {e}") from None
    return out


def _solve(f: Callable[[float], float], target: float, x: float, rising: bool,
           tol: float = 0.01, tries: int = 5) -> float:
    """``x`` > 0 where the monotone ``f`` (one simulation per call) meets ``target``
    within ``tol``: a secant on log x from a first step of a factor 1.5 the right way."""
    y = f(x)
    if abs(y - target) <= tol:
        return x
    prev = (x, y)
    x *= 1.5 if (y < target) == rising else 1 / 1.5
    for _ in range(tries):
        y = f(x)
        if abs(y - target) <= tol:
            break
        (x0, y0), prev = prev, (x, y)
        if y == y0:  # flat here: keep stepping the right way
            x *= 1.5 if (y < target) == rising else 1 / 1.5
            continue
        step = (math.log(x) - math.log(x0)) * (target - y) / (y - y0)
        x *= math.exp(max(-1.0, min(1.0, step)))  # at most a factor e per step
    return x


def calibrate(settings: Settings = Settings(), rounds: int = 2,
              progress: Callable[[str], None] | None = None) -> Settings:
    """Fit the cost model's knobs, each on one of the paper's numbers
    (:data:`paper.FITTED`, in :data:`paper.KNOBS`' order), starting from the last
    fit at the defaults (:data:`paper.FIT`): W-0's rate, NIC idle share and
    network-stack share set the host's and the NIC's per-packet costs and the host's
    split between stack and application; Table 1's host-first and naive rows set the
    NIC's cost of an offloaded packet and the host's transmit ring; W-4096-P-N's host
    idle share the NIC's cost growth with connections; D-4096-P-L's HTTP rate the
    host's cost of a dynamic page. Settings the experiment gives itself are not moved."""
    fixed = set(settings.values)
    values = {**defaults(), **paper.FIT, **settings.values}
    values = {k: v for k, v in values.items() if k in FIT_KEYS or k in fixed}

    def say(msg: str) -> None:
        if progress:
            progress(msg)

    def run(label: str, **change: float) -> dict:
        return run_setup(parse_setup(label), replace(settings, values={**values, **change}))

    def gain(label: str, base: float, **change: float) -> float:
        return run(label, **change)["requests_per_s"] / base - 1

    def knob(key: str, f: Callable[[float], float], target: float, rising: bool,
             scale: float = 1.0, tol: float = 0.01, least: float = 0.0) -> None:
        """Solve ``values[key] / scale`` unless the experiment fixed it, from its current
        value or ``least`` if that is more."""
        if key in fixed:
            return
        # A knob at 0 (the NIC's cache term is off by default) starts from a small value.
        start = max(values[key] / scale, least) or 0.25
        x = _solve(lambda x: f(x * scale), target, start, rising, tol)
        values[key] = max(1, round(x)) if key == "hardware.tx_capacity" else x * scale
        say(f"  {key} = {values[key]:.4g}")

    (rate, nic_idle, stack, pn, nn, pn_idle, d_bps) = (n.paper for n in paper.FITTED)
    for i in range(rounds):
        say(f"calibration round {i + 1}/{rounds}")
        for _ in range(3):  # W-0: the host saturated at the paper's rate, its split, the NIC
            r = run("W-0-N-N-FCFS-400")
            if r["host_idle"] > 0.02:
                raise InputError("calibration: the host is not saturated in W-0 (idle "
                                 f"{r['host_idle']:.0%}); raise host costs or clients")
            k = r["requests_per_s"] / rate  # the host is the bottleneck: rate ~ 1 / cost
            app = (r["host_stack"] / (1 - r["host_stack"])) * ((1 - stack) / stack)
            for key in HOST_COSTS:
                if key not in fixed:
                    values[key] *= k * (app if key in APP_COSTS else 1.0)
            if "nic.host_packet" not in fixed:
                # The NIC's busy share scales with its costs; an offloaded packet keeps
                # its ratio to a host packet (fitted below).
                scale = (1 - nic_idle) / ((1 - r["nic_idle"]) / k)
                values["nic.host_packet"] *= scale
                if "nic.packet" not in fixed:
                    values["nic.packet"] *= scale
        base = run("W-0-N-N-FCFS-400")
        say(f"  W-0: {base['requests_per_s']:,.0f} req/s, NIC idle {base['nic_idle']:.0%}, "
            f"stack {base['host_stack']:.0%}")
        w0 = base["requests_per_s"]
        knob("nic.packet",
             lambda x, w0=w0: gain("W-1024-P-N-FCFS-400", w0, **{"nic.packet": x}),
             pn, rising=False, scale=values["nic.host_packet"])
        knob("hardware.tx_capacity",
             lambda x, w0=w0: gain("W-1024-N-N-FCFS-400", w0,
                                   **{"hardware.tx_capacity": max(1, round(x))}),
             nn, rising=True)
        knob("nic.miss", lambda x: run("W-4096-P-N-FCFS-400", **{"nic.miss": x})["host_idle"],
             pn_idle, rising=True, scale=values["nic.packet"])
        # The dearest dynamic page at which D-4096-P-L still makes the paper's "about
        # 1 Gb/s" (±3 %): cheaper ones leave it at its clients' cap whatever the cost, so
        # the search comes down from a page too dear for it.
        knob("host.dynamic",
             lambda x: run("D-4096-P-L-FCFS-400", **{"host.dynamic": x})["http_bps"] / d_bps,
             1.0, rising=False, tol=0.03, least=1e6)
    return replace(settings, values=values)


# The experiment matrix of reference 004 §7.2 (Table 1, Figures 5, 7, 8).
def matrix(quick: bool = False) -> list[str]:
    """The configurations to run: all of §7.2, or a quick subset for W and S."""
    fig5 = {"W": ["1024-N-N", "1024-P-N", "4096-P-N", "4096-P-L"],
            "I": ["1024-N-N", "1024-P-N", "4096-P-N", "4096-P-L"],
            "S": ["2048-N-N", "2048-P-N", "4096-P-N", "4096-P-L"],
            "D": ["1024-N-N", "4096-P-L"]}
    if quick:
        fig5 = {"W": fig5["W"], "S": ["2048-P-N", "4096-P-L"]}
    out = []
    for w, rows in fig5.items():
        out.append(f"{w}-0-N-N-FCFS-400")
        out += [f"{w}-{r}-FCFS-400" for r in rows]
    out.append("W-256-N-N-FCFS-400")                                       # Table 1
    out += [f"W-256-P-L-{s}-400" for s in ("FCFS", "T4", "T20")]           # Figure 7
    out += [f"W-4096-P-L-{s}-400" for s in ("T4", "T20")]                  # A13
    for w in fig5:                                                         # Figure 8
        out += [f"{w}-4096-P-L-FCFS-{m}" for m in ((800,) if quick else (600, 800))]
    return list(dict.fromkeys(out))


def run_all(setups: Iterable[Setup], settings: Settings,
            progress: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, dict]:
    """Run each configuration (and each workload's baseline, for the gains). Returns
    one row per configuration and the time series by label."""
    setups = list(setups)
    wanted = list(dict.fromkeys([s.baseline for s in setups] + setups))
    rows, series = [], {}
    for i, s in enumerate(wanted):
        if progress:
            progress(f"[{i + 1}/{len(wanted)}] {s.label}")
        r = run_setup(s, settings)
        rows.append({"setup": s.label, "workload": s.workload, "hard_limit": s.hard_limit,
                     "priority": "P" if s.host_first else "N",
                     "load_control": "L" if s.load_control else "N",
                     "selection": s.switches.selection,
                     "mips": s.mips, **{k: r[k] for k in METRICS}})
        series[s.label] = pd.DataFrame(r["series"])
    df = pd.DataFrame(rows)
    base = df[df.hard_limit == 0].drop_duplicates("workload").set_index("workload")
    df["gain"] = df.requests_per_s / df.workload.map(base.requests_per_s) - 1
    return df, series


# Tables of model settings in an experiment file (`flows` is the LLF selection's detector).
SECTIONS = ("hardware", "host", "nic", "tcp", "run", "flows")
CONFIG_KEYS = {"runs", "calibrate", "connections", "seed", "trace", "load_control", *SECTIONS}


def load_config(path) -> tuple[list[Setup], Settings, bool]:
    """A TOML experiment: ``runs`` (shorthands), optional ``calibrate`` (default true),
    ``connections``, ``seed``, ``trace`` (a WC98 or CLF log for W, relative to the
    file), a ``[load_control]`` table (hiwat, lowat, step_down,
    step_up) and tables ``[hardware] [host] [nic] [tcp] [run] [flows]`` over the
    defaults."""
    where = str(path)
    data = read_toml(path)
    unknown = set(data) - CONFIG_KEYS
    if unknown:
        raise InputError(f"{where}: unknown keys {sorted(unknown)}; the known ones are "
                         f"{sorted(CONFIG_KEYS)}")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs or not all(isinstance(r, str) for r in runs):
        raise InputError(f'{where}: runs must be a list of configurations, e.g. runs = '
                         '["W-0-N-N-FCFS-400", "W-4096-P-L-FCFS-400"]')
    setups = [parse_setup(r) for r in runs]
    values = {f"{section}.{k}": v for section in SECTIONS
              for k, v in data.get(section, {}).items()}
    check_values(values, where)
    try:
        marks = Watermarks(**data.get("load_control", {}))
    except TypeError:
        raise InputError(f"{where}: [load_control] takes hiwat, lowat, step_down and "
                         "step_up") from None
    connections = data.get("connections", 20_000)
    seed = data.get("seed", 0)
    for name, v in (("connections", connections), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if name == "connections" else 0):
            raise InputError(f"{where}: {name} must be a whole number"
                             f"{' >= 1' if name == 'connections' else ' >= 0'}, got {v!r}")
    calibrate_first = data.get("calibrate", True)
    if not isinstance(calibrate_first, bool):
        raise InputError(f"{where}: calibrate must be true or false")
    trace = data.get("trace")
    if trace is not None:
        if not isinstance(trace, str) or not trace:
            raise InputError(f'{where}: trace must be the path of a WC98 or CLF log, e.g. '
                             f'trace = "wc_day46_1.gz", got {trace!r}')
        trace = str(Path(path).parent / trace)
    return setups, Settings(values, marks, connections, seed, trace), calibrate_first
