"""Which cores a testbed run pins its threads to. On a small machine every experiment
makes the same choice: the host on the first core this process may use, the engine (or
SQPOLL thread) on the second, and nothing pinned on a single core; a user's
--host-core or --engine-core overrides its half. The load generator shares the
engine's core, and runs ahead of a server thread that spins there (:func:`generator_nice`)."""

from __future__ import annotations

import os
from collections.abc import Sequence


def choose(host: int | None = None, engine: int | None = None,
           allowed: Sequence[int] | None = None) -> tuple[int | None, int | None]:
    """(host core, engine core): the ones given, the rest the first two of ``allowed``
    (default: the cores this process may use)."""
    allowed = sorted(os.sched_getaffinity(0) if allowed is None else allowed)
    default = (allowed[0], allowed[1]) if len(allowed) >= 2 else (None, None)
    return (default[0] if host is None else host, default[1] if engine is None else engine)


# Nice -20 puts a woken load thread ahead of a server thread that spins on the shared
# core: the SQPOLL thread spins a jiffy after each submission, so under load it never
# sleeps. In an open loop at nice 0 the kernel let it finish its time slice first, which
# added 1-2 ms to uring's measured delays at half load (docs/testbed.md, "The shared
# core"); in a closed loop at nice 0 the fair scheduler held the generator to about half
# the core, so uring's saturation runs measured that share, not the server (class 3:
# generator 47% of the core and 7,050 req/s, against 65% and 7,875 req/s at -20; class
# 0: 8,660 against 8,980 req/s, the host 89% and 94% busy; medians of 3 interleaved runs,
# 7 Dec 2026). Only beside such a spinner: an engine that sleeps when idle was held off
# its core by a generator at -20 (class 0 at 4,000 req/s: 2.4-2.8 ms against 1.2-1.3 ms
# at nice 0, medians of interleaved pairs; class 3's engine-mode capacity fell to 5,755
# req/s in a closed loop, below the 5,951 an open loop reached).
SHARED_CORE_NICE = -20


def generator_nice(pinned: bool, beside_spinner: bool) -> int:
    """The niceness of the load generator's threads: :data:`SHARED_CORE_NICE` when they
    are pinned beside a server thread that spins (``beside_spinner``) and the process
    may raise its priority (root); else 0."""
    return SHARED_CORE_NICE if pinned and beside_spinner and os.geteuid() == 0 else 0
