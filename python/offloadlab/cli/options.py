"""The flags several commands take, each declared once.

:class:`ServerFlags` places and loads the server (``offload serve``, ``offload testbed
run``); :class:`LoadFlags` shapes a generated load (``offload load``, ``offload testbed
run``). A command takes a group as one parameter, ``server: ServerFlags`` or ``shape:
LoadFlags``, and :func:`grouped` gives typer the group's flags in its place: the flags
are the dataclass's fields, typed and described by the ``Annotated`` aliases below.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from offloadlab.cli.common import flag_time
from offloadlab.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from offloadlab.workload.stream_format import Stream

HostCore = Annotated[int | None, typer.Option(
    help="Pin the host thread to this core (default: not pinned).")]
EngineCore = Annotated[int | None, typer.Option(
    help="Pin the engine thread (engine) or the SQPOLL thread (uring) to this core "
         "(uring's default: a core the host is not pinned to).")]
Work = Annotated[str | None, typer.Option(
    help="Application work X_a per request, burned on the host, e.g. exp(mean=50us).")]
SizeClass = Annotated[int | None, typer.Option(
    "--class", help="Only objects of this size class (0-4).")]


@dataclass(frozen=True)
class ServerFlags:
    """Where the server's threads run, the application's work, and how the engine
    behaves (the rest of :class:`~offloadlab.testbed.server.ServerOptions` is a
    command's own)."""

    host_core: HostCore = None
    engine_core: EngineCore = None
    work: Work = None
    sendfile_above: Annotated[int, typer.Option(
        help="Bodies longer than this many bytes go by sendfile; shorter ones are copied.")
    ] = 8000
    engine_wait: Annotated[str, typer.Option(
        help="How an idle engine waits: adaptive (spin 50 us, then sleep), poll (never "
             "sleep) or sleep (at once, for an engine core shared with other work).")
    ] = "adaptive"
    engine_slowdown: Annotated[float, typer.Option(
        help="Extra engine CPU per unit of its own work: 3 emulates an engine 4 times "
             "slower.")] = 0.0
    engine_message_cost: Annotated[str, typer.Option(
        help="Engine CPU burned per message between host and engine (each request passed "
             "up, each command passed down), to emulate a costly interface, e.g. 20us.")
    ] = "0s"
    engine_slowdown_mode: Annotated[str, typer.Option(
        help="When the engine pays its slowdown and message cost: turn (after each busy "
             "loop turn, in bursts) or operation (after each request and command: a "
             "slower processor).")] = "turn"
    handoff: Annotated[str, typer.Option(
        "--handoff", help="Handoff mode's policy (seed 004): P|N (host-first priority or "
                          "not) - L|N (load control or not) - FCFS|Tn (offer every "
                          "connection at accept, or after its n-th answer), e.g. P-L-FCFS.")
    ] = "P-L-FCFS"
    handoff_limit: Annotated[int | None, typer.Option(
        help="Handoff mode: connections the engine holds at most (Hard_limit; default "
             "--max-conns).")] = None
    watermarks: Annotated[str | None, typer.Option(
        help="Handoff load control: HIWAT,LOWAT,STEP_DOWN,STEP_UP in work items per engine "
             "turn (default 16,4,4,2).")] = None

    def options(self) -> dict:
        """These flags as ServerOptions fields (errors name the flag)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name not in ("engine_message_cost", "watermarks")}
        return fields | {
            "engine_message_cost_s": flag_time("--engine-message-cost", self.engine_message_cost),
            **_watermarks(self.watermarks)}


def _watermarks(text: str | None) -> dict:
    """``--watermarks`` as a ServerOptions field (empty: the default)."""
    if text is None:
        return {}
    parts = text.split(",")
    if len(parts) != 4 or not all(p.strip().isdigit() for p in parts):
        raise InputError(f"--watermarks {text!r}: give HIWAT,LOWAT,STEP_DOWN,STEP_UP as four "
                         "whole numbers, e.g. 16,4,4,2")
    return {"watermarks": tuple(int(p) for p in parts)}


SERVER = ServerFlags()  # the defaults, as a command's parameter default

HOST_PROFILE_HELP = (
    "The host OffloadLab's server runs on: modern (loopback, sendfile, TSO/GSO and "
    "checksum offload), seed-era (bodies copied through user space, served from a network "
    "namespace over a veth pair with TSO, GSO and transmit checksum offload off), or a "
    "step between them that adds one mechanism at a time: checksum-offload, "
    "segmentation-offload, sendfile (docs/testbed.md). All but modern need root, ip and "
    "ethtool.")


# Closed loop: requests drawn per client; a client cycles through them until --duration.
_PER_CLIENT = 1000


@dataclass(frozen=True)
class LoadFlags:
    """A generated load: Poisson connections at ``--rate`` (open loop) or ``--clients``
    that think ``--think`` between requests (closed loop), for ``--duration``, with
    ``--keep-alive`` ('no' or requests per connection) over ``--class``'s objects."""

    rate: Annotated[float | None, typer.Option(
        help="Open loop: Poisson connections started per second.")] = None
    clients: Annotated[int | None, typer.Option(help="Closed loop: clients.")] = None
    think: Annotated[str, typer.Option(
        help="Closed loop: think time, e.g. exp(mean=100ms); det(0) is saturation.")
    ] = "det(0)"
    duration: Annotated[str, typer.Option(help="Length of the generated load.")] = "10s"
    keep_alive: Annotated[str, typer.Option(
        help="'no' (HTTP/1.0) or requests per connection, e.g. 10 or geom(mean=5).")
    ] = "no"
    size_class: SizeClass = None

    @property
    def duration_s(self) -> float:
        return flag_time("--duration", self.duration)

    def describe(self) -> str:
        return (f"Poisson {self.rate:g} connections/s" if self.rate is not None
                else f"{self.clients} clients")

    def poisson(self, manifest: pd.DataFrame, rate: float, seed: int) -> Stream:
        """Open loop: Poisson connections at ``rate`` per second for the duration."""
        from offloadlab.workload import stream

        return stream.poisson(manifest, rate, duration_s=self.duration_s,
                              keep_alive=self._alive, size_class=self.size_class, seed=seed)

    def generate(self, manifest: pd.DataFrame, seed: int,
                 max_duration_s: float | None = None) -> tuple[Stream, dict]:
        """The stream ``--rate`` or ``--clients`` asks for, and the run options it needs:
        a closed loop cycles through its requests until the duration (or
        ``max_duration_s``), as wrk does."""
        if self.rate is not None:
            return self.poisson(manifest, self.rate, seed), {}
        from offloadlab.workload import stream

        requests = stream.closed(manifest, self.clients, think=self.think,
                                 requests=_PER_CLIENT, keep_alive=self._alive,
                                 size_class=self.size_class, seed=seed)
        return requests, {"repeat": True, "max_duration_s": max_duration_s or self.duration_s}

    @property
    def _alive(self) -> str | bool:
        return False if self.keep_alive == "no" else self.keep_alive


LOAD = LoadFlags()


def grouped(command):
    """Gives typer the flags of each group parameter of ``command`` (one annotated
    :class:`ServerFlags` or :class:`LoadFlags`, or a subclass that changes a default),
    and hands ``command`` the group made from them."""
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)
    groups = {name: kind for name, kind in hints.items()
              if isinstance(kind, type) and issubclass(kind, (ServerFlags, LoadFlags))}
    params = []
    for param in signature.parameters.values():
        kind = groups.get(param.name)
        if kind is None:
            params.append(param.replace(annotation=hints[param.name]))
            continue
        flags = typing.get_type_hints(kind, include_extras=True)
        params += [inspect.Parameter(f.name, param.kind, annotation=flags[f.name],
                                     default=f.default)
                   for f in dataclasses.fields(kind)]

    @functools.wraps(command)
    def wrapper(**kwargs):
        for name, kind in groups.items():
            kwargs[name] = kind(**{f.name: kwargs.pop(f.name) for f in dataclasses.fields(kind)})
        return command(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=params,
                                              return_annotation=hints.get("return"))
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper
