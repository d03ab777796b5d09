"""Seed 000's size classes: exact boundaries, ranges and labels."""

import math

import numpy as np
import pytest

from offloadlab.errors import InputError
from offloadlab.workload.classes import (
    CLASS_BOUNDS,
    CLASSES,
    class_label,
    class_name,
    class_range,
    size_class,
)


@pytest.mark.parametrize("size, c", [
    (0, 0), (1, 0), (1024, 0), (1025, 1), (10240, 1), (10241, 2), (102400, 2), (102401, 3),
    (1048576, 3), (1048577, 4), (2**40, 4),
])
def test_class_boundaries_exact(size, c):
    assert size_class(size) == c
    assert isinstance(size_class(size), int)
    assert size_class(np.array([size]))[0] == c
    assert size_class(float(size)) == c


def test_size_class_is_vectorised_and_ranges_agree():
    sizes = np.array([[1024, 1025], [1048576, 1048577]], dtype=np.int64)
    assert size_class(sizes).tolist() == [[0, 1], [3, 4]]
    assert CLASS_BOUNDS == (1024, 10 * 1024, 100 * 1024, 1024 * 1024)
    for c in CLASSES:
        lo, hi = class_range(c)
        assert size_class(lo) == c
        if hi is not None:
            assert size_class(hi) == c and size_class(hi + 1) == c + 1
        if lo > 0:
            assert size_class(lo - 1) == c - 1
    assert [class_label(c) for c in CLASSES][::4] == ["≤1 KiB", ">1 MiB"]
    assert class_name(3) == "c3"


@pytest.mark.parametrize("bad", [-1, [5, -3], math.nan, math.inf, "10"])
def test_size_class_rejects_bad_sizes(bad):
    with pytest.raises(InputError, match="size_bytes"):
        size_class(bad)


@pytest.mark.parametrize("c", [-1, 5, 1.0, True])
def test_class_functions_reject_unknown_classes(c):
    with pytest.raises(InputError, match=r"0\.\.4"):
        class_range(c)
