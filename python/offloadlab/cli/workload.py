"""``offload workload``: file sets, request streams, synthetic traces, their analysis, and
trace replay.

The work is done in :mod:`offloadlab.workload`; these commands read flags, show progress
and tables, and map each flag to the API's argument so errors name what the user typed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Column, Table

from offloadlab import units
from offloadlab.cli.common import app, err, flag_time, note, out, user_errors
from offloadlab.errors import InputError
from offloadlab.results import figure_format, write_json
from offloadlab.workload.traces import FORMATS, trace_format

workload_app = typer.Typer(
    help="Web workloads: file sets, request streams, traces, their analysis and replay.",
    no_args_is_help=True, rich_markup_mode="rich")
app.add_typer(workload_app, name="workload")

STREAM_KINDS = ("poisson", "constant", "ramp", "closed", "sessions")
TRACE_FORMATS = ", ".join(f"{f.name} ({f.title})" for f in FORMATS.values())
INPUT_FORMATS = ("auto", "manifest", "stream", *FORMATS)


# Options of the commands that write file sets.
CreateLarge = Annotated[bool, typer.Option(
    "--create-large", help="Also write sets of 2 GiB or more (otherwise only their manifest "
                           "is written).")]
Force = Annotated[bool, typer.Option(
    "--force", help="Write into a non-empty folder that holds no earlier file set.")]


def _bytes_bar() -> Progress:
    columns = ("{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn())
    return Progress(*columns, console=err, transient=True, disable=not err.is_terminal)


@workload_app.command("fileset")
@user_errors
def fileset_cmd(
    out_dir: Annotated[Path | None, typer.Option(
        "--out", help="Folder to write the files and their manifest (CSV and Parquet) to.")
    ] = None,
    preset: Annotated[str | None, typer.Option(help="A preset (see --list).")] = None,
    spec: Annotated[Path | None, typer.Option(
        help="A file-set spec (TOML); see docs/workload.md.")] = None,
    seed: Annotated[int | None, typer.Option(
        help="Seed: the same seed writes the same bytes (default: the spec's, or 0).")
    ] = None,
    list_presets: Annotated[bool, typer.Option("--list", help="List the presets.")] = False,
    create_large: CreateLarge = False,
    force: Force = False,
) -> None:
    """Generate a SURGE-like file set (or a preset's sets) and write it to disk."""
    from offloadlab.report.fileset import describe
    from offloadlab.workload import fileset

    if list_presets:
        table = Table("preset", "description", title="File-set presets", show_lines=False)
        for p in fileset.PRESETS.values():
            table.add_row(p.name, p.description)
        out.print(table)
        return
    if (preset is None) == (spec is None):
        raise InputError("give one of --preset NAME (see --list) or --spec FILE")
    if out_dir is None:
        raise InputError("--out DIR: say where to write the file set")
    specs = fileset.preset(preset, seed=seed or 0) if preset else fileset.load_spec(spec)
    specs = specs if isinstance(specs, list) else [specs]
    if seed is not None:
        specs = [replace(s, seed=seed) for s in specs]
    sets = [fileset.generate(s) for s in specs]
    out.print(describe(sets))
    options = {"overwrite": force, "create_large": create_large}
    with _bytes_bar() as bar:
        task = bar.add_task("writing", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            if len(sets) == 1:
                written = [fileset.materialise(sets[0], out_dir, progress, **options)]
            else:
                written = fileset.materialise_many(sets, out_dir, progress, **options)
        except InputError as exc:  # the API names its keywords; say the flags instead
            raise InputError(str(exc).replace("overwrite=True", "--force")
                             .replace("create_large=True", "--create-large")) from None
    for fs, w in zip(sets, written, strict=True):
        size = f"{len(fs.sizes):,} files, {units.format_bytes(fs.total_bytes)}"
        if w.created:
            out.print(f"{w.name}: {size} written to {w.out_dir} "
                      f"({w.rate_Bps / 2**20:.0f} MiB/s)", markup=False)
        else:
            out.print(f"{w.name}: {size} described by its manifest in {w.out_dir}; "
                      "--create-large writes the files", markup=False)


@workload_app.command("verify")
@user_errors
def verify_cmd(
    folder: Annotated[Path, typer.Argument(
        metavar="DIR", help="A file set written by `offload workload fileset` or `replay`.")],
) -> None:
    """Re-read every file of a file set and check its size and SHA-256 against the manifest.

    Exits 1 if any file is missing, of the wrong size or of the wrong content.
    """
    from offloadlab.workload import fileset

    with _bytes_bar() as bar:
        task = bar.add_task("checking", total=None)
        result = fileset.verify(folder, lambda done, total: bar.update(task, completed=done,
                                                                       total=total))
    size = f"{result.files:,} files, {units.format_bytes(result.total_bytes)}"
    if result.ok:
        out.print(f"{folder}: {size}: all match the manifest", markup=False)
        return
    for path, problem in result.problems[:20]:
        err.print(f"[red]{escape(str(path))}[/]: {escape(problem)}")
    more = len(result.problems) - 20
    err.print(f"{folder}: {len(result.problems):,} of {result.files:,} files do not match"
              + (f" ({more:,} more not shown)" if more > 0 else ""), markup=False)
    raise typer.Exit(1)


@workload_app.command("db")
@user_errors
def db_cmd(
    db: Annotated[str, typer.Option(
        help="A SQLite file to write, or a PostgreSQL URL (postgresql://user@host:port/db).")],
    rows: Annotated[int, typer.Option(min=1, help="Items in the catalogue table.")] = 100_000,
) -> None:
    """Write the database tier's catalogue table afresh (dynamic pages query it with
    ?query=COUNT when the server runs with --db)."""
    from offloadlab.testbed import server

    server.fill_db(db, rows)
    out.print(f"{db}: table {server.DB_TABLE} holds {rows:,} items", highlight=False,
              markup=False)


@workload_app.command("stream")
@user_errors
def stream_cmd(
    objects: Annotated[Path, typer.Argument(
        metavar="OBJECTS", help="A file-set folder, or a manifest (.csv or .parquet).")],
    out_file: Annotated[Path, typer.Option("--out", help="Stream file to write (Parquet).")],
    kind: Annotated[str, typer.Option(
        help=f"Request process: {', '.join(STREAM_KINDS)}.")] = "poisson",
    rate: Annotated[float | None, typer.Option(
        help="poisson/constant: connections started per second.")] = None,
    ramp: Annotated[str | None, typer.Option(
        help="ramp: rate at breakpoints, e.g. '0s:10, 60s:100'.")] = None,
    count: Annotated[int | None, typer.Option(help="Open loop: number of requests.")] = None,
    duration: Annotated[str | None, typer.Option(help="Length of the stream, e.g. 60s.")
                        ] = None,
    keep_alive: Annotated[str | None, typer.Option(
        help="'no' (HTTP/1.0, one request per connection), requests per connection "
             "(e.g. 5 or geom(mean=5)); sessions also take 'page' or 'session'. Default: "
             "'no', and 'page' for sessions.")] = None,
    clients: Annotated[int | None, typer.Option(help="closed/sessions: clients.")] = None,
    requests: Annotated[int | None, typer.Option(help="closed: requests per client.")
                        ] = None,
    think: Annotated[str | None, typer.Option(
        help="closed/sessions: think time, e.g. exp(mean=1s); det(0) is saturation.")
    ] = None,
    workload: Annotated[str, typer.Option(
        help="sessions: support, banking or ecommerce (SPECweb2005-like).")] = "support",
    sessions: Annotated[int | None, typer.Option(help="sessions: sessions per client.")
                        ] = None,
    size_class: Annotated[int | None, typer.Option(
        "--class", help="Only objects of this size class (0-4), as seed 000's per-class runs.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed: the same seed gives the same stream.")] = 1,
) -> None:
    """Generate a request stream over a file set's objects and write it to Parquet."""
    from offloadlab.workload import stream

    if kind not in STREAM_KINDS:
        raise InputError(f"--kind {kind!r}: use one of {', '.join(STREAM_KINDS)}")
    duration_s = flag_time("--duration", duration)
    alive = False if keep_alive in (None, "no") else keep_alive
    common = {"duration_s": duration_s, "size_class": size_class, "seed": seed}
    if kind in ("poisson", "constant"):
        if rate is None:
            raise InputError(f"--kind {kind} needs --rate, e.g. --rate 50")
        make = stream.poisson if kind == "poisson" else stream.constant
        result = make(objects, rate, count=count, keep_alive=alive, **common)
    elif kind == "ramp":
        if ramp is None:
            raise InputError("--kind ramp needs --ramp, e.g. --ramp '0s:10, 60s:100'")
        result = stream.open_loop(objects, f"ramp({ramp})", count=count, keep_alive=alive,
                                  **common)
    else:
        if clients is None:
            raise InputError(f"--kind {kind} needs --clients, e.g. --clients 100")
        extra = {} if think is None else {"think": think}
        if kind == "closed":
            result = stream.closed(objects, clients, requests=requests, keep_alive=alive,
                                   **extra, **common)
        else:
            alive = "page" if keep_alive is None else alive
            result = stream.sessions(objects, workload, clients=clients, sessions=sessions,
                                     keep_alive=alive, **extra, **common)
    result.write(out_file)
    table = Table("", "", title=f"stream written to {out_file}", show_header=False)
    for key, value in result.describe().items():
        if value is None:
            continue
        shown = (f"{value:,.6g}" if isinstance(value, float) else
                 f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else
                 str(value))
        table.add_row(key, shown)
    out.print(table)


@workload_app.command("synth")
@user_errors
def synth_cmd(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help=f"{TRACE_FORMATS}.")],
    out_file: Annotated[Path, typer.Argument(
        metavar="OUT", help="File to write (.gz to compress).")],
    requests: Annotated[int, typer.Option(help="Number of requests.")] = 100_000,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
) -> None:
    """Write a synthetic web trace in one of the trace formats.

    For trying the readers and the analysis without the real logs.
    """
    synth = trace_format(fmt, "FORMAT").synth
    if requests < 1:
        raise InputError(f"--requests {requests}: use at least 1")
    written = synth(out_file, requests, seed)
    out.print(f"{written:,} requests written to {out_file} ({fmt})", markup=False)


