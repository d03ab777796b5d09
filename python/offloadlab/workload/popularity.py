"""Popularity laws of file sets: which share of the requests each file gets."""

from __future__ import annotations

import numpy as np

from offloadlab.workload.checks import MAX_FILES, need_alpha, need_int


def zipf_probabilities(n: int, alpha: float) -> np.ndarray:
    """p_r = r^-alpha / sum_{i=1..n} i^-alpha for ranks r = 1..n (alpha = 0: uniform)."""
    need_int(n, "n", 1, MAX_FILES, "e.g. n=1000")
    need_alpha(alpha, "alpha")
    weights = np.arange(1, n + 1, dtype=float) ** -float(alpha)
    return weights / weights.sum()
