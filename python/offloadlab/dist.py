"""Service-time distributions: parse a spec, give its moments, sample from it.

A distribution is a small frozen value; the model needs only its first two
moments, the simulator samples it. Specs are written as in the scenario format::

    exp(mean=1ms)                    exponential
    det(2ms)                         deterministic (constant)
    lognormal(mean=9ms, sigma=1)     lognormal; sigma is the std. dev. of ln X
    lognormal(nu=-5.21, sigma=1)     ... or with nu = E[ln X], X in seconds
    pareto(alpha=2.5, k=5.4ms)       Pareto, P[X > x] = (k/x)^alpha for x >= k
    bpareto(alpha=1.2, lo=100us, hi=80ms)   Pareto bounded to [lo, hi]
    empirical(path=costs.csv)        resample measured service times (seconds)

Times carry a unit (ns, us, ms, s; read by :func:`offloadlab.units.parse_time`); inside,
everything is in seconds.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from offloadlab.errors import InputError
from offloadlab.inputs import read_text
from offloadlab.units import NUMBER, format_time, parse_time

_SPEC = re.compile(r"^\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$", re.DOTALL)


class Dist:
    """Base of all distributions: ``mean`` and ``m2`` (second moment E[X^2]) in seconds."""

    kind: ClassVar[str]

    @property
    def mean(self) -> float:
        raise NotImplementedError

    @property
    def m2(self) -> float:
        raise NotImplementedError

    @property
    def var(self) -> float:
        return max(self.m2 - self.mean**2, 0.0)

    @property
    def scv(self) -> float:
        """Squared coefficient of variation Var[X] / E[X]^2 (0 for a zero mean)."""
        return self.var / self.mean**2 if self.mean > 0 else 0.0

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent draws, in seconds."""
        raise NotImplementedError

    def infinite_m2_hint(self) -> str:
        """How to get a finite second moment (only distributions that can lack one override)."""
        return ""


@dataclass(frozen=True)
class Exponential(Dist):
    """Exponential with mean ``scale``: E[X^2] = 2 scale^2."""

    scale: float
    kind: ClassVar[str] = "exp"

    def __post_init__(self) -> None:
        _require(self.scale > 0, "exp mean must be > 0; for a negligible cost write det(0)")

    @property
    def mean(self) -> float:
        return self.scale

    @property
    def m2(self) -> float:
        return 2.0 * self.scale**2

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.exponential(self.scale, size)

    def __str__(self) -> str:
        return f"exp(mean={format_time(self.scale)})"


@dataclass(frozen=True)
class Deterministic(Dist):
    """Always ``value``."""

    value: float
    kind: ClassVar[str] = "det"

    def __post_init__(self) -> None:
        _require(self.value >= 0 and math.isfinite(self.value), "det value must be finite and >= 0")

    @property
    def mean(self) -> float:
        return self.value

    @property
    def m2(self) -> float:
        return self.value**2

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.full(size, self.value)

    def __str__(self) -> str:
        return f"det({format_time(self.value)})"


@dataclass(frozen=True)
class Lognormal(Dist):
    """ln X ~ Normal(nu, sigma^2): E[X] = e^(nu + sigma^2/2), E[X^2] = e^(2(nu + sigma^2))."""

    nu: float
    sigma: float
    kind: ClassVar[str] = "lognormal"

    def __post_init__(self) -> None:
        _require(math.isfinite(self.nu), "lognormal nu must be finite")
        _require(self.sigma >= 0 and math.isfinite(self.sigma), "lognormal sigma must be >= 0")

    @classmethod
    def from_mean(cls, mean: float, sigma: float) -> Lognormal:
        _require(mean > 0, "lognormal mean must be > 0")
        return cls(math.log(mean) - sigma**2 / 2, sigma)

    @property
    def mean(self) -> float:
        return math.exp(self.nu + self.sigma**2 / 2)

    @property
    def m2(self) -> float:
        return math.exp(2 * (self.nu + self.sigma**2))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.lognormal(self.nu, self.sigma, size)

    def __str__(self) -> str:
        return f"lognormal(nu={self.nu!r}, sigma={self.sigma!r})"


