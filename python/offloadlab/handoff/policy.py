"""Seed 004's policy switches in the paper's shorthand, shared by the simulator's
configurations (``W-4096-P-L-FCFS-400``) and the testbed's handoff mode (``P-L-FCFS``):
``P`` host-first priority or ``N`` FCFS; ``L`` load control or ``N`` none; ``FCFS``
selection (every connection offered at accept) or ``Tn`` (offered after its n-th send,
on the testbed its n-th answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from offloadlab.errors import InputError

# The three switches as a regular-expression fragment with named groups p, l and sel.
PATTERN = r"(?P<p>[PN])-(?P<l>[LN])-(?P<sel>FCFS|T\d+)"
_ALONE = re.compile(rf"^{PATTERN}$")


@dataclass(frozen=True)
class Policy:
    host_first: bool
    load_control: bool
    threshold: int | None  # T(n); None is FCFS selection

    @property
    def label(self) -> str:
        sel = "FCFS" if self.threshold is None else f"T{self.threshold}"
        return f"{'P' if self.host_first else 'N'}-{'L' if self.load_control else 'N'}-{sel}"


def from_match(m: re.Match, where: str) -> Policy:
    """The policy in a match of :data:`PATTERN`; T0 is an error said of ``where``."""
    threshold = None if m["sel"] == "FCFS" else int(m["sel"][1:])
    if threshold == 0:
        raise InputError(f"{where}: the n of Tn must be >= 1")
    return Policy(m["p"] == "P", m["l"] == "L", threshold)


def parse(text: str) -> Policy:
    """``P-L-T4`` -> :class:`Policy`, or an InputError that says the form."""
    m = _ALONE.match(text.strip().upper())
    if not m:
        raise InputError(f"handoff policy {text!r}: write it as P|N-L|N-FCFS|Tn, e.g. P-L-FCFS "
                         "(host first, load control, every connection offered)")
    return from_match(m, f"handoff policy {text!r}")
