"""Which cores a testbed run pins its threads to. On a small machine every experiment
makes the same choice: the host on the first core this process may use, the engine (or
SQPOLL thread) on the second, and nothing pinned on a single core; a user's
--host-core or --engine-core overrides its half."""

from __future__ import annotations

import os


def choose(host: int | None = None, engine: int | None = None) -> tuple[int | None, int | None]:
    """(host core, engine core): the ones given, the rest by the default."""
    allowed = sorted(os.sched_getaffinity(0))
    default = (allowed[0], allowed[1]) if len(allowed) >= 2 else (None, None)
    return (default[0] if host is None else host, default[1] if engine is None else engine)