@dataclass(frozen=True)
class Pareto(Dist):
    """Pareto with shape ``alpha`` and minimum ``k``: E[X] = alpha k/(alpha-1),
    E[X^2] = alpha k^2/(alpha-2), infinite for alpha <= 2."""

    alpha: float
    k: float
    kind: ClassVar[str] = "pareto"

    def __post_init__(self) -> None:
        _require(self.alpha > 1 and math.isfinite(self.alpha),
                 f"pareto alpha={self.alpha:g} has no finite mean; use alpha > 1")
        _require(self.k > 0 and math.isfinite(self.k),
                 "pareto k (the smallest value) must be > 0, e.g. k=5ms")

    @property
    def mean(self) -> float:
        return self.alpha * self.k / (self.alpha - 1)

    @property
    def m2(self) -> float:
        return self.alpha * self.k**2 / (self.alpha - 2) if self.alpha > 2 else math.inf

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.k * (1.0 - rng.random(size)) ** (-1.0 / self.alpha)

    def infinite_m2_hint(self) -> str:
        return (f"pareto alpha={self.alpha:g} has no finite second moment; "
                "use alpha > 2 or bpareto(alpha=..., lo=..., hi=...)")

    def __str__(self) -> str:
        return f"pareto(alpha={self.alpha!r}, k={format_time(self.k)})"


@dataclass(frozen=True)
class BoundedPareto(Dist):
    """Pareto with shape ``alpha`` truncated to [lo, hi]; all moments are finite.

    E[X^j] = alpha lo^j r phi((j - alpha) r) / (1 - (lo/hi)^alpha) with r = ln(hi/lo)
    and phi(t) = (e^t - 1)/t, which stays exact at j = alpha.
    """

    alpha: float
    lo: float
    hi: float
    kind: ClassVar[str] = "bpareto"

    def __post_init__(self) -> None:
        _require(self.alpha > 0 and math.isfinite(self.alpha), "bpareto alpha must be > 0")
        _require(0 < self.lo < self.hi and math.isfinite(self.hi),
                 "bpareto needs 0 < lo < hi, e.g. bpareto(alpha=1.2, lo=100us, hi=80ms)")

    def moment(self, j: int) -> float:
        r = math.log(self.hi / self.lo)
        t = (j - self.alpha) * r
        phi = math.expm1(t) / t if t != 0 else 1.0
        return self.alpha * self.lo**j * r * phi / -math.expm1(-self.alpha * r)

    @property
    def mean(self) -> float:
        return self.moment(1)

    @property
    def m2(self) -> float:
        return self.moment(2)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        tail = -math.expm1(-self.alpha * math.log(self.hi / self.lo))  # 1 - (lo/hi)^alpha
        return self.lo * (1.0 - rng.random(size) * tail) ** (-1.0 / self.alpha)

    def __str__(self) -> str:
        return (f"bpareto(alpha={self.alpha!r}, lo={format_time(self.lo)}, "
                f"hi={format_time(self.hi)})")


@dataclass(frozen=True, eq=False)
class Empirical(Dist):
    """Resamples measured service times (bootstrap): moments are the sample moments."""

    path: str
    values: np.ndarray = field(repr=False)
    kind: ClassVar[str] = "empirical"

    @classmethod
    def load(cls, path: str, base_dir: Path | None = None) -> Empirical:
        """Read the first column of a CSV file of service times in seconds.

        A first row that is not a number is taken as a header. ``path`` is
        resolved against ``base_dir`` (the scenario's folder) when relative.
        """
        file = Path(path) if base_dir is None else Path(base_dir) / path
        try:
            text = read_text(file)
        except OSError as exc:
            raise InputError(f"empirical: cannot read {file}: {exc.strerror}") from exc
        lines = csv.reader(io.StringIO(text, newline=""))
        rows = [(n, row[0].strip()) for n, row in enumerate(lines, 1) if row]
        if rows and not re.fullmatch(NUMBER, rows[0][1]):
            rows = rows[1:]
        values = []
        for line, text in rows:
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value >= 0):
                raise InputError(f"{file}:{line}: '{text}' is not a service time in seconds >= 0")
            values.append(value)
        if not values:
            raise InputError(f"{file}: no service times found; put one value in seconds per line")
        return cls(path, np.asarray(values))

    @property
    def mean(self) -> float:
        return float(self.values.mean())

    @property
    def m2(self) -> float:
        return float(np.mean(self.values**2))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.choice(self.values, size)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Empirical) and self.path == other.path
                and np.array_equal(self.values, other.values))

    def __hash__(self) -> int:
        return hash(self.path)

    def __str__(self) -> str:
        return f"empirical(path={self.path})"


