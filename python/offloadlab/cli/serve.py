"""``offload serve``: the testbed's HTTP server in the foreground until Ctrl-C or SIGTERM.

The flags that place and load the server (cores, application work, the engine's
behaviour) are ``cli/options.py``'s :class:`~offloadlab.cli.options.ServerFlags`, which
``offload testbed run`` takes too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from offloadlab.cli.common import app, err, flag_time, out, user_errors
from offloadlab.cli.options import SERVER, ServerFlags, grouped
from offloadlab.documents import ServerStats
from offloadlab.units import us

Mode = Annotated[str, typer.Option(
    help="Who makes the socket calls: inline (the host), engine (a software offload engine "
         "on its own core), uring (io_uring's SQPOLL thread) or handoff (the engine accepts "
         "and --handoff decides which connections it keeps; the host serves the rest).")]


@app.command("serve")
@user_errors
@grouped
def serve_cmd(
    root: Annotated[Path, typer.Argument(
        metavar="ROOT", help="The folder to serve, e.g. a file set from 'offload workload "
                             "fileset'.")],
    mode: Mode = "inline",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 0,
    host: Annotated[str, typer.Option(
        help="Address to listen on (loopback unless --allow-remote).")] = "127.0.0.1",
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow an address other machines can reach.")] = False,
    server_flags: ServerFlags = SERVER,
    max_conns: Annotated[int, typer.Option(
        help="Open connections at most; one more gets 503 and is closed.")] = 4096,
    max_header_bytes: Annotated[int, typer.Option(
        help="Request line plus headers at most (beyond: 431).")] = 8192,
    max_uri_bytes: Annotated[int, typer.Option(
        help="Request target at most (beyond: 414).")] = 4096,
    max_headers: Annotated[int, typer.Option(
        help="Header fields at most (beyond: 431; 128 at most).")] = 64,
    header_timeout: Annotated[str, typer.Option(
        help="Time a client has to send a request head.")] = "10s",
    idle_timeout: Annotated[str, typer.Option(
        help="A kept-alive connection with no request is closed after this.")] = "30s",
    max_work: Annotated[str, typer.Option(
        help="CPU a dynamic page may ask for with ?work= (beyond: 400).")] = "1s",
    stats: Annotated[Path | None, typer.Option(
        help="Write the stats document to this file every --stats-interval and at exit.")
    ] = None,
    stats_interval: Annotated[str, typer.Option(help="How often --stats is rewritten.")] = "1s",
    stats_endpoint: Annotated[bool, typer.Option(
        "--stats-endpoint", help="Answer GET /.offload/stats with the stats document.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the --work draws.")] = 1,
    app_offload: Annotated[str | None, typer.Option(
        help="cache: a reverse-proxy object cache in front of the application (seed 001), "
             "on the engine with --mode engine (set-up C) or on the host thread with "
             "--mode inline (set-up B).")] = None,
    cache_size: Annotated[str, typer.Option(
        help="The cache's budget; each entry is charged its path's and body's length.")
    ] = "10MiB",
    cache_policy: Annotated[str, typer.Option(
        help="The cache's replacement policy: lru, lfu or gdsf.")] = "lru",
    cache_max_object: Annotated[str, typer.Option(
        help="Larger bodies are never stored.")] = "1MiB",
    max_age: Annotated[int, typer.Option(
        help="Cache-Control max-age of static files, seconds (0: a cache revalidates "
             "every use).")] = 3600,
    db: Annotated[str | None, typer.Option(
        help="The database tier of dynamic pages (?query=COUNT): a SQLite file or a "
             "PostgreSQL URL (postgresql://user@host:port/db), filled by "
             "'offload workload db'.")] = None,
    memory_below: Annotated[str | None, typer.Option(
        help="Hybrid placement (seed 003): hold the files under this size in memory "
             "(ROOT must be a file set with a manifest).")] = None,
    memory_budget: Annotated[str | None, typer.Option(
        help="Or: hold the most popular files that fit in this much memory.")] = None,
    uncached: Annotated[bool, typer.Option(
        "--uncached", help="Read every file not held in memory from the disk, dropping "
                           "it from the page cache before each use.")] = False,
) -> None:
    """Serve ROOT over HTTP/1.0 and 1.1 until Ctrl-C or SIGTERM, then print a summary."""
    from offloadlab import _core
    from offloadlab.testbed import server

    memory = (() if memory_below is None and memory_budget is None
              else server.memory_files(root, memory_below, memory_budget))
    options = server.ServerOptions(
        root=root, mode=mode, host=host, port=port, allow_remote=allow_remote, seed=seed,
        max_header_bytes=max_header_bytes, max_uri_bytes=max_uri_bytes,
        max_headers=max_headers, max_conns=max_conns,
        header_timeout_s=flag_time("--header-timeout", header_timeout),
        idle_timeout_s=flag_time("--idle-timeout", idle_timeout),
        max_work_s=flag_time("--max-work", max_work), stats_path=stats,
        stats_interval_s=flag_time("--stats-interval", stats_interval),
        stats_endpoint=stats_endpoint, app_offload=app_offload, cache_size=cache_size,
        cache_policy=cache_policy, cache_max_object=cache_max_object, max_age=max_age, db=db,
        memory=memory, uncached=uncached, **server_flags.options())
    control = _core.ServerControl()
    with server.stop_on_signals(control):
        doc = server.serve(options, control, on_tick=_announce(options))
    out.print(summary_line(doc), soft_wrap=True, highlight=False)
    if stats is not None:
        err.print(f"final stats written to {stats}", soft_wrap=True, highlight=False)


def _announce(options):
    """Prints the URL once, as soon as the server listens."""
    from offloadlab.testbed.server import url

    shown = False

    def tick(control) -> None:
        nonlocal shown
        if control.port and not shown:
            shown = True
            out.print(f"serving {options.root} ({options.mode}) at "
                      f"{url(options.address(), control.port)}  (Ctrl-C to stop)",
                      soft_wrap=True, highlight=False)
    return tick


def summary_line(doc: ServerStats) -> str:
    """Requests, time, and host and engine CPU per request from a stats document."""
    per = doc.per_request
    engine = doc.engine
    n = doc.requests
    text = (f"{n:,} request{'' if n == 1 else 's'} in {doc.elapsed_s:.1f} s ({doc.mode}); "
            f"host CPU {us(per.host_cpu_s)} µs/request")
    if doc.has_engine():
        text += f", engine CPU {us(per.engine_cpu_s)} µs/request"
    if cache := doc.cache:
        served = cache.hits + cache.revalidated
        text += (f"; cache {served:,} hits, {cache.misses:,} misses "
                 f"({cache.entries:,} entries, {cache.used_bytes:,} B)")
    if engine.failed:
        text += (f"; the engine failed after {engine.takeover_after_s:.1f} s "
                 f"({engine.takeover_reason}) and the host took over")
    return text
