"""File sets: the objects a web server serves, generated in memory, written to disk with
a manifest, and verified against it.

A *spec* says how to build a set (:class:`FileSetSpec` for SURGE-like sets,
:class:`SpecWeb99Spec` for SPECweb99's fixed layout); :func:`generate` turns it into a
:class:`FileSet` (sizes, classes, popularity ranks and probabilities, paths) without
touching the disk; :func:`materialise` writes it with its manifest; :func:`verify`
re-hashes a directory against its manifest::

    spec = preset("web", seed=1)
    fs = generate(spec)
    materialise(fs, "/srv/www", progress=lambda done, total: ...)
    assert verify("/srv/www").ok

Sizes (SURGE, Barford & Crovella, SIGMETRICS 1998, Table 2)
    A lognormal body spliced to a Pareto tail at ``k``: a fraction ``tail`` of files is
    Pareto above k, the rest lognormal conditioned on <= k::

        F(x) = (1 - p) Phi((ln x - mu)/sigma) / Phi((ln k - mu)/sigma)    x <= k
        F(x) = 1 - p (k/x)^alpha                                           x >  k

    SURGE's published fit: mu = 9.357, sigma = 1.318 (natural log of bytes), alpha = 1.1,
    k = 133,000 bytes, with about 93% of files in the body (p = 0.07). The numbers are
    those of the paper's Table 2; we could not retrieve its text here to re-check them.
    A set's ``[min_bytes, max_bytes]`` conditions the distribution (sizes are drawn by
    inverting F between F(min) and F(max), then rounded to whole bytes): a truncation,
    not a clamp, so no size piles up at a bound.

Popularity (Zipf)
    The file of rank r (1 = most popular) is requested with probability
    r^-alpha / sum_{i<=N} i^-alpha. Ranks are a random permutation of the files, i.e.
    popularity is independent of size, as SURGE assumes (it found no strong correlation
    between the two) and as reference 003 §C1 takes by default; ``popularity =
    "small-first"`` ranks the smallest file first instead.

Content
    File ``i`` holds the first ``size`` bytes of the little-endian 64-bit output of
    numpy's PCG64 seeded with ``SeedSequence([seed, crc32(name), i])``: incompressible,
    not sparse, different in every file and every 4 MiB chunk, so a client that checks
    the manifest's SHA-256 catches flipped, missing and repeated bytes.

On disk
    ``c{class}/f{file_id:06d}.bin`` for SURGE-like sets, ``dir{d:05d}/class{c}_{j}`` for
    SPECweb99; ``manifest.csv`` and ``manifest.parquet`` (columns
    :data:`MANIFEST_COLUMNS`) and ``fileset.json`` (the spec, totals, status) at the top.
    Every file is written to a temporary name and renamed, so an interrupted run never
    leaves a partial file; the manifests are written last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import time
import tomllib
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
from rich import box
from rich.table import Table
from scipy.special import ndtr, ndtri

from offloadlab.errors import InputError
from offloadlab.results import write_atomic, write_json
from offloadlab.workload.classes import (
    CLASSES,
    KiB,
    MiB,
    class_label,
    class_range,
    size_class,
)

GiB = 1024 * MiB
TiB = 1024 * GiB

Progress = Callable[[int, int], None]
"""Called as ``progress(bytes_done, bytes_total)`` while files are written or checked."""

CHECKSUM = "sha256"
MANIFEST_CSV = "manifest.csv"
MANIFEST_PARQUET = "manifest.parquet"
INFO_FILE = "fileset.json"
FORMAT = 1
# Manifest columns, in order. ``class`` is seed 000's size class; ``set_class`` the
# class as the set itself defines it (SPECweb99's 0..3, whose 1024-byte file is seed
# 000's class 0; for SURGE-like sets the same as ``class``); ``set`` the set's name.
# ``checksum`` is the SHA-256 (hex) of the content, empty if the set was only described.
MANIFEST_COLUMNS = ("file_id", "path", "size_bytes", "class", "set_class", "rank",
                    "probability", "checksum", "set")
REQUIRED_COLUMNS = ("path", "size_bytes", "class", "rank", "probability", "checksum")
_INT_COLUMNS = ("file_id", "size_bytes", "class", "set_class", "rank")
_STR_COLUMNS = ("path", "checksum", "set")

# Sets this large are only described (manifest, no files) unless create_large=True.
LARGE_BYTES = 2 * GiB
MAX_FILES = 10_000_000
MAX_FILE_BYTES = TiB
CHUNK_BYTES = 4 * MiB           # a multiple of 8: the content stream is 64-bit words
_PROGRESS_STEP = MiB            # call progress at most once per MiB written (and at the end)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# ---------------------------------------------------------------------------------------
# Size models: each draws n sizes conditioned on [lo, hi] from n uniforms.


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
        _need(math.isfinite(self.mu), "sizes.mu", self.mu, "a finite number, e.g. mu=9.357")
        _need(0 < self.sigma < 100, "sizes.sigma", self.sigma, "a number > 0, e.g. sigma=1.318")
        _need(0 < self.alpha < 100, "sizes.alpha", self.alpha, "a number > 0, e.g. alpha=1.1")
        _need(0 < self.k < MAX_FILE_BYTES, "sizes.k", self.k,
              "the split point in bytes > 0, e.g. k=133000")
        _need(0 <= self.tail <= 1, "sizes.tail", self.tail,
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
    """Sizes uniform on [min_bytes, max_bytes]."""

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
    """ln(size) uniform on [ln min_bytes, ln max_bytes]: E[X] = (hi - lo) / ln(hi/lo)."""

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


# ---------------------------------------------------------------------------------------
# Specs


@dataclass(frozen=True)
class FileSetSpec:
    """A SURGE-like file set: how many files (``n_files``) or how many bytes
    (``working_set_bytes``: files are drawn until their total reaches it), their size
    model conditioned on [``min_bytes``, ``max_bytes``], Zipf popularity with exponent
    ``zipf_alpha`` over ranks given by ``popularity`` ("random": a random permutation;
    "small-first": by size), and the seed of it all."""

    name: str = "surge"
    n_files: int | None = 1000
    working_set_bytes: int | None = None
    sizes: SizeModel = field(default_factory=Surge)
    min_bytes: int = 1
    max_bytes: int = 64 * MiB
    zipf_alpha: float = 1.0
    popularity: str = "random"
    seed: int = 0
    description: str = ""
    kind: ClassVar[str] = "surge"
    POPULARITY: ClassVar[tuple[str, ...]] = ("random", "small-first")

    def __post_init__(self) -> None:
        _check_name(self.name)
        where = f"file set {self.name!r}: "
        if (self.n_files is None) == (self.working_set_bytes is None):
            raise InputError(f"{where}give either n_files or working_set_bytes, not "
                             f"{'both' if self.n_files is not None else 'neither'}; "
                             "e.g. n_files=10000 or working_set_bytes=\"450MiB\"")
        if self.n_files is not None:
            _need_int(self.n_files, "n_files", 1, MAX_FILES, "e.g. n_files=10000", where)
        if self.working_set_bytes is not None:
            _need_int(self.working_set_bytes, "working_set_bytes", 1, MAX_FILES * MiB,
                      'e.g. working_set_bytes="450MiB"', where)
        _need_int(self.min_bytes, "min_bytes", 1, MAX_FILE_BYTES, "e.g. min_bytes=1", where)
        _need_int(self.max_bytes, "max_bytes", self.min_bytes, MAX_FILE_BYTES,
                  f'at least min_bytes={self.min_bytes}, e.g. max_bytes="64MiB"', where)
        _need(isinstance(self.sizes, SizeModel), "sizes", self.sizes,
              f"one of {', '.join(SIZE_MODELS)}", where)
        _need_alpha(self.zipf_alpha, "zipf_alpha", where)
        _need(self.popularity in self.POPULARITY, "popularity", self.popularity,
              " or ".join(repr(p) for p in self.POPULARITY), where)
        _need_int(self.seed, "seed", 0, 2**63 - 1, "e.g. seed=0", where)
        _need(self.sizes.probability(self.min_bytes, self.max_bytes) > 0, "sizes",
              self.sizes, f"a model that puts probability on [{self.min_bytes}, "
              f"{self.max_bytes}] bytes; widen min_bytes/max_bytes", where)

    def mean_bytes(self) -> float:
        """Expected size of one file (before rounding to whole bytes)."""
        return self.sizes.mean(self.min_bytes, self.max_bytes)


# SPECweb99's nine sizes per class: class c file j is (j+1) * 1024 * 10^c / 10 bytes,
# truncated (SPECweb96 "Workload" page, Table 2: 102, 204, ... bytes; 1, 2, ... 9 KB;
# ...). That page prints 922 for the last class-0 file where truncation gives 921.
SPECWEB99_SIZES: tuple[tuple[int, ...], ...] = tuple(
    tuple((j + 1) * 1024 * 10**c // 10 for j in range(9)) for c in range(4))
# Share of requests per class (SPECweb96/99: 35 / 50 / 14 / 1 %).
SPECWEB99_CLASS_MIX = (0.35, 0.50, 0.14, 0.01)
# Zipf rank (1 = most popular) of file j within its class. SPECweb99 puts the most
# popular file in the middle of the class; this order is as we recall it from the
# SPECweb99 white paper (not retrievable here). It gives a mean response of 14.4 KiB,
# matching the published "roughly 14 KB" (Ruan et al., USENIX 2006; reference 004 §5);
# smallest-first would give 9.3 KiB.
SPECWEB99_FILE_RANKS = (9, 6, 4, 2, 1, 3, 5, 7, 8)


@dataclass(frozen=True)
class SpecWeb99Spec:
    """SPECweb99's static file set (reference 004 §5): ``directories`` directories of 36
    files, 9 in each of 4 classes (0.1–0.9 KB, 1–9 KB, 10–90 KB, 100–900 KB, about 4.9 MiB
    per directory). A request picks a directory by Zipf(``dir_alpha``) over directory
    numbers, a class by ``class_mix``, and a file within the class by
    Zipf(``file_alpha``) over :data:`SPECWEB99_FILE_RANKS`. SPECweb99 scaled the number
    of directories with the number of connections; choose it to suit the run."""

    name: str = "specweb99"
    directories: int = 20
    dir_alpha: float = 1.0
    file_alpha: float = 1.0
    class_mix: tuple[float, ...] = SPECWEB99_CLASS_MIX
    seed: int = 0
    description: str = ""
    kind: ClassVar[str] = "specweb99"

    def __post_init__(self) -> None:
        _check_name(self.name)
        where = f"file set {self.name!r}: "
        _need_int(self.directories, "directories", 1, MAX_FILES // 36,
                  "e.g. directories=20 (about 98 MiB)", where)
        _need_alpha(self.dir_alpha, "dir_alpha", where)
        _need_alpha(self.file_alpha, "file_alpha", where)
        try:
            mix = np.asarray(self.class_mix, dtype=float)
        except (TypeError, ValueError):
            mix = np.full(0, np.nan)
        _need(mix.shape == (4,) and np.all(mix >= 0) and abs(mix.sum() - 1) < 1e-9,
              "class_mix", self.class_mix, "four shares >= 0 summing to 1, e.g. "
              "[0.35, 0.5, 0.14, 0.01]", where)
        _need_int(self.seed, "seed", 0, 2**63 - 1, "e.g. seed=0", where)


Spec = FileSetSpec | SpecWeb99Spec


# ---------------------------------------------------------------------------------------
# In memory


@dataclass(frozen=True, eq=False)
class FileSet:
    """A generated file set. Arrays are indexed by file id (0..n-1): ``sizes`` in bytes,
    ``classes`` seed 000's size class, ``set_class`` the set's own class, ``ranks``
    (1 = most popular), ``probability`` of each file per request (sums to 1), ``paths``
    relative to the set's directory."""

    spec: Spec
    sizes: np.ndarray
    classes: np.ndarray
    set_class: np.ndarray
    ranks: np.ndarray
    probability: np.ndarray
    paths: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def n_files(self) -> int:
        return len(self.sizes)

    @property
    def total_bytes(self) -> int:
        return int(self.sizes.sum())

    @property
    def large(self) -> bool:
        """Too big to write unless asked (:data:`LARGE_BYTES`)."""
        return self.total_bytes >= LARGE_BYTES

    def frame(self, checksums: Sequence[str] | None = None) -> pd.DataFrame:
        """The manifest as a DataFrame (columns :data:`MANIFEST_COLUMNS`); ``checksums``
        empty if not given."""
        n = self.n_files
        return _typed(pd.DataFrame({
            "file_id": np.arange(n, dtype=np.int64),
            "path": list(self.paths),
            "size_bytes": self.sizes,
            "class": self.classes,
            "set_class": self.set_class,
            "rank": self.ranks,
            "probability": self.probability,
            "checksum": list(checksums) if checksums is not None else [""] * n,
            "set": [self.name] * n,
        }))


