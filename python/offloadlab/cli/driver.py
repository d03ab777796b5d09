"""``offload driver``: seed 002's model of a polling (NAPI) device driver's receive path
(:mod:`offloadlab.model.polling`): solve it, check it on the thesis's six CPU tables,
and set it beside the testbed engine's two wait strategies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from offloadlab.cli.common import app, err, flag_time, out, user_errors, write_experiment
from offloadlab.errors import InputError
from offloadlab.model import polling
from offloadlab.results import jsonable
from offloadlab.units import ms, parse_bytes, us

driver_app = typer.Typer(
    help="Seed 002's receive path of a polling device driver: NIC FIFO, bus, polling "
         "loop and CPU.", no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(driver_app, name="driver")

AsJson = Annotated[bool, typer.Option("--json", help="Print results as JSON.")]
DEFAULT = polling.Driver()


@driver_app.command("solve")
@user_errors
def solve_cmd(
    rates: Annotated[str, typer.Option(help="Offered line rates in Mb/s, comma-separated.")
                     ] = "100,200,400,800",
    size: Annotated[str, typer.Option(help="Packet size, e.g. 64 or 1400.")] = "64",
    rx_fifo: Annotated[str, typer.Option(help="The NIC's receive FIFO.")] = "32KiB",
    tx_fifo: Annotated[str, typer.Option(help="The transmit queue sharing the bus.")
                       ] = "32KiB",
    ring: Annotated[int, typer.Option(help="Receive descriptors (ring entries).")
                    ] = DEFAULT.ring,
    bulk_cap: Annotated[int, typer.Option(help="Most packets one poll takes (NAPI weight).")
                        ] = DEFAULT.bulk_cap,
    t_int: Annotated[str, typer.Option(help="CPU cost of an interrupt or a poll.")
                     ] = f"{DEFAULT.t_int * 1e6:g}us",
    t_pkt: Annotated[str, typer.Option(help="CPU work per packet.")
                     ] = f"{DEFAULT.t_pkt * 1e6:g}us",
    wait: Annotated[str, typer.Option(help="interrupt (NAPI) or poll (busy-poll).")
                    ] = DEFAULT.wait,
    bulk: Annotated[str, typer.Option(help="Bulk sizes: constant or rayleigh.")
                    ] = DEFAULT.bulk,
    bus: Annotated[str, typer.Option(help="Bus model: thesis (Erlang) or ps "
                                          "(processor sharing).")] = DEFAULT.bus,
    bus_width: Annotated[int, typer.Option(help="Bus width in bits.")
                         ] = DEFAULT.bus_width_bits,
    bus_mhz: Annotated[float, typer.Option(help="Bus clock in MHz.")] = DEFAULT.bus_hz / 1e6,
    as_json: AsJson = False,
) -> None:
    """CPU utilisation, interrupts, latency and loss against the offered rate."""
    mbps = _rates(rates)
    size_bytes = parse_bytes(size, "--size")
    if not (np.isfinite(bus_mhz) and bus_mhz > 0):
        raise InputError(f"--bus-mhz {bus_mhz:g}: use a clock > 0 MHz, e.g. 66")
    driver = polling.Driver(
        rx_fifo_bytes=parse_bytes(rx_fifo, "--rx-fifo"),
        tx_fifo_bytes=parse_bytes(tx_fifo, "--tx-fifo"), ring=ring, bulk_cap=bulk_cap,
        bus_width_bits=bus_width, bus_hz=bus_mhz * 1e6, t_int=flag_time("--t-int", t_int),
        t_pkt=flag_time("--t-pkt", t_pkt), bus=bus, bulk=bulk, wait=wait)
    _check_driver(driver)
    if size_bytes < 1 or size_bytes > driver.rx_fifo_bytes:
        raise InputError(f"--size {size}: use a packet of 1 byte up to the --rx-fifo "
                         f"({driver.rx_fifo_bytes} bytes)")
    solved = polling.solve(driver, polling.packet_rate(mbps * 1e6, size_bytes), size_bytes)
    rows = [{"rate_mbps": float(r), **row} for r, row in zip(mbps, solved.rows(), strict=True)]
    if as_json:
        print(json.dumps(jsonable({"driver": driver.__dict__, "size_bytes": size_bytes,
                                   "points": rows}), indent=2, allow_nan=False))
        return
    t = Table("Mb/s", "packets/s", "CPU", "busy", "interrupts/s", "bulk", "queue",
              "latency µs", "loss", title=f"{size_bytes}-byte packets, {wait} wait, ring "
                                          f"{ring}, bulk cap {bulk_cap}")
    for r in rows:
        t.add_row(f"{r['rate_mbps']:g}", f"{r['lam']:,.0f}", f"{r['cpu']:.1%}",
                  f"{r['busy']:.1%}", f"{r['interrupts_s']:,.0f}", f"{r['bulk_mean']:.2f}",
                  f"{r['queue']:.2f}", us(r["latency_s"]), f"{r['loss']:.2%}")
    out.print(t)


@driver_app.command("tables")
@user_errors
def tables_cmd(
    as_published: Annotated[bool, typer.Option(
        "--as-published", help="Keep Table 3.5's 512 and 1400-byte rows as printed "
                               "(the thesis swapped them).")] = False,
    modes: Annotated[str, typer.Option(
        help="Which fit to report: curve (t_int, t_pkt and a p_int-versus-rate curve "
             "shared by all tables) or mode (t_int and t_pkt, p_int = 1 - CPU).")
                     ] = "curve",
    cross_validate: Annotated[bool, typer.Option(
        "--cross-validate/--no-cross-validate",
        help="Also fit on five tables and score the sixth, for each table (about six "
             "more fits).")] = True,
    as_json: AsJson = False,
) -> None:
    """The thesis's six CPU tables: measured, the thesis's model and this model with its
    unpublished parameters fitted by least squares over all 72 cells."""
    from offloadlab.model import driver_tables

    if modes not in ("curve", "mode"):
        raise InputError(f"--modes {modes!r}: use curve or mode")
    unswap = not as_published
    fits = {"mode": driver_tables.fit_tables(unswap=unswap),
            "curve": driver_tables.fit_curve(unswap=unswap)}
    fitted = fits[modes]
    cv = driver_tables.cross_validate(unswap=unswap, curve=modes == "curve") \
        if cross_validate else None
    if as_json:
        print(json.dumps(jsonable({
            **fitted.summary(), "thesis_mae_pp": fitted.thesis_mae_pp,
            "fits": {k: f.summary() for k, f in fits.items()},
            "cross_validation": None if cv is None else {
                "mae_pp": float(cv["mae_pp"].iloc[-1]), "tables": cv.to_dict("records")},
            "errors": fitted.errors.to_dict("records"),
            "cells": fitted.cells.assign(mode_model=fits["mode"].cells["model"],
                                         curve_model=fits["curve"].cells["model"])
            .to_dict("records")}), indent=2, allow_nan=False))
        return
    for name, group in fitted.cells.groupby("table"):
        fifo, ring = driver_tables.TABLE_SETUP[name]
        t = Table("Mb/s", "packet", "measured", "thesis model", "mode model", "curve model",
                  title=f"Table {name}: rxFIFO {fifo} KiB, {ring} descriptors")
        for i, r in zip(group.index, group.to_dict("records"), strict=True):
            t.add_row(f"{r['rate_mbps']}", f"{r['size']} B", f"{r['measured']:.0%}",
                      f"{r['thesis_model']:.0%}", f"{fits['mode'].cells['model'][i]:.0%}",
                      f"{fits['curve'].cells['model'][i]:.0%}")
        out.print(t)
    e = Table("table", "MAE pp", "max pp", "within 5 pp", "within 20%", "thesis MAE pp",
              "thesis max pp", "thesis within 20%",
              title=f"{modes} model: errors against the measurements (percentage points)")
    for r in fitted.errors.to_dict("records"):
        e.add_row(str(r["table"]), f"{r['mae_pp']:.2f}", f"{r['max_pp']:.1f}",
                  f"{r['within_5pp']:.0%}", f"{r['within_20pct']:.0%}",
                  f"{r['thesis_mae_pp']:.2f}", f"{r['thesis_max_pp']:.0f}",
                  f"{r['thesis_within_20pct']:.0%}")
    out.print(e)
    if cv is not None:
        c = Table("held out", "MAE pp", "max pp", "within 5 pp", "within 20%",
                  title=f"{modes} model, leave one table out: fitted on the other five")
        for r in cv.to_dict("records"):
            c.add_row(str(r["table"]), f"{r['mae_pp']:.2f}", f"{r['max_pp']:.1f}",
                      f"{r['within_5pp']:.0%}", f"{r['within_20pct']:.0%}")
        out.print(c)
    for kind, f in fits.items():
        curve = "p_int = 1 - CPU" if f.modes is None else (
            f"p_int = 1/(1 + (λ/{f.modes.lam0:,.0f} pps)^{f.modes.k:.2f})")
        out.print(f"{kind} model: t_int {us(f.t_int)} µs, t_pkt {us(f.t_pkt)} µs, {curve}; "
                  f"MAE {f.mae_pp:.2f} pp, max {f.max_pp:.1f} pp, {f.within_5pp:.0%} within "
                  f"5 pp, {f.within_20pct:.0%} within 20%", highlight=False)
    if cv is not None:
        out.print(f"leave-one-table-out MAE of the {modes} model: {cv['mae_pp'].iloc[-1]:.2f} "
                  "pp", highlight=False)
    out.print("A calibrated regression: the fitted parameters are chosen to match these "
              "72 cells.", highlight=False)


@driver_app.command("testbed")
@user_errors
def testbed_cmd(
    rates: Annotated[str, typer.Option(help="Request rates, comma-separated.")
                     ] = "500,2000,8000",
    run_length: Annotated[str, typer.Option(help="Length of each run.")] = "2s",
    repeats: Annotated[int, typer.Option(help="Interleaved runs per strategy and rate.")
                       ] = 1,
    keep_alive: Annotated[int, typer.Option(help="Requests per connection.")] = 20,
    fileset_dir: Annotated[Path | None, typer.Option(
        "--fileset", help="The file set to serve; default: a small one written under "
                          "--out/fileset.")] = None,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder for runs.csv, compare.csv and summary.json (created; files "
                      "in it are replaced).")] = Path("driver-testbed"),
    seed: Annotated[int, typer.Option(help="Seed of the request stream.")] = 1,
) -> None:
    """The engine's busy polling against its adaptive spin-then-sleep, at a few request
    rates, with seed 002's model fitted to both."""
    from offloadlab.experiments import wait as testbed_wait
    from offloadlab.testbed import cores
    from offloadlab.workload import fileset
    from offloadlab.workload.specs import FileSetSpec

    chosen = _rates(rates)
    run_s = flag_time("--run-length", run_length)
    if run_s <= 0:
        raise InputError(f"--run-length {run_length}: use a time > 0, e.g. 2s")
    if repeats < 1:
        raise InputError(f"--repeats {repeats}: use 1 or more")
    if keep_alive < 1:
        raise InputError(f"--keep-alive {keep_alive}: use 1 or more requests per connection")
    if fileset_dir is not None and not (fileset_dir / "fileset.json").is_file():
        raise InputError(f"--fileset {fileset_dir}: not a file set (no fileset.json); write "
                         "one with 'offload workload fileset' or leave it out")
    host, engine = cores.choose()
    root = fileset_dir or out_dir / "fileset"
    exp = testbed_wait.Experiment(root=root, rates=tuple(float(r) for r in chosen),
                                  keep_alive=keep_alive, repeats=repeats, run_s=run_s,
                                  host_core=host, engine_core=engine, seed=seed)
    if fileset_dir is None:
        out_dir.mkdir(parents=True, exist_ok=True)
        if not (root / "fileset.json").exists():
            err.print("writing a small file set …")
            fileset.materialise(fileset.generate(FileSetSpec(
                name="driver", n_files=20, max_bytes=20_000, seed=seed)), root)
    exp.check()
    out_dir.mkdir(parents=True, exist_ok=True)
    result = testbed_wait.run(exp, progress=_say_run)
    fitted, table = result.fitted, result.compared()
    write_experiment(out_dir, exp, result)
    t = Table("wait", "req/s", "CPU", "model", "busy", "model", "idle poll",
              title="engine CPU (share of a core), measured and modelled")
    for r in table.to_dict("records"):
        t.add_row(r["strategy"], f"{r['served']:,.0f}", f"{r['cpu']:.1%}",
                  f"{r['model_cpu']:.1%}", f"{r['busy']:.1%}", f"{r['model_busy']:.1%}",
                  f"{r['idle_poll']:.1%}")
    out.print(t)
    lat = Table("wait", "req/s", "mean ms", "p50 ms", "p99 ms", "model µs", "Δmean ms",
                "Δp50 ms", "Δmodel ms",
                title="latency: measured (HTTP, end to end) and modelled (the engine's "
                      "part); Δ: less busy polling's at the same rate")
    for r in table.to_dict("records"):
        lat.add_row(r["strategy"], f"{r['served']:,.0f}", ms(r["mean_s"]), ms(r["p50_s"]),
                    ms(r["p99_s"]), us(r["model_latency_s"]), _signed_ms(r["mean_vs_poll_s"]),
                    _signed_ms(r["p50_vs_poll_s"]), _signed_ms(r["model_vs_poll_s"]))
    out.print(lat)
    out.print("model µs: the time a request spends in the engine by the model (wake-up, "
              "queueing, work). The measured latency also holds the host, the sockets, "
              "the load generator and the scheduler, which the model leaves out.",
              highlight=False)
    out.print(f"fitted t_int {us(fitted.t_int)} µs per wake-up ({us(fitted.t_wake)} µs of it "
              f"counted busy), t_pkt {us(fitted.t_pkt)} µs per request (rms {fitted.rms:.3f} "
              f"of a core); results in {out_dir}",
              highlight=False, markup=False)


