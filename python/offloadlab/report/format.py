"""Number formatting at the edge: seconds shown as milliseconds or microseconds, bytes in
binary units, infinities as ∞, values never observed (NaN, or None from JSON) as –."""

import math


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


def util(u: float) -> str:
    return f"{u:.3f}" if u < 1 else f"[red]{u:.3f}[/]"


def rate(lam: float) -> str:
    return "∞" if math.isinf(lam) else f"{lam:.3g}"


def format_bytes(n: float) -> str:
    """``27.3 KiB``, ``1.95 GiB``; whole bytes below 1 KiB."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