def generate(spec: Spec) -> FileSet:
    """Build the set in memory: sizes, classes, ranks, probabilities and paths."""
    if isinstance(spec, SpecWeb99Spec):
        return _specweb99(spec)
    if isinstance(spec, FileSetSpec):
        return _surge(spec)
    raise InputError(f"cannot generate a file set from {type(spec).__name__}; "
                     "use a FileSetSpec, a SpecWeb99Spec or preset(name)")


def zipf_probabilities(n: int, alpha: float) -> np.ndarray:
    """p_r = r^-alpha / sum_{i=1..n} i^-alpha for ranks r = 1..n (alpha = 0: uniform)."""
    _need_int(n, "n", 1, MAX_FILES, "e.g. n=1000")
    _need_alpha(alpha, "alpha")
    weights = np.arange(1, n + 1, dtype=float) ** -float(alpha)
    return weights / weights.sum()


def _surge(spec: FileSetSpec) -> FileSet:
    # Separate streams for sizes and popularity: changing n_files keeps the sizes of
    # the first files, and changing the popularity order keeps all sizes.
    size_seed, rank_seed = np.random.SeedSequence(spec.seed).spawn(2)
    sizes = _draw_sizes(spec, np.random.Generator(np.random.PCG64(size_seed)))
    n = len(sizes)
    if spec.popularity == "random":
        ranks = np.random.Generator(np.random.PCG64(rank_seed)).permutation(n) + 1
    else:
        ranks = np.empty(n, np.int64)
        ranks[np.argsort(sizes, kind="stable")] = np.arange(1, n + 1)
    classes = size_class(sizes)
    width = max(6, len(str(n - 1)))
    paths = tuple(f"c{c}/f{i:0{width}d}.bin" for i, c in enumerate(classes.tolist()))
    return FileSet(spec, sizes, classes, classes.copy(), ranks.astype(np.int64),
                   zipf_probabilities(n, spec.zipf_alpha)[ranks - 1], paths)


