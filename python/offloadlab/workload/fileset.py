"""File sets: the objects a web server serves, generated in memory, written to disk with
a manifest, and verified against it.

A spec (:mod:`~offloadlab.workload.specs`; size models in
:mod:`~offloadlab.workload.sizes`, named sets in :mod:`~offloadlab.workload.presets`)
says how to build a set; :func:`generate` turns it into a :class:`FileSet` (sizes,
classes, popularity ranks and probabilities, paths) without touching the disk
(:func:`explicit` builds one from given sizes, weights and paths instead, e.g. a trace's
objects); :func:`materialise` writes it with its manifest; :func:`verify` re-hashes a
directory against its manifest::

    spec = preset("web", seed=1)
    fs = generate(spec)
    materialise(fs, "/srv/www", progress=lambda done, total: ...)
    assert verify("/srv/www").ok

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
    SPECweb99, ``page/``, ``shared/``, ``own/``, ``item/`` and ``download/`` for a
    SPECweb2005-like site (:mod:`~offloadlab.workload.site`); ``manifest.csv`` and
    ``manifest.parquet`` (columns :data:`MANIFEST_COLUMNS`) and ``fileset.json`` (the
    spec, totals, status) at the top.
    Every file is written to a temporary name and renamed, so an interrupted run never
    leaves a partial file; the manifests are written last.

Tables of a set for the terminal are in :mod:`offloadlab.report.fileset`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import shutil
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.errors import InputError
from offloadlab.inputs import load_toml
from offloadlab.results import write_atomic, write_json
from offloadlab.units import format_bytes, parse_bytes
from offloadlab.workload import site
from offloadlab.workload.checks import (
    MAX_FILE_BYTES,
    MAX_FILES,
    need_fields,
    need_int,
)
from offloadlab.workload.classes import CLASSES, GiB, MiB, class_label, size_class
from offloadlab.workload.popularity import zipf_probabilities
from offloadlab.workload.presets import PRESETS, preset  # noqa: F401  (PRESETS: for the CLI)
from offloadlab.workload.sizes import size_model
from offloadlab.workload.specs import (
    SPECWEB99_FILE_RANKS,
    SPECWEB99_SIZES,
    ExplicitSpec,
    FileSetSpec,
    Spec,
    SpecWeb99Spec,
    SpecWeb2005Spec,
    one_target,
)

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
# A set may add columns after these (a trace's set: ``object``, the trace's name for the
# file; a SPECweb2005-like site's: ``role`` and ``page``); these are read back as text.
MANIFEST_COLUMNS = ("file_id", "path", "size_bytes", "class", "set_class", "rank",
                    "probability", "checksum", "set")
REQUIRED_COLUMNS = ("path", "size_bytes", "class", "rank", "probability", "checksum")
_INT_COLUMNS = ("file_id", "size_bytes", "class", "set_class", "rank")
_STR_COLUMNS = ("path", "checksum", "set", "object", "role", "page")

# Sets this large are only described (manifest, no files) unless create_large=True.
LARGE_BYTES = 2 * GiB
CHUNK_BYTES = 4 * MiB           # a multiple of 8: the content stream is 64-bit words
_PROGRESS_STEP = MiB            # call progress at most once per MiB written (and at the end)


# ---------------------------------------------------------------------------------------
# Specs as data (TOML files, fileset.json)

_BYTE_FIELDS = ("working_set_bytes", "min_bytes", "max_bytes")


def spec_to_dict(spec: Spec) -> dict:
    """The spec as plain data (``spec_from_dict`` reads it back)."""
    data = {"kind": spec.kind, **dataclasses.asdict(spec)}
    if isinstance(spec, FileSetSpec):
        data["sizes"] = {"kind": spec.sizes.kind, **dataclasses.asdict(spec.sizes)}
    elif isinstance(spec, SpecWeb99Spec):
        data["class_mix"] = list(spec.class_mix)
    return data


def spec_from_dict(data: dict, where: str = "file-set spec") -> Spec | list[Spec]:
    """A spec from plain data (a TOML table, ``fileset.json``'s ``spec``)::

        kind = "surge"                 # default; or "specweb99", "specweb2005"
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
        kinds = {k.kind: k for k in (FileSetSpec, SpecWeb99Spec, SpecWeb2005Spec)}
        cls = kinds.get(kind)
        if cls is None:
            raise InputError(f"{where}: kind={kind!r}; use "
                             + " or ".join(f'"{k}"' for k in kinds))
        need_fields(cls, data, f"{where}: ", "field", f"a {kind} set has")
        fields_ = _convert(data)
        return cls(**(one_target(fields_) if cls is FileSetSpec else fields_))
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
        out["sizes"] = size_model(out["sizes"])
    if "class_mix" in out:
        out["class_mix"] = tuple(out["class_mix"])
    return out


def load_spec(path: str | Path) -> Spec | list[Spec]:
    """Read a spec from a TOML file (see :func:`spec_from_dict`)."""
    return load_toml(path, "the file-set spec",
                     lambda data, source, _folder: spec_from_dict(data, source))


# ---------------------------------------------------------------------------------------
# In memory


@dataclass(frozen=True, eq=False)
class FileSet:
    """A generated file set. Arrays are indexed by file id (0..n-1): ``sizes`` in bytes,
    ``classes`` seed 000's size class, ``set_class`` the set's own class, ``ranks``
    (1 = most popular), ``probability`` of each file per request (sums to 1), ``paths``
    relative to the set's directory; ``extra`` holds further manifest columns, one value
    per file (an explicit set's ``object``)."""

    spec: Spec
    sizes: np.ndarray
    classes: np.ndarray
    set_class: np.ndarray
    ranks: np.ndarray
    probability: np.ndarray
    paths: tuple[str, ...]
    extra: dict | None = None

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
            **{k: list(v) for k, v in (self.extra or {}).items()},
        }))


