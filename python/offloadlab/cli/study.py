"""``offload study`` and ``offload demo``: does offload help this workload, for which
classes, and by how much — calibrated on the testbed, predicted, measured, reported."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from offloadlab.cli.common import app, err, note, out, user_errors
from offloadlab.cli.options import HOST_PROFILE_HELP
from offloadlab.units import ms, us

if TYPE_CHECKING:
    from offloadlab.study.pipeline import StudyConfig
    from offloadlab.study.toe2009 import Comparison

HostCore = Annotated[int | None, typer.Option(
    help="Core of the host thread (default: the first core this process may use).")]
EngineCore = Annotated[int | None, typer.Option(
    help="Core of the engine or SQPOLL thread, where the load generator runs too "
         "(default: the second).")]


@app.command("study")
@user_errors
def study_cmd(
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder for report.html, figures, results.parquet, the fitted "
                      "scenarios and summary.json (created; files in it are replaced).")
    ] = Path("study"),
    fileset_dir: Annotated[Path | None, typer.Option(
        "--fileset", help="Serve and request this file set (offload workload fileset); "
                          "default: seed 000's classes, written under OUT/fileset.")] = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="Study your traffic: an access log (Common or Combined Log Format) "
                        "or a World Cup 98 log, gzipped or not. Its objects become the file "
                        "set (under OUT/trace), its size classes with 1% or more of its "
                        "requests are studied, and the trace itself, played at each rate, is "
                        "the mix (docs/study.md, 'Study your traffic').")] = None,
    classes: Annotated[str | None, typer.Option(
        help="Size classes to study, one run each as in seed 000, e.g. 0,3 "
             "(default: 0,1,2,3,4, every class the --fileset has, or the --trace's "
             "classes with 1% or more of its requests).")] = None,
    modes: Annotated[str | None, typer.Option(
        help="Modes: inline and one or more of engine, uring (default: inline,engine).")
                     ] = None,
    budget: Annotated[str, typer.Option(
        help="quick | standard | thorough: run lengths and sweep points.")] = "quick",
    work: Annotated[str | None, typer.Option(
        help="Application work X_a per request on the host, e.g. exp(mean=50us), or "
             "det(0) for none (default: exp(mean=100us); det(0) with --server-cmd or "
             "--server-pid, whose own application work this declares).")] = None,
    run_length: Annotated[str | None, typer.Option(
        help="Override the budget's length of every run, e.g. 1s.")] = None,
    sweep_points: Annotated[int | None, typer.Option(
        help="Measure only this many of the budget's sweep rates, spread evenly from the "
             "lightest to the heaviest (a quicker look; each accuracy row then rests on "
             "fewer points).")] = None,
    replicates: Annotated[int | None, typer.Option(
        help="Measure every calibration and sweep point this many times, in interleaved "
             "rounds; the fit sees every calibration run, the sweep points' means are "
             "scored and their spread is each row's floor (default: "
             "the budget's, 1 quick, 3 standard and thorough).")] = None,
    steal_repeats: Annotated[int | None, typer.Option(
        help="Make a run again, at most this many times, while the hypervisor took more "
             "than 2% of its cores' time; the least disturbed counts (default 2; 0 keeps "
             "every run as it came, and the report names the disturbed ones).")] = None,
    mix: Annotated[bool, typer.Option(
        help="Also run the classes mixed in one stream, to check the multi-class model "
             "(needs two or more classes).")] = True,
    rate: Annotated[float | None, typer.Option(
        help="Total requests/s the bottom line answers at: host cores saved and the "
             "break-even engine speed there, the classes at their shares (default: a "
             "--trace's own mean rate, else the operating rate of the exported "
             "scenarios).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the file sets, streams and work.")] = 1,
    host_core: HostCore = None,
    engine_core: EngineCore = None,
    with_handoff: Annotated[bool, typer.Option(
        "--handoff/--no-handoff",
        help="Also run seed 004's handoff policies against inline on the smallest class, "
             "with the engine slowed by --handoff-slowdown.")] = True,
    handoff_slowdown: Annotated[float | None, typer.Option(
        help="The handoff experiment's engine slowdown (default: 6, an engine 7 times "
             "slower).")] = None,
    engine_profile: Annotated[Path | None, typer.Option(
        help="Emulate this engine on the testbed's engine thread: an [engine] TOML table "
             "(examples/engines/) with speed <= 1, one core, not shared; 'offload model "
             "--engine-profile FILE' takes any.")] = None,
    engine_speed: Annotated[float | None, typer.Option(
        help="Emulate an engine this fast against a host core, 0 < S <= 1 (0.25: each "
             "engine operation takes 4 times as long, slowed one by one); overrides the "
             "profile's.")] = None,
    engine_message_cost: Annotated[str | None, typer.Option(
        help="Emulated engine: extra engine CPU per message between host and engine, "
             "e.g. 2us; overrides the profile's.")] = None,
    preset: Annotated[str | None, typer.Option(
        help="toe-2009: seed 000's experiment, classes 0-4 of its file sets in inline and "
             "engine mode (not with --classes, --modes, --fileset or --trace); the report "
             "sets the seed's Tables 4-1, 4-3 and 4-4 beside ours. Seed 001's object cache "
             "is 'offload appcache'.")] = None,
    server_cmd: Annotated[str | None, typer.Option(
        help="Your HTTP server as the host alone: the command that starts it in the "
             "foreground, with {root} (the file set's folder) and {port} (a free loopback "
             "port, without --target) filled in; it is stopped after the study. Its CPU "
             "is every thread of its process tree (docs/study.md).")] = None,
    server_pid: Annotated[int | None, typer.Option(
        help="Your HTTP server as the host alone, already running (serving the file "
             "set); never stopped. Needs --target.")] = None,
    target: Annotated[str | None, typer.Option(
        help="HOST:PORT where --server-cmd or --server-pid answers.")] = None,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow a --target that is not loopback.")] = False,
    host_profile: Annotated[str, typer.Option(help=HOST_PROFILE_HELP)] = "modern",
    discard_bodies: Annotated[bool, typer.Option(
        "--discard-bodies", help="The load generator drops response bodies unread in "
                                 "every run (recv with MSG_TRUNC): on 2 cores it then takes "
                                 "less of the engine's core. Lengths are still checked, "
                                 "content never (docs/load.md).")] = False,
    cluster: Annotated[str | None, typer.Option(
        help="Study across hosts: the Dask scheduler (tcp://HOST:PORT) whose worker with "
             "the `server` resource runs the server and whose `client` workers send the "
             "load; the file sets must be at the same paths on the server host "
             "(docs/study.md, 'Across hosts').")] = None,
) -> None:
    """Calibrate the model on the testbed, predict with model and simulator, measure the
    rate sweep, and report whether offload helps, per class."""
    study(_pipeline().StudyConfig(
        out_dir=out_dir, fileset=fileset_dir, classes=classes, modes=modes, preset=preset,
        budget=budget,
        work=work, run_length=run_length, sweep_points=sweep_points, replicates=replicates,
        steal_repeats=steal_repeats, seed=seed, host_core=host_core, engine_core=engine_core,
        mix=mix, rate=rate, trace=trace,
        handoff_slowdown=_handoff_slowdown(handoff_slowdown) if with_handoff else None,
        server_cmd=server_cmd, server_pid=server_pid, target=target,
        allow_remote=allow_remote, engine_profile=engine_profile, engine_speed=engine_speed,
        engine_message_cost=engine_message_cost, discard_bodies=discard_bodies,
        host_profile=host_profile, cluster=cluster))


@app.command()
@user_errors
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the report.")
                       ] = Path("offload-demo"),
) -> None:
    """A quick study on the embedded defaults: a small and a large file class (seed 000's
    classes 0 and 3), inline against engine mode, in a few minutes."""
    study(_pipeline().StudyConfig.demo(out_dir))


def _handoff_slowdown(given: float | None) -> float:
    """--handoff-slowdown, or the handoff experiment's own."""
    from offloadlab.experiments import handoff

    return handoff.Experiment.slowdown if given is None else given