def _draw_sizes(spec: FileSetSpec, rng: np.random.Generator) -> np.ndarray:
    """``n_files`` sizes, or sizes until their sum reaches ``working_set_bytes``
    (the last file included, so the total overshoots by less than one file)."""
    lo, hi = spec.min_bytes, spec.max_bytes

    def draw(n: int) -> np.ndarray:
        # rng.random(a) then rng.random(b) equals rng.random(a + b): batches don't matter.
        return np.clip(np.rint(spec.sizes.sample(rng.random(n), lo, hi)), lo, hi
                       ).astype(np.int64)

    if spec.n_files is not None:
        return draw(spec.n_files)
    target, batch = spec.working_set_bytes, max(1024, int(spec.working_set_bytes /
                                                          spec.mean_bytes() * 1.1))
    parts, total = [], 0
    while total < target:
        if sum(len(p) for p in parts) >= MAX_FILES:
            raise InputError(f"file set {spec.name!r}: working_set_bytes={target} needs more "
                             f"than {MAX_FILES:,} files; lower it or raise min_bytes")
        parts.append(draw(batch))
        total += int(parts[-1].sum())
    sizes = np.concatenate(parts)
    return sizes[: int(np.searchsorted(np.cumsum(sizes), target)) + 1]


def _specweb99(spec: SpecWeb99Spec) -> FileSet:
    d, c, j = (a.ravel() for a in np.meshgrid(np.arange(spec.directories), np.arange(4),
                                              np.arange(9), indexing="ij"))
    sizes = np.asarray(SPECWEB99_SIZES, dtype=np.int64)[c, j]
    file_p = zipf_probabilities(9, spec.file_alpha)[np.asarray(SPECWEB99_FILE_RANKS) - 1]
    prob = (zipf_probabilities(spec.directories, spec.dir_alpha)[d]
            * np.asarray(spec.class_mix)[c] * file_p[j])
    ranks = np.empty(len(sizes), np.int64)
    ranks[np.lexsort((np.arange(len(sizes)), -prob))] = np.arange(1, len(sizes) + 1)
    paths = tuple(f"dir{a:05d}/class{b}_{e}" for a, b, e in zip(d.tolist(), c.tolist(),
                                                                j.tolist(), strict=True))
    return FileSet(spec, sizes, size_class(sizes), c.astype(np.int8), ranks, prob, paths)