def generate(spec: Spec) -> FileSet:
    """Build the set in memory: sizes, classes, ranks, probabilities and paths."""
    if isinstance(spec, SpecWeb99Spec):
        return _specweb99(spec)
    if isinstance(spec, FileSetSpec):
        return _surge(spec)
    if isinstance(spec, SpecWeb2005Spec):
        return FileSet(spec, **site.files(spec))
    if isinstance(spec, ExplicitSpec):
        raise InputError(f"file set {spec.name!r}: an explicit set's sizes are not in its "
                         "spec; build it with explicit(spec, sizes, weights, paths)")
    raise InputError(f"cannot generate a file set from {type(spec).__name__}; "
                     "use a FileSetSpec, a SpecWeb99Spec, a SpecWeb2005Spec or preset(name)")


def explicit(spec: ExplicitSpec, sizes, weights, paths: Sequence[str],
             extra: dict | None = None) -> FileSet:
    """A set of given files: ``sizes`` in bytes (whole numbers >= 0), popularity
    ``weights`` (e.g. request counts: ranked from the largest, ties by file id, and
    normalised into ``probability``) and ``paths`` (relative, unique, without ``..``),
    all indexed by file id; ``extra`` adds manifest columns (one value per file).
    Content is keyed by ``spec.seed`` and the file id, as for generated sets."""
    where = f"file set {spec.name!r}: "
    if not isinstance(spec, ExplicitSpec):
        raise InputError(f"{where}explicit() takes an ExplicitSpec, not {type(spec).__name__}")
    sizes = np.asarray(sizes)
    weights = np.asarray(weights, dtype=float)
    paths = tuple(paths)
    n = len(paths)
    need_int(n, "files", 1, MAX_FILES, "at least one file", where)
    if sizes.shape != (n,) or weights.shape != (n,):
        raise InputError(f"{where}give one size and one weight per path ({n} paths, "
                         f"{sizes.size} sizes, {weights.size} weights)")
    if sizes.dtype.kind not in "iu" or (sizes < 0).any() or (sizes > MAX_FILE_BYTES).any():
        raise InputError(f"{where}sizes must be whole numbers of bytes in [0, "
                         f"{MAX_FILE_BYTES:,}]")
    if not (np.isfinite(weights).all() and (weights >= 0).all() and weights.sum() > 0):
        raise InputError(f"{where}weights must be finite, >= 0 and not all 0")
    for p in paths:
        if not isinstance(p, str) or "\\" in p or "\0" in p or any(
                part in ("", ".", "..") for part in p.split("/")):
            raise InputError(f"{where}path {p!r} is not a relative path inside the set; "
                             "write names joined by '/', without a leading '/', '.', '..', "
                             "'\\' or NUL")
    if len(set(paths)) < n:
        raise InputError(f"{where}paths must differ; each file has its own path")
    for key, values in (extra or {}).items():
        if key in MANIFEST_COLUMNS or len(values) != n:
            raise InputError(f"{where}extra column {key!r}: give a new column name and one "
                             "value per file")
    sizes = sizes.astype(np.int64)
    ranks = np.empty(n, np.int64)
    ranks[np.lexsort((np.arange(n), -weights))] = np.arange(1, n + 1)
    classes = size_class(sizes)
    return FileSet(spec, sizes, classes, classes.copy(), ranks, weights / weights.sum(),
                   paths, dict(extra) if extra else None)


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
    if create:
        # Flush now: the kernel would otherwise write the set back some 30 s later, in
        # the middle of the measurements that follow (it cost a saturation run 5-12%),
        # and "complete" should mean the files are on disk.
        os.sync()
    write_json(out / INFO_FILE, {**info, "status": "complete"})
    return Materialised(out, fileset.name, fileset.n_files if create else 0,
                        fileset.total_bytes if create else 0, elapsed, create)


def materialise_many(filesets: Iterable[FileSet], out_dir: str | Path,
                     progress: Progress | None = None, **options) -> list[Materialised]:
    """Materialise several sets (e.g. ``toe-2009``'s five classes), each into
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


def _info(fileset: FileSet, created: bool) -> dict:
    counts = np.bincount(fileset.classes, minlength=len(CLASSES))
    return {"format": FORMAT, "name": fileset.name, "spec": spec_to_dict(fileset.spec),
            "files": fileset.n_files, "total_bytes": fileset.total_bytes,
            "class_files": counts.tolist(), "created": created, "checksum": CHECKSUM,
            "content": "PCG64(SeedSequence([seed, crc32(name), file_id])).random_raw, "
                       "little-endian"}


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


# ---------------------------------------------------------------------------------------
# Summary (as tables: offloadlab.report.fileset)


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