def with_moments(mean: float, m2: float) -> Dist:
    """The distribution a scenario keeps for a cost known by its first two moments (the
    model needs no more): deterministic without spread, otherwise the lognormal with
    this mean and second moment."""
    if mean <= 0:
        return Deterministic(0.0)
    scv = max(m2 / mean**2 - 1, 0.0)
    if scv < 1e-9:
        return Deterministic(mean)
    return Lognormal.from_mean(mean, math.sqrt(math.log1p(scv)))


KINDS: dict[str, type[Dist]] = {
    c.kind: c for c in (Exponential, Deterministic, Lognormal, Pareto, BoundedPareto, Empirical)
}

# Parameters each spec accepts, and how each value is read. The first one may be positional.
_PARAMS: dict[str, dict[str, str]] = {
    "exp": {"mean": "time"},
    "det": {"value": "time"},
    "lognormal": {"mean": "time", "nu": "number", "sigma": "number"},
    "pareto": {"alpha": "number", "k": "time"},
    "bpareto": {"alpha": "number", "lo": "time", "hi": "time"},
    "empirical": {"path": "path"},
}


def parse(spec: str, base_dir: Path | None = None) -> Dist:
    """Parse a spec such as ``lognormal(mean=9ms, sigma=1)`` into a :class:`Dist`.

    Raises :class:`InputError` naming the problem and the fix.
    """
    m = _SPEC.match(spec) if isinstance(spec, str) else None
    if not m:
        raise InputError(f"'{spec}' is not a distribution spec; write e.g. exp(mean=1ms) "
                         f"(known: {', '.join(KINDS)})")
    kind, body = m.group(1).lower(), m.group(2)
    if kind not in KINDS:
        raise InputError(f"unknown distribution '{m.group(1)}'; known: {', '.join(KINDS)}")
    allowed = _PARAMS[kind]
    params: dict[str, float | str] = {}
    for i, item in enumerate(a.strip() for a in body.split(",") if a.strip()):
        name, sep, value = item.partition("=")
        name, value = (name.strip(), value.strip()) if sep else (next(iter(allowed)), item)
        if not sep and i > 0:
            raise InputError(f"{kind}: only the first parameter may be given without a name "
                             f"('{item}'); write name=value ({', '.join(allowed)})")
        if name not in allowed:
            raise InputError(f"{kind}: unknown parameter '{name}'; it takes {', '.join(allowed)}")
        if name in params:
            raise InputError(f"{kind}: parameter '{name}' given twice")
        params[name] = _read_value(kind, name, allowed[name], value)
    return _build(kind, params, base_dir)


def _read_value(kind: str, name: str, how: str, value: str) -> float | str:
    if how == "path":
        return value.strip("'\"")
    if how == "time":
        try:
            return parse_time(value)
        except InputError as exc:
            raise InputError(f"{kind} {name}: {exc}") from None
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"{kind} {name}='{value}' must be a plain number (no unit)") from None
    if not math.isfinite(number):
        raise InputError(f"{kind} {name} must be finite")
    return number


def _build(kind: str, p: dict, base_dir: Path | None) -> Dist:
    def need(*names: str) -> None:
        missing = [n for n in names if n not in p]
        if missing:
            raise InputError(f"{kind} needs {', '.join(missing)}; e.g. {_EXAMPLES[kind]}")

    if kind == "lognormal":
        need("sigma")
        if ("mean" in p) == ("nu" in p):
            raise InputError(f"lognormal takes mean or nu, not both; e.g. {_EXAMPLES[kind]}")
        if "mean" in p:
            return Lognormal.from_mean(p["mean"], p["sigma"])
        return Lognormal(p["nu"], p["sigma"])
    need(*_PARAMS[kind])
    if kind == "exp":
        return Exponential(p["mean"])
    if kind == "det":
        return Deterministic(p["value"])
    if kind == "pareto":
        return Pareto(p["alpha"], p["k"])
    if kind == "bpareto":
        return BoundedPareto(p["alpha"], p["lo"], p["hi"])
    return Empirical.load(p["path"], base_dir)


_EXAMPLES = {
    "exp": "exp(mean=1ms)",
    "det": "det(2ms)",
    "lognormal": "lognormal(mean=9ms, sigma=1)",
    "pareto": "pareto(alpha=2.5, k=5.4ms)",
    "bpareto": "bpareto(alpha=1.2, lo=100us, hi=80ms)",
    "empirical": "empirical(path=costs.csv)",
}


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(message)
