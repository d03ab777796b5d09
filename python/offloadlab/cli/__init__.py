"""The ``offload`` command (typer). Exit codes: 0 ok, 1 runtime failure, 2 bad input.

``common`` holds the app and what commands share; ``evidence`` the model, simulator
and sweep commands; ``study`` the main job (``offload study``, ``offload demo``);
``appcache`` seed 001's object cache on the testbed (``offload appcache``);
``workload`` the ``offload workload`` group; ``testbed`` the load generator
(``offload load``); ``serve`` the testbed server (``offload serve``); ``testbed_run``
the ``offload testbed`` group (each server mode under the same load); ``handoff`` the
``offload handoff`` group (seed 004's connection handoff, simulated); ``datacentre`` the
``offload datacentre`` group (seed 003's multi-tier data centre, modelled); ``writeback``
the ``offload writeback`` group (seed 002's write congestion, simulated); ``driver`` the
``offload driver`` group (seed 002's polling device driver, modelled).
"""

from offloadlab.cli import (
    appcache,
    datacentre,
    driver,
    evidence,
    handoff,
    serve,
    study,
    testbed,
    testbed_run,
    workload,
    writeback,
)
from offloadlab.cli.common import app

__all__ = ["app", "appcache", "datacentre", "driver", "evidence", "handoff", "main", "serve",
           "study", "testbed", "testbed_run", "workload", "writeback"]


def main() -> None:
    app()