@workload_app.command("analyze")
@user_errors
def analyze_cmd(
    source: Annotated[Path, typer.Argument(
        metavar="INPUT", help="A trace (WC98 binary or access log, .gz too), a stream, a "
                              "file-set folder or a manifest.")],
    fmt: Annotated[str, typer.Option(
        "--format", help=f"Input format: {', '.join(INPUT_FORMATS)}.")] = "auto",
    connections: Annotated[str, typer.Option(
        help="For traces without connections: a client's requests at most this far apart "
             "share one (reference 004's replayer); 'none' to skip.")] = "15s",
    as_json: Annotated[bool, typer.Option("--json", help="Print the analysis as JSON.")
                       ] = False,
    out_file: Annotated[Path | None, typer.Option(
        "--out", help="Also write the JSON analysis to this file (atomically).")] = None,
    plot: Annotated[Path | None, typer.Option(
        help="Write figures (size CCDF, rank-frequency, ...) to this .png, .svg or "
             ".pdf.")] = None,
) -> None:
    """Fit sizes and popularity, and measure class shares, connection skew and arrivals."""
    from offloadlab.report.workload import analysis_tables, plot_analysis
    from offloadlab.workload import analyze, fileset, stream, traces

    if fmt not in INPUT_FORMATS:
        raise InputError(f"--format {fmt!r}: use one of {', '.join(INPUT_FORMATS)}")
    if plot is not None:
        figure_format(plot)
    if not source.exists():
        raise InputError(f"{source}: no such file or folder")
    kind = _input_kind(source) if fmt == "auto" else fmt
    name = str(source)
    if kind == "manifest":
        result = analyze.analyze_manifest(fileset.read_manifest(source), name=name)
    elif kind == "stream":
        result = analyze.analyze_requests(stream.iter_batches(source), name=name,
                                          arrivals="connections")
    else:
        reader = traces.read_trace(source, format=None if fmt == "auto" else fmt)
        chunks = iter(reader)
        if connections != "none":
            chunks = traces.assign_connections(chunks, flag_time("--connections",
                                                                      connections))
        result = analyze.analyze_requests(chunks, name=name)
        if reader.report.skipped:
            note(reader.report.summary())
    doc = result.to_json()
    if as_json:
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        for table in analysis_tables(result):
            out.print(table)
    if out_file is not None:
        write_json(out_file, doc)
    if plot is not None:
        plot_analysis(result, plot)
        err.print(f"figure written to {plot}", markup=False)


