"""Checks of the fields a user gives a file set or a size model, shared by
:mod:`~offloadlab.workload.sizes`, :mod:`~offloadlab.workload.specs` and
:mod:`~offloadlab.workload.fileset`. Each error names the field, its value and a fix,
e.g. ``file set 'web': n_files=0: use a whole number in [1, 10,000,000], e.g. ...``."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from offloadlab.errors import InputError
from offloadlab.workload.classes import TiB

MAX_FILES = 10_000_000
MAX_FILE_BYTES = TiB
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def need(ok: bool, name: str, value, fix: str, where: str = "") -> None:
    if not ok:
        raise InputError(f"{where}{name}={value!r}: use {fix}")


def need_int(value, name: str, lo: int, hi: int, example: str, where: str = "") -> None:
    is_int = isinstance(value, int | np.integer) and not isinstance(value, bool)
    need(is_int and lo <= value <= hi, name, value,
         f"a whole number in [{lo:,}, {hi:,}], {example}", where)


def need_alpha(value, name: str, where: str = "") -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    need(ok and math.isfinite(value) and 0 <= value <= 10, name, value,
         "a Zipf exponent in [0, 10] (0 = all files equally popular), e.g. 1.0", where)


def need_name(name) -> None:
    need(isinstance(name, str) and bool(_NAME.match(name)), "name", name,
         "letters, digits, '.', '_' or '-' (it names a directory), e.g. name=\"web\"")


def need_fields(cls, keys, where: str, noun: str, has: str) -> None:
    """Refuse ``keys`` that are not fields of the dataclass ``cls``, listing its fields."""
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in keys if k not in allowed]
    if unknown:
        raise InputError(f"{where}unknown {noun}(s) {', '.join(unknown)}; {has} "
                         f"{', '.join(allowed) or 'none'}")
