"""Number formatting at the edge: seconds shown as milliseconds, infinities as ∞."""

import math


def ms(seconds: float) -> str:
    return "∞" if math.isinf(seconds) else f"{seconds * 1e3:.3g}"


def util(u: float) -> str:
    return f"{u:.3f}" if u < 1 else f"[red]{u:.3f}[/]"


def rate(lam: float) -> str:
    return "∞" if math.isinf(lam) else f"{lam:.3g}"
