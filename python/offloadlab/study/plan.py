"""What a study will do: its workload (which classes, served from where), the modes,
and the budget that sets run lengths and sweep points. Everything is checked here,
before any server starts."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from offloadlab import dist
from offloadlab.engine_profile import EngineProfile
from offloadlab.errors import InputError
from offloadlab.mode_traits import BASELINE, traits
from offloadlab.study_tables import STUDY_MODES
from offloadlab.testbed.remote import Hosts
from offloadlab.workload import fileset, presets
from offloadlab.workload.classes import CLASSES, class_name
from offloadlab.workload.trace_window import TraceArrivals


@dataclass(frozen=True)
class Budget:
    """Run lengths (seconds of load), sweep points, replicates and paired runs. Sweep
    rates are fractions of the calibrated model's saturation rate of each class and
    mode; calibration runs at fractions of the capacity measured with zero think time,
    the first light enough that its delay is nearly all fixed path time (d0). Every
    calibration and sweep point is measured ``replicates`` times, in interleaved rounds;
    at each class's operating rate, inline and each offload mode run in pairs until the
    delay ratio's interval decides the verdict, at most ``operating_pairs`` pairs. A run the
    hypervisor disturbed is made again at most ``steal_repeats`` times."""

    name: str
    run_s: float
    saturation_s: float
    calibration: tuple[float, ...]
    sweep: tuple[float, ...]
    sim_requests: int
    replicates: int
    operating_pairs: int
    steal_repeats: int = 2

    @property
    def calibration_turns(self) -> list[tuple[int, float]]:
        """The calibration's rounds, (replicate, share): every share in turn, the whole
        ladder ``replicates`` times. One run's engine CPU per request strayed 23% under to
        41% over its sweep (6-7 Dec 2026), and the fit rests on a few such runs."""
        return list(itertools.product(range(self.replicates), self.calibration))

    def sweep_runs(self, paired: bool) -> int:
        """Runs of one load's sweep in one mode: every rate and the operating rate (at
        most: it replaces a rate within 5% of it), each ``replicates`` times, except a
        ``paired`` class's operating point: it is measured once in the sweep, and its
        other replicates are the paired runs."""
        return self.replicates * (len(self.sweep) + 1) - paired * (self.replicates - 1)

    def operating_seconds(self, verdicts: int) -> float:
        """Seconds of the paired runs at the operating rates of ``verdicts`` classes and
        offload modes, each verdict's pairs to the cap."""
        return verdicts * 2 * self.operating_pairs * self.run_s

    def load_seconds(self, classes: int, modes: int, mix: bool = False) -> float:
        """Seconds of load the testbed phases plan (without server start-up), with every
        sweep to its last rate and every verdict's pairs to the cap; ``modes`` counts
        inline. The mix is measured but not calibrated on, and has no verdict to pair
        for."""
        saturation = SATURATION_REPEATS * self.saturation_s
        calibration = len(self.calibration_turns)
        per_class = saturation + self.run_s * (calibration + self.sweep_runs(True))
        per_mix = saturation + self.run_s * self.sweep_runs(False)
        return (modes * (classes * per_class + mix * per_mix)
                + self.operating_seconds(classes * (modes - 1)))


# Run lengths, points and replicates (docs/study.md, "What it runs"). The testbed's
# noise comes in spells of tens of seconds: one class's 5 s and 20 s runs spread alike
# (CV 6.1% both), and 2 s runs about as much as 5 s runs (CV of T 11-17% against
# 10-17%), so the standard and thorough budgets measure short runs in interleaved
# replicates, and spend most of their time on the pairs that decide the verdicts. The
# standard budget plans 32.9 minutes of load for the full scope (classes 0-3; inline,
# engine and uring; the mix; 918 runs): 38-41 with each run's start-up (0.3-0.5 s in the
# full studies of 27-28 Nov) when every sweep and verdict runs to its cap. The quick
# budget keeps single runs and the three pairs an interval needs: the demo's 3.7 minutes.
BUDGETS = {b.name: b for b in (
    Budget("quick", 2.0, 2.0, (0.1, 0.3, 0.6), (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 1.0),
           20_000, replicates=1, operating_pairs=3),
    Budget("standard", 2.0, 5.0, (0.1, 0.3, 0.6), (0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.1),
           100_000, replicates=3, operating_pairs=24),
    Budget("thorough", 3.0, 10.0, (0.1, 0.2, 0.4, 0.6),
           (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0,
            1.05), 200_000, replicates=3, operating_pairs=32),
)}

