"""``offload load``: real HTTP load from a stream or a schedule, with live progress.

:func:`load_progress` (the live status line) is shared with ``offload testbed run``, and
so are the flags that shape a generated load (:class:`~offloadlab.cli.options.LoadFlags`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live
from rich.table import Table

from offloadlab.cli.common import app, err, flag_time, out, user_errors
from offloadlab.cli.options import LOAD, LoadFlags, grouped
from offloadlab.errors import InputError
from offloadlab.results import write_json
from offloadlab.units import ms as _ms
from offloadlab.units import parse_range


@contextlib.contextmanager
def load_progress(planned: int, label: str = "") -> Iterator[Callable]:
    """A live status line on stderr (on a terminal) while a load runs; yields the
    run's ``progress`` callback."""
    with Live(console=err, transient=True, refresh_per_second=5,
              auto_refresh=err.is_terminal) as live:
        yield _live(live, planned, label)


@app.command("load")
@user_errors
@grouped
def load_cmd(
    target: Annotated[str, typer.Argument(
        metavar="TARGET", help="HOST:PORT or http://HOST:PORT/PREFIX/ (loopback only unless "
                               "--allow-remote).")],
    objects: Annotated[Path, typer.Option(
        help="The file set the server serves (folder or manifest): sizes and checksums.")],
    stream_file: Annotated[Path | None, typer.Option(
        "--stream", help="Replay this stream (offload workload stream); otherwise one is "
                         "made from --rate or --clients.")] = None,
    steps: Annotated[str | None, typer.Option(
        help="Saturation search: Poisson rates START:STOP:STEP, one --duration each, until "
             "--stop-p99 or --stop-errors is passed.")] = None,
    shape: LoadFlags = LOAD,
    seed: Annotated[int, typer.Option(help="Seed of the generated stream.")] = 1,
    stop_p99: Annotated[str | None, typer.Option(
        help="--steps: stop after a step whose p99 exceeds this, e.g. 100ms.")] = None,
    stop_errors: Annotated[float | None, typer.Option(
        help="--steps: stop after a step whose error rate exceeds this, e.g. 0.01.")] = None,
    threads: Annotated[int | None, typer.Option(
        help="Generator threads (default: one per core).")] = None,
    timeout: Annotated[str, typer.Option(help="Per-request timeout.")] = "5s",
    max_duration: Annotated[str | None, typer.Option(
        help="Hard bound on a run (default: the load's length plus twice the timeout).")
    ] = None,
    method: Annotated[str, typer.Option(help="GET or HEAD.")] = "GET",
    verify: Annotated[str, typer.Option(
        help="Check each response: checksum (SHA-256), length or none.")] = "checksum",
    discard: Annotated[bool, typer.Option(
        "--discard", help="Drop each body of known length in the kernel unread (recv with "
                          "MSG_TRUNC): no per-byte receive cost for the generator. Needs "
                          "--verify length or none: sizes are still checked, content is "
                          "never seen.")] = False,
    records: Annotated[Path | None, typer.Option(
        help="Write one record per request to this Parquet file.")] = None,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow a target that is not loopback.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    out_file: Annotated[Path | None, typer.Option(
        "--out", help="Also write the JSON report to this file (atomically).")] = None,
    cluster: Annotated[str | None, typer.Option(
        help="Send the load from the Dask workers of this scheduler (tcp://HOST:PORT) that "
             "offer a `client` resource: one plan split among them, one start, one merged "
             "report with a line per host.")] = None,
    client_hosts: Annotated[int | None, typer.Option(
        help="--cluster: use this many of the client workers (default: all).")] = None,
) -> None:
    """Send HTTP load to a server and measure it (no coordinated omission)."""
    from offloadlab.testbed import load
    from offloadlab.workload import fileset, stream

    sources = [x is not None for x in (stream_file, shape.rate, steps, shape.clients)]
    if sum(sources) != 1:
        raise InputError("give one of --stream FILE, --rate R, --steps A:B:C or --clients N")
    if cluster is None and client_hosts is not None:
        raise InputError("--client-hosts counts the workers of --cluster; give --cluster too")
    if cluster is not None and steps is not None:
        raise InputError("--steps runs from this host only; it does not go with --cluster")
    manifest = fileset.read_manifest(objects)
    options = dict(threads=threads, timeout_s=flag_time("--timeout", timeout),
                   max_duration_s=flag_time("--max-duration", max_duration), method=method,
                   verify=verify, records=records is not None, allow_remote=allow_remote,
                   discard=discard)

    if steps is not None:
        if records is not None:
            raise InputError("--records keeps one run's requests; it does not go with --steps")
        try:
            rates = parse_range(steps)
        except InputError as exc:
            raise InputError(f"--steps {exc}") from None
        _run_steps(load, target, manifest, rates,
                   lambda rate: shape.poisson(manifest, rate, seed),
                   flag_time("--stop-p99", stop_p99), stop_errors, options, as_json, out_file)
        return
    if stream_file is not None:
        requests = stream.read(stream_file)
    else:
        requests, closed = shape.generate(manifest, seed, options["max_duration_s"])
        options |= closed
    if cluster is not None:
        from offloadlab.testbed import cluster as across

        result = across.run(cluster, target, requests, manifest, hosts=client_hosts,
                            seed=seed, **options)
    else:
        with load_progress(len(requests)) as progress:
            result = load.run(target, requests, manifest, progress=progress, **options)
    if records is not None:
        load.write_records(result, records)
        err.print(f"{len(result.records):,} request records written to {records}")
    doc = result.to_json()
    if as_json:
        print(json.dumps(doc, indent=2))
    else:
        out.print(report_table(result))
        if cluster is not None:
            out.print(hosts_table(doc["cluster"]))
    if out_file is not None:
        write_json(out_file, doc)


