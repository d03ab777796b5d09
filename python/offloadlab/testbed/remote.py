"""The testbed's server on a Dask worker: ``offload study --cluster``.

A study across hosts starts each run's server on the worker that offers a ``server``
resource, listening on that worker's own address, and sends the run's load from the
workers that offer a ``client`` resource (:func:`offloadlab.testbed.cluster.run`: one
plan split among them, histograms merged exactly). When the load is done the server
stops and its stats document (its threads' and its host's cores' times) comes back
through Dask. No load generator runs on the server's host, so the engine's core holds
the engine alone: the measured case of ``model_elsewhere``.

The file sets must be on the server host at the paths the study gives them (a shared
file system, or the same file sets made there); the server refuses a root it cannot
find. Every wait is bounded: a server that does not listen within :data:`START_S`
fails the run, and one nobody stops stops by itself past the run's bound.

    dask scheduler                                                     # anywhere
    dask worker tcp://SCHEDULER:8786 --resources server=1 --nthreads 1   # server host
    dask worker tcp://SCHEDULER:8786 --resources client=1 --nthreads 1   # each client
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

import offloadlab
from offloadlab import dask_scheduler
from offloadlab.documents import ServerStats
from offloadlab.errors import InputError, RunError
from offloadlab.testbed import cluster, external, load, server
from offloadlab.testbed.modes import ModeRun
from offloadlab.workload.stream_format import Stream

RESOURCE = "server"
START_S = 30.0     # the server listening, once its worker has the task
STOP_S = 15.0      # its stats document back, once the load is done
# The user's server stops by itself when no call has come for this long: a study calls
# before and after every run of the host alone, a few minutes apart at most.
LEASE_S = 900.0
_POLL_S = 0.2


@dataclass(frozen=True)
class Hosts:
    """Where a study across hosts runs: the scheduler's address, the server host (its
    Dask worker's address and name, its IP, and the cores a server may use there) and
    the client hosts' worker names."""

    scheduler: str
    server: str
    server_name: str
    server_ip: str
    server_cores: tuple[int, ...]
    clients: tuple[str, ...]

    def describe(self) -> str:
        return (f"the server on host {self.server_name} ({self.server_ip}), the load "
                f"from {len(self.clients)} client host(s) ({', '.join(self.clients)}) "
                f"through the Dask scheduler {self.scheduler}")


def find(address: str) -> Hosts:
    """The hosts of the cluster at ``address``: the first worker (by name) that offers
    the ``server`` resource, and every one that offers ``client``, each with this
    project's version. What is missing is an :class:`InputError` that says how to
    start it."""
    fix = (f"start its worker with `dask worker {address} --resources {RESOURCE}=1 "
           "--nthreads 1`")
    with dask_scheduler.connect(
            address, cluster.CONNECT_TIMEOUT_S,
            f"`dask worker {address} --resources {RESOURCE}=1 --nthreads 1` on the server "
            f"host, `... --resources {cluster.RESOURCE}=1` on each client host") as client:
        name, worker = cluster.offering(client, address, RESOURCE, fix)[0]
        try:
            facts = client.run(_facts, workers=[worker], on_error="return",
                               callback_timeout=cluster.CALL_TIMEOUT_S)
        except TimeoutError:
            raise RunError(f"--cluster {address}: the server host {name} did not answer "
                           f"within {cluster.CALL_TIMEOUT_S:g} s") from None
        fact = facts.get(worker, "no answer")
        problems = cluster.mismatched({worker: fact}, offloadlab.__version__)
        if problems:
            raise InputError(f"--cluster {address}: {problems[0]}; install this version "
                             f"of offloadlab ({offloadlab.__version__}) on the server host")
        clients = cluster.client_workers(client, address, None)
    return Hosts(address, worker, name, fact["ip"], tuple(fact["cores"]),
                 tuple(w.name for w in clients))


def _facts(dask_worker) -> dict:
    """On the server host's worker: this project's version, the worker's IP and the
    cores this process may use."""
    from distributed.comm import get_address_host

    return {"version": offloadlab.__version__, "ip": get_address_host(dask_worker.address),
            "cores": sorted(os.sched_getaffinity(0))}


def run_mode(hosts: Hosts, options: server.ServerOptions, requests: Stream,
             manifest: pd.DataFrame, **load_options) -> ModeRun:
    """Serve ``options.root`` in ``options.mode`` on the server host while the client
    hosts send ``requests`` (``load_options``: :func:`offloadlab.testbed.cluster.run`'s).
    A run that lost a client host is a :class:`RunError`: its load was not the plan."""
    import distributed

    options = replace(options, host=hosts.server_ip, allow_remote=True)
    bound = load_options.get("max_duration_s") or load.default_bound(
        requests, load_options.get("timeout_s", 5.0))
    run_id = f"offload-serve-{time.time_ns()}"
    with dask_scheduler.connect(hosts.scheduler, cluster.CONNECT_TIMEOUT_S,
                                "the study's workers", unreachable=RunError) as client:
        served = client.submit(
            _serve, options, run_id, START_S + cluster.LEAD_S + bound + cluster.GRACE_S,
            key=run_id, workers=[hosts.server], allow_other_workers=False,
            resources={RESOURCE: 1}, pure=False)
        try:
            port = _port(client, served, run_id, hosts.server_name)
            result = send(hosts, f"{hosts.server_ip}:{port}", requests, manifest,
                          **load_options)
        finally:
            distributed.Event(run_id, client=client).set()  # the server stops now
        try:
            stats = served.result(timeout=STOP_S)
        except TimeoutError:
            raise RunError(f"the server on {hosts.server_name} did not hand back its stats "
                           f"within {STOP_S:g} s of the load's end") from None
        finally:
            distributed.Variable(run_id, client=client).delete()
    return ModeRun(options.mode, result, stats)


