//! The event loop: clients, link, NIC and host of the handoff model (see the module
//! docs of [`super`] for what is and is not modelled).
//!
//! Each of the NIC and the host serves one item at a time. An item's effects on
//! connection state are applied when its service starts (they decide its cost); what it
//! produces (packets on the wire, tasks for the other side) is released when its service
//! ends.

use std::collections::VecDeque;

use offload_flows::Detector;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::policy::{Policy, Priority, Trigger};
use super::report::{Meter, Report, Sample};
use super::tcp::{ClientState, Fire, Receipt, Receiver, Sender};
use super::{Config, Workload};
use crate::calendar::Calendar;

/// Ethernet, IP and TCP headers plus the frame check sequence, bytes per packet.
const FRAMING: u32 = 58;
/// A packet without payload (SYN, ACK, FIN), bytes on the wire.
const BARE: u32 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    // Client to server; `seq` is the cumulative ACK that rides along.
    Syn,
    Ack,
    /// Request number k on the connection.
    Request(u32),
    Fin,
    LastAck,
    // Server to client; `seq` numbers data segments.
    SynAck,
    Data,
    FinAck,
}

#[derive(Clone, Copy, Debug)]
struct Pkt {
    conn: u32,
    kind: Kind,
    seq: u32,
    bytes: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Listen,
    SynRcvd,
    Open,
    LastAck,
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Host,
    Nic,
}

/// The host's one handoff attempt per connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Offer {
    NotYet,
    /// Sent; the host holds the connection's output until the NIC answers.
    Pending,
    Settled,
}

struct Conn {
    client: u32,
    /// Index of the workload connection it replays.
    work: usize,
    server: Server,
    owner: Owner,
    offer: Offer,
    enqueues: u32,
    /// Next request number the server expects.
    expected: u32,
    snd: Sender,
    rcv: Receiver,
    /// Body bytes of the response the client is receiving.
    body_bytes: u64,
}

// NIC queues (reference 004 §3.1), plus retransmission timeouts of its own connections.
const RX_HOST: usize = 0;
const TX_HOST: usize = 1;
const RX_NIC: usize = 2;
const CMD: usize = 3;
const TIMERS: usize = 4;
const HOST_TIER: &[usize] = &[RX_HOST, TX_HOST];
const NIC_TIER: &[usize] = &[RX_NIC, CMD, TIMERS];
const ALL: &[usize] = &[RX_HOST, TX_HOST, RX_NIC, CMD, TIMERS];

enum Item {
    /// A packet in RxHost, TxHost or RxNIC (the queue says which).
    Packet(Pkt),
    /// Commands from the host.
    Handoff(u32),
    Send {
        conn: u32,
        segments: u32,
    },
    /// A packet that reached the host after its connection moved to the NIC.
    Forward(Pkt),
    Timeout(u32),
}

struct Entry {
    /// Arrival order across all queues, for FCFS and within a tier.
    order: u64,
    at: f64,
    item: Item,
}

/// Notifications from the NIC to the host.
enum Note {
    Request { conn: u32, k: u32 },
    Acked,
    Closed,
    Reply { conn: u32, accepted: bool },
    SoftLimit(u32),
}

enum Task {
    Packet(Pkt),
    Note(Note),
    Timeout(u32),
}

enum Out {
    /// A packet leaving the NIC; `own` when it belongs to a NIC connection.
    Wire {
        pkt: Pkt,
        own: bool,
    },
    Host(Task),
    Nic(usize, Item),
}

enum Ev {
    Server(Pkt),
    Client(Pkt),
    NicDone,
    HostDone,
    ServerTimer(u32),
    ClientTimer(u32),
    /// A client sends its next request (or its FIN) after any throttling wait.
    Next(u32),
    /// A client opens its next connection.
    Open(u32),
    Sample,
}

/// What the server's TCP made of a packet.
#[derive(Default)]
struct Input {
    /// A new connection.
    syn: bool,
    /// The SYN needs a SYN-ACK: a new one, or a repeat after ours was dropped.
    syn_ack: bool,
    established: bool,
    request: Option<u32>,
    all_acked: bool,
    fin: bool,
    closed: bool,
}

struct Nic {
    queues: [VecDeque<Entry>; 5],
    order: u64,
    busy: bool,
    cnum: u32,
    out: Vec<Out>,
    /// When RxNIC's length last changed (for its time-average).
    rx_nic_since: f64,
}

