"""Seed 004's policy switches in the paper's shorthand, shared by the simulator's
configurations (``W-4096-P-L-FCFS-400``) and the testbed's handoff mode (``P-L-FCFS``):
``P`` host-first priority or ``N`` FCFS; ``L`` load control or ``N`` none; ``FCFS``
selection (every connection offered at accept), ``Tn`` (offered after its n-th send,
on the testbed its n-th answer) or ``LLF`` (offered once the host's long-lived flow
detector lists it; simulator only, see docs/flows.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from offloadlab.errors import InputError

# The three switches as a regular-expression fragment with named groups p, l and sel.
PATTERN = r"(?P<p>[PN])-(?P<l>[LN])-(?P<sel>FCFS|LLF|T\d+)"
_ALONE = re.compile(rf"^{PATTERN}$")


@dataclass(frozen=True)
class Policy:
    host_first: bool
    load_control: bool
    threshold: int | None  # T(n); None is FCFS selection
    long_lived: bool = False  # LLF selection (threshold is None then)

    @property
    def selection(self) -> str:
        """``FCFS``, ``Tn`` or ``LLF``."""
        if self.long_lived:
            return "LLF"
        return "FCFS" if self.threshold is None else f"T{self.threshold}"

    @property
    def label(self) -> str:
        p, lc = "P" if self.host_first else "N", "L" if self.load_control else "N"
        return f"{p}-{lc}-{self.selection}"


def from_match(m: re.Match, where: str) -> Policy:
    """The policy in a match of :data:`PATTERN`; T0 is an error said of ``where``."""
    threshold = None if m["sel"] in ("FCFS", "LLF") else int(m["sel"][1:])
    if threshold == 0:
        raise InputError(f"{where}: the n of Tn must be >= 1")
    return Policy(m["p"] == "P", m["l"] == "L", threshold, m["sel"] == "LLF")


def parse(text: str) -> Policy:
    """``P-L-T4`` -> :class:`Policy` for the testbed, or an InputError that says the
    form. LLF selection is refused: the testbed's engine runs no flow detector."""
    m = _ALONE.match(text.strip().upper())
    if not m:
        raise InputError(f"handoff policy {text!r}: write it as P|N-L|N-FCFS|Tn, e.g. P-L-FCFS "
                         "(host first, load control, every connection offered)")
    p = from_match(m, f"handoff policy {text!r}")
    if p.long_lived:
        raise InputError(f"handoff policy {text!r}: LLF selection runs only in the "
                         "simulator (offload handoff sim); on the testbed use FCFS or Tn")
    return p
