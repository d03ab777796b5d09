"""How a generator's requests become rows: grouped into keep-alive connections, and for
closed loops interleaved client by client. Shared by the generators in
:mod:`~offloadlab.workload.stream` and :mod:`~offloadlab.workload.sessions`.

A connection is a run of a client's consecutive requests; ``starts`` (a bool per
request) marks the first request of each.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from offloadlab.errors import InputError
from offloadlab.workload.counts import Count, parse_count
from offloadlab.workload.objects import ObjectTable


def per_connection(keep_alive) -> Count | None:
    """The ``keep_alive`` argument: None for HTTP/1.0 (False), else requests per
    connection."""
    if keep_alive is False or keep_alive is None:
        return None
    if keep_alive is True:
        raise InputError("keep_alive=True: give the requests per connection instead, e.g. "
                         "keep_alive=5 or keep_alive='geom(mean=5)'")
    count = parse_count(keep_alive, "keep_alive")
    if count.low < 1:
        raise InputError(f"keep_alive={keep_alive!r}: a connection carries at least 1 request")
    return count


def spec(per_conn: Count | None) -> str | bool:
    """:func:`per_connection`'s result as recorded in a stream's params."""
    return False if per_conn is None else str(per_conn)


def starts_at(lengths: np.ndarray) -> np.ndarray:
    """Positions where each group of ``lengths`` begins."""
    return (np.cumsum(lengths) - lengths).astype(np.int64)


def starts_of(lengths: np.ndarray) -> np.ndarray:
    """The ``starts`` mask of consecutive groups of ``lengths``."""
    starts = np.zeros(int(lengths.sum()), dtype=bool)
    starts[starts_at(lengths)[lengths > 0]] = True
    return starts


def keep_alive_flags(starts: np.ndarray) -> np.ndarray:
    """A request keeps its connection open unless the next one starts a new one (or it
    is the last)."""
    return np.append(~starts[1:], False) if len(starts) else starts.copy()


def cut(lengths: np.ndarray, total: int) -> np.ndarray:
    """Connection lengths that add up to at most ``total`` requests (the last cut short)."""
    ends = np.cumsum(lengths)
    k = int(np.searchsorted(ends, total, side="left"))
    if k >= len(lengths):
        return lengths
    out = lengths[: k + 1].copy()
    out[-1] -= ends[k] - total
    return out


def client_starts(n: int, per_conn: Count | None, rng) -> np.ndarray:
    """``starts`` for one client's ``n`` consecutive requests."""
    if per_conn is None:
        return np.ones(n, dtype=bool)
    parts, have = [], 0
    while have < n:
        lengths = per_conn.sample(rng, max(16, int((n - have) / per_conn.mean) + 16))
        parts.append(lengths)
        have += int(lengths.sum())
    return starts_of(cut(np.concatenate(parts), n)) if n else np.zeros(0, dtype=bool)


def closed_frame(cols: dict, client: np.ndarray, n: np.ndarray, starts: np.ndarray,
                 table: ObjectTable, rng_obj, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Rows given client by client (``n`` per client) -> interleaved rows (by position in
    the client's sequence, then client) with objects, connection ids and keep-alive flags.
    ``cols`` holds ``think_s`` and any further columns, in client-by-client order. The
    objects are ``table``'s ``rows`` (client by client), or else drawn by popularity."""
    seq = np.arange(len(client)) - np.repeat(np.cumsum(n) - n, n)
    order = np.lexsort((client, seq))
    keep = keep_alive_flags(starts)
    conn = np.cumsum(starts) - 1
    out = {k: (v[order] if isinstance(v, np.ndarray) else v.take(order)) for k, v in cols.items()}
    obj, size = table.draw(rng_obj, len(order)) if rows is None else table.take(rows[order])
    frame = pd.DataFrame({"think_s": out.pop("think_s"), "object": obj, "size_bytes": size,
                          "conn_id": _first_seen(conn[order]), "keep_alive": keep[order],
                          "client": client[order], **out})
    if "session" in frame:
        frame["session"] = _first_seen(frame["session"].to_numpy())
    return frame


def _first_seen(ids: np.ndarray) -> np.ndarray:
    """Renumber ids 0, 1, 2, ... in order of first appearance."""
    if not len(ids):
        return ids.astype(np.int64)
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse]
