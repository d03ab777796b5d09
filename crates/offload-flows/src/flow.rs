//! The flow identification unit: a packet's five-tuple, read from pcap files.

use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pcap_file::pcap::PcapReader;
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

/// What a pcap file held: its IP packets in file order, and how many frames were not IP
/// (ARP, LLDP, truncated headers), which are skipped.
#[derive(Clone, Debug, Default)]
pub struct Capture {
    pub packets: Vec<Packet>,
    pub skipped: u64,
}

/// Read a classic pcap file with Ethernet, raw-IP, IPv4 or IPv6 link type. Errors name
/// the file and say what to do.
pub fn read_pcap(path: &Path) -> Result<Capture, String> {
    let where_ = path.display();
    let file = File::open(path).map_err(|e| format!("{where_}: cannot open: {e}"))?;
    let mut reader = PcapReader::new(BufReader::new(file)).map_err(|e| {
        format!(
            "{where_}: not a pcap file ({e}); pcapng files can be converted with \
             `editcap -F pcap IN OUT`"
        )
    })?;
    let link = reader.header().datalink;
    let ethernet = match link {
        DataLink::ETHERNET => true,
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => false,
        other => {
            return Err(format!(
                "{where_}: link type {other:?} is not supported; capture on an Ethernet \
                 interface or write raw IP (DLT_RAW)"
            ))
        }
    };
    let mut out = Capture::default();
    while let Some(packet) = reader.next_packet() {
        let p = packet.map_err(|e| {
            format!(
                "{where_}: packet {} is damaged ({e}); cut the file before it",
                out.packets.len() as u64 + out.skipped
            )
        })?;
        let sliced = if ethernet {
            SlicedPacket::from_ethernet(&p.data)
        } else {
            SlicedPacket::from_ip(&p.data)
        };
        match sliced.ok().and_then(|s| five_tuple(&s)) {
            Some(flow) => out.packets.push(Packet {
                time_s: p.timestamp.as_secs_f64(),
                flow,
                bytes: p.orig_len,
            }),
            None => out.skipped += 1,
        }
    }
    Ok(out)
}

fn five_tuple(s: &SlicedPacket<'_>) -> Option<FlowId> {
    let (src, dst, proto) = match s.net.as_ref()? {
        NetSlice::Ipv4(ip) => {
            let h = ip.header();
            (
                h.source_addr().to_ipv6_mapped().octets(),
                h.destination_addr().to_ipv6_mapped().octets(),
                ip.payload().ip_number.0,
            )
        }
        NetSlice::Ipv6(ip) => (
            ip.header().source(),
            ip.header().destination(),
            ip.payload().ip_number.0,
        ),
    };
    let (src_port, dst_port) = match s.transport.as_ref() {
        Some(TransportSlice::Tcp(t)) => (t.source_port(), t.destination_port()),
        Some(TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
        _ => (0, 0),
    };
    Some(FlowId {
        src,
        dst,
        src_port,
        dst_port,
        proto,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use std::time::Duration;

    #[test]
    fn reads_back_raw_ip_written_by_pcap_file() {
        let path = std::env::temp_dir().join(format!("offload-flows-{}.pcap", std::process::id()));
        let header = PcapHeader {
            datalink: DataLink::RAW,
            ..PcapHeader::default()
        };
        let mut w = PcapWriter::with_header(File::create(&path).unwrap(), header).unwrap();
        let mut buf = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(53, 1234)
            .write(&mut buf, &[1, 2, 3])
            .unwrap();
        let at = Duration::from_millis(1500);
        w.write_packet(&PcapPacket::new(at, buf.len() as u32, &buf))
            .unwrap();
        w.write_packet(&PcapPacket::new(at, 2, &[0x45, 0])).unwrap(); // a cut header
        drop(w);
        let cap = read_pcap(&path);
        std::fs::remove_file(&path).unwrap();
        let cap = cap.unwrap();
        assert_eq!((cap.packets.len(), cap.skipped), (1, 1));
        let p = cap.packets[0];
        assert_eq!(p.flow.to_string(), "10.0.0.1:53 > 10.0.0.2:1234 udp");
        assert_eq!((p.time_s, p.bytes), (1.5, 31));
    }
}
