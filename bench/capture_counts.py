"""Benchmark: packet and flow counts of the pcap reader against tshark's, on captures of
the kinds real flow studies hand us.

Each capture is written here, byte by byte (classic pcap, so the link type, snap length
and each packet's length on the wire are what the case needs):
  snaplen-96  Ethernet, TCP segments of 1514 bytes captured at 96 (tcpdump -s 96),
              plus IPv6 ones cut inside the TCP header, after the ports
  sll, sll2   Linux cooked headers (tcpdump -i any), IPv4 and IPv6, and ARP
  raw-12, raw-101, raw-228, raw-229
              raw IP under each link type that means it
  tso         IPv4 with total length 0 (BIG TCP, TSO: the length is the frame's)
  fragments   UDP datagrams of 4000 bytes in three IPv4 fragments each, interleaved
              across flows (four per host), IP ids repeating across hosts
Flows are directional five-tuples. Ours: offloadlab.workload.flows.detect_pcap
(packets read, distinct flows). Peer: tshark with its defaults (IP reassembly on):
packets are its IP frames; flows are the distinct (addresses, protocol, ports) of the
frames it shows a TCP or UDP header in, so a fragmented datagram counts under the flow
of its reassembly. Every row should read "same".

    .venv/bin/python bench/capture_counts.py [--flows 40] [--packets 25]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import struct
import subprocess
import tempfile
from pathlib import Path

import dpkt

from offloadlab.workload import flows

ETHERNET, RAW, SLL, SLL2 = 1, 101, 113, 276


def _v4(src: int, sport: int, payload: int, udp: bool = False) -> dpkt.ip.IP:
    l4 = (dpkt.udp.UDP(sport=sport, dport=53, data=b"u" * payload) if udp
          else dpkt.tcp.TCP(sport=sport, dport=80, flags=dpkt.tcp.TH_ACK, data=b"t" * payload))
    ip = dpkt.ip.IP(src=socket.inet_aton(f"10.0.{src // 250}.{src % 250 + 1}"),
                    dst=socket.inet_aton("10.9.9.9"), ttl=64, data=l4,
                    p=dpkt.ip.IP_PROTO_UDP if udp else dpkt.ip.IP_PROTO_TCP)
    if udp:
        l4.ulen = len(l4)
    return ip


def _v6(src: int, sport: int, payload: int) -> dpkt.ip6.IP6:
    tcp = dpkt.tcp.TCP(sport=sport, dport=443, flags=dpkt.tcp.TH_ACK, data=b"t" * payload)
    ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, f"2001:db8::{src + 1:x}"),
                      dst=socket.inet_pton(socket.AF_INET6, "2001:db8::ffff"), nxt=6,
                      hlim=64, data=tcp)
    ip.plen = len(tcp)
    return ip


def _ether(ip, kind: int = dpkt.ethernet.ETH_TYPE_IP) -> bytes:
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=kind, data=ip))


def _arp() -> tuple[int, bytes]:
    return dpkt.ethernet.ETH_TYPE_ARP, bytes(dpkt.arp.ARP())


def _write(path: Path, link: int, snaplen: int, frames: list[tuple[bytes, int]]) -> None:
    """A classic pcap: (bytes captured, length on the wire) per frame."""
    with path.open("wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, link))
        for i, (data, wire) in enumerate(frames):
            fh.write(struct.pack("<IIII", 1_700_000_000 + i // 1000, i % 1000 * 1000,
                                 len(data), wire) + data)


def _whole(data: bytes) -> tuple[bytes, int]:
    return data, len(data)


def _sll(kind: int, ip: bytes, v2: bool) -> bytes:
    if v2:  # protocol, reserved, ifindex, ARPHRD_ETHER, packet type, address length, address
        return struct.pack(">HHIHBB8s", kind, 0, 2, 1, 0, 6, b"\x02" * 6) + ip
    return struct.pack(">HHH8sH", 0, 1, 6, b"\x02" * 6, kind) + ip


def captures(folder: Path, n_flows: int, per_flow: int) -> dict[str, Path]:
    out = {}
    order = [(f, k) for k in range(per_flow) for f in range(n_flows)]

    frames = [(_ether(_v4(f, 40_000 + f, 1460))[:96], 1514) for f, _ in order]
    frames += [(_ether(_v6(f, 50_000, 1440), dpkt.ethernet.ETH_TYPE_IP6)[:64], 1514)
               for f in range(n_flows)]
    _write(out.setdefault("snaplen-96", folder / "snaplen-96.pcap"), ETHERNET, 96, frames)

    for name, v2 in (("sll", False), ("sll2", True)):
        frames = [_whole(_sll(0x0800, bytes(_v4(f, 1024 + f, 100, udp=k % 2 == 1)), v2))
                  for f, k in order]
        frames += [_whole(_sll(0x86DD, bytes(_v6(f, 7000, 60)), v2)) for f in range(n_flows)]
        frames += [_whole(_sll(*_arp(), v2))] * 5
        _write(out.setdefault(name, folder / f"{name}.pcap"), SLL2 if v2 else SLL, 65535,
               frames)

    for link in (12, 101, 228, 229):
        v6 = link == 229
        frames = [_whole(bytes(_v6(f, 3000 + f, 200) if v6 else _v4(f, 3000 + f, 200)))
                  for f, _ in order]
        _write(out.setdefault(f"raw-{link}", folder / f"raw-{link}.pcap"), link, 65535,
               frames)

    frames = []
    for f, _ in order:
        ip = bytearray(bytes(_v4(f, 33_000 + f, 600)))
        ip[2:4] = b"\0\0"
        frames.append((bytes(ip), 65_000 + 600))
    _write(out.setdefault("tso", folder / "tso.pcap"), RAW, 65535, frames)

    frames = []
    for k in range(per_flow):
        # four flows per host, so ports (not addresses) must tell them apart
        datagrams = [_v4(f // 4, 5000 + f, 4000, udp=True) for f in range(n_flows)]
        for piece in range(3):  # 1480, 1480 and the rest, one piece of every flow at a time
            for f, ip in enumerate(datagrams):
                body = bytes(ip.data)[piece * 1480:(piece + 1) * 1480]
                # a host numbers its datagrams; other hosts use the same numbers
                frag = dpkt.ip.IP(src=ip.src, dst=ip.dst, ttl=64, p=ip.p, id=4 * k + f % 4,
                                  data=body,
                                  offset=piece * 185, mf=int(piece < 2))
                frames.append(_whole(bytes(frag)))
    _write(out.setdefault("fragments", folder / "fragments.pcap"), RAW, 65535, frames)
    return out


def tshark_counts(path: Path) -> tuple[int, int]:
    fields = ["ip.src", "ipv6.src", "ip.dst", "ipv6.dst", "ip.proto", "ipv6.nxt",
              "tcp.srcport", "tcp.dstport", "udp.srcport", "udp.dstport"]
    cmd = ["tshark", "-r", str(path), "-Y", "ip or ipv6", "-T", "fields",
           "-E", "occurrence=f", *(a for f in fields for a in ("-e", f))]
    lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    tuples = set()
    for line in lines:
        v = line.split("\t")
        ports = v[6:8] if v[6] else v[8:10]
        if ports[0]:
            tuples.add((v[0] or v[1], v[2] or v[3], v[4] or v[5], *ports))
    return len(lines), len(tuples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flows", type=int, default=40)
    ap.add_argument("--packets", type=int, default=25, help="packets per flow")
    args = ap.parse_args()
    if shutil.which("tshark") is None:
        raise SystemExit("needs tshark: apt-get install -y tshark")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'capture':<11} {'packets':>8} {'tshark':>8} {'flows':>6} {'tshark':>7} "
              f"{'skipped':>8} {'cut':>5}  verdict")
        for name, path in captures(Path(tmp), args.flows, args.packets).items():
            r = flows.detect_pcap(path)
            packets, n_flows = tshark_counts(path)
            same = (r.total_packets, r.flows_seen) == (packets, n_flows)
            print(f"{name:<11} {r.total_packets:>8,} {packets:>8,} {r.flows_seen:>6,} "
                  f"{n_flows:>7,} {r.skipped:>8,} {r.truncated:>5,}  "
                  f"{'same' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
