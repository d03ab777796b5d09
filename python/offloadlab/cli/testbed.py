"""``offload testbed run``: the same generated load against the server in each mode, one
after the other, with a table to compare them by (latency, throughput, and host and
engine CPU per request)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Column, Table

from offloadlab.cli.common import app, err, flag_time, out, user_errors
from offloadlab.cli.load import load_progress
from offloadlab.cli.options import HOST_PROFILE_HELP, SERVER, LoadFlags, ServerFlags, grouped
from offloadlab.errors import InputError, RunError
from offloadlab.results import write_json
from offloadlab.units import ms, us

testbed_app = typer.Typer(
    help="The testbed: the server in its modes under real HTTP load.",
    no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(testbed_app, name="testbed")


@dataclass(frozen=True)
class ModeLoad(LoadFlags):
    """The load each mode gets in turn."""

    duration: Annotated[str, typer.Option(help="Length of the load in each mode.")] = "5s"


MODE_LOAD = ModeLoad()


@testbed_app.command("run")
@user_errors
@grouped
def run_cmd(
    fileset_dir: Annotated[Path, typer.Option(
        "--fileset", help="The file set to serve and request (offload workload fileset).")],
    modes: Annotated[str, typer.Option(
        "--mode", help="Modes to run in turn, comma-separated: inline, engine, uring, "
                       "handoff or handoff:POLICY (e.g. handoff:P-L-FCFS, handoff:N-N-FCFS).")
    ] = "inline,engine",
    shape: ModeLoad = MODE_LOAD,
    seed: Annotated[int, typer.Option(help="Seed of the stream and of the --work draws.")] = 1,
    server_flags: ServerFlags = SERVER,
    threads: Annotated[int | None, typer.Option(
        help="Load generator threads (default: one per core).")] = None,
    timeout: Annotated[str, typer.Option(help="Per-request timeout.")] = "5s",
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Write every mode's results to this file (atomically).")] = None,
    host_profile: Annotated[str, typer.Option(help=HOST_PROFILE_HELP)] = "modern",
) -> None:
    """Serve a file set in each mode in turn under the same load and compare them."""
    from offloadlab.testbed import host_profile as profiles
    from offloadlab.testbed import modes as testbed_modes
    from offloadlab.testbed.server import ServerOptions
    from offloadlab.workload import fileset

    names = parse_modes(modes)
    if (shape.rate is None) == (shape.clients is None):
        raise InputError("give one of --rate R (open loop) or --clients N (closed loop)")
    host = profiles.named(host_profile)
    options = ServerOptions(root=fileset_dir, seed=seed, **server_flags.options())
    testbed_modes.check_modes(options, names)
    manifest = fileset.read_manifest(fileset_dir)
    requests, load_options = shape.generate(manifest, seed)
    load_options |= dict(threads=threads, timeout_s=flag_time("--timeout", timeout))
    with host.hosting() as namespace:
        options = host.server(options, namespace and namespace.name)
        runs, entries = _run_modes(options, names, requests, manifest, load_options)
    if runs:
        out.print(modes_table(runs, f"testbed on {fileset_dir} ({host.name} host): "
                                     f"{shape.describe()}, {shape.duration} per mode"))
    if json_out is not None:
        write_json(json_out, {"fileset": str(fileset_dir), "host_profile": host.name,
                              "stream": requests.describe(), "modes": entries})
    if len(runs) < len(names):
        raise typer.Exit(1)


def _run_modes(options, names: list[str], requests, manifest, load_options: dict):
    """Each mode in turn; a failed one is reported and the others still run. The runs,
    and one JSON entry per mode."""
    from offloadlab.testbed import modes as testbed_modes

    runs, entries = [], []
    for name in names:
        try:
            with load_progress(len(requests), name) as progress:
                run = testbed_modes.run_mode(testbed_modes.with_mode(options, name), requests,
                                             manifest, progress=progress, name=name,
                                             **load_options)
        except RunError as exc:  # the other modes still run; the exit code says it
            err.print(f"[bold red]{name} failed:[/] {escape(str(exc))}")
            entries.append({"mode": name, "error": str(exc)})
            continue
        err.print(f"{name}: {run.stats.requests:,} requests served", highlight=False)
        runs.append(run)
        entries.append(run.to_json())
    return runs, entries


def parse_modes(text: str) -> list[str]:
    from offloadlab.testbed.server import MODES

    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m.partition(":")[0] not in MODES]
    if not names or bad:
        raise InputError(f"--mode {text!r}: give modes from {', '.join(MODES)}, "
                         "comma-separated, e.g. inline,engine,handoff:P-L-FCFS")
    return names


def modes_table(runs, title: str) -> Table:
    """One row per mode: what the client saw and what the server spent."""
    table = Table(Column("mode", no_wrap=True), "req/s", "p50 ms", "p99 ms", "errors",
                  "host µs", "engine µs", "cmds", "batch", title=title,
                  caption="req/s: responses completed per second; host, engine µs: CPU "
                          "per request; cmds: host → engine commands per request; batch: "
                          "mean commands per batch")
    for run in runs:
        s = run.summary()
        table.add_row(s["mode"], _number(s["throughput"], ",.0f"), ms(s["p50_s"]), ms(s["p99_s"]),
                      f"{s['failed']:,}", us(s["host_cpu_s"]), us(s["engine_cpu_s"]),
                      _number(s["commands"], ".3g"), _number(s["batch_mean"], ".3g"))
    return table


def _number(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)
