"""The ``offload`` command (typer). Exit codes: 0 ok, 1 runtime failure, 2 bad input.

``common`` holds the app and what commands share; ``evidence`` the model, simulator
and sweep commands; ``study`` the main job (``offload study``, ``offload demo``);
``appcache`` seed 001's object cache on the testbed (``offload appcache``);
``workload`` the ``offload workload`` group; ``load`` the load generator
(``offload load``); ``serve`` the testbed server (``offload serve``); ``testbed_run``
the ``offload testbed`` group (each server mode under the same load); ``handoff`` the
``offload handoff`` group (seed 004's connection handoff, simulated); ``datacentre`` the
``offload datacentre`` group (seed 003's multi-tier data centre, modelled); ``writeback``
the ``offload writeback`` group (seed 002's write congestion, simulated); ``driver`` the
``offload driver`` group (seed 002's polling device driver, modelled).
"""

import importlib
import pkgutil

from offloadlab.cli.common import app

# Each module of this package registers its verbs on `app` when imported: a new command
# is a new module here, with nothing to add to this file. Alphabetical, as `--help`
# lists them.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["app", "main"]


def main() -> None:
    app()
