"""Load from many hosts: the load generator on Dask workers (``offload load --cluster``).

**One plan.** :func:`split` cuts one stream into a share per host, by client, so that a
client's connections and their reuse stay on one host and the shares, superposed, are
the plan. An open loop's clients (a Poisson stream's connections, a trace's hosts) are
dealt in an order drawn at random, whatever their times, so each host's share of a
Poisson stream is a thinning of it: Poisson at the rate divided by the hosts. A closed
loop's clients, sessions included, are dealt in turn.

**One start.** The start is set on the scheduler's clock, :data:`LEAD_S` ahead, and each
worker starts its generator at that time on its own clock, shifted by its clock's offset
to the scheduler. Each worker measures that offset just before, by round trips to the
scheduler (NTP style: the offset seen on the shortest trip, give or take half of it); a
worker whose offset is unknown stops the run before it starts. The generator prepares,
then waits for the start itself (``load.run(start_unix_s=...)``), and the report gives
the start skew: the spread of the hosts' actual starts on the scheduler's clock.

**One report.** Each host's generator hands back its report and its histograms in
HdrHistogram's V2 encoding; :func:`merge` adds the histograms in Rust
(``_core.merge_histograms``), bucket by bucket, never averaging quantiles. The merged
report has the shape of one run's (``docs/load.md``) plus ``cluster``: per host its
rates, send lag, errors and clock, the start skew, and the hosts lost. A host that
leaves mid-run, or has no result :data:`GRACE_S` past the run's bound, is reported lost
and the run ``partial``; the other hosts' data is kept. Every wait on Dask has a timeout.

Needs a Dask scheduler and workers that offer a ``client`` resource, each with this
project's version::

    dask scheduler                                          # on one host
    dask worker tcp://SCHEDULER:8786 --resources client=1 --nthreads 1    # per client host
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import math
import time
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

import offloadlab
from offloadlab import _core, dask_scheduler
from offloadlab.errors import InputError, RunError
from offloadlab.testbed import load
from offloadlab.workload import fileset
from offloadlab.workload.stream_format import Stream

RESOURCE = "client"
CONNECT_TIMEOUT_S = 10.0
CALL_TIMEOUT_S = 10.0     # each call on the scheduler or a worker
# The start is this far ahead of the moment it is set: time to hand each worker its share
# and for its generator to prepare the requests. A host that misses it starts at once,
# and its ``started_late_s`` in the report says by how much.
LEAD_S = 2.0
GRACE_S = 5.0             # past the run's bound, a host without a result is lost
CLOCK_ROUNDS = 8
STOP_S = 2.0              # after Ctrl-C, how long to wait for the hosts' generators to stop
# On a worker: the runs whose generator is running, and those the driver has stopped.
_RUNNING: set[str] = set()
_STOPPED: set[str] = set()
_POLL_S = 0.25
_KINDS = ("total", "ttfb", "connect")


@dataclass(frozen=True)
class Worker:
    """A client host: its Dask worker's ``address`` and ``name``, and its clock's offset
    to the scheduler's (scheduler − worker, seconds), give or take ``uncertainty_s``."""

    address: str
    name: str
    offset_s: float
    uncertainty_s: float


@dataclass(frozen=True)
class HostRun:
    """What one host did with its share: its report and parts, or why it has none."""

    worker: Worker
    rows: np.ndarray           # the plan's rows in its share
    report: dict | None = None
    parts: dict | None = None
    records: pd.DataFrame | None = None
    lost: str = ""

    def started_s(self) -> float:
        """The actual start on the scheduler's clock."""
        return self.report["started_unix_s"] + self.worker.offset_s


def split(requests: Stream, hosts: int, seed: int = 1) -> list[np.ndarray]:
    """The plan's rows each of ``hosts`` hosts sends, by client (above); every host gets
    a client. A stream of fewer clients than hosts is an :class:`InputError`."""
    codes, clients = pd.factorize(requests.frame["client"])
    if len(clients) < hosts:
        raise InputError(f"the stream has {len(clients)} client(s), and a client's "
                         f"requests stay on one host: give {len(clients)} client host(s) "
                         "or fewer, or a stream of more clients")
    order = (np.arange(len(clients)) if requests.kind == "closed"
             else np.random.default_rng(seed).permutation(len(clients)))
    host_of = np.empty(len(clients), dtype=np.int64)
    host_of[order] = np.arange(len(clients)) % hosts
    host_of_row = host_of[codes]
    return [np.flatnonzero(host_of_row == h) for h in range(hosts)]