def _pipeline():
    from offloadlab.study import pipeline

    return pipeline


def study(config: StudyConfig) -> None:
    """Run the study of ``config`` with a progress bar on a terminal, then print its
    verdicts, accuracy and notes."""
    pipeline = _pipeline()
    prepared = pipeline.prepare(config, say=err.print)
    the_plan = prepared.plan
    err.print(f"study: {len(the_plan.loads)} loads × {len(the_plan.modes)} modes, about "
              f"{prepared.load_seconds() / 60:.1f} minutes of load", highlight=False)
    columns = (TextColumn("{task.description:12}"), BarColumn(),
               TextColumn("{task.percentage:>3.0f}%"), TimeRemainingColumn())
    with Progress(*columns, console=err, disable=not err.is_terminal) as bar:
        tasks: dict = {}

        def progress(phase: str, done: float, total: float) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        tables, seed = pipeline.run(prepared, progress)
    out.print(tables.meta["agreement"], markup=False, highlight=False)
    out.print(verdict_table(tables))
    from offloadlab.report.tables import bottom_line_table
    from offloadlab.study.compare import engine_named

    for mode, rows in tables.bottom_line.groupby("mode", sort=False):
        out.print(bottom_line_table(list(rows.itertuples()),
                                    engine_named(the_plan, mode)))
    out.print(accuracy_table(tables))
    if seed is not None:
        out.print(seed_table(seed))
        if seed.ladder is not None:
            if seed.ladder.table is None:
                note(f"host ladder: {seed.ladder.reason}")
            else:
                out.print(ladder_table(seed.ladder.table))
    for text in tables.meta["notes"]:
        note(text)
    err.print(f"hypervisor: {tables.meta['steal']}", highlight=False)
    err.print(f"load generator: {tables.meta['generator']}", highlight=False)
    if more := tables.meta.get("more_notes"):
        err.print(f"{len(more)} more notes in the report", highlight=False)
    files = tables.meta["scenario_files"]
    out.print(f"report: {config.out_dir / 'report.html'}\nscenarios: "
              + ", ".join(str(config.out_dir / f) for f in files)
              + f" (try: offload model {config.out_dir / files[0]})", markup=False)


