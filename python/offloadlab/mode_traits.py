"""What each server mode does, read from Rust's table (``offload_server::Mode::traits``,
exported as ``_core.MODE_TRAITS``). Code decides a mode's behaviour by its traits, never
by its name, so a new mode is its Rust loop, its row in that table and its docs
(``tests/test_design.py`` fails on a comparison of a mode with a name)."""

from __future__ import annotations

from dataclasses import dataclass

from offloadlab import _core
from offloadlab.errors import InputError


@dataclass(frozen=True)
class ModeTraits:
    """One mode's row; each field's doc comment is on the Rust struct's field
    (``crates/offload-server/src/config.rs``)."""

    engine_thread: bool
    counts_engine_wakeups: bool
    engine_busy_from_kernel: bool
    engine_spins: bool
    answers_in_rounds: bool
    answers_wake_engine: bool
    app_cache: bool
    places_connections: bool
    engine_faults: bool
    studied: bool


# Every mode's row, in Rust's order (offload_server::Mode::ALL).
TRAITS: dict[str, ModeTraits] = {m: ModeTraits(**_core.MODE_TRAITS[m]) for m in _core.MODES}
# The host-alone baseline that every offload mode is compared with: the one mode without
# an engine thread (Rust's tests hold that there is exactly one).
(BASELINE,) = (m for m, t in TRAITS.items() if not t.engine_thread)


def traits(mode: str) -> ModeTraits:
    """``mode``'s traits; an unknown mode is bad input."""
    if mode not in TRAITS:
        raise InputError(f"mode {mode!r}: use one of {', '.join(TRAITS)}")
    return TRAITS[mode]


def modes_where(trait: str) -> tuple[str, ...]:
    """The modes that have ``trait``, in Rust's order."""
    return tuple(m for m, t in TRAITS.items() if getattr(t, trait))
