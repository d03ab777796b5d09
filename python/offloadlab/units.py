"""Quantities with units, read from text and written for people.

Reading: durations (``"250us"``, to seconds), byte counts (``"64KiB"``, to bytes) and
``START:STOP:STEP`` ranges; each raises :class:`~offloadlab.errors.InputError` naming
what is wrong and how to write it. Writing: durations that read back exactly, and the
short forms tables and messages show: seconds as milliseconds or microseconds, byte
counts in binary units, rates, utilisations. In the short forms a value never observed
(None, NaN) is –, an infinite one ∞.
"""

from __future__ import annotations

import math
import re

import numpy as np

from offloadlab.errors import InputError

# ---------------------------------------------------------------------------------------
# Durations

_DIVISORS = {"ns": 1e9, "us": 1e6, "µs": 1e6, "ms": 1e3, "s": 1.0}
NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
"""A decimal number as the parsers here accept it (a regular expression)."""
_TIME = re.compile(rf"^\s*({NUMBER})\s*(ns|us|µs|ms|s)?\s*$")


def parse_time(text: str) -> float:
    """Parse a duration such as ``"250us"`` into seconds. A bare ``0`` needs no unit."""
    m = _TIME.match(str(text))
    if not m:
        raise InputError(f"'{text}' is not a duration; write a number and a unit, e.g. 250us")
    number, unit = float(m.group(1)), m.group(2)
    if unit is None and number != 0:
        raise InputError(f"'{text}' needs a unit (ns, us, ms or s), e.g. {text}ms")
    if not math.isfinite(number) or number < 0:
        raise InputError(f"'{text}' must be a finite duration >= 0")
    return number / _DIVISORS[unit or "s"]


def format_time(seconds: float) -> str:
    """The shortest duration string that :func:`parse_time` reads back as exactly ``seconds``."""
    if seconds == 0:
        return "0s"
    unit = next((u for u in ("s", "ms", "us") if seconds * _DIVISORS[u] >= 1), "ns")
    scaled = seconds * _DIVISORS[unit]
    for digits in range(1, 18):
        text = np.format_float_positional(float(f"{scaled:.{digits}g}"), trim="-")
        if float(text) / _DIVISORS[unit] == seconds:
            return f"{text}{unit}"
    return f"{seconds!r}s"


def ms(seconds: float | None) -> str:
    return _scaled(seconds, 1e3)


def us(seconds: float | None) -> str:
    """Microseconds, e.g. a CPU cost per request."""
    return _scaled(seconds, 1e6)


def _scaled(seconds: float | None, factor: float) -> str:
    if seconds is None or math.isnan(seconds):
        return "–"
    return "∞" if math.isinf(seconds) else f"{seconds * factor:.3g}"


def ms_ci(seconds: float, half_width: float) -> str:
    """A mean and its 95% half-width, e.g. ``3.86±0.02``."""
    if not math.isfinite(half_width):
        return ms(seconds)
    return f"{ms(seconds)}[dim]±{half_width * 1e3:.2g}[/]"


# ---------------------------------------------------------------------------------------
# Byte counts

_BYTE_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
               "kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(value: int | str, what: str = "size") -> int:
    """A byte count: a whole number, or a number with a unit: B, KiB, MiB, GiB, TiB
    (powers of 1024) or kB, MB, GB, TB (powers of 1000), e.g. ``"450MiB"``."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    m = _BYTES.match(value) if isinstance(value, str) else None
    if not m or m.group(2) not in {"", *_BYTE_UNITS}:
        hint = " (KB is ambiguous: write KiB for 1024 or kB for 1000)" if m and m.group(
            2).upper() == "KB" else ""
        raise InputError(f"{what}={value!r} is not a byte count; write e.g. 1500, "
                         f"\"64KiB\" or \"2GiB\" (units {', '.join(_BYTE_UNITS)}){hint}")
    number = float(m.group(1)) * _BYTE_UNITS[m.group(2) or "B"]
    if number != int(number):
        raise InputError(f"{what}={value!r} is not a whole number of bytes")
    return int(number)


def format_bytes(n: float) -> str:
    """``27.3 KiB``, ``1.95 GiB``; whole bytes below 1 KiB."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


# ---------------------------------------------------------------------------------------
# Ranges, rates, utilisations

MAX_RANGE_VALUES = 1_000_000


def parse_range(text: str) -> list[float]:
    """The values of ``START:STOP:STEP``, STOP included. Each is rounded to 12
    significant digits, so ``0:1:0.1`` gives 0.3 and not 0.30000000000000004, and
    values compare equal to the same number written by hand."""
    try:
        start, stop, step = (float(p) for p in text.split(":"))
    except ValueError:
        raise InputError(f"'{text}': write START:STOP:STEP, e.g. 10:300:10") from None
    if not all(math.isfinite(x) for x in (start, stop, step)):
        raise InputError(f"'{text}': START, STOP and STEP must be finite")
    if not step > 0 or not stop >= start:
        raise InputError(f"'{text}': START:STOP:STEP needs STEP > 0 and STOP >= START")
    count = math.floor((stop - start) / step + 1e-9) + 1
    if count > MAX_RANGE_VALUES:
        raise InputError(f"'{text}' gives {count:,} values; at most {MAX_RANGE_VALUES:,}")
    return [float(f"{start + step * i:.12g}") for i in range(count)]


def rate(lam: float) -> str:
    return "∞" if math.isinf(lam) else f"{lam:.3g}"


def util(u: float) -> str:
    """A utilisation; 1 or more (saturated) in red."""
    return f"{u:.3f}" if u < 1 else f"[red]{u:.3f}[/]"


def speed(x: float) -> str:
    """An engine speed relative to a host core; ``none`` for inf (no engine pays)."""
    return "none" if math.isinf(x) else f"{x:.3g}"


def speed_span(low: float, high: float, error: float) -> str:
    """A break-even speed's range for a capacity error, ``0.41–0.77, ±4.2%``; empty
    without an error, or where the range is one speed to three digits."""
    if not error > 0 or speed(low) == speed(high):
        return ""
    return f"{speed(low)}–{speed(high)}, ±{error:.1%}"
