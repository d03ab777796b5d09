"""The two JSON documents the Rust side hands Python, as dataclasses: the schema the
testbed driver writes and the paper packages read (so it sits below both).

- :class:`ServerStats`, the server's stats document (``Document`` in
  ``crates/offload-server/src/stats.rs``; its fields in ``docs/testbed.md``);
- :class:`LoadReport`, the load generator's report (``Document`` in
  ``crates/offload-load/src/report.rs``; see ``docs/load.md``).

The classes follow the Rust structs key for key, and a change on one side needs the same
change on the other. ``from_json`` reads a parsed document and raises
:class:`DocumentError`, naming the key, when a key is missing or holds the wrong type;
``to_json`` gives it back as JSON values. Keys no class names are ignored: the
``offload-load`` binary adds ``url`` and ``mode``,
:meth:`offloadlab.testbed.load.LoadResult.to_json` adds ``target``. Times are seconds;
None stands for JSON's null (nothing measured yet, or not in this mode).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Self

from offloadlab.errors import RunError


class DocumentError(RunError):
    """A document lacks a key or holds one of the wrong type: the Rust extension and this
    package are out of step (or the document is not one of theirs)."""


def _key(name: str) -> dict:
    """The metadata of a field whose JSON key is not a Python name."""
    return {"key": name}


class _Document:
    """``from_json`` and ``to_json`` for a dataclass of a document, driven by its type
    hints and its fields' keys."""

    @classmethod
    def from_json(cls, doc: dict) -> Self:
        return _read(cls, doc, cls.__name__)

    def to_json(self) -> dict:
        """The document as JSON values under its keys (what ``from_json`` read)."""
        return _write(self)


