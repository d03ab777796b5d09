"""The study's judge: what the testbed's replicates say about a model's row and about a
verdict. Pure functions on numbers, so that the report, ``summary.json``, the study's
sequential measurement and the benchmarks all decide the same way (docs/study.md,
"Comparison and verdicts").
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from offloadlab.calibrate import fit
from offloadlab.model.verdict import HELPS, HURTS, MARGIN, NEUTRAL

# A row's three outcomes.
MET, MISSED, UNDECIDABLE = "met", "missed", "undecidable"
# Where a row's floor comes from: the spread of its points' replicates (this study's, or
# those stored by an earlier one on this machine: study/floors.py), or nowhere.
REPLICATES, UNMEASURED = "replicates", "unmeasured"
# Whether the testbed backs a verdict: it confirms it, contradicts it, or cannot decide.
YES, NO, INCONCLUSIVE = "yes", "no", "inconclusive"
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


@dataclass(frozen=True)
class Judged:
    """One row's outcome: ``status`` (:data:`MET`, :data:`MISSED` or
    :data:`UNDECIDABLE`), the MAPE over its ``n`` scored points (inf when a prediction
    there is not finite), the K-S D and p between the predicted and measured curves over
    the whole sweep (``ks_n`` and ``ks_m`` points), and ``why``, the reason in words."""

    status: str
    mape: float
    n: int
    ks_D: float
    ks_p: float
    ks_n: int
    ks_m: int
    why: str


def judge_row(predicted: np.ndarray, measured: np.ndarray, scored: np.ndarray,
              target: float, ks_threshold: float, floor: float,
              floor_source: str) -> Judged:
    """Judge one row from its predicted and measured values at the swept points.

    ``scored`` marks the points the row is scored on (the testbed served the rate
    stably, below 80% busy); a scored point counts when its measurement is finite and
    not 0. In this order:

    - a prediction that is not finite at a scored point (the model saturated, or a
      simulator that did not run there) is :data:`MISSED`, however few points and
      whatever the floor: no noise makes a server that kept up below 80% busy look
      saturated;
    - the floor (the MAPE a model exactly on the truth would score, from
      ``floor_source``) above ``target``, or fewer than :data:`MIN_POINTS` scored
      points, is :data:`UNDECIDABLE`;
    - :data:`MET` when the MAPE is within ``target`` and the K-S p is above
      ``ks_threshold``;
    - otherwise :data:`MISSED`, but :data:`UNDECIDABLE` when the floor is unmeasured
      (NaN): without it a miss may be the testbed's own noise, not the model's."""
    p, m = np.asarray(predicted, float), np.asarray(measured, float)
    use = np.asarray(scored, bool) & np.isfinite(m) & (m != 0)
    n = int(use.sum())
    err = fit.mape(p[use], m[use])
    D, ks_p = fit.ks(p, m)
    ks = {"ks_D": D, "ks_p": ks_p, "ks_n": int((~np.isnan(p)).sum()),
          "ks_m": int((~np.isnan(m)).sum())}
    unbounded = int((~np.isfinite(p[use])).sum())
    if unbounded:
        rest = use & np.isfinite(p)
        why = (f"no finite prediction at {unbounded} of the {n} scored points, where the "
               "testbed kept up below 80% busy")
        if rest.any():
            why += f" (MAPE {fit.mape(p[rest], m[rest]):.1%} over the other {n - unbounded})"
        return Judged(MISSED, err, n, why=why, **ks)
    undecidable = []
    if floor > target:
        undecidable.append(f"the testbed's floor {floor:.1%} (from {floor_source}) is above "
                           f"the target {target:.0%}")
    if n < MIN_POINTS:
        undecidable.append(f"only {n} scored point{'s' * (n != 1)}, fewer than the "
                           f"{MIN_POINTS} a row needs")
    if undecidable:
        return Judged(UNDECIDABLE, err, n, why="; ".join(undecidable), **ks)
    ks_text = (f"K-S p {ks_p:.2g}" if math.isfinite(ks_p) else "no K-S test (a curve is empty)")
    if err <= target and ks_p > ks_threshold:
        return Judged(MET, err, n, why=f"MAPE {err:.1%} within {target:.0%} on {n} points, "
                                       f"{ks_text} > {ks_threshold:g}", **ks)
    missed = [] if err <= target else [f"MAPE {err:.1%} above the target {target:.0%}"]
    if not ks_p > ks_threshold:
        missed.append(f"{ks_text} <= {ks_threshold:g}" if math.isfinite(ks_p) else ks_text)
    if math.isnan(floor):
        missed.append("the testbed's floor is unmeasured (no replicates), so the miss may be "
                      "its noise: measure with --replicates 2 or more")
        return Judged(UNDECIDABLE, err, n, why="; ".join(missed), **ks)
    return Judged(MISSED, err, n, why="; ".join(missed), **ks)


@dataclass(frozen=True)
class Tally:
    """How many rows were met, missed and undecidable."""

    met: int
    missed: int
    undecidable: int

    @property
    def total(self) -> int:
        return self.met + self.missed + self.undecidable

    @property
    def decidable(self) -> int:
        return self.met + self.missed

    @property
    def decidable_share(self) -> float:
        """Decidable rows over all rows (NaN without rows)."""
        return self.decidable / self.total if self.total else math.nan

    @property
    def met_share(self) -> float:
        """Met rows over the decidable ones (NaN without a decidable row)."""
        return self.met / self.decidable if self.decidable else math.nan


def tally(statuses: Iterable[str]) -> Tally:
    """Count rows by status; an unknown status is refused, so a row is never left out."""
    counts = collections.Counter(statuses)
    unknown = set(counts) - {MET, MISSED, UNDECIDABLE}
    if unknown:
        raise ValueError(f"tally: unknown row status {sorted(unknown)}; use "
                         f"{MET}, {MISSED} or {UNDECIDABLE}")
    return Tally(counts[MET], counts[MISSED], counts[UNDECIDABLE])


def _capacity(saturation_ratio: float) -> str | None:
    """The direction a saturation ratio (offload over inline) shows for the delay:
    capacity up beyond the band helps, down beyond it hurts, inside it is neutral."""
    inverse = 1 / saturation_ratio
    return direction(inverse, inverse)


def agreement(verdict: str, ratio: float, low: float, high: float,
              predicted_saturation: float, measured_saturation: float,
              client_bound: bool = False) -> tuple[str, str]:
    """Whether the testbed backs a verdict, and why in words: :data:`YES`,
    :data:`NO` or :data:`INCONCLUSIVE`.

    ``ratio`` is the measured delay ratio (offload over inline) at the verdict's rate,
    NaN when a sweep saturated below that rate, with its interval (``low``, ``high``);
    the saturation ratios are the model's and the testbed's (offload over inline);
    ``client_bound``: a saturation run of the two was the load generator's, so the
    measured ratio is the client's and says nothing of the server's capacity.

    - An unknown saturation ratio decides nothing.
    - A client-bound one leaves the delay interval alone to decide.
    - Capacity moving the other way (one ratio beyond the ±5% band upwards, the other
      downwards) contradicts the verdict.
    - Without a measured delay, the saturation ratios decide: the same direction
      (beyond or inside the band) confirms, else nothing is decided.
    - Otherwise the interval decides (:func:`direction`): the verdict's direction
      confirms it, another contradicts it, none decides nothing."""
    sat = f"saturation {_times(measured_saturation)} against the model's " \
          f"{_times(predicted_saturation)}"
    if not all(math.isfinite(x) and x > 0 for x in (predicted_saturation, measured_saturation)):
        return INCONCLUSIVE, f"a saturation ratio is unknown ({sat})"
    model, testbed = _capacity(predicted_saturation), _capacity(measured_saturation)
    if client_bound:
        if math.isnan(ratio):
            return INCONCLUSIVE, ("a sweep saturated below the rate and the load generator, "
                                  f"not the server, bounded a saturation run ({sat})")
    elif {model, testbed} == {HELPS, HURTS}:
        return NO, f"capacity moved the other way ({sat})"
    if math.isnan(ratio):
        if model == testbed:
            return YES, f"a sweep saturated below the rate and capacity moved alike ({sat})"
        return INCONCLUSIVE, ("a sweep saturated below the rate and only one saturation "
                              f"ratio left the ±{MARGIN:.0%} band ({sat})")
    shown = direction(low, high)
    interval = f"the delay ratio's interval {_times(low)}–{_times(high)}"
    if shown is None:
        return INCONCLUSIVE, f"{interval} does not lie wholly on one side of ±{MARGIN:.0%}"
    return (YES if shown == verdict else NO), f"{interval} shows {shown}"


def _times(ratio: float) -> str:
    """A ratio as ``×0.91``; unknown as ``×?``."""
    return "×?" if math.isnan(ratio) else f"×{ratio:.2f}"
