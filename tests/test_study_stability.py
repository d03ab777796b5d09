"""bench/study_stability.py's comparison of two studies, on two small synthetic
summaries whose differences are known: statuses matched by row, verdicts by verdict
and agreement, saturation by its ratio."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "study_stability", Path(__file__).parents[1] / "bench" / "study_stability.py")
stability = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = stability  # dataclasses look their module up there
_spec.loader.exec_module(stability)


def _summary(statuses: dict, verdicts: dict, saturation: dict) -> dict:
    """A summary.json with only the fields the comparison reads."""
    return {
        "accuracy": [{"class": c, "mode": m, "metric": metric, "source": source,
                      "status": status}
                     for (c, m, metric, source), status in statuses.items()],
        "verdicts": [{"class": c, "mode": m, "verdict": v, "agree": agree}
                     for (c, m), (v, agree) in verdicts.items()],
        "saturation": [{"class": c, "mode": m, "measured": rate,
                        "generator_bound": c == "mix"}
                       for (c, m), rate in saturation.items()],
    }


ROWS = [(c, mode, metric, "model") for c in ("c0", "c3") for mode in ("inline", "engine")
        for metric in ("U_host", "T")]  # eight rows
FIRST = _summary(
    dict.fromkeys(ROWS, "met") | {ROWS[1]: "undecidable"},
    {("c0", "engine"): ("helps", "yes"), ("c3", "engine"): ("hurts", "inconclusive")},
    {("c0", "inline"): 5000.0, ("c0", "engine"): 8000.0, ("mix", "engine"): 3000.0})


def test_identical_studies_match_everywhere():
    s = stability.compare(FIRST, FIRST)
    assert s.status_share == 1.0 and s.verdicts_match and s.saturation_ratio == 1.0


def test_differences_are_counted_where_they_are():
    second = _summary(
        # One status changed, one row only the second study has: 7 of 9 rows match.
        dict.fromkeys(ROWS, "met") | {ROWS[1]: "undecidable", ROWS[5]: "missed",
                                      ("c0", "mix", "T", "model"): "met"},
        # The same verdict, but the testbed decided it this time.
        {("c0", "engine"): ("helps", "yes"), ("c3", "engine"): ("hurts", "yes")},
        # The generator-bound mix's 2x is left out of the saturation ratio.
        {("c0", "inline"): 5500.0, ("c0", "engine"): 7600.0, ("mix", "engine"): 6000.0})
    s = stability.compare(FIRST, second)
    assert s.status_share == pytest.approx(7 / 9)
    assert (ROWS[5], "met", "missed") in s.rows
    assert (("c0", "mix", "T", "model"), stability.ABSENT, "met") in s.rows
    assert not s.verdicts_match
    assert s.saturation_ratio == pytest.approx(1.1)


def test_a_verdict_only_one_study_has_does_not_match():
    second = {**FIRST, "verdicts": FIRST["verdicts"][:1]}
    s = stability.compare(FIRST, second)
    assert not s.verdicts_match
    assert s.verdicts[1][2] == (stability.ABSENT, stability.ABSENT)


def test_no_server_bound_pair_gives_no_saturation_ratio():
    bound = {**FIRST, "saturation": [{**x, "generator_bound": True}
                                     for x in FIRST["saturation"]]}
    assert math.isnan(stability.compare(bound, FIRST).saturation_ratio)


def test_a_summary_without_statuses_is_refused_naming_the_field():
    old = {**FIRST, "accuracy": [{"class": "c0", "mode": "inline", "metric": "T",
                                  "source": "model", "met": True}]}
    with pytest.raises(SystemExit, match="c0/inline/T/model has no 'status'"):
        stability.compare(old, FIRST)
