//! Seed 004's packet-level model: a web server's host CPU and an offload NIC that can
//! take whole TCP connections (connection handoff), under closed-loop web clients.
//!
//! What is modelled (reference 004 §7.1, at the granularity it proposes):
//! - **host**: one CPU serving tasks in arrival order (the NIC's bookkeeping notes first,
//!   as the driver's interrupt handler takes them); per-packet TCP/IP cost plus a
//!   cache-miss term that grows with the connections resident on the host (their ~1 KB
//!   of state overflows the L2), per-connection, per-request, dynamic-content and copy
//!   costs, and the bypass path's cost per socket operation for offloaded connections;
//!   a bounded transmit ring to the NIC whose overflow the driver drops;
//! - **NIC**: one processor with the queues RxHost, TxHost, RxNIC, Cmd (and a timer queue
//!   for offloaded connections' retransmissions), served in the order a [`Policy`] picks;
//!   bounded receive queues that drop when full; a per-packet cost that grows once its
//!   connections' state overflows its fast memory; `Cnum`, `Soft_limit`, `Hard_limit`;
//! - **handoff**: every connection is born on the host; the host offers it once (at
//!   establishment, at the n-th send-buffer enqueue, or once its long-lived flow
//!   detector lists it); the NIC accepts while `Cnum < Soft_limit`. Packets that reach
//!   the host after the move are passed on;
//! - **TCP**, per segment: three-way handshake, slow start and congestion avoidance
//!   (cwnd in segments), a fixed receive window, cumulative ACKs every second segment
//!   with the last one riding on the next request or the FIN, retransmission timeouts
//!   with exponential back-off and go-back-N, FIN exchange;
//! - **link**: full duplex, serialization at the link rate plus a propagation delay;
//! - **clients**: functional (cost nothing), closed loop, one persistent connection per
//!   workload connection, zero think time or a bandwidth cap (SPECweb99).
//!
//! Not modelled: fast retransmit and SACK (the only losses are the server NIC's receive
//! drops, ACKs, requests, SYNs and FINs, which fast retransmit would not repair either,
//! and the host's transmit-ring drops, which here wait for the timeout);
//! RTT estimation (RTTs here are far below the minimum RTO, so RTO = its minimum);
//! delayed-ACK timers (an ACK with nothing to ride on goes at once); the I/O bus;
//! interrupt coalescing; active restore (the paper did not need it).

pub mod policy;
mod report;
mod sim;
mod tcp;

pub use policy::{LoadControl, Paper, Policy, Priority, Selection, State, Trigger, Watermarks};
pub use report::{Report, Sample};
pub use sim::run;

/// The machine: clock rates, link, NIC buffers, segment sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct Hardware {
    /// Host CPU cycles per second (the paper: 2 GHz).
    pub host_hz: f64,
    /// NIC processor instructions per second (the paper: 400, 600 or 800 MIPS).
    pub nic_ips: f64,
    pub link_bps: f64,
    pub link_delay_s: f64,
    /// Capacity of the NIC's receive buffer (RxHost and RxNIC together), packets.
    pub rx_capacity: u32,
    /// The host driver's transmit ring (TxHost), packets. A host packet that finds it
    /// full is dropped by the driver (FreeBSD's ENOBUFS) and TCP resends it on its
    /// timeout: under FCFS a busy NIC drains the ring slowly, and this is how its TCP
    /// work starves the host's connections (reference 004 Table 1).
    pub tx_capacity: u32,
    pub mss: u32,
    /// HTTP response header bytes sent before each body.
    pub header_bytes: u32,
    /// HTTP request bytes.
    pub request_bytes: u32,
}

impl Default for Hardware {
    fn default() -> Self {
        Hardware {
            host_hz: 2e9,
            nic_ips: 400e6,
            link_bps: 10e9,
            link_delay_s: 1e-6,
            rx_capacity: 4096,
            tx_capacity: 256,
            mss: 1460,
            header_bytes: 250,
            request_bytes: 300,
        }
    }
}

/// Host CPU costs, in cycles.
#[derive(Clone, Debug, PartialEq)]
pub struct HostCosts {
    /// Driver plus TCP/IP per packet, sent or received, with the connection's state in cache.
    pub packet: f64,
    /// Accept, socket set-up and close, per connection.
    pub connection: f64,
    /// The server application and its system calls, per request.
    pub request: f64,
    /// Extra application work per dynamic request.
    pub dynamic: f64,
    /// Copy cost per byte of headers and dynamic bodies (static bodies go by sendfile).
    pub copy_per_byte: f64,
    /// Per bypass operation of an offloaded connection (send, notification, close).
    pub bypass: f64,
    /// Exporting a connection's state in a handoff command.
    pub handoff: f64,
    /// Cycles per DRAM access (the paper's 195).
    pub miss: f64,
    /// Cache lines of connection state one packet touches.
    pub miss_lines: f64,
    /// Connection state per host connection, bytes (the paper's ~1 KB).
    pub state_bytes: f64,
    /// Cache bytes that hold connection state.
    pub cache_bytes: f64,
}