def share(requests: Stream, rows: np.ndarray, index: int, hosts: int) -> Stream:
    """The stream of the plan's ``rows``: what host ``index`` of ``hosts`` sends."""
    frame = requests.frame.iloc[rows].reset_index(drop=True)
    return Stream(frame, {**requests.meta, "share": f"{index + 1} of {hosts}"})


def offered_rate(requests: Stream) -> float | None:
    """The plan's rate as the generator reports it: (n − 1) / span of intended starts;
    None for a closed loop."""
    if requests.kind == "closed" or len(requests) < 2:
        return None
    times = requests.frame["time_s"].to_numpy(float)
    span = times.max() - times.min()
    return (len(times) - 1) / span if span > 0 else None


def run(address: str, target: str | load.Target, requests: Stream, objects, *,
        hosts: int | None = None, allow_remote: bool | Collection[str] = False,
        seed: int = 1, connect_timeout_s: float | None = None,
        **run_options) -> load.LoadResult:
    """Send ``requests`` to ``target`` from the Dask workers at ``address``
    (``tcp://HOST:PORT``) that offer a ``client`` resource, or from ``hosts`` of them,
    and return the merged :class:`~offloadlab.testbed.load.LoadResult`.

    ``allow_remote``: True lets the generators load any address, a collection of
    addresses those only (a test cluster's server); a loopback target is each host's
    own loopback. ``run_options`` are :func:`offloadlab.testbed.load.run`'s (not
    ``cores``, ``progress`` or ``start_unix_s``). ``connect_timeout_s``: how long
    to wait for the scheduler (default :data:`CONNECT_TIMEOUT_S`). With ``records``, the result's
    records hold every host's requests, by the plan's row (``request``) and ``host``,
    with times from the planned start on the scheduler's clock.
    """
    target = load.parse_target(target) if isinstance(target, str) else target
    refused = {"cores", "progress", "start_unix_s", "parts"} & set(run_options)
    if refused:
        raise InputError(f"{', '.join(sorted(refused))}: not for a run across hosts")
    run_options["allow_remote"] = _allowed(target, allow_remote)
    if hosts is not None and hosts < 1:
        raise InputError(f"--client-hosts {hosts}: give 1 or more")
    if run_options.get("max_duration_s") is None:  # one bound for every host: the plan's
        run_options["max_duration_s"] = load.default_bound(
            requests, run_options.get("timeout_s", 5.0))
    manifest = objects if isinstance(objects, pd.DataFrame) else fileset.read_manifest(objects)
    with dask_scheduler.connect(
            address, connect_timeout_s or CONNECT_TIMEOUT_S,
            f"client hosts with `dask worker {address} --resources {RESOURCE}=1`") as client:
        workers = client_workers(client, address, hosts)
        shares = split(requests, len(workers), seed)
        streams = [share(requests, rows, i, len(workers)) for i, rows in enumerate(shares)]
        planned, driver_offset = _start(client)
        run_id = f"offload-load-{time.time_ns()}"
        try:
            futures = {
                w.address: client.submit(
                    _run_share, target, part, manifest, planned - w.offset_s, run_options,
                    run_id, key=f"{run_id}-{w.name}", workers=[w.address],
                    allow_other_workers=False, resources={RESOURCE: 1}, pure=False)
                for w, part in zip(workers, streams, strict=True)}
            deadline = planned - driver_offset + run_options["max_duration_s"] + GRACE_S
            outcomes = _collect(client, futures, deadline)
        except BaseException:  # Ctrl-C, or a share refused: stop every host's generator
            _stop(client, run_id, [w.address for w in workers])  # before returning
            raise
    runs = [HostRun(w, rows, **outcomes[w.address])
            for w, rows in zip(workers, shares, strict=True)]
    done = [r for r in runs if not r.lost]
    if not done:
        first = runs[0].lost
        raise RunError(f"no client host returned a report; {runs[0].worker.name}: {first}")
    doc, parts = merge(done, offered_rate(requests))
    doc["cluster"] = _cluster_section(address, runs, planned)
    return load.LoadResult(target.addr, doc, _records(done, planned)
                           if run_options.get("records") else None, parts)


def _allowed(target: load.Target, allow: bool | Collection[str]) -> bool:
    """Whether the generators must be let past their loopback-only rule for
    ``target``; an :class:`InputError` if they may not be."""
    ip = ipaddress.ip_address(target.addr.rsplit(":", 1)[0].strip("[]"))
    if ip.is_loopback:
        return False
    if allow is True or (not isinstance(allow, bool) and str(ip) in allow):
        return True
    raise InputError(f"target {target.addr} is not loopback: give --allow-remote to load "
                     "it from the client hosts")


