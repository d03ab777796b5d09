"""The study from its settings to its output folder, without the command line:
:class:`StudyConfig` holds and checks what ``offload study`` was asked, :func:`prepare`
builds the plan (writing seed 000's file sets when no file set is given), and
:func:`run` runs it and writes every output file. ``offload study`` and ``offload
demo`` add only their flags, the progress bar and what they print.

Beside the study's own phases (:mod:`offloadlab.study.run`), the pipeline runs seed
004's handoff experiment (:mod:`offloadlab.experiments.handoff`): its result goes to
the report as a section of its own making (:func:`sections`) and to summary.json's
``handoff`` key."""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from offloadlab import dask_scheduler, dist, engine_profile, scenario
from offloadlab.errors import InputError, for_flag
from offloadlab.experiments import handoff
from offloadlab.mode_traits import BASELINE, traits
from offloadlab.report.html import write_report
from offloadlab.report.section import Section
from offloadlab.results import jsonable, write_outputs
from offloadlab.study import compare, floors, host_ladder, plan, toe2009
from offloadlab.study import external as host_server
from offloadlab.study import run as study_run
from offloadlab.study import trace as study_trace
from offloadlab.study.measure import measure
from offloadlab.study_tables import StudyTables
from offloadlab.testbed import cores, external, host_profile, idle, netns, remote
from offloadlab.testbed.server import emulating
from offloadlab.units import parse_time

DEFAULT_WORK = "exp(mean=100us)"
# A user's server does its own application work, which --work declares; none (static
# files, as nginx serves) unless it says so.
EXTERNAL_WORK = "det(0)"
# offload demo: seed 000's classes 0 (small) and 3 (large), inline against engine mode,
# on the quick budget; README.md states its planned time (tests/test_design.py).
DEMO_CLASSES = "0,3"
DEMO_MODES = "inline,engine"
DEMO_BUDGET = "quick"
# The classes and modes studied when no flag chooses them: seed 000's.
PRESET_CLASSES = toe2009.PRESET_CLASSES
DEFAULT_MODES = toe2009.PRESET_MODES
# Runs per policy in the handoff experiment (interleaved; the report shows medians).
HANDOFF_REPEATS = 3

Say = Callable[[str], None]


