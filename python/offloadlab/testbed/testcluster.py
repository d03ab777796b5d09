"""A Dask cluster on one machine, for ``offload load --cluster`` and its tests.

One server host and three client hosts, each a network namespace of its own on a private
bridge (:func:`offloadlab.testbed.netns.bridge`, addresses from 10.232.0.10 up), each
running a Dask worker: the server host's offers a ``server`` resource, the clients' a
``client`` resource, one thread each. The scheduler runs on this machine's end of the
bridge (10.232.0.1), where ``offload load --cluster`` reaches it. :func:`serving` starts
the testbed's server in the server host. Traffic goes only to those namespaces and to
loopback. Everything started is stopped, and the namespaces and the bridge removed,
when the ``with`` block ends, even on failure.

    python -m offloadlab.testbed.testcluster        # start, print the addresses, hold

Needs root and the ``ip`` command (:func:`offloadlab.testbed.netns.check`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from offloadlab.errors import InputError, RunError
from offloadlab.testbed import netns
from offloadlab.testbed.processes import interrupt_on_sigterm, stop

CLIENTS = 3
START_S = 60.0    # scheduler and workers up (4 interpreters importing Dask on 2 cores)
SERVER_PORT = 8080


@dataclass(frozen=True)
class Cluster:
    """The scheduler's address, the hosts (``server`` and ``clients``) and the worker
    process of each host, by namespace name."""

    scheduler: str
    server: netns.Host
    clients: tuple[netns.Host, ...]
    workers: dict[str, subprocess.Popen]

    def kill(self, host: netns.Host) -> None:
        """Kill ``host``'s worker at once (SIGKILL), as a host that dies would stop."""
        self.workers[host.name].kill()


@contextlib.contextmanager
def started(clients: int = CLIENTS) -> Iterator[Cluster]:
    """The cluster, up with every worker registered; all of it gone afterwards."""
    netns.check(("ip",))
    names = ["server"] + [f"client{i + 1}" for i in range(clients)]
    with tempfile.TemporaryDirectory(prefix="offload-cluster-") as tmp, \
            netns.bridge(names) as hosts, contextlib.ExitStack() as processes:
        scheduler_file = Path(tmp) / "scheduler.json"
        _started(processes, [sys.executable, "-m", "distributed.cli.dask_scheduler",
                             "--host", netns.BRIDGE_IP, "--port", "0", "--no-dashboard",
                             "--scheduler-file", str(scheduler_file)], Path(tmp) / "scheduler")
        address = _address(scheduler_file)
        workers = {}
        for name, host in zip(names, hosts, strict=True):
            resource = "server" if name == "server" else "client"
            workers[host.name] = _started(processes, [
                "ip", "netns", "exec", host.name, sys.executable, "-m",
                "distributed.cli.dask_worker", address, "--host", host.ip, "--name", name,
                "--nthreads", "1", "--no-nanny", "--no-dashboard", "--resources",
                f"{resource}=1", "--local-directory", tmp,
                # A worker left behind stops by itself once the scheduler is gone.
                "--death-timeout", "30"], Path(tmp) / name)
        try:
            _registered(address, len(hosts))
        except RunError as exc:
            tails = {n: (Path(tmp) / n).read_text().strip().splitlines()[-3:] for n in names}
            raise RunError(f"{exc}; the workers' last words: {tails}") from None
        yield Cluster(address, hosts[0], tuple(hosts[1:]), workers)


def _started(processes: contextlib.ExitStack, command: list[str], log: Path
             ) -> subprocess.Popen:
    """``command`` running, its output to ``log``; stopped when ``processes`` closes."""
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    processes.callback(stop, process)
    return process


def _address(scheduler_file: Path) -> str:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, KeyError):
            return json.loads(scheduler_file.read_text())["address"]
        time.sleep(0.1)
    raise RunError(f"the test cluster's scheduler did not start within {START_S:g} s")


def _registered(address: str, count: int) -> None:
    import distributed

    with distributed.Client(address, timeout=START_S, set_as_default=False) as client:
        try:
            client.wait_for_workers(count, timeout=START_S)
        except TimeoutError:
            raise RunError(f"the test cluster's {count} workers did not all register "
                           f"within {START_S:g} s") from None


@contextlib.contextmanager
def serving(cluster: Cluster, root: str | Path, *options: str) -> Iterator[str]:
    """The testbed's server (``offload serve ROOT OPTIONS``) in the server host, on
    :data:`SERVER_PORT`; yields its ``IP:PORT`` and stops it afterwards."""
    ip = cluster.server.ip
    server = subprocess.Popen(
        ["ip", "netns", "exec", cluster.server.name, sys.executable, "-m", "offloadlab",
         "serve", str(root), "--host", ip, "--allow-remote", "--port", str(SERVER_PORT),
         *options], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + START_S
        while not _listening(ip):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RunError(f"the server in {cluster.server.name} did not listen: "
                               f"{server.stderr.read() if server.poll() is not None else ''}")
            time.sleep(0.1)
        yield f"{ip}:{SERVER_PORT}"
    finally:
        stop(server, signal.SIGINT)


def _listening(ip: str) -> bool:
    try:
        socket.create_connection((ip, SERVER_PORT), 0.2).close()
    except OSError:
        return False
    return True


def main() -> None:
    """Start the cluster, print where it is, and hold it until Ctrl-C or SIGTERM; exit
    code 2 when this machine cannot (not root, no ``ip``), 1 when it failed to start."""
    try:
        with interrupt_on_sigterm(), started() as cluster:
            print(f"scheduler  {cluster.scheduler}")
            print(f"server     {cluster.server.ip}  (namespace {cluster.server.name})")
            for host in cluster.clients:
                print(f"client     {host.ip}  (namespace {host.name})")
            print(f"load it:   offload load --cluster {cluster.scheduler} "
                  f"{cluster.server.ip}:PORT --allow-remote ...; Ctrl-C or kill stops it all",
                  flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
    except (InputError, RunError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2 if isinstance(exc, InputError) else 1)


if __name__ == "__main__":
    main()
