"""The same load against each server mode in turn (``offload testbed run``).

For each mode, :func:`run_mode` starts the server in this process on the file set,
sends the request stream with the load generator (every response checked against the
manifest), stops the server, and keeps both sides' reports: the generator's latencies
and the server's final stats document. From the server side come the service demands
the model needs: host and engine CPU seconds per request; from the engine's rings,
commands per request and the mean batch.

A mode is named as the server's ``mode``, or ``handoff:POLICY`` for handoff mode under
one of seed 004's policies (``handoff:P-L-FCFS``; plain ``handoff`` takes the options'
own policy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import TypeVar

import pandas as pd

from offloadlab.documents import ServerStats
from offloadlab.errors import InputError, RunError, require
from offloadlab.mode_traits import traits
from offloadlab.testbed import load
from offloadlab.testbed.server import ServerOptions, running
from offloadlab.workload.stream_format import Stream


@dataclass(frozen=True)
class ModeRun:
    """One mode's run: the load generator's result and the server's final stats
    document."""

    mode: str
    load: load.LoadResult
    stats: ServerStats

    def summary(self) -> dict:
        """The numbers to compare modes by (seconds; None where nothing was measured)."""
        r, per = self.load.parsed, self.stats.per_request
        engine = self.stats.has_engine()
        return {
            "mode": self.mode,
            "throughput": r.throughput,
            "p50_s": r.total.p50_s,
            "p99_s": r.total.p99_s,
            "failed": r.failed,
            "requests": self.stats.requests,
            "host_cpu_s": per.host_cpu_s,
            "engine_cpu_s": per.engine_cpu_s if engine else None,
            "commands": per.commands if engine else None,
            "batch_mean": per.batch_mean,
        }

    def to_json(self) -> dict:
        return {"mode": self.mode, "summary": self.summary(), "load": self.load.to_json(),
                "server": self.stats.to_json()}


def with_mode(options: ServerOptions, name: str) -> ServerOptions:
    """``options`` in the mode ``name`` (see the module notes)."""
    mode, _, policy = name.partition(":")
    if not policy:
        return options.replace(mode=mode)
    if not traits(mode).places_connections:
        raise InputError(f"mode {name!r}: only handoff takes a policy (handoff:P-L-FCFS)")
    return options.replace(mode=mode, handoff=policy)


def run_mode(options: ServerOptions, requests: Stream, manifest: pd.DataFrame,
             progress: Callable | None = None, name: str | None = None,
             **load_options) -> ModeRun:
    """Serve ``options.root`` in ``options.mode`` while ``requests`` are sent to it.
    ``name`` labels the run (default: the mode); ``load_options`` go to
    :func:`offloadlab.testbed.load.run`, whose generator runs ahead of the server's
    threads where one spins (``beside_spinner``, unless they say otherwise)."""
    load_options.setdefault("beside_spinner",
                            options.spins_on(load_options.get("cores", ())))
    # A server in a namespace of the testbed's own is reached over its veth pair.
    load_options.setdefault("allow_remote", options.netns is not None)
    with running(options) as server:
        result = load.run(server.url, requests, manifest, progress=progress, **load_options)
    assert server.final is not None  # set as the server stopped
    return ModeRun(name or options.mode, result, server.final)


T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Rounds:
    """The load of an experiment that compares set-ups in interleaved rounds: closed-loop
    keep-alive ``clients``, ``repeats`` runs of ``run_s`` seconds per set-up, the server's
    cores and the seed."""

    clients: int = 32
    run_s: float = 5.0
    repeats: int = 3
    host_core: int | None = None
    engine_core: int | None = None
    seed: int = 1

    def check_rounds(self) -> None:
        require(self.clients >= 1 and self.repeats >= 1 and self.run_s > 0,
                "clients and repeats must be >= 1 and the run length > 0")

    def describe_rounds(self) -> dict:
        """These settings, for an experiment's ``describe()``."""
        return {f.name: getattr(self, f.name) for f in fields(Rounds)}


def rounds(policies: Sequence[str], repeats: int, run_one: Callable[[str, int], T],
           what: str, progress: Callable[[str, int, int], None] | None = None
           ) -> list[tuple[str, int, T]]:
    """``run_one(policy, repeat)`` for every policy, ``repeats`` rounds of them
    interleaved (so drift on a shared machine hits every policy alike);
    ``progress(policy, done, total)`` before each run and ``("", total, total)`` at the
    end. A failed run is reported as ``what``, the policy and the repeat."""
    total = repeats * len(policies)
    done: list[tuple[str, int, T]] = []
    for rep in range(repeats):
        for name in policies:
            if progress is not None:
                progress(name, len(done), total)
            try:
                done.append((name, rep, run_one(name, rep)))
            except RunError as exc:
                raise RunError(f"{what}, {name}, repeat {rep + 1}: {exc}") from None
    if progress is not None:
        progress("", total, total)
    return done


def check_modes(options: ServerOptions, modes: Sequence[str]) -> None:
    for mode in modes:
        with_mode(options, mode).check()