def _live(live: Live, planned: int, label: str = ""):
    started = time.monotonic()
    prefix = f"{label}: " if label else ""

    def show(control) -> None:
        elapsed = time.monotonic() - started
        live.update(f"{prefix}sent {control.sent:,}/{planned:,}  done {control.done:,} "
                    f"({control.done / elapsed:,.0f}/s)  p99 {control.p99_us / 1e3:.3g} ms  "
                    f"errors {control.errors:,}")
    return show


def _run_steps(load, target, manifest, rates, make, stop_p99_s, stop_errors, options,
               as_json, out_file) -> None:
    table = Table("rate/s", "offered", "achieved", "p50 ms", "p99 ms", "errors", "stop",
                  title=f"saturation search on {target}")

    def on_step(step) -> None:
        r = step.result.parsed
        table.add_row(f"{step.rate:g}", f"{r.offered_rate:.1f}", f"{r.achieved_rate:.1f}",
                      _ms(r.total.p50_s),
                      _ms(r.total.p99_s), f"{r.failed:,}", step.stop_reason)
        if not as_json:
            err.print(f"rate {step.rate:g}/s: p99 {_ms(r.total.p99_s)} ms, "
                      f"{r.failed:,} errors")

    done = load.steps(target, manifest, rates, make, stop_p99_s=stop_p99_s,
                      stop_error_rate=stop_errors, on_step=on_step, **options)
    doc = {"target": target, "steps": [{"rate": s.rate, "stop_reason": s.stop_reason,
                                        **s.result.report} for s in done]}
    if as_json:
        print(json.dumps(doc, indent=2))
    else:
        out.print(table)
    if out_file is not None:
        write_json(out_file, doc)


def report_table(result) -> Table:
    """The run at a glance: rates, latency quantiles overall and per size class, errors."""
    r = result.parsed
    table = Table("", "requests", "mean ms", "p50", "p90", "p99", "p99.9", "max",
                  title=f"load on {result.target}: {r.completed:,} ok, {r.failed:,} "
                        f"failed, {r.unfinished:,} unfinished in {r.duration_s:.2f} s")
    rows = [("all", r.total)] + [(f"class {c.size_class}", c.total) for c in r.classes]
    for label, t in rows:
        table.add_row(label, f"{t.count:,}", _ms(t.mean_s), _ms(t.p50_s),
                      _ms(t.p90_s), _ms(t.p99_s), _ms(t.p99_9_s), _ms(t.max_s))
    errors = ", ".join(f"{k} {v:,}" for k, v in r.errors.items() if v) or "none"
    offered = r.offered_rate
    lag = r.lag
    table.caption = (
        (f"offered {offered:,.1f}/s, achieved {r.achieved_rate:,.1f}/s, send lag mean "
         f"{_ms(lag.mean_s)} ms, p99 {_ms(lag.p99_s)} ms; " if offered else "")
        + f"throughput {r.throughput:,.1f} req/s, goodput {r.goodput_Bps / 1e6:,.2f} MB/s,"
        f" {r.connections:,} connections (mean connect {_ms(r.connect_mean_s)} ms, "
        f"{r.connections_per_min or 0:,.0f}/min); errors: {errors}")
    return table


def hosts_table(cluster: dict) -> Table:
    """A run across hosts, host by host: its share, what it did, its clock and start."""
    table = Table("host", "planned", "sent", "ok", "failed", "achieved/s", "lag mean ms",
                  "lag p99 ms", "errors", "clock offset ms", "started late ms",
                  title=f"{len(cluster['hosts'])} client hosts of {cluster['scheduler']}: "
                        f"start skew {cluster['start_skew_s'] * 1e3:.2f} ms"
                        + (f"; PARTIAL, lost {', '.join(cluster['lost'])}"
                           if cluster["partial"] else ""))
    for h in cluster["hosts"]:
        offset = f"{h['clock_offset_s'] * 1e3:+.2f} ± {h['clock_uncertainty_s'] * 1e3:.2f}"
        if h["lost"]:
            table.add_row(h["name"], f"{h['planned']:,}", "", "", "", "", "", "",
                          f"lost: {h['lost']}", offset, "")
            continue
        achieved = h["achieved_rate"]
        table.add_row(h["name"], f"{h['planned']:,}", f"{h['sent']:,}", f"{h['completed']:,}",
                      f"{h['failed']:,}", "" if achieved is None else f"{achieved:,.1f}",
                      _ms(h["lag"]["mean_s"]), _ms(h["lag"]["p99_s"]),
                      ", ".join(f"{k} {v:,}" for k, v in h["errors"].items()) or "none",
                      offset, f"{h['started_late_s'] * 1e3:.2f}")
    return table