@dataclass(frozen=True)
class StudyConfig:
    """What ``offload study`` was asked, as its flags give it (text where the flag is
    text), checked when made: a bad value raises :class:`~offloadlab.errors.InputError`
    naming its flag, before any file is written. ``handoff_slowdown`` None skips the
    handoff experiment."""

    out_dir: Path = Path("study")
    fileset: Path | None = None
    trace: Path | None = None
    classes: str | None = None
    modes: str | None = None  # None: DEFAULT_MODES
    # A named study that fixes classes, modes and files (toe2009.NAME); None: the flags.
    preset: str | None = None
    budget: str = "quick"
    work: str | None = None  # None: DEFAULT_WORK
    run_length: str | None = None
    sweep_points: int | None = None  # None: every rate of the budget's sweep
    replicates: int | None = None  # None: the budget's
    steal_repeats: int | None = None  # None: the budget's
    seed: int = 1
    host_core: int | None = None
    engine_core: int | None = None
    mix: bool = True
    handoff_slowdown: float | None = handoff.Experiment.slowdown
    rate: float | None = None  # the bottom line's total requests/s (None: the operating rate)
    # The user's server as the host alone (testbed.external): a command or a PID.
    server_cmd: str | None = None
    server_pid: int | None = None
    target: str | None = None
    allow_remote: bool = False
    # The engine the offload modes emulate: a profile file, its speed and message cost
    # given or overridden by flags (all None: the testbed's own engine).
    engine_profile: Path | None = None
    engine_speed: float | None = None
    engine_message_cost: str | None = None
    # The load generator drops bodies unread in every run (measure.stream_of).
    discard_bodies: bool = False
    # The host OffloadLab's server runs on (testbed.host_profile).
    host_profile: str = "modern"
    # A Dask scheduler whose workers run the server and the load (testbed.remote).
    cluster: str | None = None

    def __post_init__(self) -> None:
        # In the order the flags were checked before the pipeline had a home, so a
        # command with two bad flags names the same one it always did.
        for check in (self.study_preset, self.size_classes, self.mode_names,
                      self.chosen_budget, self.work_dist, self.workload_source,
                      self.external_server, self.engine, self.host, self.across_hosts):
            check()
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate > 0):
            raise InputError(f"--rate {self.rate}: give the total requests/s to answer at, "
                             "> 0 (default: the study's operating rate)")

    @classmethod
    def demo(cls, out_dir: Path) -> StudyConfig:
        """``offload demo``: a small and a large class, inline against engine mode, on
        the quick budget."""
        return cls(out_dir, classes=DEMO_CLASSES, modes=DEMO_MODES, budget=DEMO_BUDGET)

    def study_preset(self) -> None:
        """--preset: a known name, given without the flags that choose what it fixes."""
        if self.preset is None:
            return
        if self.preset != toe2009.NAME:
            from offloadlab.workload.presets import RENAMED

            if self.preset == "appcache":
                # The object cache is an experiment of its own, with its own flags.
                raise InputError("--preset 'appcache': seed 001's object cache is now its "
                                 "own verb; run 'offload appcache' (see 'offload appcache "
                                 "--help')")
            renamed = (f" ({self.preset} is now called {RENAMED[self.preset]})"
                       if self.preset in RENAMED else "")
            raise InputError(f"--preset {self.preset!r}: use {toe2009.NAME}{renamed}")
        given = [(flag, value) for flag, value in (
            ("--classes", self.classes), ("--modes", self.modes),
            ("--fileset", self.fileset), ("--trace", self.trace)) if value is not None]
        if given:
            flag, value = given[0]
            raise InputError(f"--preset {self.preset} and {flag} {value}: give one; the "
                             f"preset studies classes "
                             f"{','.join(map(str, toe2009.PRESET_CLASSES))} of seed "
                             f"000's file sets in {toe2009.PRESET_MODES} mode")

    def size_classes(self) -> tuple[int, ...] | None:
        """--classes as numbers, or the preset's (None: every class the file set has)."""
        if self.preset is not None:
            return toe2009.PRESET_CLASSES
        return None if self.classes is None else plan.parse_classes(self.classes)

    def mode_names(self) -> tuple[str, ...]:
        """--modes, or the preset's, or DEFAULT_MODES."""
        return plan.parse_modes(toe2009.PRESET_MODES if self.preset is not None
                                else self.modes or DEFAULT_MODES)

    def chosen_budget(self) -> plan.Budget:
        return plan.with_budget_override(plan.budget(self.budget),
                                         for_flag("--run-length", parse_time, self.run_length),
                                         self.sweep_points, self.replicates,
                                         self.steal_repeats)

    def work_dist(self) -> dist.Dist:
        default = DEFAULT_WORK if self.external_server() is None else EXTERNAL_WORK
        return for_flag("--work", dist.parse, self.work or default)

    def external_server(self) -> external.ExternalServer | None:
        """The user's server (None: ours is the host alone too), checked."""
        if self.server_cmd is None and self.server_pid is None:
            if self.target is not None:
                raise InputError(f"--target {self.target}: give the server there with "
                                 "--server-cmd or --server-pid")
            return None
        server = external.ExternalServer(self.server_cmd, self.server_pid, self.target,
                                         self.allow_remote or self.cluster is not None)
        # Across hosts the program and the PID are the server host's: checked there.
        server.check(here=self.cluster is None)
        return server

    def host(self) -> host_profile.HostProfile:
        """The host profile, checked: another than today's needs what it makes (a
        network namespace: root, ip, ethtool), and is OffloadLab's server's alone."""
        profile = host_profile.named(self.host_profile)
        if profile.offloads is not None:
            if self.external_server() is not None:
                raise InputError(f"--host-profile {profile.name} runs OffloadLab's server "
                                 "on that host; your server (--server-cmd, --server-pid) "
                                 "runs as you started it: leave one of them out")
            netns.check()
        return profile

    def engine(self) -> engine_profile.EngineProfile | None:
        """The engine to emulate (None: the testbed's own), checked that the testbed's
        engine thread can (:func:`~offloadlab.testbed.server.emulating`)."""
        profile = engine_profile.from_flags(self.engine_profile, self.engine_speed,
                                            self.engine_message_cost)
        if profile is None:
            return None
        emulating(profile)
        kernel = [m for m in self.mode_names() if traits(m).engine_busy_from_kernel]
        if kernel:
            modes = ",".join(self.mode_names())
            raise InputError(f"--modes {modes!r}: {kernel[0]}'s engine is a kernel "
                             "thread, which the server cannot slow to the emulated engine; "
                             "study it without --engine-profile/--engine-speed/"
                             "--engine-message-cost, or leave it out of --modes")
        return profile

    def across_hosts(self) -> None:
        """--cluster: a scheduler's address, for today's host (another host profile and
        the preset's run on this machine)."""
        if self.cluster is None:
            return
        if not dask_scheduler.ADDRESS.fullmatch(self.cluster):
            raise InputError(f"--cluster '{self.cluster}': write the Dask scheduler's "
                             "address as tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786")
        here = [flag for flag, given in (
            (f"--host-profile {self.host_profile}", self.host_profile != "modern"),
            (f"--preset {self.preset}", self.preset is not None)) if given]
        if here:
            raise InputError(f"--cluster and {here[0]}: a study across hosts runs "
                             "OffloadLab's server on the server host as it is; give one")

    def workload_source(self) -> None:
        """--trace and --fileset each say what is served: at most one of them."""
        if self.trace is not None and self.fileset is not None:
            raise InputError(f"--trace {self.trace} and --fileset {self.fileset}: give one; "
                             "--trace makes the file set from the trace's objects")