impl Default for HostCosts {
    fn default() -> Self {
        HostCosts {
            packet: 2200.0,
            connection: 12_000.0,
            request: 30_000.0,
            dynamic: 60_000.0,
            copy_per_byte: 0.5,
            bypass: 1000.0,
            handoff: 3000.0,
            miss: 195.0,
            miss_lines: 8.0,
            state_bytes: 1024.0,
            cache_bytes: 512.0 * 1024.0,
        }
    }
}

impl HostCosts {
    /// Cycles per packet with `resident` connections on the host: the state of the
    /// ones beyond what the cache holds misses, in proportion.
    pub fn packet_cycles(&self, resident: u32) -> f64 {
        let fits = self.cache_bytes / self.state_bytes;
        let missing = (1.0 - fits / f64::from(resident.max(1))).max(0.0);
        self.packet + self.miss * self.miss_lines * missing
    }
}

/// NIC processor costs, in instructions.
#[derive(Clone, Debug, PartialEq)]
pub struct NicCosts {
    /// A host connection's packet: lookup and DMA, received or sent.
    pub host_packet: f64,
    /// An offloaded connection's packet: full TCP processing, received or sent.
    pub packet: f64,
    /// A bypass command or a notification to the host.
    pub command: f64,
    /// Installing a handed-off connection.
    pub handoff: f64,
    /// Extra instructions per offloaded packet whose connection's state is not in the
    /// NIC processor's fast memory: the paper's overloaded NIC takes "much longer" per
    /// packet with all 2048 connections (W-4096-P-N).
    pub miss: f64,
    /// Offloaded connections whose state the NIC's fast memory holds.
    pub cache_conns: f64,
}

impl NicCosts {
    /// Instructions per offloaded packet with `cnum` connections on the NIC: the ones
    /// beyond what its fast memory holds miss, in proportion (as the host's).
    pub fn packet_instructions(&self, cnum: u32) -> f64 {
        let missing = (1.0 - self.cache_conns / f64::from(cnum.max(1))).max(0.0);
        self.packet + self.miss * missing
    }
}

impl Default for NicCosts {
    fn default() -> Self {
        NicCosts {
            host_packet: 500.0,
            packet: 1750.0,
            command: 500.0,
            handoff: 2000.0,
            miss: 0.0,
            cache_conns: 1024.0,
        }
    }
}

/// TCP parameters (reference 004 §7.5 item 4: not given by the paper).
#[derive(Clone, Debug, PartialEq)]
pub struct Tcp {
    pub initial_cwnd: u32,
    /// Receive window, segments (64 KiB).
    pub window: u32,
    /// The retransmission timeout (its minimum; RTTs here are far below it).
    pub rto_s: f64,
    /// A SYN's first retransmission timeout (RFC 6298: 1 s).
    pub syn_rto_s: f64,
    /// The client acknowledges every this many segments.
    pub ack_every: u32,
    /// Bytes per send-buffer enqueue (sendfile appends page by page), for `T(n)`.
    pub enqueue_bytes: u32,
}

impl Default for Tcp {
    fn default() -> Self {
        Tcp {
            initial_cwnd: 2,
            window: 44,
            rto_s: 0.2,
            syn_rto_s: 1.0,
            ack_every: 2,
            enqueue_bytes: 4096,
        }
    }
}

/// How long to run and what to record.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub clients: u32,
    /// Server packets (both directions) before measuring (the paper: 400,000).
    pub warmup_packets: u64,
    /// Server packets measured (the paper: 600,000).
    pub packets: u64,
    /// Simulated time at which the run stops even if the packets were not reached
    /// (a collapsed configuration may never reach them).
    pub max_time_s: f64,
    /// Interval of the time series (`Cnum`, `Soft_limit`, `Qlen`, rates).
    pub sample_s: f64,
    pub seed: u64,
}

impl Default for Run {
    fn default() -> Self {
        Run {
            clients: 2048,
            warmup_packets: 400_000,
            packets: 600_000,
            max_time_s: 60.0,
            sample_s: 0.01,
            seed: 0,
        }
    }
}

/// The host's long-lived flow detector, used by [`Selection::LongLived`].
pub type Flows = offload_flows::Params;

/// The detector's settings on the host: short epochs, so a connection is listed while it
/// still has packets to move; a memory that fades by 10 % an epoch, so the FMU forgets
/// connections that ended; and a 1-bit margin, because in a closed loop every live
/// connection sends at a similar rate and only accumulated packets set the long ones
/// apart (docs/flows.md, "In connection handoff").
pub fn host_flows() -> Flows {
    Flows {
        fcu_flows: 4096,
        epoch_packets: 4096,
        margin_bits: 1.0,
        decay: 0.9,
        ..Flows::default()
    }
}