# ---------------------------------------------------------------------------------------
# Content


def file_chunks(fileset: FileSet, file_id: int, chunk: int = CHUNK_BYTES
                ) -> Iterator[np.ndarray]:
    """The content of file ``file_id`` as uint8 arrays of ``chunk`` bytes (the last one
    shorter); see "Content" in the module docstring. ``chunk`` is a multiple of 8, so
    the content does not depend on it."""
    if chunk <= 0 or chunk % 8:
        raise InputError(f"chunk={chunk}: use a positive multiple of 8 bytes, e.g. 4 MiB")
    spec = fileset.spec
    key = [spec.seed, zlib.crc32(spec.name.encode()), int(file_id)]
    bits = np.random.PCG64(np.random.SeedSequence(key))
    remaining = int(fileset.sizes[file_id])
    while remaining > 0:
        n = min(chunk, remaining)
        words = bits.random_raw((n + 7) // 8).astype("<u8", copy=False)
        yield words.view(np.uint8)[:n]
        remaining -= n


def file_content(fileset: FileSet, file_id: int) -> bytes:
    """The whole content of one file (for tests and small files)."""
    return b"".join(c.tobytes() for c in file_chunks(fileset, file_id))


# ---------------------------------------------------------------------------------------
# On disk


@dataclass(frozen=True)
class Materialised:
    """What :func:`materialise` did: ``created`` is False when the set was only described
    (manifest without files, checksums empty)."""

    out_dir: Path
    name: str
    files: int
    total_bytes: int
    elapsed_s: float
    created: bool

    @property
    def rate_Bps(self) -> float:
        """Bytes written per second of writing (content, hashing and file system)."""
        return self.total_bytes / self.elapsed_s if self.elapsed_s > 0 else math.inf


def materialise(fileset: FileSet, out_dir: str | Path, progress: Progress | None = None, *,
                overwrite: bool = False, create_large: bool = False) -> Materialised:
    """Write the set's files under ``out_dir`` with their manifest and ``fileset.json``.

    ``out_dir`` must be new, empty, or hold an earlier file set (its files not in this
    set are removed); any other non-empty directory is refused unless ``overwrite``
    (then only this set's paths are written, nothing is removed). Sets of
    :data:`LARGE_BYTES` or more are only described unless ``create_large``.
    ``progress(bytes_done, bytes_total)`` is called as bytes are written.
    """
    out = Path(out_dir)
    create = create_large or not fileset.large
    _prepare(out, fileset if create else None, overwrite)
    if create:
        _check_space(out, fileset)
    info = _info(fileset, created=create)
    write_json(out / INFO_FILE, {**info, "status": "writing"})
    start = time.perf_counter()
    checksums = _write_files(fileset, out, progress) if create else None
    elapsed = time.perf_counter() - start
    write_manifest(fileset.frame(checksums), out)
    write_json(out / INFO_FILE, {**info, "status": "complete"})
    return Materialised(out, fileset.name, fileset.n_files if create else 0,
                        fileset.total_bytes if create else 0, elapsed, create)


def materialise_many(filesets: Iterable[FileSet], out_dir: str | Path,
                     progress: Progress | None = None, **options) -> list[Materialised]:
    """Materialise several sets (e.g. ``seed000``'s five classes), each into
    ``out_dir/<set name>``, with one progress count over all of them."""
    sets = list(filesets)
    names = [fs.name for fs in sets]
    if len(set(names)) != len(names):
        raise InputError(f"file set names must differ to share {out_dir}: {names}")
    create = options.get("create_large", False)
    total = sum(fs.total_bytes for fs in sets if create or not fs.large)
    done = 0
    results = []
    for fs in sets:
        def each(d: int, _t: int, base: int = done) -> None:
            if progress:
                progress(base + d, total)
        results.append(materialise(fs, Path(out_dir) / fs.name, each, **options))
        done += results[-1].total_bytes
    return results


def _prepare(out: Path, fileset: FileSet | None, overwrite: bool) -> None:
    """Make ``out`` ready: refuse foreign non-empty directories, clear an earlier set's
    manifests (they would describe files about to change) and its files not among those
    about to be written (all of them when ``fileset`` is None: nothing will be written)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file; give a directory for the file set")
    out.mkdir(parents=True, exist_ok=True)
    earlier = (out / INFO_FILE).exists()
    if not earlier and any(out.iterdir()) and not overwrite:
        raise InputError(f"{out} is not empty and holds no file set ({INFO_FILE} missing); "
                         "choose a new or empty directory, or allow overwriting it "
                         "(overwrite=True)")
    if not earlier:
        return
    old_paths: list[str] = []
    for name in (MANIFEST_PARQUET, MANIFEST_CSV):
        if (out / name).exists() and not old_paths:
            with contextlib.suppress(InputError):  # unreadable: nothing to clean up by it
                old_paths = read_manifest(out / name)["path"].tolist()
        (out / name).unlink(missing_ok=True)
    keep = set(fileset.paths) if fileset else set()
    for rel in old_paths:
        target = out / rel
        if rel not in keep and _inside(out, target) and target.is_file():
            target.unlink()
            if target.parent.resolve() != out.resolve():
                with contextlib.suppress(OSError):  # not empty: other files live there
                    target.parent.rmdir()


def _check_space(out: Path, fileset: FileSet) -> None:
    free = shutil.disk_usage(out).free
    need = fileset.total_bytes + 64 * MiB
    if need > free:
        raise InputError(f"{out}: file set {fileset.name!r} needs {format_bytes(need)}, only "
                         f"{format_bytes(free)} free; choose another directory")


def _write_files(fileset: FileSet, out: Path, progress: Progress | None) -> list[str]:
    total, done, shown = fileset.total_bytes, 0, 0
    for parent in sorted({str(Path(p).parent) for p in fileset.paths}):
        (out / parent).mkdir(parents=True, exist_ok=True)
    checksums = []
    for i, rel in enumerate(fileset.paths):
        final = out / rel
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        digest = hashlib.sha256()
        try:
            with open(tmp, "wb") as fh:
                for chunk in file_chunks(fileset, i):
                    digest.update(chunk)
                    fh.write(chunk)
                    done += len(chunk)
                    if progress and done - shown >= _PROGRESS_STEP:
                        shown = done
                        progress(done, total)
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        checksums.append(digest.hexdigest())
    if progress:
        progress(done, total)
    return checksums


def write_manifest(frame: pd.DataFrame, out_dir: str | Path) -> None:
    """Write ``manifest.csv`` and ``manifest.parquet`` in ``out_dir``, each atomically."""
    out = Path(out_dir)
    write_atomic(out / MANIFEST_CSV, lambda tmp: frame.to_csv(tmp, index=False))
    write_atomic(out / MANIFEST_PARQUET, lambda tmp: frame.to_parquet(tmp, index=False))


def read_manifest(path: str | Path) -> pd.DataFrame:
    """A manifest (CSV or Parquet, or a set's directory: its Parquet manifest, else its
    CSV one) as a DataFrame with typed columns."""
    path = Path(path)
    if path.is_dir():
        found = [path / n for n in (MANIFEST_PARQUET, MANIFEST_CSV) if (path / n).exists()]
        if not found:
            raise InputError(f"{path}: no {MANIFEST_PARQUET} or {MANIFEST_CSV}; materialise a "
                             "file set there first, or give the manifest's path")
        path = found[0]
    frame = _read_table(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: manifest lacks column(s) {', '.join(missing)}; a manifest "
                         f"needs {', '.join(REQUIRED_COLUMNS)} (written by materialise)")
    try:
        return _typed(frame)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{path}: bad manifest values ({exc}); sizes, classes and ranks "
                         "must be whole numbers and probabilities numbers") from None


def _read_table(path: Path) -> pd.DataFrame:
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix == ".csv":
            return pd.read_csv(path, dtype={c: str for c in _STR_COLUMNS},
                               keep_default_na=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such manifest") from None
    except Exception as exc:  # pyarrow and pandas raise many types for a corrupt file
        raise InputError(f"{path}: cannot read the manifest: {exc}") from None
    raise InputError(f"{path}: a manifest is a .csv or .parquet file")


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Known columns in :data:`MANIFEST_COLUMNS` order with one dtype each, whichever
    format they came from; other columns follow unchanged."""
    frame = frame.copy()
    for c in _INT_COLUMNS:
        if c in frame:
            frame[c] = pd.to_numeric(frame[c], errors="raise").astype(np.int64)
    if "probability" in frame:
        frame["probability"] = pd.to_numeric(frame["probability"], errors="raise"
                                             ).astype(np.float64)
    for c in _STR_COLUMNS:
        if c in frame:
            frame[c] = frame[c].astype(str)
    order = [c for c in MANIFEST_COLUMNS if c in frame] + [
        c for c in frame if c not in MANIFEST_COLUMNS]
    return frame[order].reset_index(drop=True)


def read_info(out_dir: str | Path) -> dict:
    """The ``fileset.json`` of a materialised set (spec, totals, status)."""
    path = Path(out_dir) / INFO_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{out_dir}: no {INFO_FILE}; this is not a file set directory") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None


@dataclass(frozen=True)
class Verified:
    """Result of :func:`verify`: files and bytes checked, and ``(path, problem)`` pairs."""

    files: int
    total_bytes: int
    problems: tuple[tuple[str, str], ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(out_dir: str | Path, progress: Progress | None = None) -> Verified:
    """Re-read every file of a materialised set and compare its size and SHA-256 with
    the manifest. Problems are reported, not raised: missing files, wrong sizes, wrong
    content."""
    out = Path(out_dir)
    manifest = read_manifest(out)
    if (manifest["checksum"] == "").any():
        raise InputError(f"{out}: the manifest has no checksums, the set was only described; "
                         "materialise it (create_large=True, --create-large) to check it")
    total, done, problems = int(manifest["size_bytes"].sum()), 0, []
    for rel, size, expected in zip(manifest["path"], manifest["size_bytes"],
                                   manifest["checksum"], strict=True):
        target = out / rel
        problem = _check_file(target, int(size), expected) if _inside(out, target) else (
            "path leaves the set's directory")
        if problem:
            problems.append((rel, problem))
        done += int(size)
        if progress:
            progress(done, total)
    return Verified(len(manifest), total, tuple(problems))


def _check_file(path: Path, size: int, expected: str) -> str:
    try:
        actual = path.stat().st_size
        if actual != size:
            return f"size {actual} bytes, manifest says {size}"
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            while block := fh.read(CHUNK_BYTES):
                digest.update(block)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return "" if digest.hexdigest() == expected else "content differs from its checksum"


def _inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def format_bytes(n: float) -> str:
    """``27.3 KiB``, ``1.95 GiB``; whole bytes below 1 KiB."""
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


# ---------------------------------------------------------------------------------------
# Presets


@dataclass(frozen=True)
class Preset:
    """A named recipe: ``build(seed)`` gives one spec or a list (one set per class)."""

    name: str
    description: str
    build: Callable[[int], Spec | list[Spec]]


# seed000: files per class. Classes 0-3 draw from SURGE's lognormal body conditioned on
# the class range, class 4 from SURGE's Pareto tail conditioned on (1 MiB, 5 MiB]. Means:
# 0.65 KiB, 4.9 KiB, 30.5 KiB, 194 KiB, 2.02 MiB. Reference 000 §2.10(a) infers from the
# thesis's goodput ~27-30 KiB, ~160-200 KiB and ~1.9-2.1 MiB for classes 2-4; the full
# hybrid conditioned on class 3 would give 259 KiB (its Pareto tail is too heavy there),
# and an unbounded class 4 would average 11 MiB, hence the 5 MiB cap.
SEED000_FILES = (1000, 1000, 1000, 250, 50)
SEED000_CLASS4_MAX = 5 * MiB
# seed003: reference 003 Table 2 (KB and MB read as KiB and MiB). The size distribution
# inside each range is not given there [gap]; we use SURGE's hybrid conditioned on it.
SEED003 = ((250 * KiB, 25 * MiB), (1 * MiB, 100 * MiB), (4 * MiB, 450 * MiB),
           (16 * MiB, 2 * GiB), (64 * MiB, 6 * GiB))


def _seed000(seed: int) -> list[Spec]:
    specs: list[Spec] = []
    for c in CLASSES:
        lo, hi = class_range(c)
        specs.append(FileSetSpec(
            name=f"seed000-c{c}", n_files=SEED000_FILES[c],
            sizes=Surge() if c == 4 else Surge(tail=0.0), min_bytes=max(lo, 1),
            max_bytes=SEED000_CLASS4_MAX if hi is None else hi, zipf_alpha=1.0, seed=seed,
            description=f"seed 000 class {c} ({class_label(c)}) on its own"))
    return specs


def _seed003(i: int) -> Callable[[int], Spec]:
    max_bytes, working_set = SEED003[i]

    def build(seed: int) -> Spec:
        return FileSetSpec(
            name=f"seed003-{i + 1}", n_files=None, working_set_bytes=working_set,
            sizes=Surge(), min_bytes=KiB, max_bytes=max_bytes, zipf_alpha=0.9, seed=seed,
            description=f"seed 003 class {i}: 1 KiB–{format_bytes(max_bytes)} files, "
                        f"{format_bytes(working_set)} working set, Zipf 0.9")
    return build


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("seed000", "seed 000's five size classes, one set per class (per-class runs)",
           _seed000),
    Preset("specweb99", "SPECweb99's static layout: directories of 36 files in 4 classes",
           lambda seed: SpecWeb99Spec(seed=seed, description="SPECweb99-like static set")),
    *(Preset(f"seed003-{i + 1}", f"seed 003 class {i}: {format_bytes(ws)} working set, "
             f"files 1 KiB–{format_bytes(mx)}, Zipf 0.9", _seed003(i))
      for i, (mx, ws) in enumerate(SEED003)),
    Preset("web", "a mixed SURGE web site: 10,000 files, Zipf 1.0",
           lambda seed: FileSetSpec(name="web", n_files=10_000, seed=seed,
                                    description="SURGE sizes, 1 B–64 MiB, Zipf 1.0")),
)}


