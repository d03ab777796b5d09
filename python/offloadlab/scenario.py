"""Scenario: traffic classes, their service costs and the model options, from TOML.

This module is the only place that reads and checks scenario files. Every error
names the file, the class and the field, says what is wrong and how to fix it,
and all problems of a file are reported at once. See ``docs/scenario.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Literal

import tomli_w

from offloadlab import dist, units
from offloadlab.dist import Dist
from offloadlab.errors import InputError
from offloadlab.inputs import load_toml, parse_toml

# The service-time fields of a class, with the seed's symbol and meaning.
COST_FIELDS: dict[str, str] = {
    "app": "X_a, application work on the host CPU",
    "host_proto": "X_p, protocol work on the host CPU when not offloaded",
    "host_overhead": "X_o, host CPU cost of driving the engine when offloaded",
    "engine_overhead": "X_c, engine cost of the host's commands",
    "engine_proto": "X_q, protocol work on the engine",
}
# The queues of the two systems, by table name: the host alone (no engine), the host with
# an engine, and the engine.
QUEUES: dict[str, str] = {
    "host_alone": "the host CPU without an engine",
    "host": "the host CPU with the engine",
    "engine": "the offload engine",
}
# The costs of a queue beyond its requests' own service.
QUEUE_FIELDS: dict[str, str] = {
    "wakeup": "CPU time of each wake-up: paid once per busy period, by the request that "
              "finds the queue idle",
    "background": "CPU time of other work sharing the queue's core, per request of the "
                  "scenario (it preempts the queue's own work); a spec, or a table of "
                  "class name -> spec",
    "background_share": "share of the queue's core that other work holds at every rate "
                        "(a steady tenant: the load generator's timers and polling); the "
                        "queue runs at 1 - share of the core's speed",
    "cooling": "how long an idle queue takes to cool down: after idling I, a wake-up "
               "costs wakeup x (1 - exp(-I / cooling)); 0: the full cost every time",
    "release": 'when a served request leaves: "request", at once; "round", with its round: '
               "the queue serves in gated rounds (each takes every request waiting when it "
               "begins) and a round's requests leave together once its last is served",
    "answers_wake": "engine only: true if the host's answers wake the engine too, each "
                    "batch of them that finds it idle paying a wake-up, as well as the "
                    "requests it reads from the network (an engine in front of the host)",
    "polls": "true if the queue's thread polls for work and never sleeps (io_uring's "
             "SQPOLL thread): the request that finds it idle is taken at once, and its "
             "wakeup cost stays in its core's account (its utilisation) alone",
    "cores": "engine only: cores the engine spreads its connections over (as a NIC hashes "
             "flows to its cores), each its own queue fed an equal share of the offloaded "
             "requests; 1 by default",
}
RELEASES = ("request", "round")
_CHOICES = {
    "system_delay": ("max", "sum"),
    "cpu_queue": ("mm1", "mg1"),
    "objective": ("delay", "host_cpu"),
}

Offload = float | Literal["auto"]
_ZERO = dist.Deterministic(0.0)


@dataclass(frozen=True)
class Queue:
    """What a queue pays beyond its requests' service times: a wake-up cost per busy
    period, and background work on its core that arrives with the scenario's requests
    (one job per request, at the total rate) and takes precedence. The background job of
    a class-c request costs ``background``, or what ``per_class`` gives for c (other work
    often grows with the answer: a client reading a large body works longer)."""

    wakeup: Dist = _ZERO
    background: Dist = _ZERO
    per_class: tuple[tuple[str, Dist], ...] = ()
    #: Share of the core other work holds whatever the rate (the part of a neighbour's
    #: CPU that does not grow with the requests): the queue's work runs at 1 - share.
    background_share: float = 0.0
    #: Seconds; a thread that slept longer pays more to wake (caches and the core's
    #: idle state cool down): after idling I, a wake-up costs its draw x (1 - e^(-I/cooling)).
    cooling: float = 0.0
    #: "round": a thread that drains its input, handles each item and then publishes
    #: all it produced in one batch holds every result until its round is done.
    release: Literal["request", "round"] = "request"
    #: An engine in front of the host wakes for each request from the network and again
    #: for each batch of answers the host hands back to it (docs/model.md §17).
    answers_wake: bool = False
    #: Engine only: cores the offloaded requests are spread over evenly, each its own
    #: queue (the wake-ups, background and utilisation are then per core).
    cores: int = 1
    #: A thread that polls for work takes the request that finds it idle at once: its
    #: wake-up cost stays in its core's account, and no request waits for it
    #: (docs/model.md §19).
    polls: bool = False

    def background_of(self, name: str) -> Dist:
        """The background job of a request of class ``name``."""
        return dict(self.per_class).get(name, self.background)


@dataclass(frozen=True)
class Options:
    """Model options.

    ``system_delay``: ``max`` is seed 000's T = max(T_cpu, T_oe); ``sum`` is the tandem
    sojourn T_cpu + T_oe. ``cpu_queue``: ``mm1`` treats an offloaded request's host time
    X_a + X_o as exponential (the seed's approximation); ``mg1`` uses its true second
    moment. ``objective`` and ``util_cap`` steer ``offload = "auto"``.
    """

    system_delay: Literal["max", "sum"] = "max"
    cpu_queue: Literal["mm1", "mg1"] = "mm1"
    objective: Literal["delay", "host_cpu"] = "delay"
    util_cap: float = 0.85


@dataclass(frozen=True)
class TrafficClass:
    """One class of requests: Poisson arrivals at ``rate`` and the costs of serving them."""

    name: str
    rate: float
    app: Dist
    host_proto: Dist
    host_overhead: Dist
    engine_overhead: Dist
    engine_proto: Dist
    offload: Offload = 1.0
    #: Share of the offloaded requests that an object cache on the engine answers
    #: alone (seed 001): a hit costs the engine ``engine_hit`` and the host nothing.
    hit_ratio: float = 0.0
    #: X_h, the engine's cost of a hit (None: the same as ``engine_proto``).
    engine_hit: Dist | None = None
    #: d0, seconds of delay outside host and engine (network, kernel, client) for a
    #: request served on the host, and (``d0_offload``, None: the same) for one offloaded.
    d0: float = 0.0
    d0_offload: float | None = None

    @property
    def auto(self) -> bool:
        return self.offload == "auto"

    @property
    def hit_cost(self) -> Dist:
        return self.engine_proto if self.engine_hit is None else self.engine_hit

    @property
    def d0_sent(self) -> float:
        """d0 of an offloaded request."""
        return self.d0 if self.d0_offload is None else self.d0_offload


@dataclass(frozen=True)
class Scenario:
    name: str
    classes: tuple[TrafficClass, ...]
    options: Options = field(default_factory=Options)
    description: str = ""
    host_alone: Queue = field(default_factory=Queue)
    host: Queue = field(default_factory=Queue)
    engine: Queue = field(default_factory=Queue)

    @property
    def rate(self) -> float:
        """Total arrival rate over all classes, requests/s."""
        return sum(c.rate for c in self.classes)

    @property
    def class_names(self) -> list[str]:
        return [c.name for c in self.classes]

    def with_offload(self, offload: Offload) -> Scenario:
        """The same scenario with every class sent to the engine with fraction ``offload``."""
        return replace(self, classes=tuple(replace(c, offload=offload) for c in self.classes))


def load(path: str | Path) -> Scenario:
    """Read and check a scenario file. Relative ``empirical(path=...)`` is resolved
    against the file's folder."""
    return load_toml(path, "scenario", from_dict)


def loads(text: str, source: str = "<scenario>", base_dir: Path | None = None) -> Scenario:
    """Parse and check scenario TOML text; ``source`` names it in error messages."""
    return from_dict(parse_toml(text, source), source, base_dir)


def from_dict(data: dict, source: str = "<scenario>", base_dir: Path | None = None) -> Scenario:
    """Check a parsed scenario table and build the :class:`Scenario`."""
    errors: list[str] = []
    _unknown_keys(data, {"name", "description", "options", "class", *QUEUES}, "", errors)
    options = _options(data.get("options", {}), errors)
    host = _queue(data.get("host", {}), "host", Queue(), base_dir, errors)
    queues = {"host": host,
              "host_alone": _queue(data.get("host_alone", {}), "host_alone", host, base_dir,
                                   errors),
              "engine": _queue(data.get("engine", {}), "engine", Queue(), base_dir, errors)}
    raw_classes = data.get("class")
    if not isinstance(raw_classes, list) or not raw_classes:
        errors.append('no traffic classes; add at least one [[class]] table with name, rate, '
                      'app, host_proto, host_overhead, engine_overhead, engine_proto')
        raw_classes = []
    classes = []
    for i, raw in enumerate(raw_classes):
        cls = _traffic_class(raw, i, base_dir, errors)
        if cls is not None:
            classes.append(cls)
    names = [c.name for c in classes]
    if "all" in names:
        errors.append('class "all": the name is reserved for the all-classes results; rename it')
    for dup in sorted({n for n in names if names.count(n) > 1}):
        errors.append(f'class "{dup}": name is used twice; class names must be unique')
    for table, queue in queues.items():
        for unknown in sorted({n for n, _ in queue.per_class} - set(names)):
            errors.append(f"{table}: background: no class is named {unknown!r}; name one of "
                          f"{', '.join(names)}")
    name = data.get("name", "scenario" if source.startswith("<") else Path(source).stem)
    if not isinstance(name, str) or not name.strip():
        errors.append('name: must be a non-empty string, e.g. name = "large files"')
    description = data.get("description", "")
    if not isinstance(description, str):
        errors.append("description: must be a string")
    if errors:
        raise InputError("\n".join(f"{source}: {e}" for e in errors))
    return Scenario(name, tuple(classes), options, description, **queues)


def _queue(raw: object, table: str, default: Queue, base_dir: Path | None,
           errors: list[str]) -> Queue:
    """A ``[host]``, ``[host_alone]`` or ``[engine]`` table; missing fields keep ``default``'s."""
    if not isinstance(raw, dict):
        errors.append(f'{table}: must be a table, e.g. [{table}] wakeup = "det(20us)"')
        return default
    _unknown_keys(raw, set(QUEUE_FIELDS), f"{table}: ", errors)
    values: dict = {}
    if "wakeup" in raw:
        values["wakeup"] = _cost(raw["wakeup"], f"{table}: wakeup", QUEUE_FIELDS["wakeup"],
                                 base_dir, errors)
    if "cooling" in raw:
        values["cooling"] = _duration(raw, "cooling", f"{table}: ", "the cooling time", errors)
    if "background_share" in raw:
        share = raw["background_share"]
        if _is_number(share) and 0 <= share < 1:
            values["background_share"] = float(share)
        else:
            errors.append(f"{table}: background_share = {share!r} must be a number in [0, 1), "
                          f"the share of the core other work holds, e.g. 0.05 "
                          f"({QUEUE_FIELDS['background_share']})")
    if "release" in raw:
        if raw["release"] in RELEASES:
            values["release"] = raw["release"]
        else:
            errors.append(f"{table}: release = {raw['release']!r} is not one of "
                          f"{', '.join(map(repr, RELEASES))} ({QUEUE_FIELDS['release']})")
    if "answers_wake" in raw:
        if table != "engine":
            errors.append(f"{table}: answers_wake belongs in [engine], the queue the host's "
                          "answers go back to; remove it here")
        elif isinstance(raw["answers_wake"], bool):
            values["answers_wake"] = raw["answers_wake"]
        else:
            errors.append(f"{table}: answers_wake = {raw['answers_wake']!r} must be true or "
                          f"false ({QUEUE_FIELDS['answers_wake']})")
    if "polls" in raw:
        if isinstance(raw["polls"], bool):
            values["polls"] = raw["polls"]
        else:
            errors.append(f"{table}: polls = {raw['polls']!r} must be true or false "
                          f"({QUEUE_FIELDS['polls']})")
    if values.get("polls") and values.get("answers_wake"):
        errors.append(f"{table}: polls and answers_wake exclude each other: a queue that "
                      "polls is never asleep, so nothing wakes it; keep one")
    if "cores" in raw:
        cores = raw["cores"]
        if table != "engine":
            errors.append(f"{table}: cores belongs in [engine]; the host is one core here")
        elif isinstance(cores, int) and not isinstance(cores, bool) and cores >= 1:
            values["cores"] = cores
        else:
            errors.append(f"{table}: cores = {cores!r} must be a whole number >= 1 "
                          f"({QUEUE_FIELDS['cores']})")
    background = raw.get("background")
    if isinstance(background, dict):  # per class: { c0 = "det(10us)", c3 = "det(60us)" }
        values["background"] = _ZERO
        values["per_class"] = tuple(
            (str(name), _cost(spec, f"{table}: background: {name}", QUEUE_FIELDS["background"],
                              base_dir, errors))
            for name, spec in background.items())
    elif background is not None:
        values["background"] = _cost(background, f"{table}: background",
                                     QUEUE_FIELDS["background"], base_dir, errors)
        values["per_class"] = ()
    if any(v is None for v in values.values()) or any(d is None for _, d in
                                                      values.get("per_class", ())):
        return default  # the errors say why
    return replace(default, **values)


def _cost(spec: object, where: str, meaning: str, base_dir: Path | None,
          errors: list[str]) -> Dist | None:
    """A distribution spec with a finite second moment, or None and an error."""
    try:
        d = dist.parse(spec, base_dir)
    except InputError as exc:
        errors.append(f"{where}: {exc} ({meaning})")
        return None
    if not math.isfinite(d.m2):
        errors.append(f"{where}: {d.infinite_m2_hint()}")
        return None
    return d


def _duration(raw: dict, key: str, where: str, what: str, errors: list[str]) -> float | None:
    """A duration such as "120us"; None when absent or wrong (with an error that says
    ``what`` it is)."""
    if key not in raw:
        return None
    value = raw[key]
    try:
        if not isinstance(value, str):
            raise InputError("write it as a string with a unit")
        return units.parse_time(value)
    except InputError as exc:
        errors.append(f"{where}{key}: {value!r}: {exc}; {what} is a duration >= 0, e.g. "
                      f'{key} = "120us"')
        return None


def _options(raw: object, errors: list[str]) -> Options:
    if not isinstance(raw, dict):
        errors.append("options: must be a table, e.g. [options] system_delay = \"max\"")
        return Options()
    _unknown_keys(raw, {f.name for f in fields(Options)}, "options: ", errors)
    values = {}
    for key, choices in _CHOICES.items():
        if key in raw:
            if raw[key] in choices:
                values[key] = raw[key]
            else:
                errors.append(f"options: {key} = {raw[key]!r} is not one of "
                              f"{', '.join(map(repr, choices))}")
    if "util_cap" in raw:
        cap = raw["util_cap"]
        if _is_number(cap) and 0 < cap <= 1:
            values["util_cap"] = float(cap)
        else:
            errors.append(f"options: util_cap = {cap!r} must be a number in (0, 1], e.g. 0.85")
    return Options(**values)


def _traffic_class(raw: object, index: int, base_dir: Path | None,
                   errors: list[str]) -> TrafficClass | None:
    if not isinstance(raw, dict):
        errors.append(f"class #{index + 1}: must be a [[class]] table")
        return None
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        errors.append(f'class #{index + 1}: name: missing; add name = "c{index}"')
        name = f"#{index + 1}"
    where = f'class "{name}": '
    before = len(errors)
    _unknown_keys(raw, {"name", "rate", "offload", "hit_ratio", "engine_hit", "d0",
                        "d0_offload", *COST_FIELDS}, where, errors)

    rate = raw.get("rate")
    if not (_is_number(rate) and math.isfinite(rate) and rate > 0):
        errors.append(f"{where}rate: {'missing' if rate is None else repr(rate)}; "
                      "rates must be > 0 requests/s, e.g. rate = 50")

    costs = {}
    for key, meaning in (*COST_FIELDS.items(), ("engine_hit", "X_h, the engine's cost of a "
                                                               "cache hit")):
        spec = raw.get(key)
        if spec is None:
            if key != "engine_hit":
                errors.append(f"{where}{key}: missing ({meaning}); add e.g. "
                              f'{key} = "exp(mean=1ms)", or "det(0)" if it is negligible')
            continue
        d = _cost(spec, f"{where}{key}", meaning, base_dir, errors)
        if d is not None:
            costs[key] = d
    outside = "the delay outside host and engine"
    d0 = _duration(raw, "d0", where, outside, errors)
    d0_offload = _duration(raw, "d0_offload", where, outside, errors)
    hit_ratio = raw.get("hit_ratio", 0.0)
    if not (_is_number(hit_ratio) and 0 <= hit_ratio <= 1):
        errors.append(f"{where}hit_ratio: {hit_ratio!r} must be a share in [0, 1] of the "
                      "offloaded requests, e.g. hit_ratio = 0.93")

    offload = raw.get("offload", 1.0)
    if not (offload == "auto" or (_is_number(offload) and 0 <= offload <= 1)):
        errors.append(f'{where}offload: {offload!r} must be a fraction in [0, 1] or "auto"')
    if len(errors) > before:
        return None
    return TrafficClass(name, float(rate), offload=offload if offload == "auto" else float(offload),
                        hit_ratio=float(hit_ratio), d0=d0 or 0.0, d0_offload=d0_offload,
                        **costs)


def _unknown_keys(table: dict, known: set[str], where: str, errors: list[str]) -> None:
    for key in sorted(set(table) - known):
        errors.append(f"{where}unknown field '{key}'; known fields: {', '.join(sorted(known))}")


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def dumps(scenario: Scenario) -> str:
    """Scenario as TOML text that :func:`loads` reads back to an equal scenario."""
    opts = scenario.options
    data: dict = {"name": scenario.name}
    if scenario.description:
        data["description"] = scenario.description
    data["options"] = {f.name: getattr(opts, f.name) for f in fields(Options)}
    for table in QUEUES:
        queue = getattr(scenario, table)
        data[table] = {"wakeup": str(queue.wakeup), "cooling": units.format_time(queue.cooling),
                       "background": str(queue.background) if not queue.per_class else
                       {c.name: str(queue.background_of(c.name)) for c in scenario.classes},
                       "background_share": queue.background_share, "release": queue.release,
                       **({"answers_wake": True} if queue.answers_wake else {}),
                       **({"cores": queue.cores} if queue.cores != 1 else {}),
                       **({"polls": True} if queue.polls else {})}
    data["class"] = [
        {"name": c.name, "rate": c.rate,
         **{key: str(getattr(c, key)) for key in COST_FIELDS},
         "offload": c.offload,
         **({"hit_ratio": c.hit_ratio} if c.hit_ratio else {}),
         **({"engine_hit": str(c.engine_hit)} if c.engine_hit is not None else {}),
         "d0": units.format_time(c.d0),
         **({"d0_offload": units.format_time(c.d0_offload)} if c.d0_offload is not None
            else {})}
        for c in scenario.classes
    ]
    return tomli_w.dumps(data)
