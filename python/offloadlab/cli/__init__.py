"""The ``offload`` command (typer). Exit codes: 0 ok, 1 runtime failure, 2 bad input.

Each module is named after the command or command group it registers (``load`` is
``offload load``, ``testbed`` the ``offload testbed`` group), with two modules of
several verbs: ``evidence`` (``offload model``, ``sim``, ``sweep``) and ``study``
(``offload study``, ``demo``). ``common`` holds the app and what commands share,
``options`` the flags several commands take, and ``load_binary`` is no verb but the
``offload-load`` console script. docs/cli.md's table "Commands and their modules" lists
every command with its module and the experiment it runs.
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
