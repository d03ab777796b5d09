"""Run seed 004's packet-level handoff model: the paper's configuration shorthand,
settings over the Rust defaults, calibration on the baseline, and the experiment matrix.

A configuration is written as in the paper, ``Workload-NICconns-P|N-L|N-FCFS|Tn|LLF-MIPS``:
``W-4096-P-L-FCFS-400`` is World Cup-like clients, ``Hard_limit`` 4096, host-first
priority, load control, FCFS selection, a 400 MIPS NIC. ``NICconns`` 0 is the baseline
without handoff. Calibration follows reference 004 §7.3–7.4: on ``W-0`` only, the host's
costs are scaled until it saturates at the paper's 23,031 requests/s and the NIC's
host-packet cost until the NIC is 62 % idle; an offloaded packet costs the NIC
``NIC_PACKET_RATIO`` (3.5) host packets. Every other configuration is then predicted.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import pandas as pd

from offloadlab import _core
from offloadlab.errors import InputError
from offloadlab.handoff import policy
from offloadlab.handoff import workloads as wl
from offloadlab.inputs import read_toml

SHORTHAND = re.compile(rf"^(?P<w>[A-Za-z])-(?P<limit>\d+)-{policy.PATTERN}-(?P<mips>\d+)$")
# Reference 004 §6.1 and §7.3: what calibration on W-0 aims at.
BASELINE_RATE = 23031.0
BASELINE_NIC_IDLE = 0.62
NIC_PACKET_RATIO = 3.5
# Host-cost settings scaled together by calibration (the rest are ratios to these).
HOST_COSTS = ("host.packet", "host.connection", "host.request", "host.dynamic",
              "host.bypass", "host.handoff")
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
    def switches(self) -> policy.Policy:
        return policy.Policy(self.host_first, self.load_control, self.threshold,
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
    p = policy.from_match(m, f"configuration {text!r}")
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
    :func:`defaults`), load control's watermarks and the workload's size."""

    values: dict[str, float] = field(default_factory=dict)
    watermarks: Watermarks = Watermarks()
    connections: int = 20_000
    seed: int = 0

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


def run_setup(setup: Setup, settings: Settings = Settings()) -> dict:
    """Simulate one configuration; returns the metrics and the time series."""
    work = connections(setup.workload, settings.connections, settings.seed)
    values = {"run.clients": work.clients, "run.seed": settings.seed, **settings.values,
              "hardware.nic_ips": setup.mips * 1e6}
    try:
        out = _core.handoff_run(
            list(values.items()), setup.hard_limit, setup.host_first,
            settings.watermarks.as_tuple() if setup.load_control else None, setup.threshold,
            work.offsets.tolist(), work.sizes.tolist(), work.dynamic.tolist(),
            None if work.client_kbps is None else work.client_kbps * 1e3,
            long_lived=setup.long_lived)
    except ValueError as e:
        raise InputError(f"{setup.label}: {e}") from None
    return out


def calibrate(settings: Settings = Settings(), rounds: int = 3,
              progress: Callable[[str], None] | None = None) -> Settings:
    """Scale host and NIC costs so that W-0-N-N-FCFS-400 matches the paper's baseline:
    the host saturated at 23,031 requests/s and the NIC 62 % idle."""
    base = parse_setup("W-0-N-N-FCFS-400")
    start = {**defaults(), **settings.values}
    # Only the costs calibration moves go into the settings (not, e.g., run.clients,
    # which each workload sets).
    values = {**settings.values,
              **{k: start[k] for k in (*HOST_COSTS, "nic.host_packet", "nic.packet")}}
    for i in range(rounds):
        r = run_setup(base, replace(settings, values=values))
        if progress:
            progress(f"calibration {i + 1}/{rounds}: {r['requests_per_s']:.0f} req/s, "
                     f"NIC idle {r['nic_idle']:.0%}")
        if r["host_idle"] > 0.02:
            raise InputError("calibration: the host is not saturated in W-0 "
                             f"(idle {r['host_idle']:.0%}); raise host costs or clients")
        # The host is the bottleneck: its rate scales with the inverse of its costs.
        k = r["requests_per_s"] / BASELINE_RATE
        for key in HOST_COSTS:
            values[key] *= k
        # At the calibrated rate the NIC's busy share scales with its per-packet cost.
        nic_busy = (1 - r["nic_idle"]) / k
        values["nic.host_packet"] *= (1 - BASELINE_NIC_IDLE) / nic_busy
        values["nic.packet"] = NIC_PACKET_RATIO * values["nic.host_packet"]
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
CONFIG_KEYS = {"runs", "calibrate", "connections", "seed", "load_control", *SECTIONS}


def load_config(path) -> tuple[list[Setup], Settings, bool]:
    """A TOML experiment: ``runs`` (shorthands), optional ``calibrate`` (default true),
    ``connections``, ``seed``, a ``[load_control]`` table (hiwat, lowat, step_down,
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
    return setups, Settings(values, marks, connections, seed), calibrate_first
