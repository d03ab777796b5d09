"""What checksum, segmentation and per-packet offload save the host (seed 003 §6, Table 5).

Per-byte work: Linux fuses the sender's checksum with its copy, so offloading the
checksum leaves a plain copy. The receiver checksums the socket buffer (bringing it into
cache) and then copies it out from cache. When the NIC checksums instead, the DMA has
just invalidated those lines, and the copy runs from memory. In a micro-benchmark the
warm copy is cheap, so offload costs nearly what it saves. In a data centre the copy
misses the cache anyway, so offload saves most of the checksum (Table 5).

Per-packet work (protocol processing, buffers, interrupts) can move to the NIC. The part
done in hardware costs the host nothing. The part run by NIC firmware is slower by the
clock ratio. For host time T per packet, offloaded fraction f and hardware share h:

    T' = T [(1 - f) + f (1 - h) r]      r = host clock / NIC clock (700/132 in seed 003)

So offload shortens the packet path only when h > 1 - 1/r (0.81 for seed 003's cards).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from offloadlab.errors import InputError

KiB = 1024
# TCP segmentation offload hands the NIC up to 64 KiB per send; the host pays its
# per-packet cost once per such chunk.
TSO_BYTES = 64 * KiB


@dataclass(frozen=True)
class ByteCosts:
    """Host seconds per byte of each step (Table 5's rows): the sender's fused
    checksum and copy, its copy alone when the NIC checksums; the receiver's checksum,
    its copy after it (cache warm), and its copy when the NIC checksummed (cache cold)."""

    tx_fused: float
    tx_copy: float
    rx_checksum: float
    rx_copy: float
    rx_copy_offload: float

    def send(self, offload: bool) -> float:
        return self.tx_copy if offload else self.tx_fused

    def receive(self, offload: bool) -> float:
        return self.rx_copy_offload if offload else self.rx_checksum + self.rx_copy

    def scaled(self, factor: float) -> ByteCosts:
        """Every cost times ``factor`` (e.g. to a host of another speed)."""
        return ByteCosts(*(factor * getattr(self, f) for f in self.__dataclass_fields__))


def _per_kib(*us_per_kib: float) -> ByteCosts:
    # Table 5 prints no unit; µs per KB (ns per byte) is the only consistent reading,
    # and KB is read as KiB (reference 003 §8.7).
    return ByteCosts(*(u * 1e-6 / KiB for u in us_per_kib))


# Seed 003 Table 5, Cluster 3 (700 MHz Pentium III).
TABLE5 = {
    "micro": _per_kib(3.69, 1.95, 8.42, 1.95, 8.40),
    "datacenter": _per_kib(3.69, 3.65, 8.42, 5.17, 8.40),
}


def byte_costs(name: str) -> ByteCosts:
    if name not in TABLE5:
        raise InputError(f"byte costs {name!r}: use one of {', '.join(TABLE5)}")
    return TABLE5[name]


def packets(size_bytes, mss: int, segmentation_offload: bool = False):
    """Packets the host handles to send ``size_bytes`` (a number or an array; at least
    one, for the head)."""
    unit = TSO_BYTES if segmentation_offload else mss
    return np.maximum(1.0, np.ceil(np.asarray(size_bytes, float) / unit))


@dataclass(frozen=True)
class PacketOffload:
    """Per-packet work moved to the NIC: ``fraction`` f of it, ``hardware`` share h of
    that in an ASIC (free), the rest in firmware ``slowdown`` r times slower."""

    fraction: float
    hardware: float
    slowdown: float

    def __post_init__(self):
        for name in ("fraction", "hardware"):
            if not 0 <= getattr(self, name) <= 1:
                raise InputError(f"{name}={getattr(self, name)}: give a share from 0 to 1")
        if not (math.isfinite(self.slowdown) and self.slowdown > 0):
            raise InputError(f"slowdown={self.slowdown}: give the host/NIC clock ratio > 0")

    def host(self, per_packet_s: float) -> float:
        """What stays on the host."""
        return per_packet_s * (1 - self.fraction)

    def nic(self, per_packet_s: float) -> float:
        """What the NIC's firmware spends."""
        return per_packet_s * self.fraction * (1 - self.hardware) * self.slowdown

    def path(self, per_packet_s: float) -> float:
        """T': the packet's time on host and NIC together."""
        return self.host(per_packet_s) + self.nic(per_packet_s)

    @property
    def break_even_hardware(self) -> float:
        """The hardware share above which offload shortens the packet path."""
        return max(0.0, 1 - 1 / self.slowdown)
