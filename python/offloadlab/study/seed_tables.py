"""Seed 000's testbed numbers at saturation, per size class: Apache alone ("Non-TOE",
our inline mode) and through the TOE emulator ("TOE", our offload modes). The one home
of these numbers; reference 000 §5.1.1 and §5.2.2-5.2.3 gives them. A class the seed
gives no number for is absent.

Each quantity maps a class to its (Non-TOE, TOE) pair, in SI units: req/s, seconds,
bytes/s. The thesis's KB/s and MB/s are 1024 and 1,048,576 B/s (its glossary).
"""

from __future__ import annotations

from offloadlab.workload.classes import KiB, MiB

# Table 4-1: saturation point (req/s); the thesis gives classes 2-4 only.
SATURATION: dict[int, tuple[float, float]] = {2: (300.0, 350.0), 3: (100.0, 300.0),
                                              4: (12.0, 40.0)}

# Table 4-3: mean connection set-up at saturation (0.27 ms ... 0.78 ms).
CONNECT_S: dict[int, tuple[float, float]] = {
    0: (0.27e-3, 0.09e-3), 1: (0.28e-3, 0.08e-3), 2: (0.28e-3, 0.09e-3),
    3: (0.28e-3, 0.12e-3), 4: (0.29e-3, 0.78e-3)}

# Table 4-4: mean goodput at saturation (317.4 KB/s ... 74.1 MB/s).
GOODPUT_BPS: dict[int, tuple[float, float]] = {
    0: (317.4 * KiB, 256.0 * KiB), 1: (1.36 * MiB, 1.35 * MiB), 2: (7.8 * MiB, 10.2 * MiB),
    3: (19.6 * MiB, 46.5 * MiB), 4: (24.8 * MiB, 74.1 * MiB)}

# Fig. 4-11: connections per minute at saturation, given only as TOE's change: class 0
# "Non-TOE handled ~6% more", class 1 ~1% more, classes 2-4 TOE +21%, ~+62%, +66%. No
# absolute numbers. Reference 000 reads the goodput percentages as relative to TOE,
# (TOE - Non-TOE) / TOE; read alike these give the ratios 1.27, 2.6 and 2.9, close to
# goodput's 1.31, 2.37 and 2.99 (conn_per_min_ratio).
CONN_PER_MIN_CHANGE: dict[int, float] = {0: -0.06, 1: -0.01, 2: 0.21, 3: 0.62, 4: 0.66}


def conn_per_min_ratio(klass: int) -> float:
    """TOE / Non-TOE connections per minute of ``klass``, from its change relative to
    TOE: 1 / (1 - change)."""
    return 1 / (1 - CONN_PER_MIN_CHANGE[klass])
