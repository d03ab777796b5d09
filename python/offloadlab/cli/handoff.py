"""``offload handoff``: seed 004's connection handoff — in the packet-level simulator
(one experiment from a TOML file, the paper's experiment matrix, the model's defaults),
on the testbed (its policies against inline mode with a slowed engine), and seed 000's
model-driven online placement on the testbed against fixed splits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Column, Table

from offloadlab.cli.common import (
    app,
    drawn,
    err,
    flag_time,
    out,
    user_errors,
    write_experiment,
    write_folder,
)
from offloadlab.cli.options import EngineCore, HostCore, Work
from offloadlab.errors import InputError
from offloadlab.results import Check
from offloadlab.units import ms, us

if TYPE_CHECKING:
    import pandas as pd

handoff_app = typer.Typer(
    help="Connection handoff to an offload NIC (seed 004): its policies in packet-level "
         "simulation and on the testbed.", no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(handoff_app, name="handoff")

FilesetDir = Annotated[Path, typer.Option(
    "--fileset", help="The file set to serve and request (offload workload fileset).")]
OutDir = Annotated[Path, typer.Option(
    "--out", help="Folder for results.csv, checks.csv, paper.csv, series.parquet, "
                  "summary.json and the figures (created; files in it are replaced).")]


@handoff_app.command("sim")
@user_errors
def sim_cmd(config: Annotated[Path, typer.Argument(help="Experiment TOML (see docs/handoff.md).")],
            out_dir: OutDir = Path("handoff")) -> None:
    """Run the configurations a TOML file lists, calibrated on the paper's numbers unless
    it says not to."""
    from offloadlab.handoff import run as handoff

    if not config.is_file():
        raise InputError(f"{config}: no such file")
    setups, settings, calibrate = handoff.load_config(config)
    _run(setups, settings, calibrate, out_dir)


@handoff_app.command("matrix")
@user_errors
def matrix_cmd(out_dir: OutDir = Path("handoff-matrix"),
               quick: Annotated[bool, typer.Option(
                   "--quick", help="W and S only, and 800 MIPS only for the NIC speeds.")
               ] = False,
               connections: Annotated[int, typer.Option(
                   min=1000, help="Workload connections each client list holds.")] = 20_000,
               seed: Annotated[int, typer.Option(min=0)] = 0,
               trace: Annotated[Path | None, typer.Option(
                   help="A WC98 or CLF log for W to replay instead of its synthetic trace "
                        "(a client's requests within 15 s share a connection).")] = None
               ) -> None:
    """Reference 004 §7.2's matrix: Table 1, Figures 5-8, checked against the paper."""
    from offloadlab.handoff import run as handoff

    setups = [handoff.parse_setup(s) for s in handoff.matrix(quick)]
    settings = handoff.Settings(connections=connections, seed=seed,
                                trace=None if trace is None else str(trace))
    _run(setups, settings, True, out_dir)


@handoff_app.command("defaults")
@user_errors
def defaults_cmd() -> None:
    """The model's settings and their defaults (override them in an experiment TOML)."""
    from offloadlab.handoff import run as handoff

    t = Table("setting", "default")
    for k, v in handoff.defaults().items():
        t.add_row(k, f"{v:g}")
    out.print(t)


@handoff_app.command("testbed")
@user_errors
def testbed_cmd(
    fileset_dir: FilesetDir,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder for runs.csv, series.parquet, summary.json and the figure "
                      "(created; files in it are replaced).")] = Path("handoff-testbed"),
    policies: Annotated[str | None, typer.Option(
        help="inline and handoff policies (P|N-L|N-FCFS|Tn), comma-separated (default: "
             "inline and four of the paper's).")] = None,
    size_class: Annotated[int | None, typer.Option(
        "--class", help="Only objects of this size class (0-4).")] = None,
    clients: Annotated[int, typer.Option(help="Closed-loop clients (zero think time).")] = 64,
    keep_alive: Annotated[int, typer.Option(help="Requests per connection.")] = 100,
    work: Work = None,
    engine_slowdown: Annotated[float | None, typer.Option(
        help="Extra engine CPU per unit of its own work: 3 emulates an engine 4 times "
             "slower (default: 6).")] = None,
    run_length: Annotated[str, typer.Option(help="Length of each run.")] = "3s",
    repeats: Annotated[int, typer.Option(help="Runs per policy, interleaved.")] = 3,
    host_core: HostCore = None,
    engine_core: EngineCore = None,
    seed: Annotated[int, typer.Option(help="Seed of the stream and the --work draws.")] = 1,
) -> None:
    """Seed 004's policies on the testbed: the same keep-alive load against inline mode
    and handoff mode under each policy, the engine slowed by --engine-slowdown."""
    from offloadlab.experiments import handoff as testbed
    from offloadlab.testbed import cores
    from offloadlab.workload import fileset

    host, engine = cores.choose(host_core, engine_core)
    exp = testbed.Experiment(
        root=fileset_dir, manifest=fileset.read_manifest(fileset_dir), size_class=size_class,
        clients=clients, keep_alive=keep_alive,
        run_s=flag_time("--run-length", run_length), repeats=repeats,
        host_core=host, engine_core=engine, seed=seed,
        **_given(work=work, slowdown=engine_slowdown,
                 policies=None if policies is None else testbed.parse_policies(policies)))
    exp.check()
    out_dir.mkdir(parents=True, exist_ok=True)
    total_s = exp.run_s * exp.repeats * len(exp.policies)
    err.print(f"{len(exp.policies)} policies × {exp.repeats} repeats × {exp.run_s:g} s: about "
              f"{total_s:.0f} s of load", highlight=False)

    result = testbed.run(exp, progress=_say_run)
    out.print(testbed_table(result.medians(), exp))
    _print_claims(result.checks())
    write_experiment(out_dir, exp, result)