def _signed_ms(seconds: float) -> str:
    return "–" if not np.isfinite(seconds) else f"{seconds * 1e3:+.3f}"


def _rates(text: str) -> np.ndarray:
    try:
        values = np.array([float(r) for r in text.split(",")])
    except ValueError:
        values = np.array([])
    if not (values.size and np.all(np.isfinite(values) & (values > 0))):
        raise InputError(f"--rates {text!r}: give rates > 0, comma-separated, e.g. "
                         "100,200,400,800")
    return values


def _check_driver(driver: polling.Driver) -> None:
    """The model's checks, told in the options' names."""
    flags = {"rx_fifo_bytes": "--rx-fifo", "tx_fifo_bytes": "--tx-fifo", "ring": "--ring",
             "bulk_cap": "--bulk-cap", "bus_width_bits": "--bus-width", "t_int": "--t-int",
             "t_pkt": "--t-pkt", "bus": "--bus", "bulk": "--bulk", "wait": "--wait"}
    try:
        driver.check()
    except InputError as exc:
        text = str(exc)
        field = text.split("=", 1)[0]
        raise InputError(text.replace(field, flags.get(field, field), 1)) from None


def _say_run(name: str, done: int, total: int) -> None:
    if name:
        err.print(f"[dim]run {done + 1}/{total}: {name}[/]", highlight=False)