def preset(name: str, seed: int = 0, **overrides) -> Spec | list[Spec]:
    """The spec(s) of preset ``name`` with ``seed``; ``overrides`` replace spec fields
    (e.g. ``preset("specweb99", directories=100)``), in every set of a multi-set preset."""
    if name not in PRESETS:
        raise InputError(f"unknown file-set preset {name!r}; known: {', '.join(PRESETS)}")
    built = PRESETS[name].build(seed)
    if not overrides:
        return built
    if isinstance(built, list):
        return [_override(s, overrides) for s in built]
    return _override(built, overrides)


def _override(spec: Spec, overrides: dict) -> Spec:
    allowed = [f.name for f in dataclasses.fields(spec)]
    unknown = [k for k in overrides if k not in allowed]
    if unknown:
        raise InputError(f"file set {spec.name!r}: unknown field(s) {', '.join(unknown)}; "
                         f"it has {', '.join(allowed)}")
    if isinstance(spec, FileSetSpec) and "working_set_bytes" in overrides:
        overrides = {"n_files": None, **overrides}
    elif isinstance(spec, FileSetSpec) and "n_files" in overrides:
        overrides = {"working_set_bytes": None, **overrides}
    return dataclasses.replace(spec, **overrides)


# ---------------------------------------------------------------------------------------
# Specs as data (TOML files, fileset.json)

