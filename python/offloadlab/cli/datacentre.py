"""``offload datacentre``: seed 003's multi-tier data centre on the closed-network model
(:mod:`offloadlab.model.tiers`) — one data centre solved, or the paper's studies
repeated and checked by trend (:mod:`offloadlab.datacentre.studies`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from offloadlab.cli.common import (
    app,
    err,
    flag_time,
    out,
    user_errors,
    write_experiment,
    write_folder,
)
from offloadlab.errors import InputError
from offloadlab.units import format_bytes, parse_bytes

if TYPE_CHECKING:
    from offloadlab.model import tiers

datacentre_app = typer.Typer(
    help="Seed 003's multi-tier data centre (proxies, web servers, database, disks, "
         "network) as a closed queueing network.", no_args_is_help=True,
    rich_markup_mode="rich")
app.add_typer(datacentre_app, name="datacentre")

File = Annotated[Path | None, typer.Argument(
    help="Data-centre TOML (docs/datacentre.md); without it, seed 003's layout.")]


# Options of the testbed experiments that compare set-ups in interleaved rounds
# (offloadlab.testbed.modes.Rounds).
Clients = Annotated[int, typer.Option(min=1, help="Closed-loop keep-alive clients.")]
RunLength = Annotated[str, typer.Option(help="Length of each run.")]
Repeats = Annotated[int, typer.Option(min=1, help="Interleaved runs per set-up.")]
Seed = Annotated[int, typer.Option(min=0)]


@datacentre_app.command("solve")
@user_errors
def solve_cmd(file: File = None,
              out_dir: Annotated[Path | None, typer.Option(
                  "--out", help="Also write stations.csv and summary.json here.")] = None,
              check_sim: Annotated[bool, typer.Option(
                  "--sim", help="Also simulate the same network and show both.")] = False,
              requests: Annotated[int, typer.Option(
                  min=1000, help="Completions the --sim run measures.")] = 200_000) -> None:
    """Throughput, response time, cache hit ratios and the busiest stations, by MVA."""
    import pandas as pd

    from offloadlab.datacentre import config
    from offloadlab.model import tiers
    from offloadlab.sim import closed

    dc = config.load(file)
    solved = tiers.solve(dc)
    simulated = None
    if check_sim:
        err.print(f"simulating {requests:,} requests …")
        simulated = closed.simulate(solved.net, requests=requests)
    out.print(_sites(dc, solved, simulated))
    out.print(_stations(solved))
    out.print(f"bottleneck: {solved.bottleneck}", highlight=False)
    if out_dir is not None:
        write_folder(out_dir, {
            "stations.csv": pd.DataFrame(solved.stations()),
            "summary.json": {"sites": _site_rows(dc, solved, simulated),
                             "bottleneck": solved.bottleneck}})


@datacentre_app.command("study")
@user_errors
def study_cmd(preset: Annotated[str, typer.Option(
                  help="all, or some of the studies, comma-separated (docs/datacentre.md; "
                       "a name it does not know lists them).")
              ] = "all",
              file: Annotated[Path | None, typer.Option(
                  "--file", help="Base data centre (TOML); each study varies one thing "
                                 "of it. Default: seed 003's layout.")] = None,
              out_dir: Annotated[Path, typer.Option(
                  "--out", help="Folder for <study>.csv, <study>.png and summary.json "
                                "(created; files in it are replaced).")] = Path("datacentre")
              ) -> None:
    """Seed 003's experiments on the model, each checked against the paper's claim."""
    from offloadlab.datacentre import config, studies
    from offloadlab.report import datacentre as figure
    from offloadlab.results import write_outputs

    names = studies.parse(preset)
    base = config.load(file)
    summary = []
    for i, name in enumerate(names):
        err.print(f"[dim]study {i + 1}/{len(names)}: {name}[/]", highlight=False)
        study = studies.STUDIES[name](base)
        # Each study's files as soon as it is done: the whole set takes a while.
        write_outputs(out_dir, {f"{name}.csv": study.points,
                                f"{name}.png": figure.figure(study)})
        out.print(f"[bold]{study.title}[/]")
        for c in study.checks:
            mark = "[green]reproduced[/]" if c.holds else "[red]not reproduced[/]"
            out.print(f"  {c.claim}: {mark} ({c.detail})", highlight=False)
        summary.append({"study": name, "title": study.title,
                        "checks": [c.__dict__ for c in study.checks]})
    write_outputs(out_dir, {"summary.json": {"studies": summary}})
    held = sum(c["holds"] for s in summary for c in s["checks"])
    total = sum(len(s["checks"]) for s in summary)
    out.print(f"{held} of {total} of the paper's claims reproduced on the model; "
              f"results in {out_dir}", highlight=False, markup=False)


@datacentre_app.command("testbed")
@user_errors
def testbed_cmd(
    classes: Annotated[str, typer.Option(
        help="Seed 003's working-set classes (Table 2: 0 = 25 MB ... 4 = 6 GB), "
             "comma-separated; their file sets are written under --out/filesets.")] = "0,1,2",
    memory_budget: Annotated[str | None, typer.Option(
        help="The most popular files that fit in this much memory go there "
             "[default: 64MiB].")] = None,
    memory_below: Annotated[str | None, typer.Option(
        help="Or: the files under this size (the paper's rule was 1MiB).")] = None,
    mode: Annotated[str, typer.Option(help="The server's mode: inline or engine.")
                    ] = "inline",
    clients: Clients = 32,
    run_length: RunLength = "5s",
    repeats: Repeats = 3,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder for runs.csv, summary.csv, summary.json and hybrid.png "
                      "(created; files in it are replaced).")] = Path("datacentre-testbed"),
    seed: Seed = 1,
) -> None:
    """Seed 003's hybrid placement on the real server: popular files in memory, the rest
    read from disk, against everything from disk, per working-set class."""
    from offloadlab.experiments import hybrid
    from offloadlab.mode_traits import traits
    from offloadlab.study.plan import parse_classes
    from offloadlab.testbed import cores
    from offloadlab.workload import fileset, presets

    chosen = parse_classes(classes)
    if memory_below is None and memory_budget is None:
        memory_budget = "64MiB"
    host, engine = cores.choose()
    out_dir.mkdir(parents=True, exist_ok=True)
    sets = {}
    for c in chosen:
        spec = presets.preset(f"dc-2004-{c + 1}", seed)
        root = out_dir / "filesets" / spec.name
        if not (root / "fileset.json").exists():
            err.print(f"writing {spec.name} ({spec.description}) …", highlight=False)
            fileset.materialise(fileset.generate(spec), root, create_large=True)
        sets[str(c)] = root
    exp = hybrid.Experiment(sets, memory_below=memory_below, memory_budget=memory_budget,
                            mode=mode, clients=clients, run_s=flag_time("--run-length",
                                                                       run_length),
                            repeats=repeats, host_core=host,
                            engine_core=engine if traits(mode).engine_thread else None,
                            seed=seed)
    result = hybrid.run(exp, progress=_say_run)
    table = result.medians()
    write_experiment(out_dir, exp, result)
    t = Table("class", "working set", "in memory", "requests there", "disk req/s",
              "hybrid req/s", "gain", "disk ms", "hybrid ms", title="hybrid placement")
    for r in table.to_dict("records"):
        t.add_row(r["class"], format_bytes(r["working_set_bytes"]),
                  f"{r['memory_files']:,} files, {format_bytes(r['memory_bytes'])}",
                  f"{r['memory_share']:.0%}", f"{r['disk_throughput']:,.0f}",
                  f"{r['hybrid_throughput']:,.0f}", f"{r['gain']:+.0%}",
                  f"{r['disk_mean_ms']:.2f}", f"{r['hybrid_mean_ms']:.2f}")
    out.print(t)
    out.print(f"results in {out_dir}", highlight=False, markup=False)


@datacentre_app.command("tiers")
@user_errors
def tiers_cmd(
    fileset_dir: Annotated[Path | None, typer.Option(
        "--fileset", help="The file set to serve; default: seed 003's class 0 (25 MB), "
                          "written under --out/fileset.")] = None,
    db: Annotated[str | None, typer.Option(
        help="The database tier: a SQLite file or a PostgreSQL URL "
             "(postgresql://user@host:port/db), filled with 'offload workload db'. "
             "Default: SQLite under --out, filled with --rows items.")] = None,
    rows: Annotated[int, typer.Option(min=1, help="Items of the default SQLite table.")
                    ] = 100_000,
    dynamic: Annotated[float, typer.Option(help="Share of requests that are dynamic "
                                                "pages.")] = 0.2,
    queries: Annotated[int, typer.Option(min=0, help="Database queries per dynamic page.")
                       ] = 5,
    work: Annotated[str, typer.Option(help="Application work per dynamic page.")] = "100us",
    cache_size: Annotated[str, typer.Option(help="The proxy tier's cache.")] = "64MiB",
    clients: Clients = 32,
    run_length: RunLength = "5s",
    repeats: Repeats = 3,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder for runs.csv, summary.csv and summary.json (created; files "
                      "in it are replaced).")] = Path("datacentre-tiers"),
    seed: Seed = 1,
) -> None:
    """Seed 003's three tiers on the testbed: the web tier and database alone, then with
    the proxy tier (an object cache) on the host thread, then on the engine."""
    from offloadlab.experiments import multitier
    from offloadlab.testbed import cores
    from offloadlab.workload import fileset, presets

    host, engine = cores.choose()
    work_s = flag_time("--work", work)
    exp = multitier.Experiment(
        root=fileset_dir or out_dir / "fileset", db=db or "", dynamic=dynamic,
        queries=queries, work_us=round(work_s * 1e6), cache_size=cache_size,
        clients=clients, run_s=flag_time("--run-length", run_length), repeats=repeats,
        host_core=host, engine_core=engine, seed=seed)
    exp.check_values()
    out_dir.mkdir(parents=True, exist_ok=True)
    if fileset_dir is None:
        fileset_dir = out_dir / "fileset"
        if not (fileset_dir / "fileset.json").exists():
            err.print("writing seed 003's class 0 file set …")
            fileset.materialise(fileset.generate(presets.preset("dc-2004-1", seed)),
                                fileset_dir)
    if db is None:
        db = str(multitier.default_db(out_dir, rows))
    exp = replace(exp, root=fileset_dir, db=db)
    result = multitier.run(exp, progress=_say_run)
    table = result.medians()
    write_experiment(out_dir, exp, result)
    t = Table("set-up", "req/s", "mean ms", "proxy hits", "host µs/req", "engine µs/req",
              "db queries/req", "µs/query", title=f"three tiers ({exp.db_name()})")
    for r in table.to_dict("records"):
        t.add_row(r["setup"], f"{r['throughput']:,.0f}", f"{r['mean_ms']:.2f}",
                  f"{r['proxy_hit_rate']:.0%}", f"{r['host_cpu_us']:.1f}",
                  f"{r['engine_cpu_us']:.1f}", f"{r['db_queries_per_request']:.2f}",
                  f"{r['db_us_per_query']:.1f}")
    out.print(t)
    out.print(f"results in {out_dir}", highlight=False, markup=False)


@datacentre_app.command("nic")
@user_errors
def nic_cmd(
    sizes: Annotated[str, typer.Option(
        help="Message sizes, comma-separated (three or more).")
    ] = "1KiB,4KiB,16KiB,64KiB,256KiB",
    run_length: Annotated[str, typer.Option(help="Length of each run.")] = "2s",
    repeats: Annotated[int, typer.Option(min=1, help="Runs per setting and size.")] = 3,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder for runs.csv, savings.csv, costs.json, nic.png and "
                      "summary.json (created; files in it are replaced).")
    ] = Path("datacentre-nic"),
) -> None:
    """Measure what checksum and segmentation offload save the host, by message size:
    the server in a private network namespace behind a veth pair whose offloads are
    switched with ethtool (needs root)."""
    from offloadlab.experiments import nic

    try:
        chosen = tuple(parse_bytes(s.strip(), "--sizes") for s in sizes.split(","))
    except InputError as exc:
        raise InputError(f"--sizes {sizes!r}: {exc}") from None
    exp = nic.Experiment(root=out_dir / "fileset", sizes=chosen,
                         run_s=flag_time("--run-length", run_length), repeats=repeats)
    result = nic.run(exp, progress=_say_run)
    fitted, saved = result.costs(), result.savings()
    write_experiment(out_dir, exp, result)
    t = Table("size", *(f"{s} µs" for s in nic.SETTINGS), "segmentation saves",
              "checksum saves", title="host CPU per request")
    for r in saved.to_dict("records"):
        t.add_row(format_bytes(r["size"]), *(f"{r[f'{s}_us']:.1f}" for s in nic.SETTINGS),
                  f"{r['segmentation_saves']:.0%}", f"{r['checksum_saves']:.0%}")
    out.print(t)
    out.print(f"fitted (R² {fitted.r2:.3f}): {1e6 * fitted.c0:.1f} µs per request, copy "
              f"{1e9 * fitted.copy:.2f} ns/byte, checksum {1e9 * fitted.checksum:.2f} "
              f"ns/byte, {1e6 * fitted.packet:.2f} µs per packet, {1e6 * fitted.segment:.2f} "
              f"µs per 64 KiB segment. In a data-centre file: measured_costs = "
              f"\"{out_dir / 'costs.json'}\" under network", highlight=False, markup=False)


def _say_run(name: str, done: int, total: int) -> None:
    if name:
        err.print(f"[dim]run {done + 1}/{total}: {name}[/]", highlight=False)


def _site_rows(dc: tiers.DataCentre, solved: tiers.Solved, simulated) -> list[dict]:
    rows = []
    for i, s in enumerate(dc.sites):
        row = {"site": s.name, "clients": s.clients, "throughput": float(solved.throughput[i]),
               "response_s": float(solved.response[i]), "proxy_hit": float(solved.proxy_hit[i]),
               "page_hit": float(solved.page_hit[i]),
               "mean_bytes": float(solved.bytes_per_request[i])}
        if simulated is not None:
            row |= {"sim_throughput": float(simulated.throughput[i]),
                    "sim_throughput_hw": float(simulated.throughput_hw[i]),
                    "sim_response_s": float(simulated.response[i]),
                    "sim_response_hw": float(simulated.response_hw[i])}
        rows.append(row)
    return rows


def _sites(dc: tiers.DataCentre, solved: tiers.Solved, simulated) -> Table:
    t = Table("site", "clients", "req/s", "resp. ms", "proxy hit", "page hit",
              *(("sim req/s", "sim resp. ms") if simulated is not None else ()),
              title="by MVA" + (" and simulated (± 95%)" if simulated is not None else ""))
    for r in _site_rows(dc, solved, simulated):
        cells = [r["site"], f"{r['clients']}", f"{r['throughput']:,.1f}",
                 f"{r['response_s'] * 1e3:.3f}", f"{r['proxy_hit']:.1%}", f"{r['page_hit']:.1%}"]
        if simulated is not None:
            cells += [f"{r['sim_throughput']:,.1f} ± {r['sim_throughput_hw']:,.1f}",
                      f"{r['sim_response_s'] * 1e3:.3f} ± {r['sim_response_hw'] * 1e3:.3f}"]
        t.add_row(*cells)
    return t


def _stations(solved: tiers.Solved, shown: int = 8) -> Table:
    """The busiest queueing stations (of alike nodes, the first)."""
    rows = [r for r in solved.stations() if not solved.net.delay[solved.net.stations.index(
        r["station"])]]
    rows.sort(key=lambda r: -r["utilisation"])
    t = Table("station", "servers", "utilisation", "mean queue", title="busiest stations")
    seen: set[float] = set()
    for r in rows:
        key = round(r["utilisation"], 12)
        if key in seen:
            continue
        seen.add(key)
        t.add_row(r["station"], f"{r['servers']}", f"{r['utilisation']:.1%}", f"{r['queue']:.2f}")
        if len(seen) == shown:
            break
    return t