@handoff_app.command("online")
@user_errors
def online_cmd(
    fileset_dir: FilesetDir,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder for runs.csv, steps.csv, latency.csv, summary.json and the "
                      "figure (created; files in it are replaced).")] = Path("handoff-online"),
    phase: Annotated[list[str] | None, typer.Option(
        "--phase", help="One phase of the workload, DURATION:cC=RATE[,cC=RATE]"
                        "[:slowdown=F] (HTTP/1.0 Poisson requests/s per size class; the "
                        "engine's slowdown), repeated in order. Default: class 3 at "
                        "4000/s with the engine slowed in the middle phase.")] = None,
    fixed: Annotated[str | None, typer.Option(
        help="Fixed offload fractions to compare with, comma-separated (default: 0 to 1 "
             "in steps of 0.25).")] = None,
    period: Annotated[str, typer.Option(help="Control period.")] = "250ms",
    window: Annotated[str, typer.Option(help="Estimation window.")] = "1s",
    dwell: Annotated[str, typer.Option(help="Least time between two changes.")] = "1s",
    hysteresis: Annotated[float, typer.Option(
        help="Change only for a predicted mean delay this much lower (a share).")] = 0.05,
    probe: Annotated[float, typer.Option(
        help="Least share of each class kept on each side, so both stay measured.")] = 0.02,
    work: Work = None,
    repeats: Annotated[int | None, typer.Option(
        help="Runs per policy, interleaved (default: 3).")] = None,
    host_core: HostCore = None,
    engine_core: EngineCore = None,
    generator_core: Annotated[int | None, typer.Option(
        help="Core of the load generator (default: the host's; the controller sees it "
             "there as background load of the host CPU).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the stream and the --work draws.")] = 1,
) -> None:
    """Model-driven online placement (seed 000 §6) on the testbed: a controller re-solves
    the queueing model every period from the server's live per-class accounts and sets
    each size class's offload fraction; compared with fixed fractions on the same
    shifting workload."""
    from offloadlab.experiments import online
    from offloadlab.online.control import Policy
    from offloadlab.testbed import cores
    from offloadlab.workload import fileset

    host, engine = cores.choose(host_core, engine_core)
    control = Policy(period_s=flag_time("--period", period),
                     window_s=flag_time("--window", window),
                     dwell_s=flag_time("--dwell", dwell), hysteresis=hysteresis, probe=probe)
    exp = online.Experiment(
        root=fileset_dir, manifest=fileset.read_manifest(fileset_dir),
        phases=tuple(online.parse_phase(p) for p in phase) if phase else online.DEFAULT_PHASES,
        control=control, host_core=host, engine_core=engine,
        generator_core=generator_core, seed=seed,
        **_given(work=work, repeats=repeats,
                 fixed=None if fixed is None else online.parse_fractions(fixed)))
    if exp.generator_core is None:
        exp = replace(exp, generator_core=exp.host_core)
    exp.check()
    out_dir.mkdir(parents=True, exist_ok=True)
    err.print(f"{len(exp.policies)} policies × {exp.repeats} repeats × {exp.duration_s:g} s "
              "of load", highlight=False)

    result = online.run(exp, progress=_say_run)
    out.print(online_table(result.medians(), exp))
    _print_claims(result.checks())
    write_experiment(out_dir, exp, result)


def _given(**values) -> dict:
    """The options that were given; the experiment's own defaults stand for the rest."""
    return {k: v for k, v in values.items() if v is not None}


