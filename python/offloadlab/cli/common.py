"""What every ``offload`` command shares: the app, the consoles, error handling.

Exit codes: 0 ok, 1 runtime failure, 2 bad input.

The consoles read rich markup (``[bold]...[/]``), so text from outside (paths, names
from files, log lines, messages that quote them) goes through :func:`escape` before it
is printed: unescaped, ``[/b]`` stops the program and ``[x]`` vanishes.
"""

from __future__ import annotations

import functools
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from offloadlab import __version__
from offloadlab.errors import InputError, RunError, for_flag
from offloadlab.units import parse_time

app = typer.Typer(
    help="OffloadLab: does offloading protocol work to an offload engine help your web server?",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
out = Console(soft_wrap=False)
err = Console(stderr=True, soft_wrap=True)


def user_errors(command):
    """Bad input is reported in one red paragraph and exits with code 2, an operating
    system error (a folder that cannot be written, a full disk) or a failed run
    (:class:`~offloadlab.errors.RunError`) with code 1; never a traceback."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except InputError as exc:
            print_error(exc)
            raise typer.Exit(2) from None
        except (OSError, RunError) as exc:
            print_error(exc)
            raise typer.Exit(1) from None
    return wrapper


def print_error(exc: Exception) -> None:
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)


def flag_time(flag: str, text: str | None) -> float | None:
    """A duration flag's value in seconds (None stays None); errors name the flag."""
    return for_flag(flag, parse_time, text)


def note(text: str) -> None:
    err.print(f"[yellow]note:[/] {escape(text)}")


def drawn(figures: dict) -> list[str]:
    """The names of the figures there was something to draw (None: nothing)."""
    return [name for name, fig in figures.items() if fig is not None]


def write_folder(out_dir, files: dict) -> None:
    """Write an experiment's output folder (:func:`offloadlab.results.write_outputs`)
    and say what was written."""
    from offloadlab.results import write_outputs

    _wrote(out_dir, write_outputs(out_dir, files))


def write_experiment(out_dir, exp, result) -> None:
    """Write an experiment's output folder (:func:`offloadlab.experiments.protocol.write`)
    and say what was written."""
    from offloadlab.experiments import protocol

    _wrote(out_dir, protocol.write(out_dir, exp, result))


def _wrote(out_dir, names: list[str]) -> None:
    out.print(f"wrote {escape(str(out_dir))}/: {', '.join(names)}", highlight=False)


def _show_version(value: bool) -> None:
    if value:
        out.print(f"offload {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """OffloadLab: does offloading protocol work to an offload engine help your web server?"""
