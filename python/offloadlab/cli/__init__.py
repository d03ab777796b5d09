"""The ``offload`` command (typer). Exit codes: 0 ok, 1 runtime failure, 2 bad input.

``common`` holds the app and what commands share; ``evidence`` the model, simulator,
sweep and demo commands; ``workload`` the ``offload workload`` group; ``testbed`` the
load generator (``offload load``); ``serve`` the testbed server (``offload serve``);
``testbed_run`` the ``offload testbed`` group (each server mode under the same load).
"""

from offloadlab.cli import evidence, serve, testbed, testbed_run, workload
from offloadlab.cli.common import app

__all__ = ["app", "evidence", "main", "serve", "testbed", "testbed_run", "workload"]


def main() -> None:
    app()