def _input_kind(path: Path) -> str:
    """Manifest, stream or trace, from the folder or the file's own marks."""
    if path.is_dir() or path.suffix == ".csv":
        return "manifest"
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            meta = pq.read_schema(path).metadata or {}
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{path}: not a readable Parquet file ({exc}); give a stream "
                             "or a manifest written by offload, or a trace") from None
        return "stream" if any(k.startswith(b"offloadlab.stream") for k in meta) else "manifest"
    from offloadlab.workload import traces

    return traces.sniff_format(path)


# The API's keywords in replay's messages, as the flags that set them.
_REPLAY_FLAGS = (("all_requests=True", "--all-requests"), ("unknown_size=BYTES", "--unknown-size"),
                 ("(start_s, duration_s)", "(--start, --duration)"), ("overwrite=True", "--force"),
                 ("create_large=True", "--create-large"))


@workload_app.command("replay")
@user_errors
def replay_cmd(
    trace: Annotated[Path, typer.Argument(
        metavar="TRACE", help="A trace: WC98 binary log or access log (.gz too).")],
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder to write the trace's file set and stream.parquet to.")],
    speed: Annotated[float, typer.Option(
        help="Divide the trace's times by this: 2 replays twice as fast.")] = 1.0,
    limit: Annotated[int | None, typer.Option(
        help="Keep only the first N requests that pass the filters.")] = None,
    window: Annotated[str, typer.Option(
        help="A client's requests at most this far apart share a connection (reference "
             "004's replayer); 'none': one connection per request.")] = "15s",
    start: Annotated[str | None, typer.Option(
        help="Keep requests from this far into the trace, e.g. 3600s.")] = None,
    duration: Annotated[str | None, typer.Option(
        help="Keep requests within this long after --start (or the trace's start).")] = None,
    all_requests: Annotated[bool, typer.Option(
        "--all-requests", help="Keep every request, not only GET/HEAD with status 200.")
    ] = False,
    unknown_size: Annotated[str, typer.Option(
        help="Objects the trace gives no size for: 'drop' them and their requests, or give "
             "them this size, e.g. 1KiB.")] = "drop",
    fmt: Annotated[str, typer.Option(
        "--format", help=f"Trace format: auto (from the file) or {TRACE_FORMATS}.")
    ] = "auto",
    seed: Annotated[int, typer.Option(help="Seed of the files' content.")] = 0,
    create_large: CreateLarge = False,
    force: Force = False,
) -> None:
    """Make a trace replayable: its objects as a file set, its requests as a stream.

    Then: offload load 127.0.0.1:PORT --objects DIR --stream DIR/stream.parquet
    """
    from offloadlab.report.fileset import describe
    from offloadlab.workload import replay, traces

    if not trace.is_file():
        raise InputError(f"TRACE {trace}: no such file")
    if fmt != "auto":
        trace_format(fmt, "--format")
    if not (speed > 0 and speed < float("inf")):
        raise InputError(f"--speed {speed:g}: use a factor > 0, e.g. --speed 2 (twice as fast)")
    if limit is not None and limit < 1:
        raise InputError(f"--limit {limit}: keep at least 1 request")
    window_s = None if window == "none" else flag_time("--window", window)
    start_s = flag_time("--start", start)
    duration_s = flag_time("--duration", duration)
    if duration_s == 0:
        raise InputError(f"--duration {duration}: use a duration > 0, e.g. 60s")
    if unknown_size == "drop":
        fallback = None
    else:
        try:
            fallback = units.parse_bytes(unknown_size, "size")
        except InputError as exc:
            raise InputError(f"--unknown-size: {exc}; or 'drop'") from None
    if seed < 0:
        raise InputError(f"--seed {seed}: use a whole number >= 0")
    reader = traces.read_trace(trace, format=None if fmt == "auto" else fmt)
    try:
        result = replay.replay(reader, speed=speed, window_s=window_s,
                               all_requests=all_requests, limit=limit, start_s=start_s,
                               duration_s=duration_s, unknown_size=fallback, seed=seed,
                               source=str(trace))
        if reader.report.skipped:
            note(reader.report.summary())
        out.print(describe(result.fileset))
        with _bytes_bar() as bar:
            task = bar.add_task("writing", total=None)

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            written = result.write(out_dir, progress, overwrite=force,
                                   create_large=create_large)
    except InputError as exc:  # the API names its keywords; say the flags instead
        text = str(exc)
        for keyword, flag in _REPLAY_FLAGS:
            text = text.replace(keyword, flag)
        raise InputError(text) from None
    r = result.report
    table = Table("", "", title=f"replay of {trace}", show_header=False)
    rows = [("requests read", r.read), ("kept", r.kept),
            ("not GET/HEAD with status 200", r.not_replayed),
            ("outside the window", r.outside_window)]
    if fallback is None:
        rows.append(("dropped: object size unknown", r.unknown_size))
    rows += [("objects", r.objects), ("objects of unknown size", r.objects_unknown_size),
             ("connections", r.connections), ("trace span (s)", r.trace_span_s),
             ("stream span (s)", r.span_s), ("speed", r.speed)]
    if r.reordered:
        rows.append(("rows sorted into time order", r.reordered))
    for key, value in rows:
        table.add_row(key, f"{value:,.6g}" if isinstance(value, float) else f"{value:,}")
    out.print(table)
    if r.stopped_at_limit:
        note(f"stopped reading at --limit {limit}; the trace may hold more requests")
    fs = result.fileset
    size = f"{fs.n_files:,} files, {units.format_bytes(fs.total_bytes)}"
    stream_path = out_dir / replay.STREAM_FILE
    if written.created:
        out.print(f"{fs.name}: {size} written to {out_dir} ({written.rate_Bps / 2**20:.0f} "
                  f"MiB/s); {len(result.stream):,} requests to {stream_path}", markup=False)
    else:
        out.print(f"{fs.name}: {size} described by its manifest in {out_dir} (--create-large "
                  f"writes the files); {len(result.stream):,} requests to {stream_path}",
                  markup=False)
    out.print(f"replay with: offload load 127.0.0.1:PORT --objects {out_dir} "
              f"--stream {stream_path}", markup=False)


