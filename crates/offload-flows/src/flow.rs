//! The flow identification unit: a packet's five-tuple, read from pcap files.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;

use etherparse::{
    EtherType, IpNumber, Ipv6ExtensionSlice, LaxNetSlice, LaxSlicedPacket, TcpHeaderSlice,
    UdpHeaderSlice,
};
use pcap_file::pcap::{PcapPacket, PcapReader};
use pcap_file::DataLink;

/// The five-tuple (source and destination address, ports, protocol). IPv4 addresses are
/// kept IPv4-mapped in 16 bytes, so one key type holds both families (the thesis's
/// 104-bit IPv4 key is 296 bits for IPv6). Protocols without ports (ICMP, ...) have port 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
}

impl fmt::Display for FlowId {
    /// `10.0.0.1:1234 > 10.0.0.2:80 tcp`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addr = |a: [u8; 16]| {
            let v6 = Ipv6Addr::from(a);
            v6.to_ipv4_mapped()
                .map_or(IpAddr::V6(v6), IpAddr::V4)
                .to_string()
        };
        let proto = match self.proto {
            6 => "tcp".to_string(),
            17 => "udp".to_string(),
            p => format!("proto {p}"),
        };
        write!(
            f,
            "{}:{} > {}:{} {proto}",
            addr(self.src),
            self.src_port,
            addr(self.dst),
            self.dst_port
        )
    }
}

/// One packet as the detector sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Packet {
    pub time_s: f64,
    pub flow: FlowId,
    /// Length on the wire.
    pub bytes: u32,
}

/// What a pcap file held: its IP packets in file order, the frames that were skipped
/// (not IP, such as ARP or LLDP, or cut before the ports), and how many of the packets
/// kept had their TCP or UDP header cut by the capture's snap length after the ports.
#[derive(Clone, Debug, Default)]
pub struct Capture {
    pub packets: Vec<Packet>,
    pub skipped: u64,
    pub truncated: u64,
}

/// How a frame starts, by the file's link type.
#[derive(Clone, Copy)]
enum Link {
    Ethernet,
    /// Raw IP; the version nibble tells IPv4 from IPv6.
    Ip,
    /// Linux "cooked" headers (`tcpdump -i any`): 16 bytes with the EtherType in the
    /// last two (SLL), or 20 bytes with it in the first two (SLL2).
    Cooked {
        len: usize,
        ether_type_at: usize,
    },
}

/// Read a classic pcap file with Ethernet, raw-IP (link types 12, 14, 101, 228, 229) or
/// Linux cooked (SLL, SLL2) framing. Snap-length captures are read: flows need only the
/// headers, and a packet's bytes are its length on the wire. Errors name the file and
/// say what to do.
pub fn read_pcap(path: &Path) -> Result<Capture, String> {
    let where_ = path.display();
    let file = File::open(path).map_err(|e| format!("{where_}: cannot open: {e}"))?;
    let mut reader = PcapReader::new(BufReader::new(file)).map_err(|e| {
        format!(
            "{where_}: not a pcap file ({e}); pcapng files can be converted with \
             `editcap -F pcap IN OUT`"
        )
    })?;
    let header = reader.header();
    let link = match header.datalink {
        DataLink::ETHERNET => Link::Ethernet,
        // DLT_RAW is 12 on most systems and 14 on OpenBSD; files written without mapping
        // it to LINKTYPE_RAW (101) carry those numbers, and tshark reads both as raw IP.
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 | DataLink::Unknown(12 | 14) => Link::Ip,
        DataLink::LINUX_SLL => Link::Cooked {
            len: 16,
            ether_type_at: 14,
        },
        DataLink::LINUX_SLL2 => Link::Cooked {
            len: 20,
            ether_type_at: 0,
        },
        other => {
            return Err(format!(
                "{where_}: link type {other:?} is not supported; capture on an Ethernet \
                 interface, or on any interface (`tcpdump -i any`, Linux cooked), or as raw IP"
            ))
        }
    };
    let mut out = Capture::default();
    let mut fragments = Fragments::default();
    while let Some(raw) = reader.next_raw_packet() {
        // pcap-file's own check refuses orig_len > snap_len, which is every packet of a
        // snap-length capture; lift it and keep the others (time, incl_len <= orig_len).
        let p = raw
            .and_then(|raw| PcapPacket::try_from_raw_packet(raw, header.ts_resolution, u32::MAX))
            .map_err(|e| {
                format!(
                    "{where_}: packet {} is damaged ({e}); cut the file before it",
                    out.packets.len() as u64 + out.skipped
                )
            })?;
        let sliced = match link {
            Link::Ethernet => LaxSlicedPacket::from_ethernet(&p.data).ok(),
            Link::Ip => LaxSlicedPacket::from_ip(&p.data).ok(),
            Link::Cooked { len, ether_type_at } => p.data.get(len..).map(|rest| {
                let at = &p.data[ether_type_at..ether_type_at + 2];
                LaxSlicedPacket::from_ether_type(
                    EtherType(u16::from_be_bytes([at[0], at[1]])),
                    rest,
                )
            }),
        };
        match sliced.and_then(|s| fragments.five_tuple(&s)) {
            Some((flow, cut)) => {
                out.truncated += u64::from(cut);
                out.packets.push(Packet {
                    time_s: p.timestamp.as_secs_f64(),
                    flow,
                    bytes: p.orig_len,
                });
            }
            None => out.skipped += 1,
        }
    }
    Ok(out)
}