def verdict_table(tables) -> Table:
    t = Table("class", "mode", "verdict", "f", "host µs alone → mode", "rate/s",
              "delay alone → mode", "saturation ×", "measured delay × (95%)", "agree",
              title="Does offload help?",
              caption="each class on its own at its rate in the exported scenario; f: "
                      "fraction the optimiser sends to the engine for the mix; × : mode / "
                      "inline, model then measured; the measured delay ratio's interval "
                      "decides agree (–: a sweep saturated below the rate)")
    from offloadlab.mode_traits import BASELINE

    costs = tables.costs.set_index(["class", "mode"])
    for v in tables.verdicts.itertuples():
        base, off = costs.loc[(v[1], BASELINE)], costs.loc[(v[1], v.mode)]
        t.add_row(v[1], v.mode, v.verdict, f"{v.f:.2f}",
                  f"{us(base.EXa + base.EXp)} → {us(off.EXa + off.EXo)}", f"{v.rate:,.0f}",
                  f"{ms(v.T_noe)} → {ms(v.T)} ms",
                  f"{v.saturation_ratio:.2f} / {v.measured_saturation_ratio:.2f}",
                  f"{_ratio(v.measured_delay_ratio)} ({_ratio(v.delay_low)}–"
                  f"{_ratio(v.delay_high)})", v.agree)
    return t


def accuracy_table(tables) -> Table:
    t = Table("class", "mode", "metric", "source", "points", "MAPE", "floor", "K-S D",
              "K-S p", "outcome",
              title="Model and simulator against the testbed",
              caption="points: scored (stable, below 80% utilisation) / measured; MAPE over "
                      "the scored points; floor: the MAPE a model exactly on the truth "
                      "would score there, and how it was measured; K-S: exact two-sample "
                      "test between predicted and measured curves (p > 0.2 passes); "
                      "outcome: met, missed or undecidable (floor above the target, or "
                      "fewer than 4 points), with the reason in the report")
    from offloadlab.study import judge

    style = {judge.MET: "green", judge.MISSED: "red", judge.UNDECIDABLE: "yellow"}
    for a in tables.accuracy.itertuples():
        t.add_row(a[1], a.mode, a.metric, a.source, f"{a.n}/{a.ks_m}", f"{a.mape:.1%}",
                  f"{a.floor:.1%} ({a.floor_source})", f"{a.ks_D:.3f}",
                  f"{a.ks_p:.3f}", f"[{style[a.status]}]{a.status}[/]")
    return t


def seed_table(seed: Comparison) -> Table:
    """Seed 000's experiment: per class and offload mode, our
    ratio mode / inline beside the seed's TOE / Non-TOE for each of its quantities."""
    from offloadlab.study import toe2009

    t = Table("class", "mode", *(f"{q.label} ×" for q in toe2009.QUANTITIES.values()),
              title="Seed 000's experiment: offload / inline, ours (the seed's)",
              caption=f"host profile {seed.host_profile}; from the saturation runs; "
                      "the numbers beside the seed's Tables 4-1, 4-3 and 4-4 are in the "
                      "report (–: the seed gives none; *: the load generator bounded a "
                      "saturation run, and the model's ratio with it on cores of its own "
                      "follows)")
    for row in seed.table.to_dict("records"):
        cells = [f"{_ratio(row[f'ratio_{q}'])} ({_ratio(row[f'seed_ratio_{q}'])})"
                 for q in toe2009.QUANTITIES]
        if row["generator_bound"]:
            cells[0] += f" *model {_ratio(row['model_ratio_elsewhere'])}"
        t.add_row(row["class"], row["mode"], *cells)
    return t


def ladder_table(steps) -> Table:
    """The host ladder (study.host_ladder's table): per class, E[X_p] on each step, and
    how much the step's mechanism changed it as a share of the seed-era host's."""
    adds = dict(zip(steps["profile"], steps["adds"], strict=True))
    t = Table("class", *adds, title="What today's host takes off E[X_p]",
              caption="inline at saturation, from seed 000's host to today's, each step "
                      "adding one mechanism (" + "; ".join(
                          f"{step}: {mechanism}" for step, mechanism in adds.items()
                          if mechanism) + "); E[X_p] in µs, and the step's change as a "
                      "share of the seed-era host's; medians of the rounds")
    for name, rows in steps.groupby("class", sort=False):
        t.add_row(name, *(us(r.EXp_s) + ("" if r.removed_share != r.removed_share
                                         else f" ({-r.removed_share:+.0%})")
                          for r in rows.itertuples()))
    return t


def _ratio(x: float) -> str:
    return "–" if x != x else f"{x:.2f}"