# Detector parameters as flags (the API's names in its messages, then the flags).
_FLOW_FLAGS = (("margin_bits", "--margin-bits"), ("sample_every", "--sample-every"),
               ("epoch_packets", "--epoch-packets"), ("fcu_flows", "--fcu-flows"),
               ("decay", "--decay"))


@workload_app.command("flows")
@user_errors
def flows_cmd(
    source: Annotated[Path, typer.Argument(
        metavar="TRACE|PCAP", help="A pcap file, a request stream (.parquet) or a trace "
                                   "(WC98 binary or access log); a connection is a flow.")],
    top: Annotated[int, typer.Option(help="Long-lived flows to list (all with --json).")
                   ] = 20,
    margin_bits: Annotated[float | None, typer.Option(
        help="ε of the rule p(f) > 2^-(H-ε): higher lists fewer flows.")] = None,
    sample_every: Annotated[int | None, typer.Option(
        help="Sample one packet in this many of listed flows.")] = None,
    epoch_packets: Annotated[int | None, typer.Option(
        help="Packets per epoch (between refreshes of the list) at most.")] = None,
    fcu_flows: Annotated[int | None, typer.Option(
        help="Distinct flows an FCU counts before the epoch ends.")] = None,
    decay: Annotated[float | None, typer.Option(
        help="Fade the FMU's counts by this factor each epoch (1: whole trace).")] = None,
    connections: Annotated[str, typer.Option(
        help="For traces without connections: a client's requests at most this far apart "
             "share one.")] = "15s",
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")
                       ] = False,
) -> None:
    """Detect long-lived flows (seed 002's FastFlow) and estimate unseen ones and the
    flow-size density."""
    from offloadlab.workload import flows

    if top < 0:
        raise InputError(f"--top {top}: list at least 0 flows")
    given = {"margin_bits": margin_bits, "sample_every": sample_every,
             "epoch_packets": epoch_packets, "fcu_flows": fcu_flows, "decay": decay}
    params = {k: v for k, v in given.items() if v is not None}
    window_s = flag_time("--connections", connections)
    try:
        r = flows.detect_file(source, connections_s=window_s, **params)
    except InputError as exc:
        text = str(exc)
        for name, flag in _FLOW_FLAGS:
            text = text.replace(name, flag)
        raise InputError(text) from None
    doc = r.to_json()
    if as_json:
        print(json.dumps(doc, indent=2, allow_nan=False))
        return
    if r.skipped:
        note(f"{r.skipped:,} frames were skipped: not IP, or cut before the ports")
    if r.truncated:
        note(f"{r.truncated:,} packets had their TCP/UDP header cut by the snap length; "
             "their ports were read")
    out.print(f"{source}: {r.total_packets:,} packets, {r.flows_seen:,} flows; "
              f"{len(r.flows):,} long-lived at the end carry {r.llf_packet_share:.1%} of the "
              "packets", highlight=False, markup=False)
    table = Table("long-lived flow", Column("packets", justify="right"),
                  Column("share", justify="right"))
    for f, p, s in list(zip(r.flows, r.packets, r.share, strict=True))[:top]:
        table.add_row(str(f), f"{p:,.0f}", f"{s:.2%}")
    out.print(table)
    if len(r.flows) > top:
        note(f"{len(r.flows) - top:,} more long-lived flows; --top N or --json lists them")
    off = doc["offline"]
    est = Table("", Column("", justify="right"), title="offline estimates", show_header=False)
    rows = [("entropy of the flow distribution (bits)", f"{r.entropy_bits:.2f}"),
            ("short flows, counted exactly", f"{r.slf_flows:,}"),
            ("sampled packets of long-lived flows", f"{r.llf_samples:,}"),
            ("long-lived flows among the samples", f"{r.llf_sampled_flows:,}"),
            ("long-lived flows, estimate (coupon collector)", _maybe(off["llf_flows_mle"])),
            ("all flows, estimate", _maybe(off["flows_estimate"])),
            ("flow-size density: bandwidth (log10 packets)", _maybe(off["kde_bandwidth_log10"])),
            ("flow-size density: mode (packets)", _maybe(off["kde_mode_packets"])),
            ("peak memory (bytes, reserved)", f"{r.peak_bytes:,}"),
            ("peak memory per tracked flow (bytes)", f"{r.bytes_per_flow:.0f}")]
    for key, value in rows:
        est.add_row(key, value)
    out.print(est)


def _maybe(value: float | None) -> str:
    """A number for a table, or a dash where there is no finite estimate."""
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:.3g}"
