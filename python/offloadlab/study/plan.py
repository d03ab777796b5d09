"""What a study will do: its workload (which classes, served from where), the modes,
and the budget that sets run lengths and sweep points. Everything is checked here,
before any server starts."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from offloadlab import dist
from offloadlab.errors import InputError
from offloadlab.mode_traits import BASELINE, traits
from offloadlab.study_tables import STUDY_MODES
from offloadlab.workload import fileset, presets
from offloadlab.workload.classes import CLASSES, class_name


@dataclass(frozen=True)
class Budget:
    """Run lengths (seconds of load) and sweep points. Sweep rates are fractions of the
    calibrated model's saturation rate of each class and mode; calibration runs at
    fractions of the capacity measured with zero think time, the first light enough
    that its delay is nearly all fixed path time (d0)."""

    name: str
    run_s: float
    saturation_s: float
    calibration: tuple[float, ...]
    sweep: tuple[float, ...]
    sim_requests: int

    def load_seconds(self, classes: int, modes: int, mix: bool = False) -> float:
        """Seconds of load the testbed phases plan (without server start-up); the mix
        is measured but not calibrated on. A sweep adds one point, at the operating
        rate, :data:`OPERATING_RUNS` run lengths long (at most: it replaces a sweep point
        within 5% of it)."""
        saturation = SATURATION_REPEATS * self.saturation_s
        sweep = self.run_s * (len(self.sweep) + OPERATING_RUNS)
        per = saturation + self.run_s * len(self.calibration) + sweep
        return modes * (classes * per + mix * (saturation + sweep))


BUDGETS = {b.name: b for b in (
    Budget("quick", 2.0, 2.0, (0.1, 0.3, 0.6), (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 1.0),
           20_000),
    Budget("standard", 5.0, 5.0, (0.1, 0.3, 0.6), tuple(round(0.1 * i, 2) for i in range(1, 12)),
           100_000),
    Budget("thorough", 10.0, 10.0, (0.1, 0.2, 0.4, 0.6),
           (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0,
            1.05), 200_000),
)}

# The sweep's run at the operating rate, where the verdict is measured, is this many run
# lengths long: its delay ratio decides whether the testbed backs the verdict.
OPERATING_RUNS = 3
# Saturation runs per class and mode; the one of median capacity counts. Two single
# runs' capacities differed by up to 17% on this shared 2-core machine (a process's or a
# file set's first run, and noise), more than a rerun should.
SATURATION_REPEATS = 3
# A run in which the hypervisor took more than STEAL_LIMIT of the cores' time
# (measure.steal_share) is made again, at most STEAL_REPEATS times, and the least
# disturbed one kept. Undisturbed runs on the 2-core VM lost under 0.5%; the runs whose
# delays jumped 4-10 times lost 9-14%.
STEAL_LIMIT = 0.02
STEAL_REPEATS = 2
# A sweep stops after the first point whose p99 passes 200 ms, whose errors pass 1%,
# or whose throughput falls more than 10% below the offered rate.
STOP_P99_S = 0.2
STOP_ERROR_RATE = 0.01
STOP_SHORTFALL = 0.10
# Closed-loop clients of the saturation runs (HTTP/1.0, zero think time): enough to
# keep the engine path full too (32 left host and engine both idle at times).
SATURATION_CLIENTS = 128
# The study's engine sleeps as soon as it is idle: the load generator shares its core,
# and a 50 us spin takes CPU from it. Measured 27 Nov 2026 (engine mode, 3 s runs,
# interleaved): class 3 at 5,000 req/s, mean delay 1.35-2.13 ms sleeping against
# 1.94-2.36 ms spinning, the engine's core 64-68% busy against 78-79%; class 0 at
# 7,800 req/s, 1.04-1.26 ms against 1.15-1.20 ms.
ENGINE_WAIT = "sleep"


# The name of the mixed load: every studied class in one stream.
MIX = "mix"


@dataclass(frozen=True)
class ClassLoad:
    """A load to run: one size class, or (``size_class`` None) the mix of the studied
    classes; the folder served and the objects requested from it."""

    name: str
    root: Path
    manifest: pd.DataFrame
    size_class: int | None


@dataclass(frozen=True)
class Plan:
    classes: tuple[ClassLoad, ...]
    modes: tuple[str, ...]
    budget: Budget
    work: dist.Dist | None
    host_core: int | None
    engine_core: int | None
    seed: int
    workload: str
    # Each class's share of the requests in the mix and in the fitted scenario.
    shares: dict[str, float]
    mix: ClassLoad | None = None

    def load_seconds(self) -> float:
        """Seconds of load this plan runs (without server start-up)."""
        return self.budget.load_seconds(len(self.classes), len(self.modes),
                                        self.mix is not None)

    @property
    def offload_modes(self) -> tuple[str, ...]:
        return tuple(m for m in self.modes if traits(m).engine_thread)

    @property
    def loads(self) -> tuple[ClassLoad, ...]:
        """Everything that runs: the classes, then the mix if there is one."""
        return self.classes + ((self.mix,) if self.mix is not None else ())


def parse_modes(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in names if m not in STUDY_MODES]
    if bad or BASELINE not in names or len(names) < 2:
        offload = [m for m in STUDY_MODES if traits(m).engine_thread]
        raise InputError(f"--modes {text!r}: give {BASELINE} (the baseline) and at least one "
                         f"of {', '.join(offload)}, comma-separated, e.g. "
                         f"{BASELINE},{offload[0]}")
    return names


def parse_classes(text: str) -> tuple[int, ...]:
    try:
        numbers = tuple(dict.fromkeys(int(c) for c in text.split(",") if c.strip()))
    except ValueError:
        numbers = ()
    if not numbers or any(c not in CLASSES for c in numbers):
        raise InputError(f"--classes {text!r}: give size classes 0-4, comma-separated, "
                         "e.g. 0,3")
    return numbers


def budget(name: str) -> Budget:
    if name not in BUDGETS:
        raise InputError(f"--budget {name!r}: use one of {', '.join(BUDGETS)}")
    return BUDGETS[name]


def preset_classes(classes: tuple[int, ...], folder: Path, seed: int) -> tuple[ClassLoad, ...]:
    """Seed 000's file sets for ``classes``, written under ``folder`` (kept if already
    there from an earlier study with the same seed)."""
    specs = {int(s.name.rsplit("c", 1)[1]): s for s in presets.preset("toe-2009", seed)}
    loads = []
    for c in classes:
        root = folder / specs[c].name
        if not _same_set(root, specs[c]):
            fileset.materialise(fileset.generate(specs[c]), root)
        loads.append(ClassLoad(class_name(c), root, fileset.read_manifest(root), c))
    return tuple(loads)


def _same_set(root: Path, spec) -> bool:
    try:
        info = fileset.read_info(root)
    except (InputError, OSError):
        return False
    spec_data = json.loads(json.dumps(fileset.spec_to_dict(spec)))  # as the info file has it
    return info.get("status") == "complete" and info.get("spec") == spec_data


def folder_classes(root: Path, classes: tuple[int, ...] | None) -> tuple[ClassLoad, ...]:
    """The size classes of an existing file set (all that it has, or ``classes``)."""
    manifest = fileset.read_manifest(root)
    present = sorted(int(c) for c in manifest["class"].unique())
    chosen = classes or tuple(present)
    missing = [c for c in chosen if c not in present]
    if missing:
        raise InputError(f"--fileset {root}: has no files of class {missing[0]} (it has "
                         f"classes {', '.join(map(str, present))}); pick from those")
    return tuple(ClassLoad(class_name(c), root, manifest, c) for c in chosen)


def mix(loads: tuple[ClassLoad, ...]) -> tuple[ClassLoad, dict[str, float]]:
    """The studied classes in one stream, and each class's share of its requests. One
    file set keeps its own popularity across its classes; separate per-class sets
    (seed 000's) are served from their common folder in equal shares."""
    roots = {load.root for load in loads}
    if len(roots) == 1:
        root = loads[0].root
        manifest = loads[0].manifest
        manifest = manifest[manifest["class"].isin([load.size_class for load in loads])]
        total = manifest["probability"].sum()
        shares = {load.name: float(manifest.loc[manifest["class"] == load.size_class,
                                                "probability"].sum() / total)
                  for load in loads}
    else:
        root = loads[0].root.parent
        if any(load.root.parent != root for load in loads):
            raise InputError("the classes' file sets must share a folder to be mixed")
        parts = []
        for load in loads:
            part = load.manifest[load.manifest["class"] == load.size_class].copy()
            part["path"] = f"{load.root.name}/" + part["path"].astype(str)
            part["probability"] = part["probability"] / part["probability"].sum() / len(loads)
            parts.append(part)
        manifest = pd.concat(parts, ignore_index=True)
        shares = {load.name: 1 / len(loads) for load in loads}
    return ClassLoad(MIX, root, manifest.reset_index(drop=True), None), shares


def with_budget_override(b: Budget, run_s: float | None,
                         sweep_points: int | None = None) -> Budget:
    """``--run-length`` replaces every run's length; ``--sweep-points N`` keeps N of the
    sweep's rates, spread evenly from its lightest to its heaviest."""
    if run_s is not None:
        b = replace(b, run_s=run_s, saturation_s=run_s)
    if sweep_points is None:
        return b
    last = len(b.sweep) - 1
    if not 2 <= sweep_points <= len(b.sweep):
        raise InputError(f"--sweep-points {sweep_points}: the {b.name} budget's sweep has "
                         f"{len(b.sweep)} rates; keep 2 to {len(b.sweep)} of them")
    keep = sorted({round(i * last / (sweep_points - 1)) for i in range(sweep_points)})
    return replace(b, sweep=tuple(b.sweep[i] for i in keep))