def send(hosts: Hosts, target: str | load.Target, requests: Stream, manifest: pd.DataFrame,
         **load_options) -> load.LoadResult:
    """The client hosts send ``requests`` to ``target`` on the server host. A run that
    lost a client host is a :class:`RunError`: its load was not the plan."""
    result = cluster.run(hosts.scheduler, target, requests, manifest,
                         allow_remote={hosts.server_ip}, **load_options)
    lost = result.report["cluster"]["lost"]
    if lost:
        raise RunError(f"client host(s) {', '.join(lost)} were lost during the run, so "
                       "its load was not the plan's")
    return result


class UserServer:
    """The user's server on the server host, for a whole study (a Dask actor on its
    worker): started from its command or found by its PID as on one machine
    (:func:`offloadlab.testbed.external.running`), and its process tree's CPU and the
    host's cores' times read there, before and after each run. Without --target the
    server listens on the host's own address at a free port.

    A thread of the actor's own starts the server and holds it, and the server gets
    SIGTERM when that thread ends, whatever ends it: :meth:`stop`, no call for
    :data:`LEASE_S` (a driver that died), or the worker's process killed outright."""

    def __init__(self, server: external.ExternalServer, root: str, core: int | None,
                 ip: str):
        if not Path(root).is_dir():
            raise InputError(f"the file set {root} is not on the server host: make it there "
                             "at the same path (a shared file system, or the same file sets "
                             "written there)")
        if server.target is None:
            server = replace(server, target=f"{ip}:{external.free_port()}")
        self._lock = threading.Lock()
        self._stopping, self._stopped = threading.Event(), threading.Event()
        self._seen = time.monotonic()
        started: queue.Queue = queue.Queue(1)
        threading.Thread(target=self._hold, args=(server, Path(root), core, started),
                         daemon=True).start()
        got = started.get()  # external.running's own waits are bounded
        if isinstance(got, BaseException):
            raise got
        self.live: external.Live = got

    def _hold(self, server: external.ExternalServer, root: Path, core: int | None,
              started: queue.Queue) -> None:
        live = None
        try:
            with external.running(server, root, core, with_thread=True) as live:
                started.put(live)
                while not self._stopping.wait(1.0):
                    if not live.alive() or time.monotonic() - self._seen > LEASE_S:
                        break
        except BaseException as exc:
            if live is not None:
                raise
            started.put(exc)  # __init__ raises it
        finally:
            self._stopped.set()

    def where(self) -> external.Live:
        return self.live

    def snapshot(self) -> tuple[dict, dict]:
        """Its threads' CPU and the host's cores' times now; a RunError if it has gone."""
        with self._lock:
            self._seen = time.monotonic()
            return self.live.reading()

    def stop(self) -> None:
        """Stops the server (SIGTERM, then SIGKILL past the grace) and waits for it."""
        self._stopping.set()
        self._stopped.wait(external.STOP_GRACE_S + STOP_S)


@contextlib.contextmanager
def user_server(hosts: Hosts, server: external.ExternalServer, root: Path,
                core: int | None) -> Iterator[tuple[UserServer, external.Live]]:
    """The user's server running on the server host (:class:`UserServer`) while inside,
    stopped on the way out, also after an error."""
    with dask_scheduler.connect(hosts.scheduler, cluster.CONNECT_TIMEOUT_S,
                                "the study's workers", unreachable=RunError) as client, \
            client.as_current():  # the actor's handle calls through the current client
        made = client.submit(UserServer, server, str(root), core, hosts.server_ip,
                             actor=True, workers=[hosts.server], allow_other_workers=False)
        try:
            actor = made.result(timeout=START_S + server.start_timeout_s)
        except TimeoutError:
            raise RunError(f"the server under test did not start on {hosts.server_name} "
                           f"within {START_S + server.start_timeout_s:g} s") from None
        try:
            yield actor, actor.where().result(timeout=cluster.CALL_TIMEOUT_S)
        finally:
            with contextlib.suppress(Exception):
                actor.stop().result(timeout=STOP_S + external.STOP_GRACE_S)


def _port(client, served, run_id: str, name: str) -> int:
    """The port the server on host ``name`` listens on, once it does; its error if it
    failed to start, a :class:`RunError` after :data:`START_S`."""
    import distributed

    listening = distributed.Variable(run_id, client=client)
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if served.done():
            served.result()  # raises the server's error
            break
        try:
            return int(listening.get(timeout=_POLL_S))
        except TimeoutError:
            continue
    raise RunError(f"the server on host {name} did not listen within {START_S:g} s")


def _serve(options: server.ServerOptions, run_id: str, bound_s: float) -> ServerStats:
    """On the server host: serve until the driver sets the event ``run_id`` (at most
    ``bound_s``), telling it the port through the variable ``run_id``; the stats."""
    import distributed

    if not Path(options.root).is_dir():
        raise InputError(f"the file set {options.root} is not on the server host: make it "
                         "there at the same path (a shared file system, or the same file "
                         "sets written there)")
    with server.running(options) as live:
        distributed.Variable(run_id).set(live.port)
        distributed.Event(run_id).wait(timeout=bound_s)
    return live.final