struct Host {
    tasks: VecDeque<Task>,
    /// The NIC's bookkeeping notes (handoff replies, closes, limits, acknowledged data),
    /// which the driver handles in its interrupt handler, ahead of the queued work.
    driver: VecDeque<Task>,
    busy: bool,
    /// Connections whose TCP state lives on the host (the cache-pressure term).
    resident: u32,
    /// The driver's view of the NIC's limit and connections, to skip hopeless offers.
    soft_view: u32,
    cnum_view: u32,
    out: Vec<Out>,
    /// Application cycles of the task in service (the rest is network stack).
    app_cycles: f64,
    /// The long-lived flow detector over the packets the host handles (connection id as
    /// the flow), when the policy offers on [`Trigger::LongLived`].
    detector: Option<Detector<u32>>,
}

/// Whole-run totals behind the time series.
#[derive(Clone, Copy, Default)]
struct Totals {
    requests: u64,
    host_busy_s: f64,
    nic_busy_s: f64,
}

struct World<'a, P: Policy> {
    cfg: &'a Config,
    work: &'a Workload,
    policy: P,
    cal: Calendar<Ev>,
    now: f64,
    rng: Xoshiro256PlusPlus,
    conns: Vec<Conn>,
    cursor: usize,
    nic: Nic,
    host: Host,
    up_free: f64,
    down_free: f64,
    server_packets: u64,
    measuring: bool,
    meter: Meter,
    totals: Totals,
    last: (f64, Totals),
    series: Vec<Sample>,
}

/// Run the model until `cfg.run.packets` server packets after the warm-up were
/// measured, or until `cfg.run.max_time_s` of simulated time.
pub fn run<P: Policy>(cfg: &Config, work: &Workload, policy: P) -> Result<Report, String> {
    cfg.validate()?;
    let mut w = World::new(cfg, work, policy);
    let complete = w.simulate();
    Ok(w.finish(!complete))
}

