"""Named file sets: seed 000's classes (one set each), SPECweb99's layout, seed 003's
five working sets and a mixed web site. ``preset(name, seed, **overrides)`` gives the
spec, or the list of specs, to pass to :func:`offloadlab.workload.fileset.generate`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from offloadlab.errors import InputError
from offloadlab.units import format_bytes
from offloadlab.workload.checks import need_fields
from offloadlab.workload.classes import CLASSES, GiB, KiB, MiB, class_label, class_range
from offloadlab.workload.sizes import Surge
from offloadlab.workload.specs import (
    FileSetSpec,
    Spec,
    SpecWeb99Spec,
    SpecWeb2005Spec,
    one_target,
)


@dataclass(frozen=True)
class Preset:
    """A named recipe: ``build(seed)`` gives one spec or a list (one set per class)."""

    name: str
    description: str
    build: Callable[[int], Spec | list[Spec]]


# toe-2009: files per class. Classes 0-3 draw from SURGE's lognormal body conditioned on
# the class range, class 4 from SURGE's Pareto tail conditioned on (1 MiB, 5 MiB]. Means:
# 0.65 KiB, 4.9 KiB, 30.5 KiB, 194 KiB, 1.97 MiB. Reference 000 §2.10(a) infers from the
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
            name=f"toe-2009-c{c}", n_files=SEED000_FILES[c],
            sizes=Surge() if c == 4 else Surge(tail=0.0), min_bytes=max(lo, 1),
            max_bytes=SEED000_CLASS4_MAX if hi is None else hi, zipf_alpha=1.0, seed=seed,
            description=f"seed 000 class {c} ({class_label(c)}) on its own"))
    return specs


def _seed003(i: int) -> Callable[[int], Spec]:
    max_bytes, working_set = SEED003[i]

    def build(seed: int) -> Spec:
        return FileSetSpec(
            name=f"dc-2004-{i + 1}", n_files=None, working_set_bytes=working_set,
            sizes=Surge(), min_bytes=KiB, max_bytes=max_bytes, zipf_alpha=0.9, seed=seed,
            description=f"seed 003 class {i}: 1 KiB–{format_bytes(max_bytes)} files, "
                        f"{format_bytes(working_set)} working set, Zipf 0.9")
    return build


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("toe-2009", "seed 000's five size classes, one set per class (per-class runs)",
           _seed000),
    Preset("specweb99", "SPECweb99's static layout: directories of 36 files in 4 classes",
           lambda seed: SpecWeb99Spec(seed=seed, description="SPECweb99-like static set")),
    Preset("specweb2005", "a SPECweb2005-like support site whose pages embed its files, "
           "scaling with sessions (10 by default)",
           lambda seed: SpecWeb2005Spec(seed=seed, description="SPECweb2005-like site")),
    *(Preset(f"dc-2004-{i + 1}", f"seed 003 class {i}: {format_bytes(ws)} working set, "
             f"files 1 KiB–{format_bytes(mx)}, Zipf 0.9", _seed003(i))
      for i, (mx, ws) in enumerate(SEED003)),
    Preset("web", "a mixed SURGE web site: 10,000 files, Zipf 1.0",
           lambda seed: FileSetSpec(name="web", n_files=10_000, seed=seed,
                                    description="SURGE sizes, 1 B–64 MiB, Zipf 1.0")),
)}


# Presets once named after the seed documents, now after their subject and year.
RENAMED = {"seed000": "toe-2009",
           **{f"seed003-{i}": f"dc-2004-{i}" for i in range(1, len(SEED003) + 1)}}


def preset(name: str, seed: int = 0, **overrides) -> Spec | list[Spec]:
    """The spec(s) of preset ``name`` with ``seed``; ``overrides`` replace spec fields
    (e.g. ``preset("specweb99", directories=100)``), in every set of a multi-set preset."""
    if name in RENAMED:
        raise InputError(f"file-set preset {name!r} is now called {RENAMED[name]!r}")
    if name not in PRESETS:
        raise InputError(f"unknown file-set preset {name!r}; known: {', '.join(PRESETS)}")
    built = PRESETS[name].build(seed)
    if not overrides:
        return built
    if isinstance(built, list):
        return [_override(s, overrides) for s in built]
    return _override(built, overrides)


def _override(spec: Spec, overrides: dict) -> Spec:
    need_fields(spec, overrides, f"file set {spec.name!r}: ", "field", "it has")
    if isinstance(spec, FileSetSpec):
        overrides = one_target(overrides)
    return dataclasses.replace(spec, **overrides)
