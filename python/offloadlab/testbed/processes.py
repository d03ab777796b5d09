"""Stopping the processes the testbed starts: a user's server, Squid, a test cluster's
scheduler, workers and server. Each gets a signal that lets it shut down cleanly (and
flush its logs), then SIGKILL if it outlives the grace period."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

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
