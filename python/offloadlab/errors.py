"""The one exception type for bad user input (scenario files, specs, CLI values),
:func:`require`, the check that raises it, and :func:`for_flag`, which names the flag a
bad value came from.

The CLI turns it into a message on stderr and exit code 2; everything else that
goes wrong is a runtime failure (exit code 1), and :class:`RunError` is how code says
so with a message meant for the user.
"""

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class InputError(ValueError):
    """Bad input. The message names what is wrong, where, and how to fix it."""


class RunError(RuntimeError):
    """A run failed for a reason other than its input (a busy port, a server that stopped
    with an error). The message says what happened; the CLI exits with code 1."""


def require(ok: bool, message: str) -> None:
    """Raise :class:`InputError` with ``message`` unless ``ok``."""
    if not ok:
        raise InputError(message)


def for_flag(flag: str, parse: Callable[[str], T], text: str | None) -> T | None:
    """``parse(text)`` (None stays None), an :class:`InputError` prefixed with ``flag``
    so that the message names where the value came from."""
    if text is None:
        return None
    try:
        return parse(text)
    except InputError as exc:
        raise InputError(f"{flag} {exc}") from None
