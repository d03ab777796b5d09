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

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

import offloadlab
from offloadlab import dask_scheduler
from offloadlab.documents import ServerStats
from offloadlab.errors import InputError, RunError
from offloadlab.testbed import cluster, load, server
from offloadlab.testbed.modes import ModeRun
from offloadlab.workload.stream_format import Stream

RESOURCE = "server"
START_S = 30.0     # the server listening, once its worker has the task
STOP_S = 15.0      # its stats document back, once the load is done
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
            result = cluster.run(hosts.scheduler, f"{hosts.server_ip}:{port}", requests,
                                 manifest, allow_remote={hosts.server_ip}, **load_options)
        finally:
            distributed.Event(run_id, client=client).set()  # the server stops now
        try:
            stats = served.result(timeout=STOP_S)
        except TimeoutError:
            raise RunError(f"the server on {hosts.server_name} did not hand back its stats "
                           f"within {STOP_S:g} s of the load's end") from None
        finally:
            distributed.Variable(run_id, client=client).delete()
    lost = result.report["cluster"]["lost"]
    if lost:
        raise RunError(f"client host(s) {', '.join(lost)} were lost during the run, so "
                       "its load was not the plan's")
    return ModeRun(options.mode, result, stats)


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
