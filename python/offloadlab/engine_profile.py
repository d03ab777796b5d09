"""An offload engine a user is considering, described by what decides whether it pays:
how fast its cores are against one of the host's, what each message across the
host-engine interface costs it, how many cores it has, how much of them other work
holds, and whether they are host cores. The model solves a scenario with it
(:meth:`EngineProfile.apply`), the study emulates it on the testbed's engine thread,
and :mod:`offloadlab.model.answer` finds the slowest engine that still pays.

A profile is a TOML table (``examples/engines/`` has some, each citing its numbers)::

    [engine]
    name = "NVIDIA BlueField-2, Arm Cortex-A72 cores"
    source = "where the numbers come from"
    speed = 0.35            # work per second of one engine core / one host core
    message_cost = "1us"    # engine time per message across the interface, extra
    cores = 8
    shared = 0.0            # share of each engine core other work holds
    on_host = false         # true: the engine's cores are the host's own
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from offloadlab import dist, units
from offloadlab.errors import InputError
from offloadlab.inputs import load_toml
from offloadlab.scenario import Scenario

# Messages an offloaded request sends across the interface: the request up to the host
# and the answer down to the engine, as the testbed's engine pays them
# (crates/offload-server/src/engine.rs, Slowdown).
MESSAGES_PER_REQUEST = 2

FIELDS: dict[str, str] = {
    "name": "what the engine is, e.g. \"BlueField-2, 8 Arm A72 cores\"",
    "source": "where the numbers come from: a datasheet or paper by name, or "
              "\"illustrative\"",
    "speed": "work per second of one engine core over that of one host core, > 0 "
             "(0.25: each operation takes the engine four times as long)",
    "message_cost": "engine time per message across the host-engine interface, on top "
                    "of what the measured engine pays, e.g. \"2us\"",
    "cores": "engine cores; connections are spread evenly over them",
    "shared": "share of each engine core that other work holds, in [0, 1); left out, the "
              "measured engine's own tenants stay (on the testbed: the load generator)",
    "on_host": "true if the engine's cores are host cores (a dedicated core, a kernel "
               "SQPOLL thread): they then count against the host cores offload saves",
}


@dataclass(frozen=True)
class EngineProfile:
    """An engine, relative to the engine the scenario's costs were measured on (speed
    1, no extra message cost, one dedicated core: the testbed's engine thread)."""

    name: str = "the measured engine"
    source: str = ""
    speed: float = 1.0
    message_cost_s: float = 0.0
    cores: int = 1
    shared: float | None = None
    on_host: bool = False

    def __post_init__(self) -> None:
        problems = []
        if not (isinstance(self.speed, int | float) and math.isfinite(self.speed)
                and self.speed > 0):
            problems.append(f"speed = {self.speed!r}: give a number > 0 ({FIELDS['speed']})")
        if not (math.isfinite(self.message_cost_s) and self.message_cost_s >= 0):
            problems.append(f"message_cost = {self.message_cost_s!r} s: give a time >= 0, "
                            "e.g. \"2us\"")
        if isinstance(self.cores, bool) or not isinstance(self.cores, int) or self.cores < 1:
            problems.append(f"cores = {self.cores!r}: give a whole number >= 1")
        if self.shared is not None and not (isinstance(self.shared, int | float)
                                            and 0 <= self.shared < 1):
            problems.append(f"shared = {self.shared!r}: give a share in [0, 1) "
                            f"({FIELDS['shared']})")
        if not isinstance(self.on_host, bool):
            problems.append(f"on_host = {self.on_host!r}: give true or false")
        if problems:
            raise InputError(f"engine profile {self.name!r}: " + "; ".join(problems))

    @property
    def slowdown(self) -> float:
        """The testbed engine's slowdown factor that emulates this speed: each operation
        takes 1 + factor = 1 / speed times as long."""
        return 1 / self.speed - 1

    def apply(self, scenario: Scenario) -> Scenario:
        """``scenario`` with its engine replaced by this one: every engine cost divided
        by the speed, each offloaded request paying its messages' extra cost on its
        engine overhead (first two moments kept: all the model uses), the requests
        spread over the cores. Other work on the engine's cores stays as measured (the
        testbed's load generator shares its engine's core), unless the profile gives
        ``shared``: then that share replaces it, and the measured per-request tenants
        go (a candidate engine does not carry the testbed's load generator)."""
        extra = MESSAGES_PER_REQUEST * self.message_cost_s

        def slower(d: dist.Dist, add: float = 0.0) -> dist.Dist:
            mean = d.mean / self.speed
            return dist.with_moments(mean + add, d.m2 / self.speed**2 + 2 * mean * add + add**2)

        classes = tuple(replace(
            c, engine_overhead=slower(c.engine_overhead, extra),
            engine_proto=slower(c.engine_proto),
            engine_hit=None if c.engine_hit is None else slower(c.engine_hit, extra))
            for c in scenario.classes)
        engine = replace(scenario.engine, cores=self.cores,
                         wakeup=slower(scenario.engine.wakeup))
        if self.shared is not None:
            engine = replace(engine, background_share=self.shared,
                             background=dist.Deterministic(0.0), per_class=())
        return replace(scenario, classes=classes, engine=engine)

    def at_speed(self, speed: float) -> EngineProfile:
        return replace(self, speed=speed)

    def describe(self) -> str:
        where = "host cores" if self.on_host else "its own cores"
        text = (f"{self.name}: speed {self.speed:g} of a host core, "
                f"{self.cores} core{'s' * (self.cores != 1)} ({where}")
        text += f", {self.shared:.0%} held by other work)" if self.shared else ")"
        if self.message_cost_s:
            text += f", {units.format_time(self.message_cost_s)} more per message"
        return text

    def to_table(self) -> dict:
        """The ``[engine]`` table :func:`from_table` reads back to an equal profile."""
        return {"name": self.name, "source": self.source, "speed": self.speed,
                "message_cost": units.format_time(self.message_cost_s), "cores": self.cores,
                **({} if self.shared is None else {"shared": self.shared}),
                "on_host": self.on_host}


