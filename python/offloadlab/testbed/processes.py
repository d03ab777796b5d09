"""Stopping the processes the testbed starts: a user's server, Squid, a test cluster's
scheduler, workers and server. Each gets a signal that lets it shut down cleanly (and
flush its logs), then SIGKILL if it outlives the grace period."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator

GRACE_S = 10.0


def stop(process: subprocess.Popen, first: int = signal.SIGTERM, grace_s: float = GRACE_S,
         group: bool = False) -> None:
    """Send ``first``, wait up to ``grace_s``, then SIGKILL and reap. With ``group``, both
    signals go to the process's group (a process started with ``start_new_session``):
    SIGKILL then also reaches children that outlived their leader."""
    def send(number: int) -> None:
        if group:
            os.killpg(process.pid, number)  # the leader's PID is its group's
        else:
            process.send_signal(number)  # a no-op once the process has been reaped

    with contextlib.suppress(ProcessLookupError):
        send(first)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(grace_s)
    with contextlib.suppress(ProcessLookupError):
        send(signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def interrupt_on_sigterm() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt as Ctrl-C does, so that the
    ``finally`` that stops the server runs (main thread only: signals go there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(*_) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
