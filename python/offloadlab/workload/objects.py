"""The objects table a request stream draws from: paths, sizes and popularity (a file
set's manifest is one)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.errors import InputError
from offloadlab.workload.classes import size_class as class_of


@dataclass(frozen=True, eq=False)
class ObjectTable:
    """The objects requests are drawn from: paths, sizes and the popularity CDF."""

    paths: pd.Index            # sorted unique paths (the categories of the object column)
    codes: np.ndarray          # per object, its position in ``paths``
    sizes: np.ndarray
    cdf: np.ndarray
    params: dict
    size_class: int | None = None
    #: A site's ``role`` and ``page`` per object (:mod:`~offloadlab.workload.site`), else
    #: None.
    site: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def of(cls, objects, size_class: int | None = None) -> ObjectTable:
        """From a DataFrame with columns ``path``, ``size_bytes``, ``probability`` (any
        scale, normalised here) and optionally ``class`` (else computed from the size by
        :func:`offloadlab.workload.classes.size_class`); or from a file set (anything with
        a ``frame()`` manifest), a manifest file (.parquet, .csv) or a materialised set's
        folder. ``size_class`` keeps only the objects of that class. A site's ``role``
        and ``page`` columns are kept in :attr:`site`."""
        where = "objects"
        if isinstance(objects, str | Path):
            where = str(objects)
            frame = _read_objects(Path(objects))
        elif isinstance(objects, pd.DataFrame):
            frame = objects
        elif callable(getattr(objects, "frame", None)):
            frame = objects.frame()
        else:
            raise InputError("objects: give a DataFrame (a file-set manifest), a file set, or "
                             "the path of a manifest with columns path, size_bytes, "
                             "probability")
        missing = [c for c in ("path", "size_bytes", "probability") if c not in frame]
        if missing:
            raise InputError(f"{where}: no column {', '.join(map(repr, missing))}; an objects "
                             "table needs path, size_bytes and probability (e.g. a file-set "
                             "manifest)")
        if size_class is not None:
            if isinstance(size_class, bool) or not isinstance(size_class, int | np.integer):
                raise InputError(f"size_class={size_class!r}: use a class number 0-4")
            if "class" in frame:
                klass = frame["class"].to_numpy()
            else:
                klass = class_of(frame["size_bytes"].to_numpy())
            frame = frame[klass == size_class]
            if frame.empty:
                raise InputError(f"{where}: no object of class {size_class}; choose a class "
                                 "the file set has")
        paths = frame["path"]
        if not len(frame):
            raise InputError(f"{where}: the objects table is empty")
        if not all(isinstance(p, str) and p for p in paths):
            raise InputError(f"{where}: column 'path' must hold non-empty strings")
        sizes = frame["size_bytes"].to_numpy()
        if not (np.issubdtype(sizes.dtype, np.integer) and np.all(sizes >= 0)):
            raise InputError(f"{where}: column 'size_bytes' must hold whole numbers >= 0")
        prob = pd.to_numeric(frame["probability"], errors="coerce").to_numpy(dtype=float)
        if not (np.all(np.isfinite(prob)) and np.all(prob >= 0) and prob.sum() > 0):
            raise InputError(f"{where}: column 'probability' must be finite, >= 0 and not all "
                             "0 (popularity weights; they are normalised)")
        uniq, codes = np.unique(paths.to_numpy(dtype=object).astype(str), return_inverse=True)
        if len(uniq) < len(frame):
            dup = pd.Series(paths).value_counts().index[0]
            raise InputError(f"{where}: path '{dup}' appears more than once; list each object "
                             "once")
        cdf = np.cumsum(prob)
        cdf /= cdf[-1]
        digest = hashlib.sha256()
        for part in (uniq[codes].astype("U"), sizes.astype(np.int64), prob):
            digest.update(np.ascontiguousarray(part).tobytes())
        site = None
        if "role" in frame and "page" in frame:
            site = tuple(frame[c].to_numpy(dtype=object).astype(str) for c in ("role", "page"))
        return cls(pd.Index(list(uniq)), codes, sizes.astype(np.int64), cdf,
                   {"objects": len(frame), "objects_sha256": digest.hexdigest()[:16]},
                   None if size_class is None else int(size_class), site)

    def draw(self, rng: np.random.Generator, n: int) -> tuple[pd.Categorical, np.ndarray]:
        """``n`` independent draws by popularity: the object column and the sizes."""
        return self.take(pick(self.cdf, rng, n))

    def take(self, rows: np.ndarray) -> tuple[pd.Categorical, np.ndarray]:
        """The object column and the sizes of the objects at ``rows``."""
        return pd.Categorical.from_codes(self.codes[rows], self.paths), self.sizes[rows]

    def cdf_of(self, rows: np.ndarray) -> np.ndarray:
        """The popularity CDF among the objects at ``rows`` alone (empty: none)."""
        cdf = np.cumsum(np.diff(self.cdf, prepend=0.0)[rows])
        return cdf / cdf[-1] if len(cdf) and cdf[-1] > 0 else cdf


def pick(cdf: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` independent positions drawn by ``cdf``."""
    return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), len(cdf) - 1)


def _read_objects(path: Path) -> pd.DataFrame:
    """A materialised file set's folder (its manifest), or a .parquet / .csv table."""
    if path.is_dir():
        from offloadlab.workload import fileset  # only here: most callers pass a table

        return fileset.read_manifest(path)
    if not path.is_file():
        raise InputError(f"{path}: no such objects table or file-set folder")
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix == ".csv":
            return pd.read_csv(path, dtype={"path": str}, keep_default_na=False)
    except Exception as exc:  # pyarrow and pandas raise many types for a corrupt file
        raise InputError(f"{path}: cannot read the objects table: {exc}") from None
    raise InputError(f"{path}: an objects table is a .parquet or .csv file (or a file-set "
                     "folder)")
