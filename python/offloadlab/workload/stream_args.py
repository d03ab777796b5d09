"""The request-stream generators' arguments: checked in one place, so every generator
words a bad value the same way (the argument's name and the fix), and recorded in a
stream's meta."""

from __future__ import annotations

import math

import numpy as np

from offloadlab import dist, units
from offloadlab.errors import InputError


def number(what: str, value) -> float:
    if isinstance(value, bool):
        raise InputError(f"{what}={value!r}: give a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}='{value}' is not a number") from None
    if not math.isfinite(x):
        raise InputError(f"{what}={value!r} must be finite")
    return x


def positive_int(what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InputError(f"{what}={value!r}: use a whole number >= 1")
    return int(value)


def optional_positive_int(what: str, value) -> int | None:
    return None if value is None else positive_int(what, value)


def optional_seconds(what: str, value) -> float | None:
    """Seconds from a number or a duration with a unit (``"60s"``); None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            seconds = units.parse_time(value)
        except InputError as exc:
            raise InputError(f"{what}: {exc}") from None
    else:
        seconds = number(what, value)
    if not seconds > 0:
        raise InputError(f"{what}={value!r}: use a duration > 0, e.g. {what}=60 or '60s'")
    return seconds


def distribution(value, what: str) -> dist.Dist:
    if isinstance(value, dist.Dist):
        return value
    try:
        return dist.parse(value)
    except InputError as exc:
        raise InputError(f"{what}: {exc}") from None


def closed_bound(name: str, n: int | None, duration: float | None, think: dist.Dist) -> None:
    """A closed-loop stream needs ``name`` (per client) or ``duration`` to end."""
    if n is None and duration is None:
        raise InputError(f"give {name}= (per client) and/or duration_s= to bound the stream")
    if n is None and think.mean == 0:
        raise InputError(f"think={think} with only duration_s= has no end (zero think time); "
                         f"also give {name}= per client (the consumer stops at duration_s)")


def rngs(seed, n: int) -> list[np.random.Generator]:
    """Independent generators, one per aspect (times, connections, objects, ...), so that
    changing one aspect (say keep-alive) leaves the others' draws unchanged."""
    if isinstance(seed, np.random.Generator):
        return seed.spawn(n)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < 2**64:
        raise InputError(f"seed={seed!r}: use an integer in [0, 2^64)")
    return [np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(n)]


def stream_meta(generator: str, seed, params: dict, duration: float | None) -> dict:
    """How a stream was made. A Generator seed is recorded as None: it cannot be replayed."""
    return {"generator": generator,
            "seed": int(seed) if isinstance(seed, int | np.integer) else None,
            "duration_s": duration, "params": params}
