"""Drive the load generator (``crates/offload-load``) with a request stream.

A stream (:mod:`offloadlab.workload.stream`) says when each request goes, for which
object, on which connection; the file set's manifest says each object's size, class
and SHA-256, so every response is checked. The generator measures open-loop latency
from each request's *intended* send time (no coordinated omission). :func:`steps` runs
rising Poisson rates until p99 or the error rate passes a bound (a saturation search).

A session stream's dynamic requests go out as ``PATH?work=MICROSECONDS``: the testbed
server burns that much CPU for them, as a page's script would, and answers with the file
at the path, so the body is checked like any other (see ``docs/testbed.md``).
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from offloadlab import _core
from offloadlab.background import watched
from offloadlab.documents import LoadReport
from offloadlab.errors import InputError
from offloadlab.results import write_atomic
from offloadlab.testbed import cores as cores_policy
from offloadlab.workload import fileset
from offloadlab.workload.stream_format import Stream

VERIFY = ("checksum", "length", "none")
METHODS = ("GET", "HEAD")
ERROR_NAMES = dict(_core.LOAD_ERRORS)
_POLL_S = 0.2


@dataclass(frozen=True)
class Target:
    """Where requests go: ``addr`` is IP:PORT, ``host`` the Host header, ``prefix`` the
    URL path that object paths are appended to."""

    addr: str
    host: str
    prefix: str = "/"


def parse_target(text: str) -> Target:
    """``HOST:PORT`` or ``http://HOST:PORT/PREFIX/`` (HOST a name or an address)."""
    url = urlsplit(text if "://" in text else f"http://{text}")
    if url.scheme != "http" or not url.hostname or url.port is None:
        raise InputError(f"target {text!r}: write HOST:PORT or http://HOST:PORT/, "
                         "e.g. 127.0.0.1:8080")
    try:
        info = socket.getaddrinfo(url.hostname, url.port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise InputError(f"target {text!r}: cannot resolve {url.hostname}: {exc}") from None
    ip = info[0][4][0]
    addr = f"[{ip}]:{url.port}" if ":" in ip else f"{ip}:{url.port}"
    prefix = url.path if url.path.endswith("/") else f"{url.path}/"
    return Target(addr, f"{url.hostname}:{url.port}", prefix)


@dataclass(frozen=True)
class LoadResult:
    """One run: the generator's report (counts, errors by kind, rates, the send lag,
    latency quantiles in seconds, overall and per size class) as it came, and, if asked,
    one record per request and the ``parts`` that add this run to others exactly
    (:mod:`offloadlab.testbed.cluster`). ``parsed`` is the report to read."""

    target: str
    report: dict
    records: pd.DataFrame | None = None
    parts: dict | None = None

    def __getitem__(self, key: str):
        return self.report[key]

    @cached_property
    def parsed(self) -> LoadReport:
        return LoadReport.from_json(self.report)

    @property
    def error_rate(self) -> float:
        done = self.parsed.completed + self.parsed.failed
        return self.parsed.failed / done if done else math.nan

    def to_json(self) -> dict:
        return {"target": self.target, **self.report}


def run(target: str | Target, requests: Stream, objects, *, threads: int | None = None,
        timeout_s: float = 5.0, max_duration_s: float | None = None, method: str = "GET",
        verify: str = "checksum", records: bool = False, allow_remote: bool = False,
        busy_poll_s: float = 0.0, repeat: bool = False, cores: Sequence[int] = (),
        nice: int | None = None, beside_spinner: bool = False, rcvlowat: int = 0,
        discard: bool = False, start_unix_s: float | None = None, parts: bool = False,
        progress: Callable[[_core.LoadControl], None] | None = None) -> LoadResult:
    """Send ``requests`` to ``target`` and measure them.

    ``objects`` is the file set's manifest (a DataFrame, or a file-set folder or
    manifest file) the stream's object paths refer to. Open-loop streams wait until
    each request's ``time_s``; closed ones think ``think_s`` first. The run stops by
    itself after ``max_duration_s`` (default: the stream's span or stated duration plus
    twice the timeout, or 600 s for a closed stream of unknown length). With ``repeat``
    (closed streams), each client starts its requests over until ``max_duration_s``:
    a saturation run bounded by time alone, as wrk does. ``cores`` pins the generator's
    threads (round robin) to keep it off the cores being measured; ``nice`` is their
    niceness (default: :func:`offloadlab.testbed.cores.generator_nice`, ahead of the
    server's threads when pinned in an open loop beside one that spins,
    ``beside_spinner``). Loopback only unless
    ``allow_remote``. ``rcvlowat`` (bytes, 0: off) has the kernel report an answer
    only once that many of its bytes, at most its object's size, are there: one wake-up
    and read per small answer, at the price of a first-byte time that reads as the time
    those bytes were there (docs/load.md). ``discard`` drops each body of known length
    in the kernel unread (``recv`` with ``MSG_TRUNC``): the generator's per-byte
    receive cost goes, every answer is still held to its size, and its content is never
    seen, so it needs ``verify`` "length" or "none". ``start_unix_s`` (wall clock) has
    the generator prepare, then wait for that time to start, as hosts that load one
    server together do; ``parts`` keeps what adds this run to others' exactly (encoded
    histograms, the span of actual starts). ``progress(control)`` is called every 0.2 s.
    """
    target = parse_target(target) if isinstance(target, str) else target
    if method.upper() not in METHODS:
        raise InputError(f"method {method!r}: use GET or HEAD")
    if verify not in VERIFY:
        raise InputError(f"verify {verify!r}: use one of {', '.join(VERIFY)}")
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise InputError(f"timeout {timeout_s!r}: use a time > 0, e.g. 5s")
    if not (isinstance(rcvlowat, int) and 0 <= rcvlowat < 2**31):
        raise InputError(f"rcvlowat {rcvlowat!r}: give 0 (off) or a number of bytes, e.g. 4096")
    if discard and verify == "checksum":
        raise InputError("discard drops bodies unread, so they cannot be checksummed: "
                         "give verify 'length' (every answer still held to its size)")
    allowed = os.sched_getaffinity(0)
    if any(c not in allowed for c in cores):
        raise InputError(f"cores {list(cores)}: this process may run on cores "
                         f"{sorted(allowed)} only; pick from those")
    manifest = objects if isinstance(objects, pd.DataFrame) else fileset.read_manifest(objects)
    frame = requests.frame
    index = pd.Index(manifest["path"]).get_indexer(frame["object"].astype(str))
    if (index < 0).any():
        missing = frame["object"].astype(str)[index < 0].iloc[0]
        raise InputError(f"stream object {missing!r} is not in the manifest; generate the "
                         "stream from the same file set")
    closed = requests.kind == "closed"
    if nice is None:
        nice = cores_policy.generator_nice(pinned=bool(cores), beside_spinner=beside_spinner)
    if not isinstance(nice, int):  # the generator checks the range
        raise InputError(f"nice {nice!r}: give a whole niceness from -20 to 19")
    if repeat and not closed:
        raise InputError("repeat applies to closed-loop streams (clients with think times)")
    times = frame["think_s" if closed else "time_s"].to_numpy(float)
    if max_duration_s is None:
        max_duration_s = default_bound(requests, timeout_s)
    targets, index = _targets(manifest, frame, index)
    args = dict(
        addr=target.addr, host=target.host, allow_remote=allow_remote,
        objects=[(f"{target.prefix}{t}", int(s), str(c or ""), int(k))
                 for t, s, c, k in zip(targets["path"], targets["size_bytes"],
                                       targets["checksum"], targets["class"], strict=True)],
        at_s=times.tolist(), object=index.tolist(),
        conn=frame["conn_id"].to_numpy(np.int64).tolist(),
        keep_alive=frame["keep_alive"].to_numpy(bool).tolist(),
        # The generator keys clients in 32 bits, and only which requests share a client
        # matters: a trace's ids are wider (a CLF host name's is 2**32 plus a hash).
        client=pd.factorize(frame["client"])[0].tolist(), closed=closed,
        threads=threads or os.cpu_count() or 1, timeout_s=float(timeout_s),
        max_duration_s=float(max_duration_s), method=method.upper(), verify=verify,
        records=records, busy_poll_s=float(busy_poll_s), repeat=repeat,
        cores=[int(c) for c in cores], nice=nice, rcvlowat=rcvlowat, discard=bool(discard),
        start_unix_s=start_unix_s, parts=parts)
    try:
        out = watched(_core.load, args, _core.LoadControl(), progress, _POLL_S)
    except ValueError as exc:  # the generator's own checks (e.g. a remote target)
        raise InputError(str(exc)) from None
    table = None
    if "records" in out:
        table = pd.DataFrame(out["records"])
        table["path"] = targets["path"].to_numpy()[table["object"]]
        table["class"] = targets["class"].to_numpy()[table["object"]]
        table["error"] = table["error"].map(lambda e: ERROR_NAMES.get(e, "unfinished")
                                            if e else "")
    return LoadResult(target.addr, json.loads(out["report"]), table,
                      json.loads(out["parts"]) if parts else None)


def _targets(manifest: pd.DataFrame, frame: pd.DataFrame,
             index: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """What the generator requests: the manifest's objects, then one ``PATH?work=US``
    per distinct (object, work) of the stream's dynamic requests, and each request's
    row in that table."""
    if "dynamic" not in frame or not frame["dynamic"].any():
        return manifest, index
    dynamic = frame["dynamic"].to_numpy(bool)
    work_us = np.rint(frame["app_work_s"].to_numpy(float)[dynamic] * 1e6).astype(np.int64)
    pairs, inverse = np.unique(np.stack([index[dynamic], work_us]), axis=1,
                               return_inverse=True)
    pages = manifest.iloc[pairs[0]].reset_index(drop=True)
    pages["path"] = [f"{p}?work={w}" for p, w in zip(pages["path"], pairs[1], strict=True)]
    index = index.copy()
    index[dynamic] = len(manifest) + inverse.ravel()
    return pd.concat([manifest, pages], ignore_index=True), index


def default_bound(requests: Stream, timeout_s: float) -> float:
    """A run's bound when none is given: an open loop's span, or a closed loop's stated
    duration (600 s if none), plus twice the timeout."""
    if requests.kind == "open":
        return float(requests.frame["time_s"].to_numpy(float).max(initial=0.0)) + 2 * timeout_s
    stated = requests.meta.get("duration_s")
    return float(stated) + 2 * timeout_s if stated else 600.0


def write_records(result: LoadResult, path: str | Path) -> None:
    """The per-request records as Parquet (atomically)."""
    if result.records is None:
        raise InputError("this run kept no records; run with records=True (--records)")
    write_atomic(path, lambda tmp: result.records.to_parquet(tmp, index=False))


@dataclass(frozen=True)
class Step:
    rate: float
    result: LoadResult
    stop_reason: str = ""


def steps(target: str | Target, objects, rates: Sequence[float], make_stream, *,
          stop_p99_s: float | None = None, stop_error_rate: float | None = None,
          on_step: Callable[[Step], None] | None = None, **run_options) -> list[Step]:
    """Run ``make_stream(rate)`` at each rate in turn (a saturation search) and stop after
    the first step whose p99 total time exceeds ``stop_p99_s`` or whose error rate
    exceeds ``stop_error_rate``."""
    done: list[Step] = []
    for rate in rates:
        result = run(target, make_stream(rate), objects, **run_options)
        p99 = result.parsed.total.p99_s
        reason = ""
        if stop_p99_s is not None and (p99 is None or p99 > stop_p99_s):
            reason = f"p99 {p99 if p99 is None else f'{p99 * 1e3:.3g} ms'} > bound"
        elif stop_error_rate is not None and not result.error_rate <= stop_error_rate:
            reason = f"error rate {result.error_rate:.3g} > {stop_error_rate:g}"
        step = Step(float(rate), result, reason)
        done.append(step)
        if on_step is not None:
            on_step(step)
        if reason:
            break
    return done
