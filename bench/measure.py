"""What the benchmarks share: a median wall time and a process's peak memory."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn`` over ``repeat`` runs, after one warm-up run."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def high_water_kib() -> int:
    """Peak RSS of this process so far, KiB. VmHWM rather than ru_maxrss: Linux carries
    the parent's peak into ru_maxrss across fork + exec, so a child of a large process
    would report the parent's peak, not its own."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
