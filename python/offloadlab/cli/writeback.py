"""``offload writeback``: seed 002's write congestion and its throttling (WICA), simulated
(:mod:`offloadlab.writeback`) — one controller on one scenario, or every controller on
every scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from offloadlab.cli.common import app, err, flag_time, out, user_errors
from offloadlab.errors import require
from offloadlab.results import FIGURE_SUFFIXES, jsonable, write_figure, write_json
from offloadlab.writeback import controllers, scenarios
from offloadlab.writeback.sim import simulate

writeback_app = typer.Typer(
    help="Seed 002's write congestion: readers stall behind the page cache's flushes of "
         "bursty writers; WICA (D- and P-) and Linux's dirty throttling put writers to "
         "sleep.", no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(writeback_app, name="writeback")

Seed = Annotated[int, typer.Option(min=0, help="Seed of the writers' bursts and pauses.")]
Duration = Annotated[str | None, typer.Option(
    help="Simulated time per run, 1s to 1h, e.g. 60s; the scenarios' own is 30s.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
Out = Annotated[Path | None, typer.Option("--out", help="Also write the JSON to this file.")]


def _one(flag: str, name: str, known) -> None:
    require(name in known, f"{flag} {name!r}: unknown; use one of {', '.join(known)} "
                           "(several at once: 'offload writeback compare')")


def _duration(text: str | None) -> float | None:
    seconds = flag_time("--duration", text)
    require(seconds is None or 1 <= seconds <= 3600,
            f"--duration {text}: simulate between 1s and 1h, e.g. --duration 30s")
    return seconds


def _writable(flag: str, path: Path | None, suffixes: tuple[str, ...] = (".json",)) -> None:
    if path is None:
        return
    require(path.parent.is_dir(),
            f"{flag} {path}: folder {path.parent} does not exist; create it or pick another")
    require(path.suffix.lower() in suffixes,
            f"{flag} {path}: name the file with one of {', '.join(suffixes)}")


@writeback_app.command("run")
@user_errors
def run_cmd(scenario: Annotated[str, typer.Option(
                help=f"One of {', '.join(scenarios.SCENARIOS)}.")] = "heavy-bursty",
            controller: Annotated[str, typer.Option(
                help=f"One of {', '.join(controllers.CONTROLLERS)}.")] = "p-wica",
            seed: Seed = 1, duration: Duration = None, as_json: Json = False,
            out_file: Out = None,
            plot: Annotated[Path | None, typer.Option(
                help="Write a figure of dirty pages and reader throughput over time "
                     "(.png, .svg or .pdf), against no control.")] = None) -> None:
    """One controller on one scenario, against no control and against the readers alone."""
    _one("--scenario", scenario, scenarios.SCENARIOS)
    _one("--controller", controller, controllers.CONTROLLERS)
    seconds = _duration(duration)
    _writable("--out", out_file)
    _writable("--plot", plot, FIGURE_SUFFIXES)
    setup = scenarios.setup(scenario, seconds)
    alone = scenarios.alone(setup, seed)
    none = simulate(setup, controllers.NoControl(), seed)
    run = none if controller == "none" else simulate(setup, controllers.make(controller), seed)
    row = scenarios.Row(scenario, run, alone, none.reader_tps)
    doc = {"seed": seed, "duration_s": setup.duration_s, **row.record(),
           "series": {k: v.tolist() for k, v in run.series.items()}}
    if out_file is not None:
        write_json(out_file, doc)
    if plot is not None:
        from offloadlab.report.writeback import figure
        fig = figure(setup, run, none, scenario, alone)
        write_figure(fig, plot)
    if as_json:
        out.print_json(data=jsonable(doc))
    else:
        out.print(_table([row], f"{scenario}: {scenarios.SCENARIOS[scenario][0]}"))


@writeback_app.command("compare")
@user_errors
def compare_cmd(scenario: Annotated[str, typer.Option(
                    "--scenarios", help=f"all, or some of {', '.join(scenarios.SCENARIOS)}, "
                                        "comma-separated.")] = "all",
                controller: Annotated[str, typer.Option(
                    "--controllers", help=f"all, or some of "
                                          f"{', '.join(controllers.CONTROLLERS)}, "
                                          "comma-separated.")] = "all",
                seed: Seed = 1, duration: Duration = None, as_json: Json = False,
                out_file: Out = None) -> None:
    """Every controller on every scenario: reader and writer throughput, the readers' gain
    against no control, and how often the page daemon ran."""
    names = scenarios.parse(scenario, scenarios.SCENARIOS, "scenario", "--scenarios")
    ctls = scenarios.parse(controller, controllers.CONTROLLERS, "controller",
                           "--controllers")
    seconds = _duration(duration)
    _writable("--out", out_file)
    rows = scenarios.compare(names, ctls, seed, seconds,
                             progress=lambda s, c: err.print(f"[dim]{s}: {c}[/]",
                                                             highlight=False))
    doc = {"seed": seed, "rows": [r.record() for r in rows]}
    if out_file is not None:
        write_json(out_file, doc)
    if as_json:
        out.print_json(data=jsonable(doc))
    else:
        out.print(_table(rows, f"write congestion, seed {seed}"))


def _table(rows: list[scenarios.Row], title: str) -> Table:
    t = Table("scenario", "control", "reads/s", "vs none", "vs alone", "pages/s", "sleep s",
              "daemon", "daemon s", "max dirty", title=title,
              caption="reads/s: all readers; vs none: their gain against no control; vs "
                      "alone: their loss against no writer; pages/s: dirtied by all "
                      "writers; sleep s: sleep commanded, summed over writers; daemon: page-daemon "
                      "activations")
    for r in rows:
        s = r.run.summary()
        t.add_row(r.scenario, s["controller"], f"{s['reader_tps']:.1f}",
                  f"{r.reader_gain:+.1%}", f"{r.reader_loss:.1%}", f"{s['writer_pps']:,.0f}",
                  f"{s['writer_sleep_s']:.1f}", f"{s['daemon_activations']}",
                  f"{s['daemon_s']:.1f}", f"{s['max_dirty']:,.0f}")
    return t

