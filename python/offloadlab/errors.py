"""The one exception type for bad user input (scenario files, specs, CLI values), and
:func:`require`, the check that raises it.

The CLI turns it into a message on stderr and exit code 2; everything else that
goes wrong is a runtime failure (exit code 1).
"""


class InputError(ValueError):
    """Bad input. The message names what is wrong, where, and how to fix it."""


def require(ok: bool, message: str) -> None:
    """Raise :class:`InputError` with ``message`` unless ``ok``."""
    if not ok:
        raise InputError(message)