def offering(client, address: str, resource: str, fix: str) -> list[tuple[str, str]]:
    """(name, address) of each worker that offers ``resource``, by name; an
    :class:`InputError` ending with ``fix`` when none does."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    found = sorted((str(w.get("name", a)), a) for a, w in info.items()
                   if w.get("resources", {}).get(resource, 0) >= 1)
    if not found:
        raise InputError(f"--cluster {address}: no worker offers the `{resource}` resource "
                         f"({len(info)} worker(s) without it); {fix}")
    return found


def client_workers(client, address: str, wanted: int | None) -> list[Worker]:
    """The workers that offer the resource (``wanted`` of them), with this project's
    version and a known clock offset; an :class:`InputError` or :class:`RunError`
    saying what is missing."""
    fix = f"start them with `dask worker {address} --resources {RESOURCE}=1`"
    found = offering(client, address, RESOURCE, fix)
    if wanted is not None and wanted > len(found):
        raise InputError(f"--client-hosts {wanted}: the scheduler has {len(found)} "
                         f"worker(s) with the `{RESOURCE}` resource; give at most "
                         f"{len(found)}, or {fix}")
    chosen = found[:wanted or len(found)]
    try:
        facts = client.run(_facts, workers=[a for _, a in chosen], on_error="return",
                           callback_timeout=CALL_TIMEOUT_S)
    except TimeoutError:
        raise RunError(f"--cluster {address}: the client workers did not answer within "
                       f"{CALL_TIMEOUT_S:g} s") from None
    problems = mismatched({a: facts.get(a, "no answer") for _, a in chosen},
                          offloadlab.__version__)
    if problems:
        raise InputError(f"--cluster {address}: {'; '.join(problems)}; install this "
                         f"version of offloadlab ({offloadlab.__version__}) on every "
                         "client host")
    unknown = [name for name, a in chosen if not math.isfinite(facts[a]["offset_s"])]
    if unknown:
        raise RunError(f"--cluster {address}: the clock offset to the scheduler of "
                       f"{', '.join(unknown)} is unknown (no round trip answered), so no "
                       "common start can be set; check that the workers reach the "
                       "scheduler")
    return [Worker(a, name, facts[a]["offset_s"], facts[a]["uncertainty_s"])
            for name, a in chosen]


def mismatched(facts: dict[str, dict | Exception | str], version: str) -> list[str]:
    """What is wrong with each worker's answer to :func:`_facts` against this
    ``version``: an error (offloadlab missing there), no answer, another version."""
    problems = []
    for address, fact in facts.items():
        if not isinstance(fact, dict):
            problems.append(f"worker {address} could not run offloadlab ({fact})")
        elif fact["version"] != version:
            problems.append(f"worker {address} has offloadlab {fact['version']}")
    return problems


async def _facts(dask_worker) -> dict:
    """On a worker: this project's version, and the worker's clock offset to the
    scheduler's from :data:`CLOCK_ROUNDS` round trips, the one seen on the shortest
    (NaN when none answered), give or take half of it."""
    from distributed.protocol.pickle import dumps

    call = dumps(time.time)
    best, offset = math.inf, math.nan
    for _ in range(CLOCK_ROUNDS):
        t0 = time.time()
        try:
            reply = await dask_worker.scheduler.run_function(function=call)
        except OSError:  # this round is lost; the others may answer
            continue
        t1 = time.time()
        if reply.get("status") == "OK" and t1 - t0 < best:
            best, offset = t1 - t0, reply["result"] - (t0 + t1) / 2
    return {"version": offloadlab.__version__, "offset_s": offset, "uncertainty_s": best / 2}


def _start(client) -> tuple[float, float]:
    """The planned start on the scheduler's clock, :data:`LEAD_S` from now, and this
    process's clock offset to the scheduler's (one round trip)."""
    t0 = time.time()
    now = client.run_on_scheduler(time.time, callback_timeout=CALL_TIMEOUT_S)
    t1 = time.time()
    return now + LEAD_S, now - (t0 + t1) / 2


def _run_share(target: load.Target, requests: Stream, manifest: pd.DataFrame,
               start_unix_s: float, options: dict, run_id: str) -> dict:
    """On a worker: its share of the load, from ``start_unix_s`` on its own clock; or
    ``refused``, the generator's word on bad input (every host's, as they share it).
    The generator stops within :data:`load._POLL_S` once the driver stops ``run_id``."""
    def stop_if_told(_control) -> None:
        if run_id in _STOPPED:
            raise RunError(f"{run_id}: stopped by the driver")

    _RUNNING.add(run_id)
    try:
        result = load.run(target, requests, manifest, start_unix_s=start_unix_s,
                          parts=True, progress=stop_if_told, **options)
    except InputError as exc:
        return {"refused": str(exc)}
    finally:
        _RUNNING.discard(run_id)
        _STOPPED.discard(run_id)
    return {"report": result.report, "parts": result.parts, "records": result.records}


def _stop(client, run_id: str, workers: list[str]) -> None:
    """Tell each of ``workers`` to stop its generator of ``run_id``, and wait until they
    have (at most :data:`STOP_S`). A worker that does not answer in time is left to the
    run's bound (``max_duration_s``), which stops its generator anyway."""
    with contextlib.suppress(Exception):  # the run is ending anyway; its bound is the fallback
        client.run(_stopped, run_id, workers=workers, on_error="return",
                   callback_timeout=STOP_S + CALL_TIMEOUT_S)