@dataclass(frozen=True)
class Prepared:
    """A study ready to run: its config, its plan, and when preparing began (the
    summary's start time and duration count the file sets written for it)."""

    config: StudyConfig
    plan: plan.Plan
    started: float

    def handoff(self) -> handoff.Experiment | None:
        """Seed 004's policies on the smallest studied class (socket work matters most
        there), one run per policy and repeat of the budget's run length; None when the
        config skips it."""
        if self.config.handoff_slowdown is None or self.plan.hosts is not None:
            return None  # skipped, or across hosts: its servers would run here
        load = min(self.plan.classes, key=lambda c: c.size_class)
        return handoff.Experiment(
            root=load.root, manifest=load.manifest, size_class=load.size_class,
            slowdown=self.config.handoff_slowdown, run_s=self.plan.budget.run_s,
            repeats=HANDOFF_REPEATS, host_core=self.plan.host_core,
            engine_core=self.plan.engine_core, seed=self.plan.seed)

    def climbs_ladder(self) -> bool:
        """Seed 000's experiment (--preset toe-2009) on OffloadLab's server also measures
        what each of today's host mechanisms takes off E[X_p] (study.host_ladder)."""
        config = self.config
        return (config.preset == toe2009.NAME and config.server_cmd is None
                and config.server_pid is None)

    def load_seconds(self) -> float:
        """Seconds of load the study plans (without server start-up)."""
        experiment = self.handoff()
        runs = 0 if experiment is None else len(experiment.policies) * experiment.repeats
        ladder = host_ladder.load_seconds(self.plan) if self.climbs_ladder() else 0.0
        return self.plan.load_seconds() + runs * self.plan.budget.run_s + ladder


