"""The ``offload`` command (typer). Exit codes: 0 ok, 1 runtime failure, 2 bad input.

``common`` holds the app and what commands share; ``evidence`` the model, simulator,
sweep and demo commands; ``workload`` the ``offload workload`` group.
"""

from offloadlab.cli import evidence, workload
from offloadlab.cli.common import app

__all__ = ["app", "evidence", "main", "workload"]


def main() -> None:
    app()
