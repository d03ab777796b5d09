"""The result schema shared by every source of evidence (model, sim, testbed), and
writing results safely.

A result is a list of flat rows, one per (rate point, class) plus one per rate
point for all classes together (``class = "all"``). Times are in seconds, rates in
requests/s, utilisations and fractions as plain numbers. A saturated queue gives
``inf`` (written ``"inf"`` in JSON, which has no infinity) and ``saturated: true``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

# Per class and overall, in this order, in every source.
METRICS = ("U_noe", "W_noe", "T_noe", "U_cpu", "W_cpu", "T_cpu",
           "U_oe", "W_oe", "T_oe", "T", "T_sum", "N_q", "N_oe")
VERDICTS = ("cpu_relieved", "beneficial")


def jsonable(value):
    """Plain JSON types; infinities become the string "inf" (strict JSON has no infinity)."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def write_atomic(path: str | Path, write: Callable[[Path], None]) -> None:
    """Let ``write`` fill a temporary file next to ``path``, then rename it into place,
    so a crash never leaves half a result behind."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, obj) -> None:
    text = json.dumps(jsonable(obj), indent=2, allow_nan=False) + "\n"
    write_atomic(path, lambda tmp: tmp.write_text(text))