_UNITS = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB,
          "kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_BYTE_FIELDS = ("working_set_bytes", "min_bytes", "max_bytes")


def parse_bytes(value: int | str, what: str = "size") -> int:
    """A byte count: a whole number, or a number with a unit: B, KiB, MiB, GiB, TiB
    (powers of 1024) or kB, MB, GB, TB (powers of 1000), e.g. ``"450MiB"``."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    m = _BYTES.match(value) if isinstance(value, str) else None
    if not m or m.group(2) not in {"", *_UNITS}:
        hint = " (KB is ambiguous: write KiB for 1024 or kB for 1000)" if m and m.group(
            2).upper() == "KB" else ""
        raise InputError(f"{what}={value!r} is not a byte count; write e.g. 1500, "
                         f"\"64KiB\" or \"2GiB\" (units {', '.join(_UNITS)}){hint}")
    number = float(m.group(1)) * _UNITS[m.group(2) or "B"]
    if number != int(number):
        raise InputError(f"{what}={value!r} is not a whole number of bytes")
    return int(number)


def spec_to_dict(spec: Spec) -> dict:
    """The spec as plain data (``spec_from_dict`` reads it back)."""
    data = {"kind": spec.kind, **dataclasses.asdict(spec)}
    if isinstance(spec, FileSetSpec):
        data["sizes"] = {"kind": spec.sizes.kind, **dataclasses.asdict(spec.sizes)}
    else:
        data["class_mix"] = list(spec.class_mix)
    return data


def spec_from_dict(data: dict, where: str = "file-set spec") -> Spec | list[Spec]:
    """A spec from plain data (a TOML table, ``fileset.json``'s ``spec``)::

        kind = "surge"                 # default; or "specweb99"
        name = "site"
        n_files = 10000                # or working_set_bytes = "450MiB"
        sizes = {kind = "surge", mu = 9.357, sigma = 1.318, alpha = 1.1, k = 133000,
                 tail = 0.07}          # or "surge", "uniform", "loguniform"
        min_bytes = 1
        max_bytes = "64MiB"
        zipf_alpha = 1.0
        popularity = "random"          # or "small-first"
        seed = 0

    ``preset = "NAME"`` starts from a preset and the other keys override it.
    """
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a table of fields, got {type(data).__name__}")
    data = dict(data)
    try:
        if "preset" in data:
            name = data.pop("preset")
            return preset(name, data.pop("seed", 0), **_convert(data))
        kind = data.pop("kind", "surge")
        cls = {"surge": FileSetSpec, "specweb99": SpecWeb99Spec}.get(kind)
        if cls is None:
            raise InputError(f"{where}: kind={kind!r}; use \"surge\" or \"specweb99\"")
        allowed = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in data if k not in allowed]
        if unknown:
            raise InputError(f"{where}: unknown field(s) {', '.join(unknown)}; a {kind} set "
                             f"has {', '.join(allowed)}")
        fields_ = _convert(data)
        if cls is FileSetSpec and "working_set_bytes" in fields_ and "n_files" not in fields_:
            fields_["n_files"] = None
        return cls(**fields_)
    except InputError as exc:
        raise InputError(str(exc) if str(exc).startswith(where) else f"{where}: {exc}") from None
    except TypeError as exc:
        raise InputError(f"{where}: {exc}") from None


def _convert(data: dict) -> dict:
    out = dict(data)
    for key in _BYTE_FIELDS:
        if key in out and out[key] is not None:
            out[key] = parse_bytes(out[key], key)
    if "sizes" in out:
        out["sizes"] = _size_model(out["sizes"])
    if "class_mix" in out:
        out["class_mix"] = tuple(out["class_mix"])
    return out


def _size_model(value) -> SizeModel:
    if isinstance(value, SizeModel):
        return value
    params = {"kind": value} if isinstance(value, str) else dict(value)
    kind = params.pop("kind", "surge")
    cls = SIZE_MODELS.get(kind)
    if cls is None:
        raise InputError(f"sizes kind={kind!r}; use one of {', '.join(SIZE_MODELS)}")
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in params if k not in allowed]
    if unknown:
        raise InputError(f"sizes: unknown parameter(s) {', '.join(unknown)}; {kind} takes "
                         f"{', '.join(allowed) or 'none'}")
    try:
        values = {k: float(v) for k, v in params.items()}
    except (TypeError, ValueError):
        raise InputError(f"sizes: {kind} parameters must be numbers, got {params}") from None
    return cls(**values)


def load_spec(path: str | Path) -> Spec | list[Spec]:
    """Read a spec from a TOML file (see :func:`spec_from_dict`)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file-set spec") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{path}: cannot read the spec: {exc}") from None
    return spec_from_dict(data, str(path))