/// The ports of fragmented datagrams, from their first fragment, until their last.
///
/// Only a datagram's first fragment carries the TCP or UDP header. A later fragment is
/// given the five-tuple of the first fragment with the same addresses, protocol and IP
/// identification, so every fragment counts as a packet of the datagram's flow: the
/// flows are those tshark shows after reassembly (its default), and the packets are the
/// frames on the wire. A fragment whose first fragment was not seen before it (lost, or
/// out of order) keeps ports 0, as in tuple-based tools that do not reassemble.
#[derive(Default)]
struct Fragments {
    ports: HashMap<(FlowId, u32), (u16, u16)>,
}

/// A fragment's IP identification, and whether it is the first or the last.
struct Fragment {
    id: u32,
    first: bool,
    last: bool,
}

impl Fragments {
    /// The packet's flow, and whether its TCP or UDP header was cut; None when it is not
    /// IP or its ports were not captured.
    fn five_tuple(&mut self, s: &LaxSlicedPacket<'_>) -> Option<(FlowId, bool)> {
        let net = s.net.as_ref()?;
        let (src, dst, frag) = match net {
            LaxNetSlice::Ipv4(ip) => {
                let h = ip.header();
                let offset = h.fragments_offset().value();
                let frag = (h.more_fragments() || offset != 0).then(|| Fragment {
                    id: u32::from(h.identification()),
                    first: offset == 0,
                    last: !h.more_fragments(),
                });
                let v6 = |a: std::net::Ipv4Addr| a.to_ipv6_mapped().octets();
                (v6(h.source_addr()), v6(h.destination_addr()), frag)
            }
            LaxNetSlice::Ipv6(ip) => {
                let frag = ip.extensions().clone().into_iter().find_map(|e| match e {
                    // Offset and M flag read from the bytes: etherparse 0.16 takes the
                    // wrong bits for both.
                    Ipv6ExtensionSlice::Fragment(f) => {
                        let b = f.slice();
                        let offset = u16::from_be_bytes([b[2], b[3]]) >> 3;
                        let more = b[3] & 1 == 1;
                        (more || offset != 0).then(|| Fragment {
                            id: f.identification(),
                            first: offset == 0,
                            last: !more,
                        })
                    }
                    _ => None,
                });
                (ip.header().source(), ip.header().destination(), frag)
            }
        };
        let payload = net.ip_payload_ref()?;
        let mut flow = FlowId {
            src,
            dst,
            src_port: 0,
            dst_port: 0,
            proto: payload.ip_number.0,
        };
        let mut cut = false;
        match &frag {
            Some(f) if !f.first => {
                let key = (flow, f.id);
                let ports = if f.last {
                    self.ports.remove(&key)
                } else {
                    self.ports.get(&key).copied()
                };
                (flow.src_port, flow.dst_port) = ports.unwrap_or_default();
            }
            _ => {
                let whole = match payload.ip_number {
                    IpNumber::TCP => TcpHeaderSlice::from_slice(payload.payload).is_ok(),
                    IpNumber::UDP => UdpHeaderSlice::from_slice(payload.payload).is_ok(),
                    _ => return Some((flow, false)),
                };
                // Both headers start with the two ports; that is all a flow needs.
                let p = payload.payload.get(..4)?;
                cut = !whole;
                let ports = (
                    u16::from_be_bytes([p[0], p[1]]),
                    u16::from_be_bytes([p[2], p[3]]),
                );
                if let Some(f) = frag {
                    self.ports.insert((flow, f.id), ports);
                }
                (flow.src_port, flow.dst_port) = ports;
            }
        }
        Some((flow, cut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IpFragOffset, Ipv4Header, Ipv6Header, PacketBuilder};
    use pcap_file::pcap::{PcapHeader, PcapWriter};
    use std::collections::HashSet;
    use std::time::Duration;

    /// Write `frames` (bytes captured, length on the wire) to a pcap file with this link
    /// type and snap length, and read it back.
    fn round_trip(
        name: &str,
        datalink: DataLink,
        snaplen: u32,
        frames: &[(Vec<u8>, u32)],
    ) -> Capture {
        let path =
            std::env::temp_dir().join(format!("offload-flows-{name}-{}.pcap", std::process::id()));
        let header = PcapHeader {
            datalink,
            snaplen,
            ..PcapHeader::default()
        };
        let mut w = PcapWriter::with_header(File::create(&path).unwrap(), header).unwrap();
        for (i, (data, orig_len)) in frames.iter().enumerate() {
            let at = Duration::from_millis(500 * (i as u64 + 3));
            w.write_packet(&PcapPacket::new(at, *orig_len, data))
                .unwrap();
        }
        drop(w);
        let cap = read_pcap(&path);
        std::fs::remove_file(&path).unwrap();
        cap.unwrap()
    }

    fn whole(data: Vec<u8>) -> (Vec<u8>, u32) {
        let len = data.len() as u32;
        (data, len)
    }

    fn flows(cap: &Capture) -> usize {
        cap.packets
            .iter()
            .map(|p| p.flow)
            .collect::<HashSet<_>>()
            .len()
    }

    fn udp4(sport: u16, payload: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(sport, 1234)
            .write(&mut buf, &vec![7; payload])
            .unwrap();
        buf
    }

    #[test]
    fn reads_back_raw_ip_and_skips_a_cut_ip_header() {
        let cap = round_trip(
            "raw",
            DataLink::RAW,
            65535,
            &[whole(udp4(53, 3)), (vec![0x45, 0], 2)],
        );
        assert_eq!((cap.packets.len(), cap.skipped), (1, 1));
        let p = cap.packets[0];
        assert_eq!(p.flow.to_string(), "10.0.0.1:53 > 10.0.0.2:1234 udp");
        assert_eq!((p.time_s, p.bytes), (1.5, 31));
    }

    #[test]
    fn every_raw_ip_link_type_is_read() {
        for link in [12, 14, 101, 228] {
            let cap = round_trip("dlt", DataLink::from(link), 65535, &[whole(udp4(1, 10))]);
            assert_eq!((cap.packets.len(), cap.skipped), (1, 0), "link type {link}");
        }
    }

    #[test]
    fn another_link_type_is_refused_by_name() {
        let path =
            std::env::temp_dir().join(format!("offload-flows-ppp-{}.pcap", std::process::id()));
        let header = PcapHeader {
            datalink: DataLink::PPP,
            ..PcapHeader::default()
        };
        drop(PcapWriter::with_header(File::create(&path).unwrap(), header).unwrap());
        let err = read_pcap(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("link type PPP is not supported"), "{err}");
    }

    #[test]
    fn a_snap_length_capture_reads_the_headers_and_counts_what_was_cut() {
        // 3 TCP flows of 4 full-size segments over Ethernet and IPv4, captured at 96
        // bytes: the headers (54 bytes) fit, and each packet counts its 1514 wire bytes.
        let mut frames = Vec::new();
        for i in 0..12u16 {
            let mut buf = Vec::new();
            PacketBuilder::ethernet2([1; 6], [2; 6])
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .tcp(40_000 + i % 3, 80, u32::from(i), 1000)
                .write(&mut buf, &[0; 1460])
                .unwrap();
            frames.push((buf[..96].to_vec(), buf.len() as u32));
        }
        // IPv6 at 64 bytes: the ports (bytes 54-57) were captured, the rest of the TCP
        // header was not. At 56 bytes not even the ports were: skipped.
        let mut v6 = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv6([1; 16], [2; 16], 64)
            .tcp(5000, 443, 1, 1000)
            .write(&mut v6, &[0; 1000])
            .unwrap();
        frames.push((v6[..64].to_vec(), v6.len() as u32));
        frames.push((v6[..56].to_vec(), v6.len() as u32));
        let cap = round_trip("snaplen", DataLink::ETHERNET, 96, &frames);
        assert_eq!((cap.packets.len(), flows(&cap)), (13, 4));
        assert_eq!((cap.truncated, cap.skipped), (1, 1));
        assert!(cap.packets[..12].iter().all(|p| p.bytes == 1514));
        assert_eq!(cap.packets[12].flow.dst_port, 443);
    }

    #[test]
    fn linux_cooked_captures_are_read() {
        let ip = udp4(53, 20);
        // SLL: packet type, ARPHRD, address length, 8 address bytes, then the EtherType.
        let mut sll = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
        sll.extend(&ip);
        let mut arp = sll[..14].to_vec();
        arp.extend([0x08, 0x06]);
        arp.extend([0; 28]);
        // SLL2: the EtherType, 2 reserved bytes, interface index, ARPHRD, packet type,
        // address length, 8 address bytes.
        let mut sll2 = vec![
            0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0,
        ];
        sll2.extend(&ip);
        for (link, frames) in [
            (DataLink::LINUX_SLL, vec![whole(sll), whole(arp)]),
            (
                DataLink::LINUX_SLL2,
                vec![whole(sll2), whole(vec![0x08, 0x00, 0, 0])],
            ),
        ] {
            let cap = round_trip("sll", link, 65535, &frames);
            assert_eq!((cap.packets.len(), cap.skipped), (1, 1), "{link:?}");
            let flow = cap.packets[0].flow.to_string();
            assert_eq!(flow, "10.0.0.1:53 > 10.0.0.2:1234 udp");
        }
    }

    #[test]
    fn an_ipv4_total_length_of_zero_means_the_captured_length() {
        // BIG TCP and TSO captures leave the total length 0 for packets over 64 KiB.
        let mut buf = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(33_000, 80, 1, 1000)
            .write(&mut buf, &[0; 200])
            .unwrap();
        buf[2..4].fill(0);
        let cap = round_trip("tso", DataLink::RAW, 65535, &[(buf, 100_000)]);
        assert_eq!((cap.packets.len(), cap.skipped, cap.truncated), (1, 0, 0));
        assert_eq!(cap.packets[0].flow.src_port, 33_000);
    }

    /// An IPv4 fragment of a UDP datagram from 10.0.0.`host`: `payload` at 8-byte
    /// `offset`.
    fn fragment(host: u8, id: u16, offset: u16, more: bool, payload: &[u8]) -> Vec<u8> {
        let mut h = Ipv4Header::new(
            payload.len() as u16,
            64,
            IpNumber::UDP,
            [10, 0, 0, host],
            [10, 0, 0, 9],
        )
        .unwrap();
        h.identification = id;
        h.more_fragments = more;
        h.fragment_offset = IpFragOffset::try_new(offset).unwrap();
        let mut buf = h.to_bytes().to_vec();
        buf.extend(payload);
        buf
    }

    #[test]
    fn later_fragments_join_their_first_fragments_flow() {
        let udp = |sport: u16| {
            let mut b = sport.to_be_bytes().to_vec();
            b.extend([0, 53, 0x0b, 0xc8, 0, 0]); // port 53, length 3016, no checksum
            b.extend([0; 1472]);
            b
        };
        let frames = [
            // Two datagrams from different hosts with the same IP id, interleaved.
            fragment(1, 7, 0, true, &udp(1111)),
            fragment(2, 7, 0, true, &udp(2222)),
            fragment(1, 7, 185, true, &[0; 1480]),
            fragment(2, 7, 185, false, &[0; 48]),
            fragment(1, 7, 370, false, &[0; 48]),
            // A later fragment whose first fragment was never seen.
            fragment(3, 8, 185, false, &[0; 48]),
        ];
        let cap = round_trip("frag", DataLink::RAW, 65535, &frames.map(whole));
        let ports: Vec<u16> = cap.packets.iter().map(|p| p.flow.src_port).collect();
        assert_eq!(ports, [1111, 2222, 1111, 2222, 1111, 0]);
        assert_eq!((cap.packets.len(), flows(&cap), cap.skipped), (6, 3, 0));
    }

    #[test]
    fn ipv6_fragments_follow_the_same_rule() {
        let v6 = |offset: u16, more: bool, payload: &[u8]| {
            let h = Ipv6Header {
                payload_length: 8 + payload.len() as u16,
                next_header: IpNumber::IPV6_FRAGMENTATION_HEADER,
                hop_limit: 64,
                source: [1; 16],
                destination: [2; 16],
                ..Default::default()
            };
            let mut buf = h.to_bytes().to_vec();
            let frag = (offset << 3) | u16::from(more);
            buf.extend([17, 0]);
            buf.extend(frag.to_be_bytes());
            buf.extend(42u32.to_be_bytes());
            buf.extend(payload);
            buf
        };
        let mut first = vec![0x1f, 0x90, 0, 53, 0x05, 0xf0, 0, 0];
        first.extend([0; 1000]);
        let frames = [v6(0, true, &first), v6(126, false, &[0; 512])];
        let cap = round_trip("frag6", DataLink::RAW, 65535, &frames.map(whole));
        let ports: Vec<u16> = cap.packets.iter().map(|p| p.flow.src_port).collect();
        assert_eq!(ports, [8080, 8080]);
    }
}