def prepare(config: StudyConfig, say: Say = lambda text: None) -> Prepared:
    """The plan of ``config``: the classes of --fileset, those of --trace with the trace
    as the mix (its file set and stream written under OUT/trace), or seed 000's file
    sets written under OUT/fileset (both kept from an earlier study that wrote the
    same). ``say`` tells what takes a while."""
    started = time.time()
    names, work = config.mode_names(), config.work_dist()
    classes = config.size_classes()
    hosts = None
    if config.cluster is not None:
        say(f"finding the server and client hosts of {config.cluster} …")
        hosts = remote.find(config.cluster)
    host_core, engine_core = cores.choose(config.host_core, config.engine_core,
                                          None if hosts is None else hosts.server_cores)
    floors_key = plan.SEED_FILESETS
    if config.fileset is not None:
        loads = plan.folder_classes(config.fileset, classes)
        workload = f"file set {config.fileset}"
        floors_key = f"file set {Path(config.fileset).resolve()}"
    traced = None if config.trace is None else study_trace.read(config.trace, classes,
                                                                config.seed, say)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    if traced is not None:
        loads, mixed, shares, workload = traced.loads(config.out_dir, config.seed, config.mix,
                                                      say)
        floors_key = f"trace {Path(config.trace).resolve()}"
    elif config.fileset is None:
        say("writing seed 000's file sets …")
        loads = plan.preset_classes(classes or PRESET_CLASSES, config.out_dir / "fileset",
                                    config.seed)
        workload = plan.SEED_FILESETS
    if traced is None:
        workload += (f", classes {', '.join(load.name for load in loads)}, one class per "
                     "run, HTTP/1.0 Poisson arrivals")
        mixed, shares = plan.mix(loads) if len(loads) > 1 else (None, {loads[0].name: 1.0})
        if config.mix and mixed is not None:
            workload += ", and all of them mixed (" + ", ".join(
                f"{name} {share:.0%}" for name, share in shares.items()) + ")"
    if config.external_server() is not None:
        workload += (f"; {BASELINE} runs on the user's server, whose application work "
                     f"X_a is --work ({work}) and E[X_p] the rest of its CPU per request; "
                     f"the offload modes on OffloadLab's server with the same --work "
                     f"({host_server.OFFLOAD_SIDE})")
    if config.discard_bodies:
        workload += ("; the load generator drops response bodies unread (their lengths "
                     "checked)")
    the_plan = plan.Plan(loads, names, config.chosen_budget(),
                         work if work.mean > 0 else None, host_core, engine_core,
                         config.seed, workload, shares, mixed if config.mix else None,
                         rate=_answer_rate(config, mixed), engine=config.engine(),
                         floors_key=floors_key, discard=config.discard_bodies,
                         host_profile=config.host_profile, hosts=hosts)
    prepared = Prepared(config, the_plan, started)
    if (experiment := prepared.handoff()) is not None:
        experiment.check()
    return prepared


def _answer_rate(config: StudyConfig, mixed: plan.ClassLoad | None) -> float | None:
    """Where the bottom line answers: --rate, else a trace's own mean rate, else (None)
    the exported scenario's operating rate."""
    if config.rate is not None or mixed is None or mixed.trace is None:
        return config.rate
    return mixed.trace.rate


class Studied(NamedTuple):
    """What a study shows: its tables, and seed 000's experiment beside them (with the
    host ladder when it ran) when it ran on seed 000's file sets."""

    tables: StudyTables
    seed_experiment: toe2009.Comparison | None