impl<'a, P: Policy> World<'a, P> {
    fn new(cfg: &'a Config, work: &'a Workload, policy: P) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.run.seed);
        let cursor = rng.random_range(0..work.connections());
        let soft_view = policy.soft_limit();
        // Only a policy that offers on the detector's trigger pays for running it.
        let detector = policy
            .select(Trigger::LongLived)
            .then(|| Detector::new(cfg.flows.clone()).expect("validated with the config"));
        World {
            cfg,
            work,
            policy,
            cal: Calendar::new(),
            now: 0.0,
            rng,
            conns: Vec::new(),
            cursor,
            nic: Nic {
                queues: Default::default(),
                order: 0,
                busy: false,
                cnum: 0,
                out: Vec::new(),
                rx_nic_since: 0.0,
            },
            host: Host {
                tasks: VecDeque::new(),
                driver: VecDeque::new(),
                busy: false,
                resident: 0,
                soft_view,
                cnum_view: 0,
                out: Vec::new(),
                app_cycles: 0.0,
                detector,
            },
            up_free: 0.0,
            down_free: 0.0,
            server_packets: 0,
            measuring: false,
            meter: Meter::new(),
            totals: Totals::default(),
            last: (0.0, Totals::default()),
            series: Vec::new(),
        }
    }

    /// Returns whether the measurement completed before the time limit.
    fn simulate(&mut self) -> bool {
        // Clients start within the first millisecond, not all at one instant.
        for client in 0..self.cfg.run.clients {
            let t = self.rng.random::<f64>() * 1e-3;
            self.cal.schedule(t, Ev::Open(client));
        }
        self.cal.schedule(self.cfg.run.sample_s, Ev::Sample);
        while let Some((t, ev)) = self.cal.pop() {
            if t > self.cfg.run.max_time_s {
                return false;
            }
            self.now = t;
            self.dispatch(ev);
            if self.measuring && self.meter.packets >= self.cfg.run.packets {
                return true;
            }
        }
        false
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Server(p) => self.nic_receive(p),
            Ev::Client(p) => self.client_receive(p),
            Ev::NicDone => self.nic_done(),
            Ev::HostDone => self.host_done(),
            Ev::ServerTimer(id) => self.server_timer(id),
            Ev::ClientTimer(id) => self.client_timer(id),
            Ev::Next(id) => self.client_next(id),
            Ev::Open(client) => self.client_open(client),
            Ev::Sample => self.sample(),
        }
    }

    fn finish(mut self, truncated: bool) -> Report {
        self.touch_rx_nic();
        let queued = (self.nic.queues[RX_HOST].len() + self.nic.queues[RX_NIC].len()) as u64;
        let series = std::mem::take(&mut self.series);
        self.meter
            .report(self.now, truncated, queued, self.nic.cnum, series)
    }

    // ---- link --------------------------------------------------------------------

    fn send_up(&mut self, pkt: Pkt) {
        let t = self.serialize(pkt.bytes, true);
        self.cal.schedule(t, Ev::Server(pkt));
    }

    fn send_down(&mut self, pkt: Pkt) {
        let t = self.serialize(pkt.bytes, false);
        self.cal.schedule(t, Ev::Client(pkt));
    }

    /// When a packet sent now arrives: after those ahead of it, its serialization and
    /// the propagation delay.
    fn serialize(&mut self, bytes: u32, up: bool) -> f64 {
        let hw = &self.cfg.hardware;
        let free = if up {
            &mut self.up_free
        } else {
            &mut self.down_free
        };
        *free = free.max(self.now) + f64::from(bytes) * 8.0 / hw.link_bps;
        *free + hw.link_delay_s
    }

    fn count_packet(&mut self, own: bool) {
        self.server_packets += 1;
        self.meter.packets += 1;
        self.meter.nic_packets += u64::from(own);
        if !self.measuring && self.server_packets >= self.cfg.run.warmup_packets {
            self.measuring = true;
            self.touch_rx_nic();
            self.meter.restart(self.now);
        }
    }

    // ---- clients -----------------------------------------------------------------

    fn client_open(&mut self, client: u32) {
        let id = self.conns.len() as u32;
        self.conns.push(Conn {
            client,
            work: self.cursor,
            server: Server::Listen,
            owner: Owner::Host,
            offer: Offer::NotYet,
            enqueues: 0,
            expected: 0,
            snd: Sender::new(self.cfg.tcp.initial_cwnd),
            rcv: Receiver::new(),
            body_bytes: 0,
        });
        self.cursor = (self.cursor + 1) % self.work.connections();
        self.meter.connections_opened += 1;
        self.send_up(bare(id, Kind::Syn, 0));
        self.arm_client(id);
    }

    fn client_receive(&mut self, p: Pkt) {
        let id = p.conn;
        let c = &mut self.conns[id as usize];
        match p.kind {
            Kind::SynAck if c.rcv.state == ClientState::SynSent => {
                c.rcv.state = ClientState::Open;
                c.rcv.timer.disarm();
                self.send_up(bare(id, Kind::Ack, 0));
                self.client_next(id);
            }
            Kind::Data if c.rcv.state == ClientState::Open => {
                c.rcv.timer.disarm(); // the request got through
                match c.rcv.on_data(p.seq, self.cfg.tcp.ack_every) {
                    Receipt::Quiet => {}
                    Receipt::Ack => {
                        let ack = c.rcv.nxt;
                        self.send_up(bare(id, Kind::Ack, ack));
                    }
                    Receipt::Complete => self.response_complete(id),
                }
            }
            Kind::FinAck if c.rcv.state == ClientState::FinSent => {
                c.rcv.state = ClientState::Done;
                c.rcv.timer.disarm();
                let client = c.client;
                self.send_up(bare(id, Kind::LastAck, 0));
                self.client_open(client);
            }
            // The server repeated its FIN: our last ACK was lost.
            Kind::FinAck if c.rcv.state == ClientState::Done => {
                self.send_up(bare(id, Kind::LastAck, 0));
            }
            // Duplicates of what was already handled.
            _ => {}
        }
    }

    fn response_complete(&mut self, id: u32) {
        let c = &self.conns[id as usize];
        let elapsed = self.now - c.rcv.asked_at;
        if self.measuring {
            self.meter.response(elapsed, c.body_bytes);
        }
        self.totals.requests += 1;
        // SPECweb99's clients hold their bit rate under a cap by waiting.
        let wait = self.work.client_bps.map_or(0.0, |bps| {
            (c.body_bytes as f64 * 8.0 / bps - elapsed).max(0.0)
        });
        if wait > 0.0 {
            // Nothing carries the last ACK soon: the client's delayed ACK goes alone
            // (it fires well before the server's minimum RTO would).
            let ack = c.rcv.nxt;
            self.send_up(bare(id, Kind::Ack, ack));
            self.cal.schedule(self.now + wait, Ev::Next(id));
        } else {
            self.client_next(id);
        }
    }

    /// Send the connection's next request, or close it when none is left.
    fn client_next(&mut self, id: u32) {
        let c = &mut self.conns[id as usize];
        let ack = c.rcv.nxt;
        if (c.rcv.sent as usize) < self.work.requests(c.work) {
            let k = c.rcv.sent;
            let (size, _) = self.work.request(c.work, k as usize);
            c.rcv.sent += 1;
            c.rcv.end += segments(&self.cfg.hardware, size);
            c.rcv.asked_at = self.now;
            c.body_bytes = size;
            let bytes = self.cfg.hardware.request_bytes + FRAMING;
            self.send_up(Pkt {
                conn: id,
                kind: Kind::Request(k),
                seq: ack,
                bytes,
            });
        } else {
            c.rcv.state = ClientState::FinSent;
            self.send_up(bare(id, Kind::Fin, ack));
        }
        self.arm_client(id);
    }

    fn arm_client(&mut self, id: u32) {
        let tcp = &self.cfg.tcp;
        let c = &mut self.conns[id as usize];
        let base = if c.rcv.state == ClientState::SynSent {
            tcp.syn_rto_s
        } else {
            tcp.rto_s
        };
        if let Some(t) = c.rcv.timer.arm(self.now, base) {
            self.cal.schedule(t, Ev::ClientTimer(id));
        }
    }

    fn client_timer(&mut self, id: u32) {
        let c = &mut self.conns[id as usize];
        match c.rcv.timer.fire(self.now) {
            Fire::Nothing => return,
            Fire::Reschedule(t) => return self.cal.schedule(t, Ev::ClientTimer(id)),
            Fire::Expire => {}
        }
        let ack = c.rcv.nxt;
        let pkt = match c.rcv.state {
            ClientState::SynSent => bare(id, Kind::Syn, 0),
            ClientState::Open => Pkt {
                conn: id,
                kind: Kind::Request(c.rcv.sent - 1),
                seq: ack,
                bytes: self.cfg.hardware.request_bytes + FRAMING,
            },
            ClientState::FinSent => bare(id, Kind::Fin, ack),
            ClientState::Done => return,
        };
        self.meter.timeouts += 1;
        self.send_up(pkt);
        self.arm_client(id);
    }

    // ---- server TCP (whoever runs it) --------------------------------------------

    fn server_input(&mut self, p: Pkt) -> Input {
        let mut inp = Input::default();
        let c = &mut self.conns[p.conn as usize];
        if p.kind == Kind::Syn {
            // A repeated SYN gets the SYN-ACK again and changes nothing else.
            inp.syn = c.server == Server::Listen;
            inp.syn_ack = matches!(c.server, Server::Listen | Server::SynRcvd);
            if inp.syn {
                c.server = Server::SynRcvd;
            }
            return inp;
        }
        if c.server == Server::SynRcvd && matches!(p.kind, Kind::Ack | Kind::Request(_)) {
            c.server = Server::Open;
            inp.established = true;
        }
        let mut rearm = false;
        if c.snd.on_ack(p.seq) {
            if c.snd.una == c.snd.end {
                c.snd.timer.disarm();
                inp.all_acked = true;
            } else {
                rearm = true;
            }
        }
        match p.kind {
            Kind::Request(k) if k == c.expected && c.server == Server::Open => {
                c.expected += 1;
                inp.request = Some(k);
            }
            Kind::Fin if c.server == Server::Open => {
                c.server = Server::LastAck;
                inp.fin = true;
                rearm = true; // for the FIN we answer with
            }
            Kind::LastAck if c.server == Server::LastAck => {
                c.server = Server::Closed;
                c.snd.timer.disarm();
                inp.closed = true;
                self.meter.connections_closed += 1;
            }
            _ => {}
        }
        if rearm {
            self.arm_server(p.conn);
        }
        inp
    }

    fn arm_server(&mut self, id: u32) {
        let c = &mut self.conns[id as usize];
        if let Some(t) = c.snd.timer.arm(self.now, self.cfg.tcp.rto_s) {
            self.cal.schedule(t, Ev::ServerTimer(id));
        }
    }

    fn server_timer(&mut self, id: u32) {
        let c = &mut self.conns[id as usize];
        match c.snd.timer.fire(self.now) {
            Fire::Nothing => {}
            Fire::Reschedule(t) => self.cal.schedule(t, Ev::ServerTimer(id)),
            Fire::Expire if c.server == Server::Closed => {}
            Fire::Expire => {
                self.meter.timeouts += 1;
                if c.owner == Owner::Nic {
                    self.nic_push(TIMERS, Item::Timeout(id));
                    self.nic_kick();
                } else {
                    self.host_push(Task::Timeout(id));
                }
            }
        }
    }

    /// Data segments the connection may send now, advancing its send pointer.
    fn take_segments(&mut self, id: u32) -> std::ops::Range<u32> {
        let c = &mut self.conns[id as usize];
        let n = c.snd.sendable(self.cfg.tcp.window);
        let first = c.snd.nxt;
        c.snd.nxt += n;
        if n > 0 {
            self.arm_server(id);
        }
        first..first + n
    }

    fn data(&self, id: u32, seq: u32) -> Pkt {
        Pkt {
            conn: id,
            kind: Kind::Data,
            seq,
            bytes: self.cfg.hardware.mss + FRAMING,
        }
    }

    // ---- NIC ---------------------------------------------------------------------

    fn nic_receive(&mut self, p: Pkt) {
        let own = self.conns[p.conn as usize].owner == Owner::Nic;
        self.count_packet(own);
        self.meter.packets_in += 1;
        let q = if own { RX_NIC } else { RX_HOST };
        let held = self.nic.queues[RX_HOST].len() + self.nic.queues[RX_NIC].len();
        if held >= self.cfg.hardware.rx_capacity as usize {
            self.meter.drops += 1;
            self.meter.packets_dropped += 1;
        } else {
            self.nic_push(q, Item::Packet(p));
        }
        self.observe();
        self.nic_kick();
    }

    fn nic_push(&mut self, q: usize, item: Item) {
        if q == RX_NIC {
            self.touch_rx_nic();
            self.meter.rx_nic_arrivals += 1;
        }
        self.nic.order += 1;
        self.nic.queues[q].push_back(Entry {
            order: self.nic.order,
            at: self.now,
            item,
        });
    }

    /// Add RxNIC's length times the time since it last changed to its area.
    fn touch_rx_nic(&mut self) {
        let len = self.nic.queues[RX_NIC].len() as f64;
        self.meter.rx_nic_area += len * (self.now - self.nic.rx_nic_since);
        self.nic.rx_nic_since = self.now;
    }

    /// Load control runs on packet arrivals, handoffs and terminations.
    fn observe(&mut self) {
        let qlen = self.nic.queues[RX_NIC].len() as u32;
        if let Some(limit) = self.policy.observe(qlen, self.nic.cnum) {
            self.host_push(Task::Note(Note::SoftLimit(limit)));
        }
    }

    fn nic_kick(&mut self) {
        if self.nic.busy {
            return;
        }
        let tiers: &[&[usize]] = match self.policy.priority() {
            Priority::HostFirst => &[HOST_TIER, NIC_TIER],
            Priority::Fcfs => &[ALL],
        };
        let queues = &self.nic.queues;
        let Some(q) = tiers.iter().find_map(|tier| {
            tier.iter()
                .copied()
                .filter_map(|q| queues[q].front().map(|e| (e.order, q)))
                .min()
                .map(|(_, q)| q)
        }) else {
            return;
        };
        if q == RX_NIC {
            self.touch_rx_nic();
        }
        let entry = self.nic.queues[q]
            .pop_front()
            .expect("picked a non-empty queue");
        if q == RX_NIC {
            self.meter.rx_nic_wait_sum += self.now - entry.at;
            self.meter.rx_nic_departures += 1;
        }
        let instructions = self.nic_item(q, entry.item);
        let service = instructions / self.cfg.hardware.nic_ips;
        if q == RX_HOST || q == TX_HOST {
            self.meter
                .host_delay(q == TX_HOST, self.now + service - entry.at);
        }
        self.nic.busy = true;
        self.meter.nic_busy_s += service;
        self.totals.nic_busy_s += service;
        self.cal.schedule(self.now + service, Ev::NicDone);
    }

    fn nic_done(&mut self) {
        self.nic.busy = false;
        for out in std::mem::take(&mut self.nic.out) {
            match out {
                Out::Wire { pkt, own } => {
                    self.count_packet(own);
                    self.send_down(pkt);
                }
                Out::Host(task) => self.host_push(task),
                Out::Nic(..) => unreachable!("the NIC does not queue work for itself"),
            }
        }
        self.nic_kick();
    }

    /// Serve one item; returns its cost in instructions.
    fn nic_item(&mut self, q: usize, item: Item) -> f64 {
        let cost = &self.cfg.nic;
        match item {
            Item::Packet(p) if q == TX_HOST => {
                self.nic.out.push(Out::Wire { pkt: p, own: false });
                cost.host_packet
            }
            Item::Packet(p) if q == RX_HOST => {
                self.meter.packets_received += 1;
                self.nic.out.push(Out::Host(Task::Packet(p)));
                cost.host_packet
            }
            Item::Packet(p) => {
                self.meter.packets_received += 1;
                self.nic_packet() + self.nic_input(p)
            }
            Item::Forward(p) => self.nic_packet() + self.nic_input(p),
            Item::Handoff(id) => cost.handoff + self.nic_accept(id),
            Item::Send { conn, segments } => {
                self.conns[conn as usize].snd.end += segments;
                cost.command + self.nic_output(conn)
            }
            Item::Timeout(id) => self.nic_timeout(id),
        }
    }

    /// TCP input for a connection on the NIC; returns the instructions beyond the
    /// packet's own.
    fn nic_input(&mut self, p: Pkt) -> f64 {
        let cost = &self.cfg.nic;
        let inp = self.server_input(p);
        let mut extra = 0.0;
        if let Some(k) = inp.request {
            self.nic_note(Note::Request { conn: p.conn, k });
            extra += cost.command;
        }
        if inp.all_acked {
            // One aggregated notification lets the host free the acknowledged data.
            self.nic_note(Note::Acked);
            extra += cost.command;
        }
        if inp.fin {
            self.nic_wire(bare(p.conn, Kind::FinAck, 0));
            extra += self.nic_packet();
        }
        if inp.closed {
            self.nic.cnum -= 1;
            self.meter.nic_closed += 1;
            self.nic_note(Note::Closed);
            extra += cost.command;
            self.observe();
        }
        extra + self.nic_output(p.conn)
    }

    fn nic_output(&mut self, id: u32) -> f64 {
        let range = self.take_segments(id);
        let n = range.len() as f64;
        for seq in range {
            let pkt = self.data(id, seq);
            self.nic_wire(pkt);
        }
        n * self.nic_packet()
    }

    /// Instructions per packet of the NIC's own connections at its current `Cnum`.
    fn nic_packet(&self) -> f64 {
        self.cfg.nic.packet_instructions(self.nic.cnum)
    }

    fn nic_wire(&mut self, pkt: Pkt) {
        self.nic.out.push(Out::Wire { pkt, own: true });
    }

    fn nic_note(&mut self, note: Note) {
        self.nic.out.push(Out::Host(Task::Note(note)));
    }

    fn nic_accept(&mut self, id: u32) -> f64 {
        let c = &mut self.conns[id as usize];
        let alive = matches!(c.server, Server::SynRcvd | Server::Open);
        let accepted = alive && self.policy.admit(self.nic.cnum);
        let mut instructions = self.cfg.nic.command;
        if accepted {
            c.owner = Owner::Nic;
            self.nic.cnum += 1;
            self.host.resident -= 1;
            self.meter.handoffs_accepted += 1;
            self.meter.offloaded += u64::from(self.measuring);
            self.observe();
            instructions += self.nic_output(id);
        } else {
            self.meter.handoffs_refused += 1;
        }
        self.nic_note(Note::Reply { conn: id, accepted });
        instructions
    }

    fn nic_timeout(&mut self, id: u32) -> f64 {
        let c = &mut self.conns[id as usize];
        if c.server == Server::LastAck {
            self.arm_server(id);
            self.nic_wire(bare(id, Kind::FinAck, 0));
            self.nic_packet()
        } else {
            c.snd.on_timeout();
            self.nic_output(id)
        }
    }

    // ---- host --------------------------------------------------------------------

    fn host_push(&mut self, task: Task) {
        match task {
            Task::Note(Note::Request { .. }) | Task::Packet(_) | Task::Timeout(_) => {
                self.host.tasks.push_back(task)
            }
            Task::Note(_) => self.host.driver.push_back(task),
        }
        self.host_kick();
    }

    fn host_kick(&mut self) {
        if self.host.busy {
            return;
        }
        let host = &mut self.host;
        let Some(task) = host.driver.pop_front().or_else(|| host.tasks.pop_front()) else {
            return;
        };
        self.host.app_cycles = 0.0;
        let cycles = match task {
            Task::Packet(p) => self.host_input(p),
            Task::Note(note) => self.host_note(note),
            Task::Timeout(id) => self.host_timeout(id),
        };
        let hz = self.cfg.hardware.host_hz;
        let service = cycles / hz;
        self.host.busy = true;
        self.meter.host_busy_s += service;
        self.meter.host_stack_s += (cycles - self.host.app_cycles) / hz;
        self.totals.host_busy_s += service;
        self.cal.schedule(self.now + service, Ev::HostDone);
    }

    fn host_done(&mut self) {
        self.host.busy = false;
        let outs = std::mem::take(&mut self.host.out);
        let any = !outs.is_empty();
        for out in outs {
            match out {
                Out::Nic(q, item) => self.nic_push(q, item),
                Out::Wire { .. } | Out::Host(_) => unreachable!("the host talks only to the NIC"),
            }
        }
        if any {
            self.nic_kick();
        }
        self.host_kick();
    }

    fn packet_cycles(&self) -> f64 {
        self.cfg.host.packet_cycles(self.host.resident)
    }

    /// Host TCP input for a packet the NIC passed up; returns cycles.
    fn host_input(&mut self, p: Pkt) -> f64 {
        let id = p.conn;
        if self.conns[id as usize].owner == Owner::Nic {
            // It moved while this packet was on its way: pass it on.
            self.host.out.push(Out::Nic(CMD, Item::Forward(p)));
            return self.cfg.host.bypass;
        }
        let mut cycles = self.packet_cycles();
        let long_lived = self.detect(id);
        let inp = self.server_input(p);
        if inp.syn {
            self.host.resident += 1;
        }
        if inp.syn_ack {
            cycles += self.host_send(bare(id, Kind::SynAck, 0));
        }
        if inp.established {
            self.meter.established += u64::from(self.measuring);
            cycles += self.cfg.host.connection;
            if self.policy.select(Trigger::Established) {
                cycles += self.offer(id);
            }
        }
        if let Some(k) = inp.request {
            let (app, segments) = self.application(id, k);
            self.conns[id as usize].snd.end += segments;
            cycles += app + self.count_enqueues(id, k);
        }
        if inp.fin {
            cycles += self.host_send(bare(id, Kind::FinAck, 0));
        }
        if inp.closed {
            self.host.resident -= 1;
        }
        if long_lived && self.conns[id as usize].server == Server::Open {
            cycles += self.offer(id);
        }
        cycles + self.host_output(id)
    }

    /// The host's detector sees a packet of connection `id`; returns whether the
    /// connection is on its long-lived list (false without a detector).
    fn detect(&mut self, id: u32) -> bool {
        self.host.detector.as_mut().is_some_and(|d| {
            d.observe(id);
            d.is_llf(&id)
        })
    }

    /// The application's work for request `k`: (cycles, response segments).
    fn application(&mut self, id: u32, k: u32) -> (f64, u32) {
        let (size, dynamic) = self.work.request(self.conns[id as usize].work, k as usize);
        let host = &self.cfg.host;
        let hw = &self.cfg.hardware;
        let copied = u64::from(hw.header_bytes) + if dynamic { size } else { 0 };
        let cycles = host.request
            + if dynamic { host.dynamic } else { 0.0 }
            + copied as f64 * host.copy_per_byte;
        self.host.app_cycles += cycles;
        (cycles, segments(hw, size))
    }

    /// Count request `k`'s send-buffer enqueues (its header, then its body page by
    /// page) and offer the connection at the enqueue the selection policy names.
    fn count_enqueues(&mut self, id: u32, k: u32) -> f64 {
        let c = &self.conns[id as usize];
        let (size, _) = self.work.request(c.work, k as usize);
        let before = c.enqueues;
        let after = before + 1 + size.div_ceil(u64::from(self.cfg.tcp.enqueue_bytes)) as u32;
        self.conns[id as usize].enqueues = after;
        if (before + 1..=after).any(|n| self.policy.select(Trigger::Enqueue(n))) {
            self.offer(id)
        } else {
            0.0
        }
    }

    /// The one handoff attempt; returns cycles.
    fn offer(&mut self, id: u32) -> f64 {
        let c = &mut self.conns[id as usize];
        if c.offer != Offer::NotYet {
            return 0.0;
        }
        if self.host.cnum_view >= self.host.soft_view {
            // The driver knows the NIC is full: the attempt fails without a message.
            c.offer = Offer::Settled;
            self.meter.handoffs_refused += 1;
            return 0.0;
        }
        c.offer = Offer::Pending;
        self.host.cnum_view += 1;
        self.host.out.push(Out::Nic(CMD, Item::Handoff(id)));
        self.cfg.host.handoff
    }

    /// Hand a packet to the driver; returns cycles. A full transmit ring drops it, and
    /// the connection's timer resends it (a SYN-ACK: the client's repeated SYN).
    fn host_send(&mut self, pkt: Pkt) -> f64 {
        self.detect(pkt.conn);
        // The ring holds what the NIC has yet to send and what this task has queued.
        let mine = self.host.out.iter();
        let queued = self.nic.queues[TX_HOST].len()
            + mine.filter(|o| matches!(o, Out::Nic(TX_HOST, _))).count();
        if queued >= self.cfg.hardware.tx_capacity as usize {
            self.meter.drops += 1;
        } else {
            self.host.out.push(Out::Nic(TX_HOST, Item::Packet(pkt)));
        }
        self.packet_cycles()
    }

    /// Segments a host connection may send now; returns cycles.
    fn host_output(&mut self, id: u32) -> f64 {
        let c = &self.conns[id as usize];
        if c.owner != Owner::Host || c.offer == Offer::Pending {
            return 0.0;
        }
        let range = self.take_segments(id);
        let mut cycles = 0.0;
        for seq in range {
            let pkt = self.data(id, seq);
            cycles += self.host_send(pkt);
        }
        cycles
    }

    fn host_note(&mut self, note: Note) -> f64 {
        let bypass = self.cfg.host.bypass;
        match note {
            Note::Request { conn, k } => {
                let (app, segments) = self.application(conn, k);
                self.host
                    .out
                    .push(Out::Nic(CMD, Item::Send { conn, segments }));
                app + 2.0 * bypass // the receive notification and the send command
            }
            Note::Acked => bypass,
            Note::Closed => {
                self.host.cnum_view = self.host.cnum_view.saturating_sub(1);
                bypass
            }
            Note::Reply { conn, accepted } => {
                self.conns[conn as usize].offer = Offer::Settled;
                if accepted {
                    bypass
                } else {
                    self.host.cnum_view = self.host.cnum_view.saturating_sub(1);
                    bypass + self.host_output(conn)
                }
            }
            Note::SoftLimit(limit) => {
                self.host.soft_view = limit;
                bypass
            }
        }
    }

    fn host_timeout(&mut self, id: u32) -> f64 {
        let c = &mut self.conns[id as usize];
        if c.owner == Owner::Nic || c.server == Server::Closed {
            return 0.0; // it moved or ended after the timer fired
        }
        if c.offer == Offer::Pending {
            // Output is held for the handoff; whoever owns it next will send.
            self.arm_server(id);
            return 0.0;
        }
        if c.server == Server::LastAck {
            self.arm_server(id);
            return self.host_send(bare(id, Kind::FinAck, 0));
        }
        c.snd.on_timeout();
        self.packet_cycles() + self.host_output(id)
    }

    // ---- time series -------------------------------------------------------------

    fn sample(&mut self) {
        let (t0, before) = self.last;
        let dt = self.now - t0;
        let now = self.totals;
        self.series.push(Sample {
            t_s: self.now,
            cnum: self.nic.cnum,
            soft_limit: self.policy.soft_limit(),
            qlen: self.nic.queues[RX_NIC].len() as u32,
            requests_per_s: (now.requests - before.requests) as f64 / dt,
            host_busy: ((now.host_busy_s - before.host_busy_s) / dt).min(1.0),
            nic_busy: ((now.nic_busy_s - before.nic_busy_s) / dt).min(1.0),
        });
        self.last = (self.now, now);
        self.cal
            .schedule(self.now + self.cfg.run.sample_s, Ev::Sample);
    }
}

fn bare(conn: u32, kind: Kind, seq: u32) -> Pkt {
    Pkt {
        conn,
        kind,
        seq,
        bytes: BARE,
    }
}

/// Data segments of a response with `size` body bytes (its header included).
fn segments(hw: &super::Hardware, size: u64) -> u32 {
    (size + u64::from(hw.header_bytes)).div_ceil(u64::from(hw.mss)) as u32
}
