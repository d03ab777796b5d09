"""Run a long call into the Rust extension while this thread watches it.

The extension releases the GIL, so the call runs on a worker thread and this one stays
free to report progress and to turn Ctrl-C into a clean cancel through the call's
control object (anything with a ``cancel()`` method).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

C = TypeVar("C")
R = TypeVar("R")


def watched(call: Callable[..., R], args: dict, control: C,
            on_tick: Callable[[C], None] | None = None, poll_s: float = 0.1) -> R:
    """``call(**args, control=control)`` on a worker thread; ``on_tick(control)`` every
    ``poll_s`` seconds until it returns. Any exception here (Ctrl-C included) cancels it."""
    with ThreadPoolExecutor(1, thread_name_prefix="offload") as pool:
        future = pool.submit(call, **args, control=control)
        try:
            while True:
                try:
                    return future.result(timeout=poll_s)
                except FutureTimeout:
                    if on_tick is not None:
                        on_tick(control)
        except BaseException:
            control.cancel()
            raise
