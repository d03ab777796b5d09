"""Ranges of values written ``START:STOP:STEP`` (STOP included), for rate sweeps on the
command line and grid axes in sweep files."""

from __future__ import annotations

import math

from offloadlab.errors import InputError

MAX_VALUES = 1_000_000


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
    if count > MAX_VALUES:
        raise InputError(f"'{text}' gives {count:,} values; at most {MAX_VALUES:,}")
    return [float(f"{start + step * i:.12g}") for i in range(count)]