def run(prepared: Prepared, progress: study_run.Progress | None = None) -> Studied:
    """Run the study and write its folder: the fitted scenarios, results.parquet and
    summary.json (each atomically, the summary last), then report.html and its
    figures. Returns what the report shows."""
    config = prepared.config
    with _hosting(prepared) as host, config.host().hosting() as namespace:
        the_plan = replace(prepared.plan, netns=namespace and namespace.name)
        result = study_run.run(the_plan, progress,
                               measure if host is None else host.measure)
    if host is None:
        # For the studies of single runs after it (quick, the demo); a user's server's
        # floors are not our server's.
        floors.store(result)
    # Seed 000's experiment on both hosts, and what each of today's host mechanisms
    # takes off E[X_p]: each step from a namespace of its own, after the study's.
    ladder = (host_ladder.run(prepared.plan, study_run.undisturbed(
        measure, prepared.plan.budget.steal_repeats), progress=progress)
        if prepared.climbs_ladder() else None)
    experiment = prepared.handoff()
    handoff_result = None if experiment is None else _run_handoff(experiment, progress)
    meta = _meta(prepared, experiment)
    if host is not None:
        meta |= {"host_server": host.describe(), "offload_side": host.offload_side,
                 "notes": host.notes(result)}
    tables = compare.tables(result, meta)
    seed_experiment = toe2009.compare(prepared.plan, tables, ladder)
    write_outputs(config.out_dir, {
        **{f"scenario-{mode}.toml": scenario.dumps(sc)
           for mode, sc in result.fitted.scenarios.items()},
        "results.parquet": results_frame(tables, config.seed),
        "summary.json": summary(tables, handoff_result, host, result, seed_experiment)})
    write_report(tables, config.out_dir, sections(handoff_result, host, result,
                                                  seed_experiment))
    return Studied(tables, seed_experiment)


@contextlib.contextmanager
def _hosting(prepared: Prepared):
    """The user's server, running on the host's core while the study measures it
    (:class:`~offloadlab.study.external.HostServer`), and stopped after; None when our
    server is the host alone."""
    server = prepared.config.external_server()
    if server is None:
        yield None
        return
    the_plan = prepared.plan
    root = Path(os.path.commonpath([load.root.resolve() for load in the_plan.loads]))
    work = prepared.config.work_dist().mean
    if the_plan.hosts is None:
        with external.running(server, root, the_plan.host_core) as live:
            yield host_server.HostServer(server, live, root, work)
        return
    with remote.user_server(the_plan.hosts, server, root, the_plan.host_core) as (actor, live):
        yield host_server.HostServer(server, live, root, work, hosts=the_plan.hosts,
                                     user_server=actor)


def sections(handoff_result: handoff.Result | None,
             host: host_server.HostServer | None = None,
             result: compare.Study | None = None,
             seed_experiment: toe2009.Comparison | None = None) -> list[Section]:
    """The experiments' sections of the report: seed 000's tables beside ours when the
    study ran on its file sets, the handoff experiment's, which says so when the study
    skipped it, and the user's server's threads when it was the host (of the study's
    ``result``)."""
    return [*([] if seed_experiment is None else seed_experiment.sections()),
            Section(handoff.TITLE, handoff.CAPTION) if handoff_result is None
            else handoff_result.section(),
            *([] if host is None else [host.section(result)])]


def _run_handoff(experiment: handoff.Experiment,
                 progress: study_run.Progress | None) -> handoff.Result:
    """The handoff experiment, its progress in seconds of load like the study's phases."""
    def step(_: str, done: int, total: int) -> None:
        if progress is not None:
            progress("handoff", done * experiment.run_s, total * experiment.run_s)
    return handoff.run(experiment, step)


def _meta(prepared: Prepared, experiment: handoff.Experiment | None) -> dict:
    """The run facts the report's header and summary.json's ``meta`` show."""
    the_plan = prepared.plan
    classes = [load.name for load in the_plan.classes]
    return {
        "title": f"Offload study: {', '.join(classes)} in {', '.join(the_plan.modes)} mode",
        "command": shlex.join(["offload", *sys.argv[1:]]),
        "started": datetime.datetime.fromtimestamp(prepared.started).isoformat(
            timespec="seconds"),
        "duration_s": time.time() - prepared.started, "budget": the_plan.budget.name,
        "modes": list(the_plan.modes), "classes": classes, "workload": the_plan.workload,
        "shares": dict(the_plan.shares),
        "machine": _machine(the_plan, prepared.config.work_dist()),
        "scenario_files": [f"scenario-{m}.toml" for m in the_plan.offload_modes],
        "notes": [],
        "handoff": None if experiment is None else experiment.describe(),
        # Which server was the host alone, and where the offload side came from (a user's
        # server replaces both, run()).
        "host_server": f"OffloadLab's server in {BASELINE} mode",
        "offload_side": host_server.OFFLOAD_SIDE,
    }


