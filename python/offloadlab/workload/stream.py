"""Request streams: the requests a load generator sends and a simulator replays.

A :class:`Stream` is a table with one row per HTTP request, written to Parquet in a
stable, versioned format (:mod:`~offloadlab.workload.stream_format`: the columns, the
checks, writing and reading). This module holds the open- and closed-loop generators.
Generators build a stream from an *objects table* (at least ``path``,
``size_bytes``, ``probability``; a file set's manifest is one) and a seed; the same
seed gives the same stream, row for row::

    s = poisson(objects, rate=100, duration_s=60, keep_alive=5, seed=1)
    s = closed(objects, clients=64, think="det(0)", requests=1000)      # saturation
    s = sessions(objects, "support", clients=100, sessions=20)
    s.write("stream.parquet");  s = read("stream.parquet");  s.describe()

The rest of the API lives where its concept does, and is re-imported here so that
``offloadlab.workload.stream`` stays the one entry point: ``Stream``, ``read``,
``iter_batches``, ``COLUMNS`` and ``FORMAT_VERSION`` in
:mod:`~offloadlab.workload.stream_format`, arrival processes and ``parse_arrivals`` in
:mod:`~offloadlab.workload.arrivals`, ``parse_count`` in
:mod:`~offloadlab.workload.counts`, ``sessions`` in :mod:`~offloadlab.workload.sessions`
and ``MIXES`` in :mod:`~offloadlab.workload.page_mixes`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from offloadlab import dist
from offloadlab.errors import InputError
from offloadlab.workload import connections as conns
from offloadlab.workload.arrivals import Arrivals, Constant, Poisson, Ramp, parse_arrivals
from offloadlab.workload.counts import parse_count
from offloadlab.workload.objects import ObjectTable
from offloadlab.workload.page_mixes import MIXES
from offloadlab.workload.sessions import sessions
from offloadlab.workload.stream_args import (
    closed_bound,
    distribution,
    number,
    optional_positive_int,
    optional_seconds,
    positive_int,
    rngs,
    stream_meta,
)
from offloadlab.workload.stream_format import COLUMNS, FORMAT_VERSION, Stream, iter_batches, read

__all__ = [
    "COLUMNS", "FORMAT_VERSION", "MIXES", "Stream", "closed", "constant", "iter_batches",
    "open_loop", "parse_arrivals", "parse_count", "poisson", "ramp", "read", "sessions",
]

# ------------------------------------------------------------------- generators


def open_loop(objects, arrivals: Arrivals | str, *, count: int | None = None,
              duration_s: float | str | None = None, keep_alive=False,
              size_class: int | None = None, seed: int | np.random.Generator = 1,
              generator: str | None = None) -> Stream:
    """Requests from an open-loop arrival process of *connection initiations*.

    ``keep_alive`` False is HTTP/1.0 (one request per connection); otherwise it gives the
    requests per HTTP/1.1 connection (a number or a count spec such as ``"geom(mean=5)"``),
    sent back to back on the connection (all with the connection's ``time_s``). The
    stream stops after ``count`` requests (the last connection may be cut short) and/or
    before ``duration_s`` seconds (connections starting before it are kept whole).
    Objects are drawn independently by their ``probability``, from one ``size_class``
    if given. Every connection is its own client (client = conn_id).
    """
    arr = parse_arrivals(arrivals)
    table = ObjectTable.of(objects, size_class)
    count = optional_positive_int("count", count)
    duration = optional_seconds("duration_s", duration_s)
    if isinstance(arr, Ramp) and count is None and duration is None:
        duration = arr.end_s
    if count is None and duration is None:
        raise InputError(f"{arr.kind}: give count= (requests) and/or duration_s= to bound "
                         "the stream")
    per_conn = conns.per_connection(keep_alive)
    rng_time, rng_conn, rng_obj = rngs(seed, 3)
    starts = arr.times(rng_time, count, duration)
    lengths = (np.ones(len(starts), dtype=np.int64) if per_conn is None
               else per_conn.sample(rng_conn, len(starts)))
    if count is not None:
        lengths = conns.cut(lengths, count)
    conn = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    obj, size = table.draw(rng_obj, len(conn))
    frame = pd.DataFrame({"time_s": np.repeat(starts[: len(lengths)], lengths), "object": obj,
                          "size_bytes": size, "conn_id": conn,
                          "keep_alive": conns.keep_alive_flags(conns.starts_of(lengths)),
                          "client": conn})
    params = {"arrivals": str(arr), "count": count, "duration_s": duration,
              "keep_alive": conns.spec(per_conn), "size_class": table.size_class, **table.params}
    return Stream(frame, stream_meta(generator or arr.kind, seed, params, duration))


def poisson(objects, rate: float, **kwargs) -> Stream:
    """Poisson arrivals at ``rate`` connections/s (requests/s for HTTP/1.0); see
    :func:`open_loop` for ``count``, ``duration_s``, ``keep_alive``, ``size_class``, ``seed``."""
    return open_loop(objects, Poisson(number("rate", rate)), **kwargs)


def constant(objects, rate: float, **kwargs) -> Stream:
    """Evenly spaced arrivals at ``rate`` per second; see :func:`open_loop`."""
    return open_loop(objects, Constant(number("rate", rate)), **kwargs)


def ramp(objects, points: Sequence[tuple[float, float]] | str, **kwargs) -> Stream:
    """Poisson arrivals whose rate ramps linearly between breakpoints ``[(t_s, rate),
    ...]`` (or ``"0s:10, 60s:100"``); without ``count``/``duration_s`` the stream ends at
    the last breakpoint. See :class:`~offloadlab.workload.arrivals.Ramp` and
    :func:`open_loop`."""
    arr = parse_arrivals(f"ramp({points})") if isinstance(points, str) else Ramp(tuple(points))
    return open_loop(objects, arr, **kwargs)


def closed(objects, clients: int, *, think: str | dist.Dist = "det(0)",
           requests: int | None = None, duration_s: float | str | None = None,
           keep_alive=False, size_class: int | None = None,
           seed: int | np.random.Generator = 1) -> Stream:
    """``clients`` closed-loop clients: each waits ``think`` (a distribution spec;
    ``det(0)`` is saturation mode, back to back) after each response, then sends its
    next request. Each client has ``requests`` rows and/or the rows it could send before
    ``duration_s`` if responses were instant (the think times alone fit in it); a
    consumer stops at ``duration_s`` (kept in ``meta``). ``keep_alive`` groups each
    client's consecutive requests into connections as in :func:`open_loop`.

    Rows are interleaved: every client's first request, then every client's second, ...
    so a consumer reading in order finds every client's next request nearby.
    """
    table = ObjectTable.of(objects, size_class)
    n_clients = positive_int("clients", clients)
    think_d = distribution(think, "think")
    requests = optional_positive_int("requests", requests)
    duration = optional_seconds("duration_s", duration_s)
    closed_bound("requests", requests, duration, think_d)
    per_conn = conns.per_connection(keep_alive)
    rng_think, rng_conn, rng_obj = rngs(seed, 3)
    thinks = [_thinks(think_d, rng_think, requests, duration) for _ in range(n_clients)]
    n = np.array([len(t) for t in thinks], dtype=np.int64)
    client = np.repeat(np.arange(n_clients, dtype=np.int64), n)
    starts = np.concatenate([conns.client_starts(k, per_conn, rng_conn) for k in n])
    cols = {"think_s": np.concatenate(thinks)}
    frame = conns.closed_frame(cols, client, n, starts, table, rng_obj)
    params = {"clients": n_clients, "think": str(think_d), "requests": requests,
              "duration_s": duration, "keep_alive": conns.spec(per_conn),
              "size_class": table.size_class, **table.params}
    return Stream(frame, stream_meta("closed", seed, params, duration))


def _thinks(think: dist.Dist, rng, requests: int | None, duration: float | None) -> np.ndarray:
    """One client's think times: ``requests`` of them and/or those whose running sum
    stays below ``duration``."""
    # Zero think time never uses up the duration (and a duration alone is refused then).
    if duration is None or think.mean == 0:
        return think.sample(rng, requests)
    parts, clock, have = [], 0.0, 0
    while True:
        want = int(duration / think.mean * 1.1) + 16
        block = want if requests is None else min(want, requests - have)
        t = think.sample(rng, block)
        keep = int(np.searchsorted(clock + np.cumsum(t), duration, side="left"))
        parts.append(t[:keep])
        have += keep
        clock += float(t.sum())
        if keep < block or (requests is not None and have >= requests):
            return np.concatenate(parts)
