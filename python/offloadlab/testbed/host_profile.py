"""The host the testbed's server runs on: today's, or one that pays for every byte as
seed 000's did (issue 48).

- ``modern``: loopback, with the kernel's segmentation (TSO/GSO) and checksum offload,
  and bodies above 8000 bytes sent by ``sendfile`` without a copy.
- ``seed-era``: every body copied through user space (no ``sendfile``), sent from a
  network namespace of its own over a veth pair whose TSO, GSO and transmit checksum
  offload are off, so the kernel segments at the MSS and checksums every byte in
  software, as seed 000's Apache host on its 2009 NIC did. In engine mode those copies
  and checksums fall to the engine, which makes the socket calls.

Between them, :data:`LADDER` climbs from seed-era to modern one mechanism at a time
(``checksum-offload``, ``segmentation-offload``, ``sendfile``), so that what each takes
off a request's protocol work can be measured (:mod:`offloadlab.study.host_ladder`).

A profile changes the server's options (:meth:`HostProfile.server`) and, for the
seed-era host, needs a namespace for the whole of a run or study
(:meth:`HostProfile.hosting`): root, ``ip`` and ``ethtool``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from offloadlab.errors import InputError
from offloadlab.testbed import netns
from offloadlab.testbed.server import ServerOptions

# Bodies of any size are copied: no body is longer than this.
NEVER_SENDFILE = 2**62


@dataclass(frozen=True)
class HostProfile:
    """``copy``: bodies through user space; ``offloads``: ethtool features of the
    server's veth end (None: loopback, no namespace); ``adds``: the mechanism this
    host has over the one before it on :data:`LADDER`."""

    name: str
    copy: bool
    offloads: str | None
    about: str
    adds: str = ""

    def server(self, options: ServerOptions, namespace: str | None) -> ServerOptions:
        """``options`` on this host: bodies copied, and served from ``namespace`` (the
        name of the one :meth:`hosting` yields)."""
        if self.offloads is None:
            return options
        return options.replace(sendfile_above=NEVER_SENDFILE if self.copy
                               else options.sendfile_above,
                               netns=namespace, host=netns.SERVER_IP)

    @contextlib.contextmanager
    def hosting(self) -> Iterator[netns.Veth | None]:
        """While inside, the namespace this host serves from (None: loopback), its
        offloads set; removed afterwards."""
        if self.offloads is None:
            yield None
            return
        netns.check()
        with netns.veth("host") as ns:
            ns.set_offloads(self.offloads)
            yield ns


# From seed 000's host to today's, each the one before with one mechanism more. TSO
# needs transmit checksum offload, so checksums come first; veth passes its peer the
# large segments TSO/GSO leave whole, as loopback does.
LADDER = (
    HostProfile("seed-era", copy=True, offloads="tx off tso off gso off",
                about="seed 000's host: every body copied through user space, sent over a "
                      "veth pair with TSO, GSO and transmit checksum offload off"),
    HostProfile("checksum-offload", copy=True, offloads="tx on tso off gso off",
                about="seed-era with transmit checksum offload: bodies copied, sent over "
                      "a veth pair without TSO or GSO",
                adds="transmit checksum offload"),
    HostProfile("segmentation-offload", copy=True, offloads="tx on tso on gso on",
                about="bodies copied, sent over a veth pair with TSO, GSO and transmit "
                      "checksum offload", adds="TSO/GSO"),
    HostProfile("sendfile", copy=False, offloads="tx on tso on gso on",
                about="bodies above 8000 bytes by sendfile, sent over a veth pair with "
                      "TSO, GSO and transmit checksum offload", adds="sendfile"),
    HostProfile("modern", copy=False, offloads=None,
                about="today's host: loopback with TSO/GSO and checksum offload, bodies "
                      "above 8000 bytes by sendfile", adds="loopback in place of veth"),
)
PROFILES = {p.name: p for p in (LADDER[-1], *LADDER[:-1])}


def named(name: str) -> HostProfile:
    """The profile called ``name``, or an InputError listing them."""
    if name not in PROFILES:
        raise InputError(f"host profile {name!r}: use one of {', '.join(PROFILES)}")
    return PROFILES[name]