def _machine(the_plan: plan.Plan, work: dist.Dist) -> str:
    hosts = the_plan.hosts
    if hosts is not None:
        return (f"across hosts: {hosts.describe()}; {len(hosts.server_cores)} cores on "
                f"{hosts.server_name}, host thread on its core {the_plan.host_core}, "
                f"engine on its core {the_plan.engine_core} (engine_wait "
                f"{plan.ENGINE_WAIT}), load generators unpinned on the client hosts; "
                f"{the_plan.host_profile} host; application work "
                f"{work}{_emulated(the_plan.engine)}")
    n = len(os.sched_getaffinity(0))
    # The load generator runs where the engine does (study.measure).
    generator = ("unpinned" if the_plan.engine_core is None
                 else f"on the engine's core {the_plan.engine_core}")
    return (f"{platform.node()}: {n} cores ({platform.processor() or platform.machine()}),"
            f" Linux {platform.release()}; {the_plan.host_profile} host "
            f"({host_profile.named(the_plan.host_profile).about}); host thread on core "
            f"{the_plan.host_core}, engine "
            f"on core {the_plan.engine_core} (engine_wait {plan.ENGINE_WAIT}), load "
            f"generator {generator}; idle cores {idle.describe()}; application work "
            f"{work}{_emulated(the_plan.engine)}")


def _emulated(profile: engine_profile.EngineProfile | None) -> str:
    """What the offload modes' engine thread emulated, for the machine text."""
    if profile is None:
        return ""
    return (f"; the engine thread emulating {profile.describe()} (slowdown "
            f"{profile.slowdown:g} paid per operation)")


def results_frame(tables: StudyTables, seed: int):
    """The points in the shared result schema: the host-alone columns (U_noe, T_noe)
    on inline rows, the offload columns (U_cpu, U_oe, T, T_sum) on the others."""
    frame = tables.points.copy()
    inline = frame["mode"] == BASELINE
    frame["U_noe"] = frame["U_host"].where(inline)
    frame["T_noe"] = frame["T"].where(inline)
    frame["U_cpu"] = frame["U_host"].where(~inline)
    frame["U_oe"] = frame["U_engine"].where(~inline)
    frame["T"] = frame["T"].where(~inline)
    frame["seed"] = seed
    return frame


def summary(tables: StudyTables, handoff_result: handoff.Result | None,
            host: host_server.HostServer | None = None,
            result: compare.Study | None = None,
            seed_experiment: toe2009.Comparison | None = None) -> dict:
    return jsonable({
        "meta": tables.meta,
        "verdicts": tables.verdicts.to_dict("records"),
        "bottom_line": tables.bottom_line.to_dict("records"),
        "saturation": tables.saturation.to_dict("records"),
        "accuracy": tables.accuracy.to_dict("records"),
        "costs": tables.costs.to_dict("records"),
        "cost_model": tables.cost_model.to_dict("records"),
        # The experiment's medians per policy and its checks, as the report shows them.
        "handoff": None if handoff_result is None else {
            **handoff_result.summary(), "checks": [vars(c) for c in handoff_result.checks()]},
        # The user's server as the host alone: which, and its threads' CPU per request.
        "host_server": None if host is None else host.summary(result),
        # Seed 000's Tables 4-1, 4-3 and 4-4 beside ours (None: not on its file sets).
        "toe_2009": None if seed_experiment is None else seed_experiment.summary(),
    })