def _info(fileset: FileSet, created: bool) -> dict:
    counts = np.bincount(fileset.classes, minlength=len(CLASSES))
    return {"format": FORMAT, "name": fileset.name, "spec": spec_to_dict(fileset.spec),
            "files": fileset.n_files, "total_bytes": fileset.total_bytes,
            "class_files": counts.tolist(), "created": created, "checksum": CHECKSUM,
            "content": "PCG64(SeedSequence([seed, crc32(name), file_id])).random_raw, "
                       "little-endian"}


# ---------------------------------------------------------------------------------------
# Describing


def summary(fileset: FileSet) -> dict:
    """Plain facts about a set, per class too: files, bytes, and the request and byte
    shares the popularity gives each class."""
    sizes, prob = fileset.sizes, fileset.probability
    demand = prob * sizes
    per_class = []
    for c in CLASSES:
        mask = fileset.classes == c
        per_class.append({
            "class": c, "label": class_label(c), "files": int(mask.sum()),
            "bytes": int(sizes[mask].sum()),
            "mean_bytes": float(sizes[mask].mean()) if mask.any() else math.nan,
            "request_share": float(prob[mask].sum()),
            "byte_share": float(demand[mask].sum() / demand.sum()),
        })
    return {"name": fileset.name, "kind": fileset.spec.kind, "files": fileset.n_files,
            "total_bytes": fileset.total_bytes, "mean_bytes": float(sizes.mean()),
            "min_bytes": int(sizes.min()), "max_bytes": int(sizes.max()),
            "mean_request_bytes": float(demand.sum()), "large": fileset.large,
            "description": fileset.spec.description, "classes": per_class}


