"""A private network namespace for the testbed's server, reached over a veth pair.

A veth device offloads like a NIC: with checksum and segmentation offload on, the stack
hands it 64 KiB segments and no checksums; turned off with ethtool, the kernel segments
at the MSS and checksums every byte itself. Loopback cannot be made to do that, so a
server that must pay those costs (seed 003's Table 5, the seed-era host of
``host_profile``) serves from a namespace of its own while the load generator stays
outside. Traffic goes only between this machine and a namespace this process created
and always removes.

A test cluster's hosts (:mod:`offloadlab.testbed.testcluster`) are namespaces on a
private bridge instead (:func:`bridge`), at addresses this module assigns.

Needs root and the ``ip`` and ``ethtool`` commands (:func:`check` says which is
missing and how to get them)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from offloadlab.errors import RunError, require

# The veth pair's addresses (a /30 of private space).
HOST_IP, SERVER_IP = "10.231.0.1", "10.231.0.2"
# The bridge's /24: this machine at .1, the namespaces from .10 up.
BRIDGE_NET = "10.232.0"
BRIDGE_IP = f"{BRIDGE_NET}.1"
MTU = 1500
MSS = MTU - 52          # IPv4 and TCP headers with timestamps
_CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class Veth:
    """A namespace (``name``, under /var/run/netns) and its end of the pair
    (``device``), at :data:`SERVER_IP`."""

    name: str
    device: str

    def set_offloads(self, features: str) -> None:
        """``ethtool -K`` on the namespace's end, e.g. "tx off tso off gso off": what
        the server's transmit path hands to the device."""
        sh(f"ip netns exec {self.name} ethtool -K {self.device} {features}")


def enter(name: str) -> None:
    """Move the calling thread into network namespace ``name`` (``setns``); threads it
    starts afterwards are born there. Only that thread moves: give it a thread of its
    own that ends with the work."""
    try:
        fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    except OSError as exc:
        raise RunError(f"network namespace {name}: {exc.strerror}; the testbed makes its "
                       "own (netns.veth)") from None
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
            raise RunError(f"cannot enter network namespace {name}: "
                           f"{os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Host:
    """A namespace on the bridge: its ``name`` under /var/run/netns and its ``ip``."""

    name: str
    ip: str


def check(commands: Sequence[str] = ("ip", "ethtool")) -> None:
    """What a namespace needs (``commands``), or an InputError naming what is missing."""
    missing = [c for c in commands if shutil.which(c) is None]
    require(not missing, f"{' and '.join(missing)} not found; install them "
                         "(apt-get install iproute2 ethtool)")
    require(os.geteuid() == 0, "creating a network namespace and setting a device's "
                               "offloads needs root; run as root (e.g. with sudo)")


@contextlib.contextmanager
def veth(tag: str = "nic") -> Iterator[Veth]:
    """A network namespace holding one end of a veth pair (the other end here, at
    :data:`HOST_IP`), named for ``tag`` and this process, always removed afterwards."""
    ns = f"offload-{tag}-{os.getpid()}"
    host_dev, ns_dev = f"olh{os.getpid() % 100000}", f"olc{os.getpid() % 100000}"
    commands = [
        f"ip netns add {ns}",
        f"ip link add {host_dev} type veth peer name {ns_dev} netns {ns}",
        f"ip addr add {HOST_IP}/30 dev {host_dev}",
        f"ip link set {host_dev} mtu {MTU} up",
        f"ip -n {ns} addr add {SERVER_IP}/30 dev {ns_dev}",
        f"ip -n {ns} link set {ns_dev} mtu {MTU} up",
        f"ip -n {ns} link set lo up",
    ]
    try:
        for command in commands:
            sh(command)
        yield Veth(ns, ns_dev)
    finally:
        # Deleting one end deletes the pair, at once. Deleting the namespace would too,
        # but the kernel destroys a namespace later, in the background, so the next
        # pair of the same name (the host ladder's next step) could find this one.
        subprocess.run(["ip", "link", "del", host_dev], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


@contextlib.contextmanager
def bridge(names: Sequence[str]) -> Iterator[list[Host]]:
    """A private bridge, this machine at :data:`BRIDGE_IP`, and one namespace per name,
    each on a veth to the bridge at the next address from ``BRIDGE_NET.10``; all named
    for this process and always removed afterwards. Stop what runs in the namespaces
    first: a namespace lasts, with its veth, while a process is in it."""
    tag = os.getpid() % 100000
    device = f"olbr{tag}"
    hosts = [Host(f"offload-{n}-{os.getpid()}", f"{BRIDGE_NET}.{10 + i}")
             for i, n in enumerate(names)]
    try:
        sh(f"ip link add {device} type bridge")
        sh(f"ip addr add {BRIDGE_IP}/24 dev {device}")
        sh(f"ip link set {device} up")
        for i, host in enumerate(hosts):
            port = f"olb{tag}p{i}"
            sh(f"ip netns add {host.name}")
            sh(f"ip link add {port} type veth peer name eth0 netns {host.name}")
            sh(f"ip link set {port} master {device} up")
            sh(f"ip -n {host.name} addr add {host.ip}/24 dev eth0")
            sh(f"ip -n {host.name} link set eth0 up")
            sh(f"ip -n {host.name} link set lo up")
        yield hosts
    finally:
        # Each pair goes at once with its end here; a deleted namespace takes its end
        # along only when the kernel destroys it, later, and the next bridge of this
        # process (same names) could find the old pair still there (seen in CI).
        for i, host in enumerate(hosts):
            subprocess.run(["ip", "link", "del", f"olb{tag}p{i}"], capture_output=True,
                           timeout=30)
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", device], capture_output=True, timeout=30)


def sh(command: str) -> None:
    """Run ``command`` (no shell); a failure is a RunError with its message."""
    done = subprocess.run(command.split(), capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RunError(f"{command}: {done.stderr.strip() or done.returncode}")
