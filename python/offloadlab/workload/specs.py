"""File-set specs: how to build a set, checked when made. :class:`FileSetSpec` for
SURGE-like sets, :class:`SpecWeb99Spec` for SPECweb99's fixed layout,
:class:`SpecWeb2005Spec` for a SPECweb2005-like site whose pages embed its files;
:func:`offloadlab.workload.fileset.generate` builds any of them. :class:`ExplicitSpec` names
a set whose sizes are given rather than drawn (a trace's objects);
:func:`offloadlab.workload.fileset.explicit` builds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from offloadlab.errors import InputError
from offloadlab.workload.checks import (
    MAX_FILE_BYTES,
    MAX_FILES,
    need,
    need_alpha,
    need_int,
    need_name,
)
from offloadlab.workload.classes import MiB
from offloadlab.workload.page_mixes import MIXES
from offloadlab.workload.sizes import SIZE_MODELS, SizeModel, Surge


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
        need_name(self.name)
        where = f"file set {self.name!r}: "
        if (self.n_files is None) == (self.working_set_bytes is None):
            raise InputError(f"{where}give either n_files or working_set_bytes, not "
                             f"{'both' if self.n_files is not None else 'neither'}; "
                             "e.g. n_files=10000 or working_set_bytes=\"450MiB\"")
        if self.n_files is not None:
            need_int(self.n_files, "n_files", 1, MAX_FILES, "e.g. n_files=10000", where)
        if self.working_set_bytes is not None:
            need_int(self.working_set_bytes, "working_set_bytes", 1, MAX_FILES * MiB,
                     'e.g. working_set_bytes="450MiB"', where)
        need_int(self.min_bytes, "min_bytes", 1, MAX_FILE_BYTES, "e.g. min_bytes=1", where)
        need_int(self.max_bytes, "max_bytes", self.min_bytes, MAX_FILE_BYTES,
                 f'at least min_bytes={self.min_bytes}, e.g. max_bytes="64MiB"', where)
        need(isinstance(self.sizes, SizeModel), "sizes", self.sizes,
             f"one of {', '.join(SIZE_MODELS)}", where)
        need_alpha(self.zipf_alpha, "zipf_alpha", where)
        need(self.popularity in self.POPULARITY, "popularity", self.popularity,
             " or ".join(repr(p) for p in self.POPULARITY), where)
        need_int(self.seed, "seed", 0, 2**63 - 1, "e.g. seed=0", where)
        need(self.sizes.probability(self.min_bytes, self.max_bytes) > 0, "sizes",
             self.sizes, f"a model that puts probability on [{self.min_bytes}, "
             f"{self.max_bytes}] bytes; widen min_bytes/max_bytes", where)

    def mean_bytes(self) -> float:
        """Expected size of one file (before rounding to whole bytes)."""
        return self.sizes.mean(self.min_bytes, self.max_bytes)


def one_target(fields: dict) -> dict:
    """``fields`` for a :class:`FileSetSpec`, with ``n_files`` or ``working_set_bytes``
    cleared when only the other is given: a set is sized by one of them."""
    for given, other in (("working_set_bytes", "n_files"), ("n_files", "working_set_bytes")):
        if given in fields and other not in fields:
            return {other: None, **fields}
    return fields


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
        need_name(self.name)
        where = f"file set {self.name!r}: "
        need_int(self.directories, "directories", 1, MAX_FILES // 36,
                 "e.g. directories=20 (about 98 MiB)", where)
        need_alpha(self.dir_alpha, "dir_alpha", where)
        need_alpha(self.file_alpha, "file_alpha", where)
        try:
            mix = np.asarray(self.class_mix, dtype=float)
        except (TypeError, ValueError):
            mix = np.full(0, np.nan)
        need(mix.shape == (4,) and np.all(mix >= 0) and abs(mix.sum() - 1) < 1e-9,
             "class_mix", self.class_mix, "four shares >= 0 summing to 1, e.g. "
             "[0.35, 0.5, 0.14, 0.01]", where)
        need_int(self.seed, "seed", 0, 2**63 - 1, "e.g. seed=0", where)


@dataclass(frozen=True)
class SpecWeb2005Spec:
    """A SPECweb2005-like site of a ``workload``'s page mix, for ``sessions``
    simultaneous sessions (:mod:`~offloadlab.workload.site` builds it and says which
    files a page requests). Every page type has a dynamic page and ``own`` embedded
    files; ``shared`` files are embedded in every page. The scaling part grows with the
    sessions, as SPECweb2005's scaling file set does: ``items_per_session`` files per
    session, of which each page embeds one, with Zipf(``item_alpha``) popularity, and
    ``downloads_per_session`` large files per session for the mix's download pages.
    Reference 001 gives none of these numbers [gap]; docs/workload.md says where each
    comes from."""

    name: str = "specweb2005"
    workload: str = "support"
    sessions: int = 10
    # Calibrated on seed 001's Table 4.4 (bench/appcache_hits.py --calibrate).
    shared: int = 14
    own: int = 5                 # our choice: each page type has a few files of its own
    items_per_session: int = 53  # calibrated
    item_alpha: float = 0.81     # calibrated
    downloads_per_session: int = 1  # our choice: downloads never hit, so any count does
    seed: int = 0
    description: str = ""
    kind: ClassVar[str] = "specweb2005"

    def __post_init__(self) -> None:
        need_name(self.name)
        where = f"file set {self.name!r}: "
        need(self.workload in MIXES, "workload", self.workload, " or ".join(MIXES), where)
        for name, lo in (("sessions", 1), ("shared", 0), ("own", 0), ("items_per_session", 1),
                         ("downloads_per_session", 0)):
            need_int(getattr(self, name), name, lo, MAX_FILES,
                     f"e.g. {name}={getattr(SpecWeb2005Spec, name)}", where)
        need_alpha(self.item_alpha, "item_alpha", where)
        need_int(self.seed, "seed", 0, 2**63 - 1, "e.g. seed=0", where)
        files = (len(MIXES[self.workload].pages) * (1 + self.own) + self.shared
                 + self.sessions * (self.items_per_session + self.downloads_per_session))
        need(files <= MAX_FILES, "sessions", self.sessions,
             f"fewer sessions or files per session: the site would have {files:,} files, "
             f"more than {MAX_FILES:,}", where)


@dataclass(frozen=True)
class ExplicitSpec:
    """A set whose files, sizes and popularity are given, not drawn: e.g. the objects a
    trace requested (:mod:`~offloadlab.workload.replay`). The spec holds only the name,
    the ``seed`` that keys the files' content (as for every set) and where the set came
    from (``source``); :func:`~offloadlab.workload.fileset.explicit` builds the set from
    the sizes, weights and paths."""

    name: str = "explicit"
    seed: int = 0
    source: str = ""
    description: str = ""
    kind: ClassVar[str] = "explicit"

    def __post_init__(self) -> None:
        need_name(self.name)
        need_int(self.seed, "seed", 0, 2**63 - 1, "e.g. seed=0", f"file set {self.name!r}: ")


Spec = FileSetSpec | SpecWeb99Spec | SpecWeb2005Spec | ExplicitSpec