async def _stopped(run_id: str) -> bool:
    """On a worker: mark ``run_id`` stopped (a share that has yet to start then stops at
    its first tick), and wait, without blocking the worker's event loop, until its
    generator has returned; False if it still runs after :data:`STOP_S`."""
    _STOPPED.add(run_id)
    deadline = time.monotonic() + STOP_S
    while run_id in _RUNNING and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return run_id not in _RUNNING


def _collect(client, futures: dict, deadline: float) -> dict[str, dict]:
    """Each worker's outcome: its result's fields, or ``lost`` with why. A worker that
    leaves the cluster is lost at once; one with no result by ``deadline`` (this
    process's clock) then."""
    pending, outcomes = dict(futures), {}
    while pending:
        left = deadline - time.time()
        if left <= 0:
            for a in pending:
                outcomes[a] = {"lost": f"no result {GRACE_S:g} s past the run's bound"}
            break
        time.sleep(min(_POLL_S, left))
        for a, future in [(a, f) for a, f in pending.items() if f.done()]:
            del pending[a]
            try:
                outcomes[a] = future.result(timeout=CALL_TIMEOUT_S)
            except Exception as exc:  # the generator's error, or the worker's death
                outcomes[a] = {"lost": f"failed: {type(exc).__name__}: {exc}"}
        if pending:
            alive = client.nthreads(callback_timeout=CALL_TIMEOUT_S)
            for a in [a for a in pending if a not in alive]:
                del pending[a]
                outcomes[a] = {"lost": "left the cluster during the run"}
    refused = [o["refused"] for o in outcomes.values() if "refused" in o]
    if refused:
        raise InputError(refused[0])
    return outcomes


def merge(runs: list[HostRun], offered: float | None) -> tuple[dict, dict]:
    """One report of the same shape as a single run's (``docs/load.md``) from the
    hosts' reports, and its parts: counts add, histograms add exactly
    (``_core.merge_histograms``), rates and times are taken on the scheduler's clock."""
    reports = [r.report for r in runs]

    def total(key: str) -> int:
        return sum(r[key] for r in reports)

    started = min(r.started_s() for r in runs)
    ended = max(r.report["ended_unix_s"] + r.worker.offset_s for r in runs)
    duration = ended - started
    sent = total("sent")
    senders = [r for r in runs if r.report["sent"]]
    first = min((r.started_s() + r.parts["first_send_s"] for r in senders), default=math.nan)
    last = max((r.started_s() + r.parts["last_send_s"] for r in senders), default=math.nan)
    connections = total("connections")
    classes, class_parts = _classes(runs)
    overall = {kind: merge_histograms([p[kind] for p in class_parts]) for kind in _KINDS}
    lag = merge_histograms([r.parts["lag"] for r in runs])
    doc = {
        "threads": total("threads"), "planned": total("planned"), "sent": sent,
        "completed": total("completed"), "failed": total("failed"),
        "unfinished": total("unfinished"),
        "errors": _added([r["errors"] for r in reports]),
        "status": _added([r["status"] for r in reports]),
        "body_bytes": total("body_bytes"), "duration_s": duration,
        "started_unix_s": started, "ended_unix_s": ended,
        "throughput": _per(total("completed"), duration),
        "goodput_Bps": _per(sum(c["body_bytes"] for c in classes), duration),
        "offered_rate": offered,
        "achieved_rate": (sent - 1) / (last - first) if sent > 1 and last > first else None,
        "lag": {"mean_s": _mean([(r["lag"]["mean_s"], r["sent"]) for r in reports]),
                "p99_s": lag["p99_s"],
                "max_s": max((r["lag"]["max_s"] for r in reports if r["sent"]),
                             default=None)},
        "connections": connections,
        "connect_mean_s": _mean([(r["connect_mean_s"], r["connections"]) for r in reports]),
        "connections_per_min": _per(connections * 60, duration),
        "classes": classes, **{kind: _quantiles(m) for kind, m in overall.items()},
    }
    parts = {"first_send_s": first - started if senders else None,
             "last_send_s": last - started if senders else None,
             "lag": lag["histogram"], "classes": class_parts}
    return doc, parts


