"""What an idle core does while the testbed measures. By default it polls: the run holds
the kernel's CPU latency request (``/dev/cpu_dma_latency``, the PM QoS knob that
cyclictest and tuned's latency profiles use) at 0 µs, so cpuidle keeps an idle core in
its polling state instead of halting it.

Why: on a virtual machine a halted vCPU goes back to the hypervisor, and the time it
takes to be run again after its wake-up is charged as stolen. The testbed's threads
sleep and wake thousands of times a second, so a halting core loses time on every
wake-up. Measured on the 2-core Firecracker VM (27 Nov 2026): two processes each
sleeping 200 µs in a loop for 8 s lost 12.7 % of the cores' time to steal with cores
halting and 1.3 % with them polling (and woke 24 % more often); two busy loops lost
0.3 %. Polling costs the run nothing it accounts: poll time is idle time, in
``/proc/stat`` and in no thread's CPU. ``OFFLOADLAB_IDLE=halt`` measures with the
machine's own idle states instead."""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator

from offloadlab.errors import InputError

LATENCY_FILE = "/dev/cpu_dma_latency"
CHOICES = ("poll", "halt")


def choice() -> str:
    """``poll`` (the default) or ``halt``, from ``OFFLOADLAB_IDLE``."""
    value = os.environ.get("OFFLOADLAB_IDLE", "poll").strip().lower() or "poll"
    if value not in CHOICES:
        raise InputError(f"OFFLOADLAB_IDLE={value!r}: give poll (idle cores poll while the "
                         "testbed measures, the default) or halt (the machine's own idle "
                         "states)")
    return value


@contextlib.contextmanager
def polled(latency_file: str = LATENCY_FILE) -> Iterator[str]:
    """While inside, idle cores poll (unless ``OFFLOADLAB_IDLE=halt``). Yields what they
    do, as :func:`describe` words it. The request ends when the file is closed, so
    nothing outlives the block, even a crash."""
    if choice() == "halt":
        yield "halt (OFFLOADLAB_IDLE=halt)"
        return
    try:
        fd = os.open(latency_file, os.O_WRONLY)
    except OSError as exc:
        yield f"halt ({latency_file}: {exc.strerror}; run as root to poll)"
        return
    try:
        os.write(fd, struct.pack("i", 0))
        yield f"poll ({latency_file} held at 0 µs)"
    finally:
        os.close(fd)


def describe(latency_file: str = LATENCY_FILE) -> str:
    """What idle cores will do in a testbed run, in the words :func:`polled` yields."""
    with polled(latency_file) as what:
        return what
