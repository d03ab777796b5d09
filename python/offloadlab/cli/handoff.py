"""``offload handoff``: seed 004's connection handoff in the packet-level simulator —
one experiment from a TOML file, the paper's experiment matrix, the model's defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.table import Table

from offloadlab.cli.common import app, err, out, user_errors
from offloadlab.errors import InputError
from offloadlab.handoff import checks
from offloadlab.handoff import run as handoff
from offloadlab.report import handoff as figures
from offloadlab.results import write_atomic, write_json

handoff_app = typer.Typer(
    help="Connection handoff to an offload NIC (seed 004): packet-level simulation of "
         "its policies.", no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(handoff_app, name="handoff")

OutDir = Annotated[Path, typer.Option(
    "--out", help="Folder for results.csv, checks.csv, series.parquet, summary.json and "
                  "the figures (created; files in it are replaced).")]


@handoff_app.command("sim")
@user_errors
def sim_cmd(config: Annotated[Path, typer.Argument(help="Experiment TOML (see docs/handoff.md).")],
            out_dir: OutDir = Path("handoff")) -> None:
    """Run the configurations a TOML file lists, calibrated on W-0 unless it says not to."""
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
               seed: Annotated[int, typer.Option(min=0)] = 0) -> None:
    """Reference 004 §7.2's matrix: Table 1, Figures 5-8, checked against the paper."""
    setups = [handoff.parse_setup(s) for s in handoff.matrix(quick)]
    _run(setups, handoff.Settings(connections=connections, seed=seed), True, out_dir)


@handoff_app.command("defaults")
@user_errors
def defaults_cmd() -> None:
    """The model's settings and their defaults (override them in an experiment TOML)."""
    t = Table("setting", "default")
    for k, v in handoff.defaults().items():
        t.add_row(k, f"{v:g}")
    out.print(t)


def _run(setups, settings, calibrate, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)

    def say(msg: str) -> None:
        err.print(f"[dim]{msg}[/]", highlight=False)

    if calibrate:
        settings = handoff.calibrate(settings, progress=say)
    results, series = handoff.run_all(setups, settings, progress=say)
    verdicts = checks.evaluate(results)
    table = figures.table(results)
    write_atomic(out_dir / "results.csv", lambda p: results.to_csv(p, index=False))
    write_atomic(out_dir / "checks.csv", lambda p: verdicts.to_csv(p, index=False))
    long = pd.concat([s.assign(setup=k) for k, s in series.items()], ignore_index=True)
    write_atomic(out_dir / "series.parquet", lambda p: long.to_parquet(p, index=False))
    written = figures.figures(results, series, out_dir, hiwat=settings.watermarks.hiwat)
    write_json(out_dir / "summary.json", {
        "settings": settings.values, "watermarks": settings.watermarks.as_tuple(),
        "connections": settings.connections, "seed": settings.seed, "calibrated": calibrate,
        "checks": verdicts.to_dict("records"), "figures": [p.name for p in written]})
    _print(table, verdicts)
    out.print(f"wrote {out_dir}/: results.csv, checks.csv, series.parquet, summary.json and "
              f"{len(written)} figures")


def _print(table: pd.DataFrame, verdicts: pd.DataFrame) -> None:
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