# At least this many pairs at the operating rate before their interval may decide: with
# two, Student's t interval is twelve standard errors wide and decides only by luck.
OPERATING_MIN_PAIRS = 3
# Saturation runs per class and mode; the one of median capacity counts. Two single
# runs' capacities differed by up to 17% on this shared 2-core machine (a process's or a
# file set's first run, and noise), more than a rerun should.
SATURATION_REPEATS = 3
# A run in which the hypervisor, or other processes, took more than STEAL_LIMIT of the
# cores' time (measure.steal_share, measure.Foreign) is made again, at most
# Budget.steal_repeats times, and the least disturbed one kept. Undisturbed runs on the
# 2-core VM lost under 0.5%; the runs whose delays jumped 4-10 times lost 9-14%.
STEAL_LIMIT = 0.02
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
# The workload of seed 000's file sets, the study's default.
SEED_FILESETS = "seed 000's file sets"


@dataclass(frozen=True)
class ClassLoad:
    """A load to run: one size class, or (``size_class`` None) the mix of the studied
    classes; the folder served and the objects requested from it. A load with a ``trace``
    (``offload study --trace``) sends the trace's own requests instead of Poisson ones."""

    name: str
    root: Path
    manifest: pd.DataFrame
    size_class: int | None
    trace: TraceArrivals | None = None


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
    # Total requests/s the bottom line answers at (--rate, or a trace's mean rate;
    # None: the exported scenario's own).
    rate: float | None = None
    # The engine the offload modes' engine thread emulates (None: the testbed's own).
    engine: EngineProfile | None = None
    # The workload whose stored floors a study of single runs reads (floors.py).
    floors_key: str = SEED_FILESETS
    # The load generator drops response bodies unread (docs/load.md) in every run, so
    # the fitted background (its work on the engine's core) is what saturation meets.
    discard: bool = False
    # The host the server runs on (testbed.host_profile), and the network namespace it
    # serves from while the study runs (None: loopback; set by pipeline.run).
    host_profile: str = "modern"
    netns: str | None = None
    # A study across hosts (--cluster): where its server and its load run (None: here).
    hosts: Hosts | None = None

    @property
    def floors_workload(self) -> str:
        """What the stored floors of this study's workload are filed under: another host
        repeats itself differently."""
        if self.host_profile == "modern":
            return self.floors_key
        return f"{self.floors_key}, {self.host_profile} host"

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
        if not same_set(root, specs[c]):
            fileset.materialise(fileset.generate(specs[c]), root)
        loads.append(ClassLoad(class_name(c), root, fileset.read_manifest(root), c))
    return tuple(loads)


def same_set(root: Path, spec) -> bool:
    """``root`` holds the set of ``spec``, completely written."""
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


def with_budget_override(b: Budget, run_s: float | None, sweep_points: int | None = None,
                         replicates: int | None = None,
                         steal_repeats: int | None = None) -> Budget:
    """``--run-length`` replaces every run's length; ``--sweep-points N`` keeps N of the
    sweep's rates, spread evenly from its lightest to its heaviest; ``--replicates R``
    measures every sweep point R times; ``--steal-repeats N`` makes a disturbed run
    again at most N times."""
    if steal_repeats is not None:
        if steal_repeats < 0:
            raise InputError(f"--steal-repeats {steal_repeats}: give 0 (keep every run as it "
                             f"came) or more (default {b.steal_repeats})")
        b = replace(b, steal_repeats=steal_repeats)
    if run_s is not None:
        b = replace(b, run_s=run_s, saturation_s=run_s)
    if sweep_points is not None:
        last = len(b.sweep) - 1
        if not 2 <= sweep_points <= len(b.sweep):
            raise InputError(f"--sweep-points {sweep_points}: the {b.name} budget's sweep has "
                             f"{len(b.sweep)} rates; keep 2 to {len(b.sweep)} of them")
        keep = sorted({round(i * last / (sweep_points - 1)) for i in range(sweep_points)})
        b = replace(b, sweep=tuple(b.sweep[i] for i in keep))
    if replicates is not None and replicates < 1:
        raise InputError(f"--replicates {replicates}: measure every sweep point at least "
                         f"once; give 1 or more (the {b.name} budget's default is "
                         f"{b.replicates})")
    return b if replicates is None else replace(b, replicates=replicates)
