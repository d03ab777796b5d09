"""File-size models. Each draws sizes conditioned on a set's ``[lo, hi]`` bytes from
uniforms (``sample``) and gives P[lo <= X <= hi] (``probability``) and
E[X | lo <= X <= hi] (``mean``).

SURGE (Barford & Crovella, SIGMETRICS 1998, Table 2)
    A lognormal body spliced to a Pareto tail at ``k``: a fraction ``tail`` of files is
    Pareto above k, the rest lognormal conditioned on <= k::

        F(x) = (1 - p) Phi((ln x - mu)/sigma) / Phi((ln k - mu)/sigma)    x <= k
        F(x) = 1 - p (k/x)^alpha                                           x >  k

    SURGE's published fit: mu = 9.357, sigma = 1.318 (natural log of bytes), alpha = 1.1,
    k = 133,000 bytes, with about 93% of files in the body (p = 0.07). The numbers are
    those of the paper's Table 2; we could not retrieve its text here to re-check them.
    Sizes are drawn by inverting F between F(lo) and F(hi), then rounded to whole bytes:
    a truncation, not a clamp, so no size piles up at a bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import ndtr, ndtri

from offloadlab.errors import InputError
from offloadlab.workload.checks import MAX_FILE_BYTES, need, need_fields


@dataclass(frozen=True)
class Surge:
    """SURGE's hybrid size distribution (module docstring): lognormal body (``mu``,
    ``sigma`` of ln bytes) up to ``k``, Pareto(``alpha``, ``k``) tail holding a fraction
    ``tail`` of files. ``tail=0`` is the plain lognormal (no split), ``tail=1`` the
    plain Pareto."""

    mu: float = 9.357
    sigma: float = 1.318
    alpha: float = 1.1
    k: float = 133_000.0
    tail: float = 0.07
    kind: ClassVar[str] = "surge"

    def __post_init__(self) -> None:
        need(math.isfinite(self.mu), "sizes.mu", self.mu, "a finite number, e.g. mu=9.357")
        need(0 < self.sigma < 100, "sizes.sigma", self.sigma, "a number > 0, e.g. sigma=1.318")
        need(0 < self.alpha < 100, "sizes.alpha", self.alpha, "a number > 0, e.g. alpha=1.1")
        need(0 < self.k < MAX_FILE_BYTES, "sizes.k", self.k,
             "the split point in bytes > 0, e.g. k=133000")
        need(0 <= self.tail <= 1, "sizes.tail", self.tail,
             "the fraction of files in the Pareto tail, in [0, 1], e.g. tail=0.07")

    def cdf(self, x) -> np.ndarray:
        """P[X <= x] for each x >= 1, exact in the body (small F)."""
        x = np.asarray(x, dtype=float)
        p, out = self.tail, np.empty_like(x)
        in_tail = self._in_tail(x)
        out[in_tail] = 1 - p * (self.k / x[in_tail]) ** self.alpha
        out[~in_tail] = (1 - p) * ndtr(self._z(x[~in_tail])) / self._phi_k
        return out

    def sf(self, x) -> np.ndarray:
        """P[X > x] for each x >= 1, exact in the tail (small 1 - F)."""
        x = np.asarray(x, dtype=float)
        p, out = self.tail, np.empty_like(x)
        in_tail = self._in_tail(x)
        out[in_tail] = p * (self.k / x[in_tail]) ** self.alpha
        z = self._z(x[~in_tail])
        out[~in_tail] = ndtr(-z) if p == 0 else 1 - (1 - p) * ndtr(z) / self._phi_k
        return out

    def ppf(self, u) -> np.ndarray:
        """The size x with P[X <= x] = u, for u in [0, 1)."""
        u = np.asarray(u, dtype=float)
        return self._quantile(u, 1 - u)

    def isf(self, v) -> np.ndarray:
        """The size x with P[X > x] = v, for v in (0, 1]."""
        v = np.asarray(v, dtype=float)
        return self._quantile(1 - v, v)

    def _quantile(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """x with F(x) = u and 1 - F(x) = v (the caller passes both, each computed where
        it is exact: u for small sizes, v for large ones)."""
        p, out = self.tail, np.empty_like(u)
        in_tail = v < p
        out[in_tail] = self.k * (v[in_tail] / p) ** (-1 / self.alpha)
        body = ~in_tail
        if p == 1:  # no body: only v = 1, i.e. x <= k, lands here, and means x = k
            out[body] = self.k
            return out
        if p == 0:  # plain lognormal: invert whichever of u, v is the smaller
            z = np.where(u[body] < 0.5, ndtri(np.minimum(u[body], 0.5)),
                         -ndtri(np.minimum(v[body], 0.5)))
        else:
            z = ndtri(u[body] / (1 - p) * self._phi_k)
        out[body] = np.exp(self.mu + self.sigma * z)
        return out

    def _in_tail(self, x: np.ndarray) -> np.ndarray:
        return x > self.k if self.tail > 0 else np.zeros(x.shape, bool)

    def _z(self, x: np.ndarray) -> np.ndarray:
        return (np.log(x) - self.mu) / self.sigma

    @property
    def _phi_k(self) -> float:
        """Phi((ln k - mu)/sigma): the body's lognormal mass below k (1 with no tail)."""
        return float(ndtr((math.log(self.k) - self.mu) / self.sigma)) if self.tail > 0 else 1.0

    def sample(self, u: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """Inverse transform conditioned on [lo, hi]: F runs from F(lo) to F(hi) (and
        1 - F from S(lo) down to S(hi)) as u runs from 0 to 1."""
        (f_lo, f_hi), (s_lo, s_hi) = self.cdf([lo, hi]), self.sf([lo, hi])
        return self._quantile(f_lo + u * (f_hi - f_lo), s_lo - u * (s_lo - s_hi))

    def probability(self, lo: int, hi: int) -> float:
        """P[lo <= X <= hi] (continuous, so the same as P[lo < X <= hi])."""
        (f_lo, f_hi), (s_lo, s_hi) = self.cdf([lo, hi]), self.sf([lo, hi])
        return float(f_hi - f_lo if f_hi < 0.5 else s_lo - s_hi)

    def mean(self, lo: float, hi: float) -> float:
        """E[X | lo <= X <= hi], from the partial expectations of body and tail:
        body: (1-p)/Phi(z_k) e^(mu + sigma^2/2) [Phi((ln b - mu - sigma^2)/sigma)]_a^b,
        tail: p alpha k^alpha (a^(1-alpha) - b^(1-alpha)) / (alpha - 1)."""
        p, total = self.tail, 0.0
        body_hi = hi if p == 0 else min(hi, self.k)
        if p < 1 and lo < body_hi:
            shift = self.mu + self.sigma**2
            scale = (1 - p) / self._phi_k
            total += scale * math.exp(self.mu + self.sigma**2 / 2) * float(
                ndtr((math.log(body_hi) - shift) / self.sigma)
                - ndtr((math.log(lo) - shift) / self.sigma))
        tail_lo = max(lo, self.k)
        if p > 0 and tail_lo < hi:
            a = self.alpha
            if a == 1:
                part = self.k * math.log(hi / tail_lo)
            else:
                part = a * self.k**a * (tail_lo ** (1 - a) - hi ** (1 - a)) / (a - 1)
            total += p * part
        return total / self.probability(lo, hi)

    def __str__(self) -> str:
        return (f"surge(mu={self.mu:g}, sigma={self.sigma:g}, alpha={self.alpha:g}, "
                f"k={self.k:g}, tail={self.tail:g})")


@dataclass(frozen=True)
class Uniform:
    """Sizes uniform on [lo, hi]."""

    kind: ClassVar[str] = "uniform"

    def sample(self, u: np.ndarray, lo: int, hi: int) -> np.ndarray:
        return lo + u * (hi - lo)

    def probability(self, lo: int, hi: int) -> float:
        return 1.0

    def mean(self, lo: float, hi: float) -> float:
        return (lo + hi) / 2

    def __str__(self) -> str:
        return "uniform"


@dataclass(frozen=True)
class LogUniform:
    """ln(size) uniform on [ln lo, ln hi]: E[X] = (hi - lo) / ln(hi/lo)."""

    kind: ClassVar[str] = "loguniform"

    def sample(self, u: np.ndarray, lo: int, hi: int) -> np.ndarray:
        return np.exp(math.log(lo) + u * math.log(hi / lo))

    def probability(self, lo: int, hi: int) -> float:
        return 1.0

    def mean(self, lo: float, hi: float) -> float:
        return (hi - lo) / math.log(hi / lo) if hi > lo else float(lo)

    def __str__(self) -> str:
        return "loguniform"


SizeModel = Surge | Uniform | LogUniform
SIZE_MODELS: dict[str, type] = {m.kind: m for m in (Surge, Uniform, LogUniform)}


def size_model(value) -> SizeModel:
    """A model from data: a model, its kind (``"surge"``), or a table of its kind and
    parameters (``{kind = "surge", mu = 9.0}``; kind defaults to surge)."""
    if isinstance(value, SizeModel):
        return value
    params = {"kind": value} if isinstance(value, str) else dict(value)
    kind = params.pop("kind", "surge")
    cls = SIZE_MODELS.get(kind)
    if cls is None:
        raise InputError(f"sizes kind={kind!r}; use one of {', '.join(SIZE_MODELS)}")
    need_fields(cls, params, "sizes: ", "parameter", f"{kind} takes")
    try:
        values = {k: float(v) for k, v in params.items()}
    except (TypeError, ValueError):
        raise InputError(f"sizes: {kind} parameters must be numbers, got {params}") from None
    return cls(**values)
