"""The ``offload`` command (typer). Exit codes: 0 ok, 1 runtime failure, 2 bad input.

``common`` holds the app and what commands share; ``evidence`` the model, simulator,
sweep and demo commands; ``workload`` the ``offload workload`` group; ``testbed`` the
load generator (``offload load``).
"""

from offloadlab.cli import evidence, testbed, workload
from offloadlab.cli.common import app

__all__ = ["app", "evidence", "main", "testbed", "workload"]


def main() -> None:
    app()