@functools.cache
def _hints(cls: type) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _read(kind, value, where: str):
    """``value`` as ``kind``: a document dataclass, ``X | None``, ``tuple[X, ...]``,
    ``dict[str, X]``, or a plain JSON type; ``where`` is its path, for errors."""
    if dataclasses.is_dataclass(kind):
        _expect(isinstance(value, dict), value, where, "an object")
        hints = _hints(kind)
        fields = {}
        for f in dataclasses.fields(kind):
            key = f.metadata.get("key", f.name)
            if key not in value:
                raise DocumentError(f"{where}: no key {key!r}; rebuild the extension "
                                    "(pip install -e .) if it is older than this package")
            fields[f.name] = _read(hints[f.name], value[key], f"{where}.{key}")
        return kind(**fields)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is types.UnionType:
        return None if value is None else _read(args[0], value, where)
    if origin is tuple:
        _expect(isinstance(value, list), value, where, "a list")
        return tuple(_read(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        _expect(isinstance(value, dict), value, where, "an object")
        return {k: _read(args[1], v, f"{where}.{k}") for k, v in value.items()}
    # JSON has one kind of number: an integral float is written without a fraction.
    allowed = (int, float) if kind is float else kind
    _expect(isinstance(value, allowed) and (kind is bool or not isinstance(value, bool)),
            value, where, kind.__name__)
    return value


def _write(value):
    """``value`` as JSON values: the inverse of :func:`_read`."""
    if dataclasses.is_dataclass(value):
        return {f.metadata.get("key", f.name): _write(getattr(value, f.name))
                for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_write(v) for v in value]
    if isinstance(value, dict):
        return {k: _write(v) for k, v in value.items()}
    return value


def _expect(ok: bool, value, where: str, what: str) -> None:
    if not ok:
        raise DocumentError(f"{where}: {value!r:.60} is not {what}")


# The server's stats document.

@dataclass(frozen=True)
class Connections:
    accepted: int
    refused: int     # answered 503 at max_conns
    timed_out: int


@dataclass(frozen=True)
class ThreadTime:
    """An accounted thread (role host or engine) and its CPU time so far."""

    role: str
    tid: int
    core: int | None
    cpu_s: float


@dataclass(frozen=True)
class EngineCounts:
    """The rings between host and engine, and whether the host took over."""

    commands: int
    command_batches: int
    events: int
    event_batches: int
    # Sums of each batch's size squared, for the batch-mates per item (PerRequest).
    command_batch_squares: int
    event_batch_squares: int
    idle_poll_s: float
    failed: bool
    takeover_after_s: float | None
    takeover_reason: str | None
    # The slowdown's payments (ServerOptions.engine_slowdown_mode): how many, CPU seconds
    # burned in all, and the largest debt one of them paid.
    slowdown_payments: int
    slowdown_s: float
    slowdown_longest_s: float


@dataclass(frozen=True)
class PerRequest:
    """Service demands per request the application answered."""

    host_cpu_s: float | None
    host_busy_cpu_s: float | None
    app_cpu_s: float | None
    db_s: float | None
    engine_cpu_s: float | None
    engine_busy_cpu_s: float | None
    commands: float | None
    batch_mean: float | None
    # A command's and an event's batch-mates on average, E[X^2] / E[X] - 1 over batch
    # sizes X: what arriving together adds to a queue's wait (M^X/G/1).
    command_batch_others: float | None
    event_batch_others: float | None
    host_wakeups: float | None
    host_turns: float | None
    engine_wakeups: float | None
    engine_sq_work_s: float | None
    # Engine and handoff modes: mean seconds from the engine passing a request up to its
    # answer's first command coming back (both rings, the host's queue and work).
    host_turnaround_s: float | None


@dataclass(frozen=True)
class Wakeups:
    host: int
    engine: int | None
    host_turns: int


@dataclass(frozen=True)
class Sqpoll:
    """uring's SQPOLL thread: its work, its total time, and its CPU time."""

    work_s: float | None
    total_s: float | None
    cpu_s: float | None


@dataclass(frozen=True)
class CoreTimes:
    """One core's time since the server started (``/proc/stat``)."""

    core: int
    user_s: float
    system_s: float
    idle_s: float
    irq_s: float
    softirq_s: float
    steal_s: float


@dataclass(frozen=True)
class HandoffSeries:
    """The handoff gauges every 0.1 s, a column each."""

    t_s: tuple[float, ...]
    held: tuple[float, ...]
    soft_limit: tuple[float, ...]
    qlen: tuple[float, ...]


@dataclass(frozen=True)
class HandoffCounts:
    passed: int
    offered: int
    adopted: int
    returned: int
    engine_requests: int
    held: int
    soft_limit: int
    series: HandoffSeries


@dataclass(frozen=True)
class Sums:
    """Count, sum and sum of squares of the work of one class on one path."""

    n: int
    sum_s: float
    sumsq_s2: float


@dataclass(frozen=True)
class Placement:
    """Model-driven placement's accounts: the class edges, and per path one entry per
    class."""

    edges: tuple[int, ...]
    host: tuple[Sums, ...]
    offloaded_host: tuple[Sums, ...]
    engine: tuple[Sums, ...]
    passed: Sums


@dataclass(frozen=True)
class CacheRefusals:
    too_large: int
    uncacheable: int
    status: int
    unvalidated: int
    unframed: int


@dataclass(frozen=True)
class CacheCounts:
    policy: str
    capacity_bytes: int
    max_object_bytes: int
    entries: int
    used_bytes: int
    hits: int
    revalidated: int
    misses: int
    hit_rate: float | None
    bytes_from_cache: int
    admitted: int
    evictions: int
    refused: CacheRefusals


@dataclass(frozen=True)
class MemoryTier:
    files: int
    bytes: int
    hits: int


@dataclass(frozen=True)
class Database:
    queries: int
    time_s: float


@dataclass(frozen=True)
class HostTimes:
    idle_poll_s: float


@dataclass(frozen=True)
class ServerErrors:
    count: int
    last: str


@dataclass(frozen=True)
class ServerStats(_Document):
    """The stats document. ``handoff``, ``placement`` and ``cache`` are None where the
    run had none."""

    mode: str
    pid: int
    port: int
    elapsed_s: float
    final: bool
    requests: int
    bytes: int
    statuses: dict[str, int]
    connections: Connections
    threads: tuple[ThreadTime, ...]
    engine: EngineCounts
    per_request: PerRequest
    wakeups: Wakeups
    sqpoll: Sqpoll
    cores: tuple[CoreTimes, ...]
    handoff: HandoffCounts | None
    placement: Placement | None
    cache: CacheCounts | None
    memory_tier: MemoryTier
    database: Database
    host: HostTimes
    errors: ServerErrors

    def has_engine(self) -> bool:
        """Whether an engine thread is accounted (engine or uring mode)."""
        return any(t.role == "engine" for t in self.threads)


# The load generator's report.

@dataclass(frozen=True)
class Quantiles:
    """One latency histogram: mean and quantiles, None when it is empty."""

    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    p99_9_s: float | None = field(metadata=_key("p99.9_s"))
    max_s: float | None
    count: int


@dataclass(frozen=True)
class Lag:
    """How late requests started against the plan."""

    mean_s: float | None
    p99_s: float | None
    max_s: float | None


@dataclass(frozen=True)
class Latencies:
    """Intended start to the last and to the first byte of the response, and the
    connections' set-up (Rust's ``Latency``, whose keys sit beside the counts)."""

    total: Quantiles
    ttfb: Quantiles
    connect: Quantiles


@dataclass(frozen=True)
class ClassReport(Latencies):
    size_class: int = field(metadata=_key("class"))
    completed: int
    errors: int
    body_bytes: int


@dataclass(frozen=True)
class LoadReport(Latencies, _Document):
    """The report of one run, its latencies over all classes. Rates are None where
    there is nothing to divide by (``offered_rate`` of a closed loop)."""

    threads: int
    planned: int
    sent: int
    completed: int
    failed: int
    unfinished: int
    errors: dict[str, int]
    status: dict[str, int]
    body_bytes: int
    duration_s: float
    started_unix_s: float
    ended_unix_s: float
    throughput: float | None
    goodput_Bps: float | None
    offered_rate: float | None
    achieved_rate: float | None
    lag: Lag
    connections: int
    connect_mean_s: float | None
    connections_per_min: float | None
    classes: tuple[ClassReport, ...]
