"""Run the testbed's HTTP server (``crates/offload-server``) from Python.

:class:`ServerOptions` holds everything a run is told and checks it at the edge (every
message names the field and the fix); the Rust side trusts what it gets. Two ways to
run it:

- :func:`serve` in the foreground until its control is stopped (``offload serve``);
  :func:`stop_on_signals` turns Ctrl-C and SIGTERM into that stop;
- :func:`running`, a context manager that serves on a worker thread of this process
  while the body sends load, then stops the server and keeps its final stats.

Both return or keep the server's *stats document* (requests, statuses, connections, CPU
seconds per thread and per core, host and engine CPU seconds per request) as a
:class:`offloadlab.documents.ServerStats`, read once where the server hands it over, as
are the live ones (:func:`snapshot`, :meth:`Running.stats`); its fields are listed in
``docs/testbed.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import ipaddress
import json
import math
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from offloadlab import _core, dist, handoff_policy
from offloadlab.background import watched
from offloadlab.documents import ServerStats
from offloadlab.engine_profile import EngineProfile
from offloadlab.errors import InputError, RunError, require
from offloadlab.mode_traits import traits
from offloadlab.sim.run import to_core
from offloadlab.testbed import idle
from offloadlab.units import parse_bytes

# Rust's list (offload_server::Mode::ALL): every other list of modes derives from it.
MODES: tuple[str, ...] = tuple(_core.MODES)
APP_OFFLOADS = ("cache",)
CACHE_POLICIES = ("lru", "lfu", "gdsf")
ENGINE_WAITS = ("poll", "adaptive", "sleep")
# When the engine pays its slowdown (offload_server::SlowdownMode::ALL).
SLOWDOWN_MODES: tuple[str, ...] = tuple(_core.SLOWDOWN_MODES)
# Load control's watermarks, in the order ``ServerOptions.watermarks`` gives them.
WATERMARKS = ("hiwat", "lowat", "step_down", "step_up")
FAULTS = ("stall", "panic")
# Size classes placement distinguishes at most.
MAX_CLASSES = _core.PLACEMENT_CLASSES
# Where the server answers with its stats document when the endpoint is on.
STATS_ENDPOINT = "/.offload/stats"
START_TIMEOUT_S = 10.0
_POLL_S = 0.1


@dataclass(frozen=True)
class ServerOptions:
    """One server run. Defaults are the Rust server's (``Config::new``).

    ``work`` is the application work X_a burned on the host thread per request (a
    distribution or its spec, e.g. ``"exp(mean=50us)"``). ``fault`` injects an engine
    failure, ``("stall", n)`` or ``("panic", n)`` after n requests, to exercise the
    host's takeover (engine mode only). Times are in seconds.

    A slower engine: ``engine_slowdown`` F burns F seconds of engine CPU per second of
    its own work (an engine F + 1 times slower) and ``engine_message_cost_s`` a fixed
    cost per message between host and engine; ``engine_slowdown_mode`` says when the
    engine pays: ``"turn"``, after each busy loop turn in bursts of up to 5 ms, or
    ``"operation"``, after each request it passes up and each command it carries out,
    so that it queues like a slower processor.

    Handoff mode: ``handoff`` is seed 004's policy in the paper's shorthand (``P-L-FCFS``,
    ``N-N-FCFS``, ``P-L-T4``, see :mod:`offloadlab.handoff_policy`); ``handoff_limit`` the
    engine's Hard_limit (None: ``max_conns``); ``watermarks`` load control's (hiwat,
    lowat, step_down, step_up) in work items per engine turn.

    Model-driven placement (handoff mode, a policy without load control or threshold,
    e.g. ``P-N-FCFS``): ``placement`` gives the size classes by their upper edges in
    bytes (class c holds objects up to ``placement[c]``; one more class above the last
    edge); the engine keeps a share ``fractions[c]`` of class c's new connections (None:
    none), and a controller may change them while the server runs (``Running.control``).

    Application offload (seed 001): ``app_offload="cache"`` puts a reverse-proxy object
    cache in front of the application, on the engine in engine mode (set-up C) or on the
    host thread in inline mode (set-up B). ``cache_size`` is its byte budget (each entry
    is charged its path's and its body's length), ``cache_policy`` lru, lfu or gdsf, and
    bodies above ``cache_max_object`` are not stored; sizes take units, e.g. ``"10MiB"``.
    ``max_age`` is the ``Cache-Control: max-age`` of static files, in seconds (0: the
    cache revalidates every use with the application).

    Database tier (seed 003): ``db`` is where dynamic pages' items live, a SQLite file
    (a path, or ``sqlite:PATH``) or a PostgreSQL URL (``postgresql://user@host:port/db``),
    filled by :func:`fill_db`. A page asks for them with ``?query=COUNT[&key=ID]``.

    Hybrid placement (seed 003): ``memory`` lists files (paths under the root) the
    server reads into memory at start and serves from there (:func:`memory_files`
    chooses them); with ``uncached`` every other file is dropped from the page cache
    before each use, so it is read from the disk, as on a server whose memory cannot
    hold its working set.
    """

    root: Path
    mode: str = "inline"
    host: str = "127.0.0.1"
    port: int = 0
    allow_remote: bool = False
    host_core: int | None = None
    engine_core: int | None = None
    sendfile_above: int = 8000
    work: str | dist.Dist | None = None
    seed: int = 1
    engine_wait: str = "adaptive"
    engine_slowdown: float = 0.0
    engine_message_cost_s: float = 0.0
    engine_slowdown_mode: str = "turn"
    max_header_bytes: int = 8192
    max_uri_bytes: int = 4096
    max_headers: int = 64
    max_conns: int = 4096
    header_timeout_s: float = 10.0
    idle_timeout_s: float = 30.0
    max_work_s: float = 1.0
    stats_path: Path | None = None
    stats_interval_s: float = 1.0
    stats_endpoint: bool = False
    fault: tuple[str, int] | None = None
    handoff: str = "P-L-FCFS"
    handoff_limit: int | None = None
    watermarks: tuple[int, int, int, int] = _core.TESTBED_WATERMARKS
    placement: tuple[int, ...] | None = None
    fractions: tuple[float, ...] | None = None
    max_age: int = 3600
    app_offload: str | None = None
    cache_size: int | str = "10MiB"
    cache_policy: str = "lru"
    cache_max_object: int | str = "1MiB"
    db: str | Path | None = None
    memory: tuple[str, ...] = ()
    uncached: bool = False
    # Serve from this network namespace (a name under /var/run/netns, one this process
    # made: testbed.netns), listening on ``host`` there.
    netns: str | None = None

    def check(self) -> None:
        """Raise :class:`InputError` for the first field that cannot work."""
        require(self.mode in MODES, f"mode {self.mode!r}: use one of {', '.join(MODES)}")
        require(self.engine_wait in ENGINE_WAITS,
                f"engine_wait {self.engine_wait!r}: use poll (busy-poll, a NIC processor), "
                "adaptive (spin, then sleep) or sleep (at once: a core shared with other "
                "work)")
        root = Path(self.root)
        require(root.is_dir(), f"root {str(root)!r} is not a directory; give the folder to "
                               "serve, e.g. a file set from 'offload workload fileset'")
        self.address()
        require(_is_int(self.port) and 0 <= self.port <= 65535,
                f"port {self.port!r}: use 0 (any free port) to 65535")
        self._check_cores()
        self._check_numbers()
        self.work_dist()
        self._check_stats_path()
        self._check_fault()
        self._check_handoff()
        self._check_cache()
        self._check_db()
        self._check_memory()

    def address(self) -> str:
        """The IP address to listen on (a host name resolved); loopback unless allowed."""
        ip = _resolve(self.host)
        # A namespace of the testbed's own is as private as loopback.
        require(ip.is_loopback or self.allow_remote or self.netns is not None,
                f"host {self.host!r} is not a loopback address, so other machines could "
                "reach the server; use 127.0.0.1 or allow it (allow_remote, --allow-remote)")
        return str(ip)

    def work_dist(self) -> dist.Dist | None:
        """``work`` as a distribution (None: no application work)."""
        if self.work is None or isinstance(self.work, dist.Dist):
            return self.work
        try:
            return dist.parse(self.work)
        except InputError as exc:
            raise InputError(f"work: {exc}") from None

    def _check_cores(self) -> None:
        cores = os.cpu_count() or 1
        for name in ("host_core", "engine_core"):
            core = getattr(self, name)
            require(core is None or (_is_int(core) and 0 <= core < cores),
                    f"{name}={core!r}: this machine has cores 0 to {cores - 1}; pick one of "
                    "them or leave it unpinned")
        require(not traits(self.mode).engine_thread or self.host_core is None
                or self.host_core != self.engine_core,
                f"host_core and engine_core are both {self.host_core}: in {self.mode} mode "
                "host and engine would share one core and take turns on it, which is not "
                "offload; pin them to different cores")

    def _check_numbers(self) -> None:
        require(_is_int(self.sendfile_above) and self.sendfile_above >= 0,
                f"sendfile_above={self.sendfile_above!r}: use a size in bytes >= 0")
        require(_is_int(self.seed) and 0 <= self.seed < 2**64,
                f"seed={self.seed!r}: use a whole number >= 0")
        require(_finite(self.engine_slowdown) and self.engine_slowdown >= 0,
                f"engine_slowdown={self.engine_slowdown!r}: use a factor >= 0 (0: the "
                "engine's own speed, 3: an engine 4 times slower)")
        require(_finite(self.engine_message_cost_s) and self.engine_message_cost_s >= 0,
                f"engine_message_cost_s={self.engine_message_cost_s!r}: use seconds >= 0 "
                "(0: no cost; 20e-6: 20 us of engine CPU per message)")
        require(self.engine_slowdown_mode in SLOWDOWN_MODES,
                f"engine_slowdown_mode {self.engine_slowdown_mode!r}: use operation (pay "
                "after each request and command: a slower processor) or turn (pay after "
                "each busy loop turn)")
        for name in ("max_header_bytes", "max_uri_bytes", "max_headers", "max_conns"):
            value = getattr(self, name)
            require(_is_int(value) and value >= 1, f"{name}={value!r}: use a whole number >= 1")
        require(self.max_headers <= _core.MAX_HEADERS,
                f"max_headers={self.max_headers!r}: the parser holds at most "
                f"{_core.MAX_HEADERS} header fields; use 1 to {_core.MAX_HEADERS}")
        for name in ("header_timeout_s", "idle_timeout_s", "stats_interval_s", "max_work_s"):
            value = getattr(self, name)
            require(_finite(value) and value > 0, f"{name}={value!r}: use a time > 0, e.g. 1s")

    def _check_stats_path(self) -> None:
        if self.stats_path is None:
            return
        path = Path(self.stats_path)
        require(path.parent.is_dir(), f"stats_path {str(path)!r}: folder {str(path.parent)!r} "
                                      "does not exist; create it or write the stats elsewhere")
        require(not path.is_dir(), f"stats_path {str(path)!r} is a folder; give a file name, "
                                   "e.g. stats.json")

    def _check_fault(self) -> None:
        if self.fault is None:
            return
        kind, after = self.fault
        require(kind in FAULTS, f"fault {kind!r}: use stall or panic")
        require(_is_int(after) and after >= 1,
                f"fault after {after!r} requests: use a whole number >= 1")
        require(traits(self.mode).engine_faults, f"fault: faults are injected into the "
                f"engine; use mode 'engine', not {self.mode!r}")

    def _check_handoff(self) -> None:
        handoff_policy.parse(self.handoff)
        limit = self.handoff_limit
        require(limit is None or (_is_int(limit) and 0 <= limit <= self.max_conns),
                f"handoff_limit={limit!r}: use 0 to max_conns ({self.max_conns}) connections")
        marks = self.watermarks
        require(len(marks) == 4 and all(_is_int(m) and m >= 0 for m in marks),
                f"watermarks={marks!r}: give four whole numbers: hiwat, lowat, step_down, "
                "step_up")
        hiwat, lowat, down, up = marks
        require(lowat < hiwat, f"watermarks: lowat ({lowat}) must be below hiwat ({hiwat})")
        require(down >= 1 and up >= 1, "watermarks: step_down and step_up must be >= 1")
        self._check_placement()

    def _check_placement(self) -> None:
        if self.placement is None:
            require(self.fractions is None, "fractions: give the size classes too "
                                            "(placement)")
            return
        edges = list(self.placement)
        require(traits(self.mode).places_connections, f"placement: the engine places "
                f"connections in handoff mode; use mode 'handoff', not {self.mode!r}")
        p = handoff_policy.parse(self.handoff)
        require(not p.load_control and p.threshold is None,
                f"placement with policy {self.handoff!r}: placement decides which "
                "connections the engine keeps, so use a policy without load control or "
                "threshold, e.g. P-N-FCFS")
        require(all(_is_int(e) and e >= 0 for e in edges) and edges == sorted(set(edges)),
                f"placement {edges}: give increasing class edges in bytes, e.g. (8000,)")
        require(len(edges) + 1 <= MAX_CLASSES,
                f"placement: {len(edges) + 1} classes; the server places at most "
                f"{MAX_CLASSES}")
        fractions = self.placement_fractions()
        require(len(fractions) == len(edges) + 1,
                f"fractions {list(fractions)}: give one per class ({len(edges) + 1})")
        require(all(_finite(f) and 0 <= f <= 1 for f in fractions),
                f"fractions {list(fractions)}: each must be in [0, 1]")

    def _check_cache(self) -> None:
        require(_is_int(self.max_age) and 0 <= self.max_age < 2**32,
                f"max_age={self.max_age!r}: use whole seconds >= 0")
        if self.app_offload is None:
            return
        require(self.app_offload in APP_OFFLOADS,
                f"app_offload {self.app_offload!r}: use {', '.join(APP_OFFLOADS)} or none")
        require(traits(self.mode).app_cache,
                f"app_offload: the cache runs on the engine (mode 'engine', seed 001's "
                f"set-up C) or on the host thread (mode 'inline', set-up B), not in "
                f"{self.mode!r} mode")
        require(self.cache_policy in CACHE_POLICIES,
                f"cache_policy {self.cache_policy!r}: use {', '.join(CACHE_POLICIES)}")
        size, largest = self.cache_bytes()
        require(size >= 1, f"cache_size={self.cache_size!r}: give a budget of at least 1 "
                           "byte, e.g. 10MiB")
        require(largest >= 1, f"cache_max_object={self.cache_max_object!r}: give a size "
                              "of at least 1 byte, e.g. 1MiB")

    def _check_db(self) -> None:
        if self.db is None or is_postgres(self.db):
            return
        path = Path(str(self.db).removeprefix("sqlite:"))
        require(path.is_file(), f"db {str(self.db)!r}: no such SQLite file; fill one with "
                                "'offload workload db --db PATH', or give a PostgreSQL URL "
                                "(postgresql://user@host:port/db)")

    def _check_memory(self) -> None:
        root = Path(self.root)
        missing = [p for p in self.memory if not (root / str(p).lstrip("/")).is_file()]
        require(not missing, f"memory: {len(missing)} files are not under the root "
                             f"{str(root)!r}, e.g. {missing[0] if missing else ''!r}; give "
                             "paths of the served file set")

    def cache_args(self) -> dict | None:
        """The cache as ``_core.serve`` takes it (None without one)."""
        if self.app_offload is None:
            return None
        size, largest = self.cache_bytes()
        return {"capacity_bytes": size, "policy": self.cache_policy,
                "max_object_bytes": largest}

    def cache_bytes(self) -> tuple[int, int]:
        """The cache's budget and largest object, in bytes."""
        return (parse_bytes(self.cache_size, "cache_size"),
                parse_bytes(self.cache_max_object, "cache_max_object"))

    def placement_fractions(self) -> tuple[float, ...]:
        if self.fractions is not None:
            return tuple(self.fractions)
        return (0.0,) * (len(self.placement or ()) + 1)

    def handoff_args(self) -> dict | None:
        """Handoff mode's policy as ``_core.serve`` takes it (None in other modes)."""
        if not traits(self.mode).places_connections:
            return None
        p = handoff_policy.parse(self.handoff)
        limit = self.max_conns if self.handoff_limit is None else self.handoff_limit
        marks = dict(zip(WATERMARKS, self.watermarks, strict=True))
        return {"hard_limit": limit, "host_first": p.host_first,
                "watermarks": marks if p.load_control else None, "threshold": p.threshold}

    def placement_args(self) -> dict | None:
        """Placement as ``_core.serve`` takes it (None without one)."""
        if self.placement is None:
            return None
        return {"edges": [int(e) for e in self.placement],
                "fractions": [float(f) for f in self.placement_fractions()]}

    def core_args(self) -> dict:
        """The checked options as ``_core.serve`` takes them: what every mode needs,
        then one group per part of the server (the lines :meth:`check` draws)."""
        self.check()
        work = self.work_dist()
        return {
            "host": self.address(), "port": self.port, "root": str(self.root),
            "mode": self.mode, "host_core": self.host_core,
            "sendfile_above": self.sendfile_above,
            "work": None if work is None else to_core(work), "seed": self.seed,
            "max_age": self.max_age,
            "limits": {"max_header_bytes": self.max_header_bytes,
                       "max_uri_bytes": self.max_uri_bytes, "max_headers": self.max_headers,
                       "max_conns": self.max_conns,
                       "header_timeout_s": float(self.header_timeout_s),
                       "idle_timeout_s": float(self.idle_timeout_s),
                       "max_work_s": float(self.max_work_s)},
            "stats": {"path": None if self.stats_path is None else str(self.stats_path),
                      "interval_s": float(self.stats_interval_s),
                      "endpoint": self.stats_endpoint},
            "engine": {"core": self.engine_core, "wait": self.engine_wait,
                       "slowdown": float(self.engine_slowdown),
                       "message_cost_s": float(self.engine_message_cost_s),
                       "slowdown_mode": self.engine_slowdown_mode,
                       "fault": self.fault},
            "handoff": self.handoff_args(), "placement": self.placement_args(),
            "cache": self.cache_args(), "db": None if self.db is None else str(self.db),
            "memory": {"files": ["/" + str(p).lstrip("/") for p in self.memory],
                       "uncached": self.uncached},
        }

    def replace(self, **changes) -> ServerOptions:
        return dataclasses.replace(self, **changes)

    def spins_on(self, cores: Sequence[int]) -> bool:
        """Whether a server thread spins under load on one of ``cores``: uring's SQPOLL
        thread or a busy-polling engine, both on the engine's core (a load generator
        there must run ahead of it, :func:`offloadlab.testbed.cores.generator_nice`)."""
        t = traits(self.mode)
        spinner = t.engine_spins or (t.engine_thread and self.engine_wait == "poll")
        return spinner and self.engine_core is not None and self.engine_core in cores


def emulating(profile: EngineProfile) -> dict:
    """The :class:`ServerOptions` fields with which the engine thread emulates
    ``profile``: each operation slowed to the profile's speed (slowdown 1/speed - 1,
    paid per operation, so that it queues like a slower processor) and its extra cost per
    message. The one place a profile becomes server options. One thread on a dedicated
    core can be slowed, not sped up, split over cores or shared: such a profile is an
    InputError that points to the model, which takes any profile."""
    where = f"engine profile {profile.name!r}"
    ask = "ask the model about it instead (offload model --engine-profile FILE)"
    require(profile.speed <= 1, f"{where}: speed = {profile.speed:g}: the testbed's engine "
            f"can be slowed, not sped up; give a speed in (0, 1], or {ask}")
    require(profile.cores == 1, f"{where}: cores = {profile.cores}: the testbed's engine is "
            f"one thread and cannot emulate {profile.cores} engine cores; {ask}")
    require(not profile.shared, f"{where}: shared = {profile.shared}: the testbed cannot "
            "hold back part of its engine's core for other work (the load generator "
            f"already shares it); leave shared out, or {ask}")
    return {"engine_slowdown": profile.slowdown,
            "engine_message_cost_s": profile.message_cost_s,
            "engine_slowdown_mode": "operation"}


# The catalogue table dynamic pages query.
DB_TABLE = _core.DB_TABLE


def is_postgres(db: str | Path) -> bool:
    return str(db).startswith(("postgresql://", "postgres://"))


def fill_db(db: str | Path, rows: int) -> None:
    """Write the database tier's table afresh: ``rows`` items, the same content in
    SQLite and PostgreSQL (see ``crates/offload-server/src/db.rs``)."""
    require(_is_int(rows) and rows >= 1, f"rows={rows!r}: give a whole number >= 1")
    if not is_postgres(db):
        folder = Path(str(db).removeprefix("sqlite:")).parent
        require(folder.is_dir(), f"db {str(db)!r}: folder {str(folder)!r} does not exist")
    try:
        _core.db_fill(str(db), rows)
    except RuntimeError as exc:
        raise RunError(str(exc)) from None


def memory_files(root: str | Path, below: int | str | None = None,
                 budget: int | str | None = None) -> tuple[str, ...]:
    """The files of the file set at ``root`` that seed 003's hybrid placement puts in
    memory (:func:`offloadlab.model.tiers.memory_set`): those under ``below`` bytes, or
    the most popular that fit in ``budget``, by the set's manifest."""
    from offloadlab.model.tiers import memory_set
    from offloadlab.workload.fileset import read_manifest

    manifest = read_manifest(root)
    chosen = memory_set(manifest["size_bytes"], manifest["probability"],
                        None if below is None else parse_bytes(below, "memory_below"),
                        None if budget is None else parse_bytes(budget, "memory_budget"))
    return tuple(manifest.loc[chosen, "path"].astype(str))


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _resolve(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        info = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise InputError(f"host {host!r}: cannot resolve it ({exc}); give an IP address, "
                         "e.g. 127.0.0.1") from None
    return ipaddress.ip_address(info[0][4][0])


def _serve_core(args: dict, control: _core.ServerControl, netns: str | None = None
                ) -> ServerStats:
    """``_core.serve`` with its errors in OffloadLab's terms and its document read; in
    network namespace ``netns`` when given (the calling thread moves there, and the
    server's threads are born there: call it on a thread of its own)."""
    if netns is not None:
        from offloadlab.testbed.netns import enter

        enter(netns)
    try:
        text = _core.serve(args, control)
    except ValueError as exc:  # arguments the checks above should have caught
        raise InputError(str(exc)) from None
    except RuntimeError as exc:
        raise RunError(str(exc)) from None
    return ServerStats.from_json(json.loads(text))


def serve(options: ServerOptions, control: _core.ServerControl | None = None,
          on_tick: Callable[[_core.ServerControl], None] | None = None) -> ServerStats:
    """Serve until ``control.stop()`` (or Ctrl-C, which stops it too, then re-raises) and
    return the final stats document. ``on_tick(control)`` is called every 0.1 s;
    ``control.port`` turns non-zero once the server listens."""
    args = options.core_args()
    return watched(_serve_core, {"args": args, "netns": options.netns},
                   control or _core.ServerControl(), on_tick, _POLL_S)


@contextlib.contextmanager
def stop_on_signals(control: _core.ServerControl,
                    signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """While inside, Ctrl-C and SIGTERM stop the server cleanly instead of raising
    (main thread only). The previous handlers are put back on exit."""
    previous = {s: signal.signal(s, lambda *_: control.stop()) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@dataclass
class Running:
    """A server running in this process: where it listens and, once it has stopped, its
    final stats document."""

    host: str
    port: int
    stats_endpoint: bool
    control: _core.ServerControl
    final: ServerStats | None = None

    @property
    def url(self) -> str:
        return url(self.host, self.port)

    def stats(self, timeout_s: float = 5.0) -> ServerStats | None:
        """The live stats document from ``GET /.offload/stats`` (that request counts as
        one), or None when the endpoint is off."""
        if not self.stats_endpoint:
            return None
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
        try:
            conn.request("GET", STATS_ENDPOINT)
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        if response.status != 200:
            raise RunError(f"{STATS_ENDPOINT} answered {response.status} {response.reason}")
        return ServerStats.from_json(json.loads(body))


def snapshot(control: _core.ServerControl) -> ServerStats | None:
    """The running server's stats document now (None before it starts)."""
    text = control.snapshot()
    return None if text is None else ServerStats.from_json(json.loads(text))


def url(host: str, port: int) -> str:
    """The server's base URL (an IPv6 address in brackets)."""
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


@contextlib.contextmanager
def running(options: ServerOptions,
            start_timeout_s: float = START_TIMEOUT_S) -> Iterator[Running]:
    """Serve on a worker thread while the body runs; always stop and join the server,
    even when the body raises. ``final`` holds the stats document after the block.

    Raises :class:`RunError` if the server fails (at start, while serving, or when
    stopped; this error wins over one the body raised) or does not listen within
    ``start_timeout_s``, and if the host took over from an engine that no fault was
    injected into: the run then measured inline serving under the engine's name.
    Idle cores poll meanwhile (:mod:`offloadlab.testbed.idle`)."""
    args = options.core_args()
    control = _core.ServerControl()
    with idle.polled(), ThreadPoolExecutor(1, thread_name_prefix="offload-server") as pool:
        future = pool.submit(_serve_core, args, control, options.netns)
        try:
            port = _wait_listening(future, control, start_timeout_s)
            server = Running(args["host"], port, options.stats_endpoint, control)
            yield server
        finally:
            control.stop()
            pool.shutdown(wait=True)  # joined: the stats document is complete
            failure = future.exception()
            if failure is not None:
                # The server's reason, rather than the body's symptom of it (e.g. a
                # refused connection), with the symptom kept as the context.
                raise failure
        server.final = future.result()
    engine = server.final.engine
    if engine.failed and options.fault is None:
        raise RunError(
            f"the engine was declared failed after {engine.takeover_after_s:.1f} s "
            f"({engine.takeover_reason}) and the host served the rest inline, so this "
            f"run does not measure {options.mode} mode; run it again, with nothing else "
            "busy on the engine's core")


def _wait_listening(future: Future, control: _core.ServerControl, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while control.port == 0:
        if future.done():
            future.result()  # the reason it did not start
            raise RunError("the server stopped before it listened")
        if time.monotonic() > deadline:
            raise RunError(f"the server did not listen within {timeout_s:g} s")
        time.sleep(0.005)
    return control.port
