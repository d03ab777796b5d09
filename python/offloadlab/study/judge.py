"""The study's judge: what the testbed's replicates say about a model's row and about a
verdict. Pure functions on numbers, so that the report, ``summary.json``, the study's
sequential measurement and the benchmarks all decide the same way (docs/study.md,
"Reading the outcomes").
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from offloadlab.model.verdict import HELPS, HURTS, MARGIN, NEUTRAL

# A row's three outcomes.
MET, MISSED, UNDECIDABLE = "met", "missed", "undecidable"
# A row is judged on at least this many scored points; fewer is undecidable.
MIN_POINTS = 4
# Confidence of the intervals the judge reads.
CONFIDENCE = 0.95


def replicate_floor(values: np.ndarray) -> float:
    """The MAPE that a model exactly on the true means would score against the means of
    these replicates: the floor below which a row's target cannot be judged.

    ``values`` holds one row per point and one column per replicate (NaN where a
    replicate is missing). Each point's relative variance is pooled over the points
    (a point's own 2 or 3 replicates say little alone), the mean of r replicates is off
    by that over r, and a normal error's mean absolute value is sqrt(2/pi) of its
    standard deviation. NaN when no point has two replicates."""
    v = np.asarray(values, float)
    if v.ndim != 2:
        raise ValueError(f"replicate_floor: values must be points x replicates, got {v.shape}")
    ok = np.isfinite(v)
    r = ok.sum(axis=1)
    use = r >= 2
    if not use.any():
        return math.nan
    v, ok, r = v[use], ok[use], r[use]
    mean = np.nanmean(v, axis=1)
    rel_var = np.nanvar(v, axis=1, ddof=1) / mean**2
    # Each point's mean is off by its own variance over its own replicate count.
    return float(math.sqrt(2 / math.pi) * math.sqrt(np.mean(rel_var / r)))


def paired_ratio(treated: np.ndarray, baseline: np.ndarray) -> tuple[float, float, float]:
    """(ratio, low, high): the geometric mean of ``treated / baseline`` over paired
    replicates and its :data:`CONFIDENCE` interval from the pairs' log ratios (Student's
    t). Pairing removes what the two runs of a pair share: the machine's spell. With
    fewer than two pairs the interval is unknown: (ratio, 0, inf)."""
    d = np.log(np.asarray(treated, float) / np.asarray(baseline, float))
    d = d[np.isfinite(d)]
    if not len(d):
        return math.nan, 0.0, math.inf
    centre = float(np.exp(d.mean()))
    if len(d) < 2:
        return centre, 0.0, math.inf
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return centre, float(np.exp(d.mean() - half)), float(np.exp(d.mean() + half))


def direction(low: float, high: float, band: float = MARGIN) -> str | None:
    """What an interval of a delay ratio (offload over inline) shows: ``helps`` when it
    lies wholly below 1 - ``band``, ``hurts`` wholly above 1 + ``band``, ``neutral``
    wholly inside the band, and None (undecided) when it crosses an edge of the band or
    is unknown."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    if high < 1 - band:
        return HELPS
    if low > 1 + band:
        return HURTS
    if 1 - band <= low and high <= 1 + band:
        return NEUTRAL
    return None
