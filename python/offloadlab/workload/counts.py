"""Count distributions: whole numbers of things, such as requests per keep-alive
connection or embedded files per page.

Specs: ``5`` or ``det(5)`` (always 5), ``geom(mean=5)`` (geometric on 1, 2, ...),
``uniform(lo=5, hi=15)`` (whole numbers, both ends included).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from offloadlab.errors import InputError, require
from offloadlab.workload.stream_args import number


class Count:
    """A distribution of whole numbers; ``low`` is the smallest it can give."""

    low: int

    @property
    def mean(self) -> float:
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class Fixed(Count):
    """Always ``n``."""

    n: int

    def __post_init__(self) -> None:
        require(isinstance(self.n, int | np.integer) and self.n >= 0,
                f"det({self.n}): use a whole number >= 0")

    @property
    def low(self) -> int:
        return int(self.n)

    @property
    def mean(self) -> float:
        return float(self.n)

    def sample(self, rng, size):
        return np.full(size, self.n, dtype=np.int64)

    def __str__(self) -> str:
        return f"det({self.n})"


@dataclass(frozen=True)
class Geometric(Count):
    """Geometric on 1, 2, 3, ...: P[N = n] = p (1-p)^(n-1) with p = 1/mean."""

    mean_n: float
    low: ClassVar[int] = 1

    def __post_init__(self) -> None:
        require(math.isfinite(self.mean_n) and self.mean_n >= 1,
                f"geom(mean={self.mean_n:g}): the mean must be >= 1")

    @property
    def mean(self) -> float:
        return float(self.mean_n)

    def sample(self, rng, size):
        return rng.geometric(1.0 / self.mean_n, size).astype(np.int64)

    def __str__(self) -> str:
        return f"geom(mean={self.mean_n:g})"


@dataclass(frozen=True)
class UniformInt(Count):
    """Uniform on the whole numbers lo, lo+1, ..., hi."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        require(0 <= self.lo <= self.hi, f"uniform(lo={self.lo}, hi={self.hi}): need "
                                         "0 <= lo <= hi")

    @property
    def low(self) -> int:
        return int(self.lo)

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2

    def sample(self, rng, size):
        return rng.integers(self.lo, self.hi, size, endpoint=True, dtype=np.int64)

    def __str__(self) -> str:
        return f"uniform(lo={self.lo}, hi={self.hi})"


_PARAMS = {"det": ["n"], "geom": ["mean"], "uniform": ["lo", "hi"]}
_FORMS = "5, det(5), geom(mean=5) or uniform(lo=5, hi=15)"


def parse_count(spec: int | str | Count, what: str = "count") -> Count:
    """``5``, ``"det(5)"``, ``"geom(mean=5)"`` or ``"uniform(lo=5, hi=15)"`` into a
    :class:`Count`. ``what`` names the field in error messages."""
    if isinstance(spec, Count):
        return spec
    if isinstance(spec, bool):
        raise InputError(f"{what}={spec}: give a number, e.g. {what}=5 or {what}='geom(mean=5)'")
    if isinstance(spec, int | np.integer):
        return _built(what, Fixed, int(spec))
    text = str(spec).strip()
    if re.fullmatch(r"\d+", text):
        return _built(what, Fixed, int(text))
    m = re.fullmatch(r"(\w+)\s*\((.*)\)", text)
    if not m or m.group(1).lower() not in _PARAMS:
        raise InputError(f"{what}='{spec}' is not a count; write {_FORMS}")
    kind = m.group(1).lower()
    names = _PARAMS[kind]
    args: dict[str, float] = {}
    for i, item in enumerate(a.strip() for a in m.group(2).split(",") if a.strip()):
        name, sep, value = item.partition("=")
        name = name.strip() if sep else (names[i] if i < len(names) else "?")
        if name not in names or name in args:
            raise InputError(f"{what}='{spec}': {kind} takes {', '.join(names)}")
        args[name] = number(f"{what} {kind} {name}", value if sep else item)
    if set(args) != set(names):
        raise InputError(f"{what}='{spec}': {kind} needs {', '.join(names)}; write {_FORMS}")
    if kind == "geom":
        return _built(what, Geometric, args["mean"])
    ints = {k: int(v) for k, v in args.items()}
    if any(ints[k] != args[k] for k in args):
        raise InputError(f"{what}='{spec}': {kind} takes whole numbers")
    return _built(what, Fixed, ints["n"]) if kind == "det" else _built(what, UniformInt, **ints)


def _built(what: str, cls, *args, **kwargs) -> Count:
    """``cls(...)``, its error prefixed with the field's name."""
    try:
        return cls(*args, **kwargs)
    except InputError as exc:
        raise InputError(f"{what}: {exc}") from None