def _say_run(name: str, done: int, total: int) -> None:
    if name:
        err.print(f"[dim]run {done + 1}/{total}: {name}[/]", highlight=False)


def _print_claims(claims: list[Check]) -> None:
    for c in claims:
        mark = "[green]holds[/]" if c.holds else "[red]does not hold[/]"
        out.print(f"{c.claim}: {mark} ({c.detail})", highlight=False)


def online_table(summary: pd.DataFrame, exp) -> Table:
    phases = [c for c in summary.columns if c.startswith("phase")]
    t = Table(Column("policy", no_wrap=True), "mean ms", "vs online",
              *(f"phase {c[5:-7]}" for c in phases), "on engine", "errors",
              title=f"HTTP/1.0 Poisson, mean response time, medians of {exp.repeats}",
              caption="; ".join(f"phase {i}: {p.label()}" for i, p in enumerate(exp.phases)))
    for r in summary.to_dict("records"):
        t.add_row(r["policy"], ms(r["mean_s"]), f"{r['vs_online']:.3f}",
                  *(ms(r[c]) for c in phases), f"{r['engine_share']:.0%}",
                  f"{r['errors']:,}")
    return t


def testbed_table(summary: pd.DataFrame, exp) -> Table:
    t = Table(Column("policy", no_wrap=True), "req/s", "vs inline", "mean ms", "p99 ms",
              "host µs", "engine µs", "on engine", "errors",
              title=f"{exp.clients} clients, {exp.keep_alive} requests per connection, "
                    f"engine slowdown {exp.slowdown:g}, medians of {exp.repeats}",
              caption="host, engine µs: CPU per request over all requests; on engine: "
                      "share of requests on engine-held connections")
    for r in summary.itertuples(index=False):
        t.add_row(r.policy, f"{r.throughput:,.0f}", f"{r.vs_inline:.3f}", ms(r.mean_s),
                  ms(r.p99_s), us(r.host_cpu_s), us(r.engine_cpu_s),
                  f"{r.engine_share:.0%}", f"{r.errors:,}")
    return t


def _run(setups, settings, calibrate, out_dir: Path) -> None:
    import pandas as pd

    from offloadlab.handoff import checks, paper
    from offloadlab.handoff import run as handoff
    from offloadlab.report import handoff as figures

    out_dir.mkdir(parents=True, exist_ok=True)

    def say(msg: str) -> None:
        err.print(f"[dim]{msg}[/]", highlight=False)

    replayed = None
    if settings.trace is not None:
        replayed = handoff.replayed(settings.trace, settings.connections)[1]
        say(f"W replays {replayed.summary()}")
    if calibrate:
        settings = handoff.calibrate(settings, progress=say)
    results, series = handoff.run_all(setups, settings, progress=say)
    verdicts = checks.evaluate(results)
    fit = paper.compare(results)
    table = figures.table(results)
    long = pd.concat([s.assign(setup=k) for k, s in series.items()], ignore_index=True)
    figs = figures.figures(results, series, hiwat=settings.watermarks.hiwat)
    _print(table, verdicts)
    for kind in ("fitted", "calibration", "held out"):
        rows = fit[fit.set == kind]
        if len(rows):
            out.print(f"the paper's {kind} numbers within tolerance: "
                      f"{int(rows.within.sum())} of {len(rows)} (paper.csv)", highlight=False)
    write_folder(out_dir, {
        "results.csv": results, "checks.csv": verdicts, "paper.csv": fit,
        "series.parquet": long, **figs,
        "summary.json": {"settings": settings.values,
                         "watermarks": settings.watermarks.as_tuple(),
                         "connections": settings.connections, "seed": settings.seed,
                         "trace": None if replayed is None else vars(replayed),
                         "calibrated": calibrate, "checks": verdicts.to_dict("records"),
                         "figures": drawn(figs)}})


def _print(table: pd.DataFrame, verdicts: pd.DataFrame) -> None:
    import pandas as pd

    t = Table(*map(str, table.columns))
    for row in table.itertuples(index=False):
        t.add_row(*(str(v) for v in row))
    out.print(t)
    if not verdicts.empty:
        v = Table("check", "what", "paper", "ours", "sign/order", "magnitude")
        for r in verdicts.itertuples(index=False):
            mag = "-" if r.magnitude_ok is None or pd.isna(r.magnitude_ok) else (
                "ok" if r.magnitude_ok else "off")
            v.add_row(r.check, r.what, r.paper, r.ours,
                      "[green]holds[/]" if r.holds else "[red]differs[/]", mag)
        out.print(v)