def describe(items: Spec | FileSet | Iterable[Spec | FileSet]) -> Table:
    """A rich table with one row per set: files, bytes, sizes, files per class, and
    whether :func:`materialise` creates it by default. Specs are generated in memory
    (cheap: no files are written)."""
    if isinstance(items, Spec | FileSet):
        items = [items]
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False,
                  title="[bold]file sets[/]: files per size class c0..c4",
                  caption="disk: no = only described unless create_large", show_edge=False)
    table.add_column("set", no_wrap=True)
    for name in ("files", "total", "mean", *(f"c{c}" for c in CLASSES), "α", "disk"):
        table.add_column(name, justify="right", no_wrap=True)
    for item in items:
        fs = item if isinstance(item, FileSet) else generate(item)
        s = summary(fs)
        table.add_row(fs.name, str(fs.n_files), format_bytes(s["total_bytes"]),
                      format_bytes(s["mean_bytes"]), *(str(k["files"]) for k in s["classes"]),
                      _alpha(fs.spec),
                      "[yellow]no[/]" if fs.large else "yes")
    return table


def class_table(fileset: FileSet) -> Table:
    """Per size class: files, bytes, mean size, and the shares of requests and requested
    bytes that the set's popularity gives the class."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 2), pad_edge=False, show_edge=False,
                  title=f"[bold]{fileset.name}[/] by size class",
                  caption="shares of requests and of requested bytes under the set's popularity")
    for name in ("class", "range", "files", "bytes", "mean", "requests", "req. bytes"):
        table.add_column(name, justify="left" if name in ("class", "range") else "right",
                         no_wrap=True)
    for k in summary(fileset)["classes"]:
        table.add_row(f"c{k['class']}", k["label"], f"{k['files']:,}", format_bytes(k["bytes"]),
                      format_bytes(k["mean_bytes"]) if k["files"] else "–",
                      f"{k['request_share']:.1%}", f"{k['byte_share']:.1%}")
    return table


def _alpha(spec: Spec) -> str:
    if isinstance(spec, SpecWeb99Spec):
        return f"{spec.dir_alpha:g}"
    return f"{spec.zipf_alpha:g}"


# ---------------------------------------------------------------------------------------
# Validation helpers


def _need(ok: bool, name: str, value, fix: str, where: str = "") -> None:
    if not ok:
        raise InputError(f"{where}{name}={value!r}: use {fix}")


def _need_int(value, name: str, lo: int, hi: int, example: str, where: str = "") -> None:
    is_int = isinstance(value, int | np.integer) and not isinstance(value, bool)
    _need(is_int and lo <= value <= hi, name, value,
          f"a whole number in [{lo:,}, {hi:,}], {example}", where)


def _need_alpha(value, name: str, where: str = "") -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    _need(ok and math.isfinite(value) and 0 <= value <= 10, name, value,
          "a Zipf exponent in [0, 10] (0 = all files equally popular), e.g. 1.0", where)


def _check_name(name) -> None:
    _need(isinstance(name, str) and bool(_NAME.match(name)), "name", name,
          "letters, digits, '.', '_' or '-' (it names a directory), e.g. name=\"web\"")