/// Everything but the policy and the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub hardware: Hardware,
    pub host: HostCosts,
    pub nic: NicCosts,
    pub tcp: Tcp,
    pub run: Run,
    pub flows: Flows,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hardware: Hardware::default(),
            host: HostCosts::default(),
            nic: NicCosts::default(),
            tcp: Tcp::default(),
            run: Run::default(),
            flows: host_flows(),
        }
    }
}

impl Config {
    pub fn validate(&self) -> Result<(), String> {
        let h = &self.hardware;
        let positive = [
            ("hardware.host_hz", h.host_hz),
            ("hardware.nic_ips", h.nic_ips),
            ("hardware.link_bps", h.link_bps),
            ("host.state_bytes", self.host.state_bytes),
            ("tcp.rto_s", self.tcp.rto_s),
            ("tcp.syn_rto_s", self.tcp.syn_rto_s),
            ("run.max_time_s", self.run.max_time_s),
            ("run.sample_s", self.run.sample_s),
        ];
        let c = &self.host;
        let n = &self.nic;
        let non_negative = [
            ("hardware.link_delay_s", h.link_delay_s),
            ("host.packet", c.packet),
            ("host.connection", c.connection),
            ("host.request", c.request),
            ("host.dynamic", c.dynamic),
            ("host.copy_per_byte", c.copy_per_byte),
            ("host.bypass", c.bypass),
            ("host.handoff", c.handoff),
            ("host.miss", c.miss),
            ("host.miss_lines", c.miss_lines),
            ("host.cache_bytes", c.cache_bytes),
            ("nic.host_packet", n.host_packet),
            ("nic.packet", n.packet),
            ("nic.command", n.command),
            ("nic.handoff", n.handoff),
            ("nic.miss", n.miss),
            ("nic.cache_conns", n.cache_conns),
        ];
        for (name, v) in positive {
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("{name} must be finite and > 0, got {v}"));
            }
        }
        for (name, v) in non_negative {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(format!("{name} must be finite and >= 0, got {v}"));
            }
        }
        let counts = [
            ("hardware.rx_capacity", h.rx_capacity),
            ("hardware.tx_capacity", h.tx_capacity),
            ("hardware.mss", h.mss),
            ("tcp.initial_cwnd", self.tcp.initial_cwnd),
            ("tcp.window", self.tcp.window),
            ("tcp.ack_every", self.tcp.ack_every),
            ("tcp.enqueue_bytes", self.tcp.enqueue_bytes),
            ("run.clients", self.run.clients),
        ];
        for (name, v) in counts {
            if v == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if self.run.packets == 0 {
            return Err("run.packets must be at least 1".into());
        }
        self.flows.validate().map_err(|e| format!("flows: {e}"))
    }
}

/// The connections clients replay, in order (wrapping around at the end): each is a
/// run of requests with a response body size and a dynamic flag.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Request index range of connection i: `offsets[i]..offsets[i + 1]`.
    offsets: Vec<usize>,
    sizes: Vec<u64>,
    dynamic: Vec<bool>,
    /// Per-client bandwidth cap (SPECweb99's 400 kbit/s), `None` for no think time.
    pub client_bps: Option<f64>,
}

impl Workload {
    pub fn new(
        offsets: Vec<usize>,
        sizes: Vec<u64>,
        dynamic: Vec<bool>,
        client_bps: Option<f64>,
    ) -> Result<Self, String> {
        if offsets.len() < 2 || offsets[0] != 0 {
            return Err(
                "workload offsets must start at 0 and describe at least one connection".into(),
            );
        }
        if offsets.windows(2).any(|w| w[1] <= w[0]) {
            return Err("workload offsets must increase: every connection has a request".into());
        }
        if *offsets.last().unwrap() != sizes.len() || sizes.len() != dynamic.len() {
            return Err(format!(
                "workload: offsets end at {}, but there are {} sizes and {} dynamic flags",
                offsets.last().unwrap(),
                sizes.len(),
                dynamic.len()
            ));
        }
        if let Some(bps) = client_bps {
            if !(bps > 0.0 && bps.is_finite()) {
                return Err(format!("workload client_bps must be > 0, got {bps}"));
            }
        }
        Ok(Workload {
            offsets,
            sizes,
            dynamic,
            client_bps,
        })
    }

    pub fn connections(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Requests of connection `i`: (body bytes, dynamic).
    fn request(&self, conn: usize, k: usize) -> (u64, bool) {
        let i = self.offsets[conn] + k;
        (self.sizes[i], self.dynamic[i])
    }

    fn requests(&self, conn: usize) -> usize {
        self.offsets[conn + 1] - self.offsets[conn]
    }
}
