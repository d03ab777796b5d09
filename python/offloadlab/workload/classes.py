"""Seed 000's file-size classes, and the one function that maps a size to its class.

Reference 000 §4 (thesis Table 3-3), with KB read as KiB (1024 bytes)::

    class 0:            size <= 1 KiB
    class 1:    1 KiB < size <= 10 KiB
    class 2:   10 KiB < size <= 100 KiB
    class 3:  100 KiB < size <= 1 MiB
    class 4:    1 MiB < size

Upper bounds are inclusive: 1024 bytes is class 0, 1025 bytes class 1. The scheme is
Hu, Nanda & Yang's four SPECweb classes plus seed 000's class 4. Note that SPECweb99's
own classes do not line up with these: its smallest class-1 file is exactly 1024 bytes,
which is class 0 here (see :mod:`offloadlab.workload.specs`).
"""

from __future__ import annotations

import numpy as np

from offloadlab.errors import InputError

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
TiB = 1024 * GiB

# Largest size (inclusive) of classes 0..3; class 4 has no upper bound.
CLASS_BOUNDS: tuple[int, ...] = (KiB, 10 * KiB, 100 * KiB, MiB)
N_CLASSES = len(CLASS_BOUNDS) + 1
CLASSES: tuple[int, ...] = tuple(range(N_CLASSES))
CLASS_LABELS: tuple[str, ...] = ("≤1 KiB", "1–10 KiB", "10–100 KiB", "100 KiB–1 MiB",
                                 ">1 MiB")
_BOUNDS = np.asarray(CLASS_BOUNDS, dtype=np.int64)


def size_class(size_bytes):
    """The class (0..4) of each size: ``c`` such that bound[c-1] < size <= bound[c].

    Takes a number or an array of sizes in bytes and returns an ``int`` or an int8
    array of the same shape. Sizes must be finite and >= 0.
    """
    sizes = np.asarray(size_bytes)
    if sizes.dtype.kind not in "iuf":
        raise InputError(f"size_bytes must be numbers of bytes, not {sizes.dtype}")
    if sizes.size and not (np.all(np.isfinite(sizes)) and np.all(sizes >= 0)):
        raise InputError("size_bytes must be finite and >= 0")
    # side="left": the first bound >= size, so a size equal to a bound stays below it.
    classes = np.searchsorted(_BOUNDS, sizes, side="left").astype(np.int8)
    return int(classes) if classes.ndim == 0 else classes


def class_range(c: int) -> tuple[int, int | None]:
    """Smallest and largest size in bytes (both inclusive) of class ``c``; the largest is
    None for class 4, which has no upper bound."""
    _check_class(c)
    lo = 0 if c == 0 else CLASS_BOUNDS[c - 1] + 1
    hi = CLASS_BOUNDS[c] if c < len(CLASS_BOUNDS) else None
    return lo, hi


def class_label(c: int) -> str:
    """Human label of class ``c``, e.g. ``"10–100 KiB"``."""
    _check_class(c)
    return CLASS_LABELS[c]


def class_name(c: int) -> str:
    """Short name of class ``c`` as scenarios and paths use it: ``"c0"`` .. ``"c4"``."""
    _check_class(c)
    return f"c{c}"


def _check_class(c: int) -> None:
    if isinstance(c, bool) or not isinstance(c, int | np.integer) or not 0 <= c < N_CLASSES:
        raise InputError(f"size class {c!r} does not exist; use 0..{N_CLASSES - 1}")
