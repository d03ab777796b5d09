"""The commands that weigh the model's evidence: ``model``, ``sim`` and ``sweep``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.markup import escape

from offloadlab import scenario
from offloadlab.cli.common import app, err, note, out, print_error, user_errors
from offloadlab.errors import InputError
from offloadlab.results import Result, figure_format, write_json
from offloadlab.units import parse_range

_PLOT_POINTS = 200


def parse_rates(text: str) -> np.ndarray:
    """``START:STOP:STEP`` (STOP included) or a comma list, in total requests/s."""
    if ":" in text:
        try:
            numbers = parse_range(text)
        except InputError as exc:
            raise InputError(f"--rates {exc}") from None
    else:
        try:
            numbers = [float(p) for p in text.split(",")]
        except ValueError:
            raise InputError(f"--rates '{text}': write START:STOP:STEP (e.g. 10:300:10) "
                             "or a list (e.g. 25,50,75)") from None
    if not all(np.isfinite(numbers)) or min(numbers) < 0:
        raise InputError(f"--rates '{text}': rates must be finite and >= 0 requests/s")
    return np.asarray(numbers)


def _plot_rates(sc: scenario.Scenario) -> np.ndarray:
    """A sweep from 0 to a little past the later of the two saturation points."""
    from offloadlab import model

    o = model.evaluate(sc).overall
    stars = [o["lam_star_noe"][0], min(o["lam_star_cpu"][0], o["lam_star_oe"][0])]
    top = 1.1 * max((s for s in stars if np.isfinite(s)), default=sc.rate * 2)
    return np.linspace(0.0, top, _PLOT_POINTS)


def _show(result: Result, table, as_json: bool, out_file: Path | None) -> None:
    """Print a result as JSON or as ``table(result)``, its notes to stderr, and write the
    JSON to ``out_file`` if given."""
    if as_json:
        print(json.dumps(result.to_json(), indent=2, allow_nan=False))
    else:
        out.print(table(result))
    for text in result.notes:
        note(text)
    if out_file is not None:
        write_json(out_file, result.to_json())


# Arguments and options that several commands share.
ScenarioFile = Annotated[Path, typer.Argument(metavar="SCENARIO", help="Scenario TOML file.")]
Rates = Annotated[str | None, typer.Option(
    help="Total arrival rates: START:STOP:STEP (stop included) or a list a,b,c; classes "
         "keep their share. Default: the scenario's own rates.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print results as JSON.")]
JsonOut = Annotated[Path | None, typer.Option(
    "--out", help="Also write the JSON results to this file (atomically).")]
EngineFile = Annotated[Path | None, typer.Option(
    "--engine-profile", help="Engine profile TOML ([engine] speed, message_cost, cores, shared, "
                     "on_host; examples/engines has some): solve with that engine.")]
EngineSpeed = Annotated[float | None, typer.Option(
    help="Engine speed relative to a host core (0.25: four times slower); overrides the "
         "profile's.")]
EngineMessageCost = Annotated[str | None, typer.Option(
    help="Extra engine time per message across the host-engine interface, e.g. 2us; "
         "overrides the profile's.")]


@app.command("model")
@user_errors
def model_cmd(
    scenario_file: ScenarioFile,
    rates: Rates = None,
    as_json: AsJson = False,
    as_table: Annotated[bool, typer.Option("--table", help="Print a table (the default).")
                        ] = False,
    out_file: JsonOut = None,
    plot: Annotated[Path | None, typer.Option(
        help="Write a figure (PNG, SVG or PDF) of utilisation and delay against rate; "
             "without --rates it sweeps up to past saturation.")] = None,
    engine: EngineFile = None,
    engine_speed: EngineSpeed = None,
    engine_message_cost: EngineMessageCost = None,
    rate: Annotated[float | None, typer.Option(
        help="Total requests/s the bottom line answers at, the classes at their shares "
             "(default: the scenario's own).")] = None,
    capacity_error: Annotated[float, typer.Option(
        help="How far off the scenario's capacities may be, as a fraction (0.05: ±5%, "
             "e.g. its saturation error against a measurement): the bottom line gives "
             "the break-even speed's range over it.")] = 0.0,
) -> None:
    """Solve the queueing model: host alone (M/G/1) against host + offload engine. With an
    engine profile, solve it with that engine and print the bottom line: host cores
    saved, the rate from which offload pays and the break-even engine speed."""
    from offloadlab import engine_profile, model
    from offloadlab.model import answer
    from offloadlab.report.plots import plot_model
    from offloadlab.report.tables import bottom_line_table, model_table

    if as_json and as_table:
        raise InputError("--json and --table exclude each other; pick one")
    if plot is not None:
        figure_format(plot)
    sc = scenario.load(scenario_file)
    profile = engine_profile.from_flags(engine, engine_speed, engine_message_cost)
    measured = sc
    if profile is not None:
        sc = profile.apply(sc)
    rate_points = None if rates is None else parse_rates(rates)
    result = model.evaluate(sc, rate_points)
    if rate is not None and not (np.isfinite(rate) and rate > 0):
        raise InputError(f"--rate {rate}: give the total requests/s the bottom line "
                         "answers at, > 0")
    if rate is not None and profile is None:
        raise InputError("--rate sets where the bottom line answers; give an engine with "
                         "--engine-profile, --engine-speed or --engine-message-cost too")
    if not 0 <= capacity_error < 1:
        raise InputError(f"--capacity-error {capacity_error}: give a fraction in [0, 1), "
                         "e.g. 0.05 for ±5%")
    if profile is not None:
        names = [c.name for c in measured.classes]
        bottom = answer.answers(measured, profile, rate,
                                dict.fromkeys([*names, answer.MIX], capacity_error))
        result.meta["engine"] = profile.to_table()
        result.meta["bottom_line"] = [vars(a) for a in bottom]
    _show(result, model_table, as_json, out_file)
    if profile is not None and not as_json:
        out.print(bottom_line_table(bottom, profile.describe()))
        if profile.source:
            out.print(f"the engine's numbers: {profile.source}", markup=False,
                      highlight=False)
    if plot is not None:
        swept = result if rates is not None else model.evaluate(sc, _plot_rates(sc))
        plot_model(swept, plot)
        err.print(f"figure written to {escape(str(plot))}")


@app.command("sim")
@user_errors
def sim_cmd(
    scenario_file: ScenarioFile,
    rates: Rates = None,
    requests: Annotated[int, typer.Option(
        help="Requests measured per replication and rate, after the warm-up (the most "
             "it may use with --ci).")] = 200_000,
    seed: Annotated[int, typer.Option(help="Seed; the same seed gives the same result.")] = 1,
    replications: Annotated[int, typer.Option(
        help="Independent replications (confidence intervals across them); 1 uses "
             "batch means.")] = 1,
    warmup: Annotated[str, typer.Option(
        help='Requests to discard first: "mser5" (detected) or a number.')] = "mser5",
    ci: Annotated[float | None, typer.Option(
        help="Stop once the 95% half-width of --ci-metric is within this fraction of "
             "its estimate, e.g. 0.01 (batch means, one replication).")] = None,
    ci_metric: Annotated[str, typer.Option(
        help="Metric (all classes) that --ci watches.")] = "T",
    batches: Annotated[int, typer.Option(
        help="Batches for batch means (one replication).")] = 20,
    threads: Annotated[int | None, typer.Option(
        help="Threads for replications (default: one per CPU).")] = None,
    as_json: AsJson = False,
    out_file: JsonOut = None,
) -> None:
    """Simulate the scenario: host alone against host + engine, with confidence intervals."""
    from rich.progress import BarColumn, Progress, TimeElapsedColumn

    from offloadlab import sim
    from offloadlab.report.tables import sim_table

    sc = scenario.load(scenario_file)
    rate_points = None if rates is None else parse_rates(rates)
    if warmup != "mser5" and not warmup.isdigit():
        raise InputError(f'--warmup {warmup!r}: write "mser5" or a number of requests, e.g. 10000')
    columns = ("simulating", BarColumn(), "{task.completed:,.0f} requests", TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("sim", total=None)
        result = sim.run(sc, rates=rate_points, requests=requests, seed=seed,
                         replications=replications,
                         warmup=warmup if warmup == "mser5" else int(warmup), ci=ci,
                         ci_metric=ci_metric, batches=batches, threads=threads,
                         progress=lambda done, planned: bar.update(task, completed=done,
                                                                    total=planned))
    _show(result, sim_table, as_json, out_file)


def example_files() -> list[Path]:
    """The scenario files shipped with the package (also at ``examples/`` in the source tree)."""
    folder = resources.files("offloadlab") / "examples"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml"))


@app.command("sweep")
@user_errors
def sweep_cmd(
    grid_file: Annotated[Path, typer.Argument(metavar="GRID",
                                              help="Grid TOML file (see docs/sweep.md).")],
    workers: Annotated[int | None, typer.Option(
        min=1, help="Local processes (default: one per CPU; 1 runs in this process).")] = None,
    cluster: Annotated[str | None, typer.Option(
        metavar="tcp://HOST:PORT", help="Run on this Dask distributed scheduler instead "
                                        "of local processes.")] = None,
    out_file: Annotated[Path | None, typer.Option(
        "--out", help="Write every row to this Parquet file (atomically).")] = None,
) -> None:
    """Evaluate a grid of scenario variants with the model and/or the simulator."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from offloadlab import sweep  # pandas and pyarrow load only for this command

    grid = sweep.load_grid(grid_file)
    if out_file is not None and not out_file.parent.is_dir():
        raise InputError(f"--out {out_file}: folder {out_file.parent} does not exist")
    columns = ("sweep", BarColumn(), MofNCompleteColumn(), "points", TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("sweep", total=grid.size)
        try:
            frame = sweep.run(grid, workers=workers, cluster=cluster,
                              progress=lambda done, _: bar.update(task, completed=done))
        except sweep.SweepError as exc:
            print_error(exc)
            raise typer.Exit(1) from None
    if out_file is None:
        out.print(sweep.summary_table(frame))
        err.print(f"{len(frame):,} rows in all (one per point, source and class); "
                  "write them to Parquet with --out results.parquet")
    else:
        sweep.write(frame, out_file)
        err.print(f"{len(frame):,} rows written to {escape(str(out_file))}")