def from_table(data: dict, source: str = "<engine profile>") -> EngineProfile:
    """A profile from a TOML document's ``[engine]`` table; unknown keys and bad values
    are an InputError naming the key and the fix."""
    table = data.get("engine")
    if not isinstance(table, dict):
        raise InputError(f"{source}: no [engine] table; an engine profile looks like "
                         "[engine] name = \"...\" speed = 0.5 message_cost = \"2us\" cores = 1")
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise InputError(f"{source}: [engine] has no key {unknown[0]!r}; it takes "
                         f"{', '.join(FIELDS)}")
    values = {k: table[k] for k in ("name", "source", "speed", "cores", "shared", "on_host")
              if k in table}
    for key in ("name", "source"):
        if key in values and not isinstance(values[key], str):
            raise InputError(f"{source}: [engine] {key} = {values[key]!r}: give text "
                             f"({FIELDS[key]})")
    if "message_cost" in table:
        values["message_cost_s"] = _time(table["message_cost"], f"{source}: [engine] "
                                                                 "message_cost")
    try:
        return EngineProfile(**values)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None


def load(path: str | Path) -> EngineProfile:
    """The profile in a TOML file."""
    return load_toml(path, "an engine profile", lambda data, source, _: from_table(data, source))


def from_flags(path: Path | None, speed: float | None, message_cost: str | None
               ) -> EngineProfile | None:
    """The profile of ``--engine FILE``, ``--engine-speed`` and ``--engine-message-cost``
    (flags override the file's values); None when none is given."""
    if path is None and speed is None and message_cost is None:
        return None
    profile = load(path) if path is not None else EngineProfile(name="an engine")
    changes: dict = {}
    if speed is not None:
        changes["speed"] = speed
    if message_cost is not None:
        changes["message_cost_s"] = _time(message_cost, "--engine-message-cost")
    try:
        return replace(profile, **changes)
    except InputError as exc:
        flag = "--engine-speed" if "speed" in str(exc) else "--engine-message-cost"
        raise InputError(f"{flag}: {exc}") from None


def _time(value: object, where: str) -> float:
    if isinstance(value, str):
        try:
            return units.parse_time(value)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    raise InputError(f"{where} = {value!r}: give a time with its unit, e.g. \"2us\"")

