"""What a trace, a request stream or a file-set manifest says about its workload.

:func:`analyze_requests` reads request tables chunk by chunk (memory grows with the
number of objects and connections, not with the number of requests);
:func:`analyze_manifest` reads a file-set manifest (sizes and request probabilities, no
arrivals). Both return an :class:`Analysis`: the size fits
(:mod:`~offloadlab.workload.fits`), popularity, size-class shares, connection skew and
arrival checks (:mod:`~offloadlab.workload.stats`). :meth:`Analysis.to_json` gives it as
JSON, :mod:`offloadlab.report.workload` as terminal tables and a figure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offloadlab.errors import InputError, require
from offloadlab.results import jsonable
from offloadlab.workload.fits import SizeFits, fit_sizes
from offloadlab.workload.stats import (
    REORDER_S,
    ArrivalCounter,
    Arrivals,
    ClassShare,
    ConnectionSkew,
    Popularity,
    class_shares,
    connection_skew,
    popularity,
)

# Inter-arrival times kept for the K-S test.
RESERVOIR = 1_000_000


@dataclass(frozen=True)
class Analysis:
    """Everything :func:`analyze_requests` or :func:`analyze_manifest` found.

    ``sizes`` are fitted to one size per object; ``popularity`` ranks objects by requests
    (or by manifest probability); ``classes`` per size class; ``connections`` only when
    the input has connection ids; ``arrivals`` only for requests with ``time_s``.
    ``summary`` holds the totals (requests, objects, bytes, ...); ``notes`` what the
    reader should know (left-out rows, caveats).
    """

    source: str
    summary: dict
    sizes: SizeFits
    popularity: Popularity | None
    classes: tuple[ClassShare, ...]
    connections: ConnectionSkew | None = None
    arrivals: Arrivals | None = None
    notes: tuple[str, ...] = ()
    top_objects: tuple[tuple[str, float, int], ...] = ()

    def to_json(self) -> dict:
        """Plain JSON types (NaN -> null, inf -> "inf"); ``json.dumps(...,
        allow_nan=False)`` accepts it."""
        return jsonable({
            "source": self.source, **self.summary,
            "sizes": self.sizes.to_json(),
            "popularity": None if self.popularity is None else self.popularity.to_json(),
            "top_objects": [{"object": o, "requests": r, "size_bytes": s}
                            for o, r, s in self.top_objects],
            "classes": [c.to_json() for c in self.classes],
            "connections": None if self.connections is None else self.connections.to_json(),
            "arrivals": None if self.arrivals is None else self.arrivals.to_json(),
            "notes": list(self.notes),
        })


class _Codes:
    """Dense integer codes for keys (objects, connections) and per-code totals, grown as
    new keys appear: requests, known bytes and the largest known size."""

    def __init__(self) -> None:
        self.index: dict = {}
        self.requests = np.zeros(0, dtype=np.int64)
        self.bytes = np.zeros(0, dtype=np.int64)
        self.size = np.zeros(0, dtype=np.int64)

    def add(self, keys: pd.Series, sizes: np.ndarray) -> np.ndarray:
        """Count the rows; return the positions of the rows whose key is new (its first
        row, in row order)."""
        codes, uniques = pd.factorize(keys, sort=False)
        index = self.index
        before = len(index)
        remap = np.fromiter((index.setdefault(u, len(index)) for u in uniques),
                            dtype=np.int64, count=len(uniques))
        code = remap[codes]
        grow = len(index) - self.requests.size
        if grow > 0:
            self.requests = np.r_[self.requests, np.zeros(grow, np.int64)]
            self.bytes = np.r_[self.bytes, np.zeros(grow, np.int64)]
            self.size = np.r_[self.size, np.full(grow, -1, np.int64)]
        np.add.at(self.requests, code, 1)
        known = sizes >= 0
        np.add.at(self.bytes, code[known], sizes[known])
        np.maximum.at(self.size, code[known], sizes[known])
        _, first = np.unique(codes, return_index=True)         # uniques are in code order
        return first[remap >= before]

    def keys(self) -> list:
        return list(self.index)


def analyze_requests(chunks: Iterable[pd.DataFrame] | pd.DataFrame, *,
                     reservoir: int = RESERVOIR, seed: int = 0, top_fraction: float = 0.1,
                     hybrid: bool = True, arrivals: str = "requests",
                     name: str = "requests") -> Analysis:
    """Analyse request tables (a trace reader's chunks, or a stream), one chunk at a time.

    Columns used: ``object`` and ``size_bytes`` (required; -1 = unknown size),
    ``conn_id`` (>= 0; -1 = none) for connection skew, ``time_s`` (seconds) for
    arrivals, put in time order where they are out of order by up to
    ``stats.REORDER_S``. Memory grows with the distinct objects and connections (plus at
    most ``reservoir`` inter-arrival times and the times of REORDER_S), not with the
    number of requests; the result does not depend on how the requests are cut into
    chunks.

    An object's size is the largest size_bytes seen for it (a 304 or a partial response
    moves fewer bytes than the object holds); sizes are fitted to one size per object,
    and each request counts in its object's size class, with the bytes it moved.

    ``arrivals="connections"`` checks the times at which connections open (a connection's
    first request; a request without a connection id opens its own) instead of every
    request's: with keep-alive, seed 000's Poisson process is one of connection (session)
    initiations, and the requests that follow on a connection are not Poisson.
    ``name`` labels the input in error messages.
    """
    require(arrivals in ("requests", "connections"),
            f"arrivals={arrivals!r}: use 'requests' or 'connections'")
    require(reservoir >= 2, f"reservoir={reservoir!r}: keep at least 2 inter-arrival times")
    require(0 < top_fraction < 1, f"top_fraction={top_fraction!r}: use a fraction in (0, 1), "
            "e.g. 0.1 for seed 004's top 10 %")
    if isinstance(chunks, pd.DataFrame):
        chunks = [chunks]
    objects, conns = _Codes(), _Codes()
    counter = ArrivalCounter(reservoir, seed)
    has_conn = has_time = False
    rows = unknown = 0
    for n, chunk in enumerate(chunks):
        _check_columns(chunk, n, name)
        if chunk.empty:
            continue
        sizes = _int_column(chunk, "size_bytes", n, name)
        if chunk["object"].isna().any():
            raise InputError(f"{name}: chunk {n}: {int(chunk['object'].isna().sum())} "
                             "requests have no object; every request needs one")
        rows += len(chunk)
        unknown += int(np.count_nonzero(sizes < 0))
        objects.add(chunk["object"], sizes)
        opens = np.ones(len(chunk), dtype=bool)          # the rows that open a connection
        if "conn_id" in chunk:
            cid = _int_column(chunk, "conn_id", n, name)
            on = np.flatnonzero(cid >= 0)
            if on.size:
                has_conn = True
                opens[on] = False
                opens[on[conns.add(pd.Series(cid[on]), sizes[on])]] = True
        if "time_s" in chunk:
            has_time = True
            t = _numbers(chunk, "time_s", n, name,
                         "; use seconds from the first request").astype(float)
            counter.add(t if arrivals == "requests" else t[opens])
    require(rows > 0, f"{name}: no requests to analyse (the input has no rows)")
    require(unknown < rows, f"{name}: all {rows:,} requests have an unknown size "
            "(size_bytes = -1); sizes are needed for every part of the analysis")
    notes = []
    if unknown:
        notes.append(f"{unknown:,} of {rows:,} requests have an unknown size (size_bytes = "
                     "-1): counted in requests and popularity, not in bytes")
    sizes = objects.size
    sizes_fit = fit_sizes(sizes[sizes >= 0], hybrid=hybrid)
    notes += _size_notes(sizes_fit, "objects")
    keys = objects.keys()
    top = np.argsort(-objects.requests, kind="stable")[:10]
    summary = {"requests": rows, "objects": len(keys), "bytes": int(objects.bytes.sum()),
               "unknown_size": unknown}
    connections = None
    if has_conn:
        connections = connection_skew(conns.requests, conns.bytes, top_fraction)
    arr = counter.result(seed, arrivals) if has_time else None
    if arr is not None:
        notes += _arrival_notes(arr)
    return Analysis(
        "requests", summary, sizes_fit, popularity(objects.requests),
        class_shares(sizes, objects.requests, objects.bytes), connections, arr, tuple(notes),
        tuple((str(keys[i]), int(objects.requests[i]), int(sizes[i])) for i in top))


def analyze_manifest(manifest: pd.DataFrame, *, hybrid: bool = True,
                     name: str = "manifest") -> Analysis:
    """Analyse a file-set manifest: sizes per file, popularity from ``probability``.

    The request share of a class is the sum of its files' probabilities, its byte share
    sum(p size) / sum over all files. With no ``probability`` column the popularity is
    left out and every file counts once. No connections, no arrivals.
    """
    if not isinstance(manifest, pd.DataFrame) or "size_bytes" not in manifest:
        cols = list(manifest.columns) if isinstance(manifest, pd.DataFrame) else "not a table"
        raise InputError(f"{name}: no 'size_bytes' column (columns: {cols}); a manifest "
                         "needs size_bytes per file (and probability for popularity)")
    require(len(manifest) > 0, f"{name}: the manifest has no files")
    sizes = _int_column(manifest, "size_bytes", None, name)
    require(bool(np.all(sizes >= 0)), f"{name}: size_bytes must be >= 0 for every file "
            f"(row {int(np.argmax(sizes < 0))} is {int(sizes.min())})")
    notes = []
    if "probability" in manifest:
        p = pd.to_numeric(manifest["probability"], errors="coerce").to_numpy(dtype=float)
        require(bool(np.all(np.isfinite(p) & (p >= 0))) and p.sum() > 0,
                f"{name}: probability must be a number >= 0 for every file, not all 0")
        p = p / p.sum()
        pop = popularity(p, sampled=False)
    else:
        p = np.full(sizes.size, 1.0 / sizes.size)
        pop = None
        notes.append("no probability column: popularity left out, every file counts once")
    sizes_fit = fit_sizes(sizes, hybrid=hybrid)
    notes += _size_notes(sizes_fit, "files")
    paths = (manifest["path"].astype(str).tolist() if "path" in manifest
             else [str(i) for i in range(sizes.size)])
    top = np.argsort(-p, kind="stable")[:10] if pop is not None else []
    summary = {"requests": None, "objects": int(sizes.size), "bytes": int(sizes.sum()),
               "unknown_size": 0, "mean_request_bytes": float((p * sizes).sum())}
    return Analysis("manifest", summary, sizes_fit, pop, class_shares(sizes, p, p * sizes),
                    notes=tuple(notes),
                    top_objects=tuple((paths[i], float(p[i]), int(sizes[i])) for i in top))


def _check_columns(chunk, n: int, name: str) -> None:
    if not isinstance(chunk, pd.DataFrame):
        raise InputError(f"{name}: chunk {n} is a {type(chunk).__name__}, not a DataFrame")
    missing = [c for c in ("object", "size_bytes") if c not in chunk]
    if missing:
        raise InputError(f"{name}: chunk {n}: no {' or '.join(repr(c) for c in missing)} "
                         f"column (columns: {list(chunk.columns)}); the analysis needs "
                         "object and size_bytes per request (-1 for an unknown size)")


def _int_column(df: pd.DataFrame, col: str, n: int | None, name: str) -> np.ndarray:
    hint = ", not a whole number" + (" (-1 for unknown)" if col != "size_bytes" else "")
    return _numbers(df, col, n, name, hint).astype(np.int64)


def _numbers(df: pd.DataFrame, col: str, n: int | None, name: str, hint: str) -> np.ndarray:
    """The column as numbers; InputError naming the first row that is not a finite one."""
    values = pd.to_numeric(df[col], errors="coerce")
    bad = values.isna() | ~np.isfinite(values.astype(float))
    if bad.any():
        row = int(np.argmax(bad.to_numpy()))
        where = f"{name}: " + ("" if n is None else f"chunk {n}: ")
        raise InputError(f"{where}{col} in row {row} is {df[col].iloc[row]!r}{hint}")
    return values.to_numpy()


def _size_notes(fits: SizeFits, what: str) -> list[str]:
    notes = []
    if fits.zeros:
        notes.append(f"{fits.zeros:,} {what} of 0 bytes are left out of the size fits")
    best = fits.best
    if best is not None and best.family == "pareto" and best.dist is None:
        notes.append(f"pareto alpha={best.params['alpha']:.3g} <= 1 has no finite mean: no "
                     "offloadlab.dist.Pareto for it; a bpareto (bounded) fit has one")
    return notes


def _arrival_notes(a: Arrivals) -> list[str]:
    notes = []
    if a.out_of_order:
        notes.append(f"{a.out_of_order:,} {a.of} are listed after a later one (time_s not "
                     "in order): the times were sorted before taking the gaps")
    if a.late:
        notes.append(f"{a.late:,} of them are listed more than {REORDER_S:g} s after a later "
                     "one: their gaps are left out; sort the input by time to use them")
    if a.early:
        notes.append(f"{a.early:,} {a.of} are stamped before the first one (time_s < 0): "
                     "counted in the first bin of the rate over time")
    if a.ties > 0.01:
        why = ("the timestamps are whole seconds: judge by the dispersion test of counts "
               f"per {a.bin_s:g} s bin instead" if a.resolution_s else
               "arrivals come in batches, e.g. requests on one keep-alive connection; "
               "arrivals='connections' checks the connection openings")
        notes.append(f"{a.ties:.0%} of the inter-arrival times are 0, so the K-S tests "
                     f"reject on ties alone; {why}")
    if a.gaps > a.sampled:
        notes.append(f"K-S test on a random sample of {a.sampled:,} of {a.gaps:,} "
                     "inter-arrival times")
    return notes