def _classes(runs: list[HostRun]) -> tuple[list[dict], list[dict]]:
    """Per size class, over every host that saw it: counts added and the quantiles of
    the merged histograms; and those histograms, encoded."""
    reports, parts = [], []
    for cid in sorted({c["class"] for r in runs for c in r.report["classes"]}):
        counted = [c for r in runs for c in r.report["classes"] if c["class"] == cid]
        merged = {kind: merge_histograms([p[kind] for r in runs for p in r.parts["classes"]
                                          if p["class"] == cid]) for kind in _KINDS}
        reports.append({"class": cid,
                        **{k: sum(c[k] for c in counted)
                           for k in ("completed", "errors", "body_bytes")},
                        **{kind: _quantiles(m) for kind, m in merged.items()}})
        parts.append({"class": cid, **{kind: m["histogram"] for kind, m in merged.items()}})
    return reports, parts


def merge_histograms(encoded: list[str]) -> dict:
    """``_core.merge_histograms``, read: the sum (``histogram``, encoded), its
    quantiles in seconds and count, and its ``buckets`` (highest value in ns, count)."""
    try:
        return json.loads(_core.merge_histograms(list(encoded)))
    except ValueError as exc:
        raise RunError(f"a host's histograms cannot be added: {exc}") from None


def _quantiles(merged: dict) -> dict:
    """What a report gives of a histogram: its mean, quantiles and count."""
    return {k: v for k, v in merged.items() if k not in ("histogram", "buckets")}


def _added(counts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))


def _mean(pairs: list[tuple[float | None, int]]) -> float | None:
    """The mean over hosts of a per-host mean, weighted by its count."""
    n = sum(count for mean, count in pairs if mean is not None)
    return sum(mean * count for mean, count in pairs if mean is not None) / n if n else None


def _per(amount: float, duration_s: float) -> float | None:
    return amount / duration_s if duration_s > 0 else None


def _cluster_section(address: str, runs: list[HostRun], planned: float) -> dict:
    """Which host did what: per host its share, clock, start, rates, lag and errors;
    the start skew; the hosts lost."""
    done = [r for r in runs if not r.lost]
    starts = [r.started_s() for r in done]
    hosts = []
    for r in runs:
        row = {"worker": r.worker.address, "name": r.worker.name, "planned": len(r.rows),
               "clock_offset_s": r.worker.offset_s,
               "clock_uncertainty_s": r.worker.uncertainty_s, "lost": r.lost or None}
        if not r.lost:
            rep = r.report
            row |= {"started_late_s": r.started_s() - planned,
                    **{k: rep[k] for k in ("sent", "completed", "failed", "unfinished",
                                           "offered_rate", "achieved_rate", "lag")},
                    "errors": {k: v for k, v in rep["errors"].items() if v}}
        hosts.append(row)
    return {"scheduler": address, "partial": len(done) < len(runs),
            "lost": [r.worker.name for r in runs if r.lost],
            "planned_start_unix_s": planned, "start_skew_s": max(starts) - min(starts),
            "hosts": hosts}


def _records(runs: list[HostRun], planned: float) -> pd.DataFrame:
    """Every host's records: ``request`` the plan's row, ``host`` the worker's name,
    times from the planned start on the scheduler's clock."""
    parts = []
    for r in runs:
        table = r.records.copy()
        table["request"] = r.rows[table["request"].to_numpy()]
        shift = r.started_s() - planned
        for col in ("intended_s", "sent_s"):
            table[col] = table[col] + shift
        table.insert(1, "host", r.worker.name)
        parts.append(table)
    return pd.concat(parts, ignore_index=True).sort_values(
        ["intended_s", "request"], ignore_index=True)
