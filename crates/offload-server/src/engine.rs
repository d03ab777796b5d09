//! `engine` and `handoff` modes: a software offload engine. The engine thread runs a
//! socket loop (`proto`) and makes the socket calls of the connections it holds; the
//! host thread runs the application. A request crosses as one event on the completion
//! ring; its answer comes back as one or two commands on the command ring (send these
//! bytes; sendfile this range), the last saying whether to keep the connection. Both
//! sides batch what they publish.
//!
//! In `engine` mode the engine holds every connection. In `handoff` mode it still
//! accepts every one (it is the NIC, the first to see each), and seed 004's policy
//! decides which it keeps; the others go to the host, which serves them inline in a
//! socket loop of its own. Under selection T(n) the host offers a connection to the
//! engine after its n-th answer, and it moves with whatever the client already sent.
//! Under model-driven placement (`placement`) the engine decides at each connection's
//! first request, by its size class, and a passed connection moves with that request.
//!
//! Unlike seed 000's emulator, nothing here waits on a connection: the host never
//! blocks on a busy connection (answers queue on the engine per connection) and the
//! engine never waits for the host (requests queue on the ring).
//!
//! The host watches the engine's heartbeat. If it stops for `STALL` of the engine's
//! own time (or the engine thread dies), the host shuts down the engine's connections,
//! so their clients see a clean close instead of a hang, and serves new connections
//! itself, inline. Time the engine spent runnable but waiting for its core does not
//! count: a descheduled engine (a busy core, a real-time hog) is slow, not stuck.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use offload_sim::handoff::{Paper, Policy, Priority, Trigger};

use crate::app::Handler;
use crate::cache::{Lookup, Proxy, Ticket};
use crate::config::{Config, EngineWait, Fault, Mode, SlowdownMode};
use crate::conn::{Conn, FileRange};
use crate::cpu;
use crate::files::{DocRoot, Files};
use crate::http::Head;
use crate::inline::Inline;
use crate::placement::{self, Placer};
use crate::pool::Pool;
use crate::proto::{Body, ConnId, Dispatch, Proto, Reply, Then, TICK};
use crate::ring::{self, Receiver, Sender, Wake};
use crate::stats::Stats;
use crate::Control;

/// Slots per ring: room for a burst of requests from every connection.
const RING_SLOTS: usize = 4096;
/// Longest stretch of slowdown burned between two heartbeats.
const BURN_SLICE: f64 = 0.005;
/// A heartbeat unchanged for this long of the engine's own time (not waiting for a
/// CPU) means the engine is stuck.
pub const STALL: Duration = Duration::from_millis(500);
/// After this long without a heartbeat the host starts looking at the engine thread.
const SUSPECT: Duration = Duration::from_millis(100);

/// Engine → host.
pub enum Event {
    /// A parsed request on a connection the engine holds.
    Request {
        conn: ConnId,
        class: u8,
        head: Head,
        path: Vec<u8>,
    },
    /// A connection for the host to serve: passed on at accept, or sent back when the
    /// host offered it over the engine's limit.
    Conn(Box<Conn>),
}

/// Host → engine.
pub enum Command {
    Send {
        conn: ConnId,
        buf: Vec<u8>,
        then: Then,
    },
    Sendfile {
        conn: ConnId,
        file: FileRange,
        then: Then,
    },
    /// Serve this connection from now on (a mid-life handoff).
    Adopt(Box<Conn>),
}

/// State both threads see besides the rings.
struct Shared {
    control: Arc<Control>,
    stats: Arc<Stats>,
    /// Set by the host when it takes over: a late engine must not touch anything.
    revoked: AtomicBool,
    /// The engine thread's kernel id, for its schedstat (0 until it runs).
    engine_tid: AtomicI32,
}

impl Shared {
    fn engine_must_stop(&self) -> bool {
        self.control.is_stopped() || self.revoked.load(Ordering::Relaxed)
    }
}

/// Starts the engine thread and runs the host loop on the calling thread until stop.
pub fn run(
    config: &Config,
    listener: std::net::TcpListener,
    handler: Handler,
    control: Arc<Control>,
    stats: Arc<Stats>,
) -> io::Result<()> {
    let policy = match config.mode {
        Mode::Handoff => Some(config.handoff.clone()),
        _ => None,
    };
    let placer = match (&policy, &config.placement) {
        (Some(_), Some(placement)) => {
            // The engine's own table of open files, to learn each object's size.
            let files = Files::new(DocRoot::new(&config.root)?, crate::files::FILE_CAP);
            Some(Placer::new(placement.clone(), files))
        }
        _ => None,
    };
    let account = placer.is_some();
    let backup = listener.try_clone()?;
    let open_fds: Arc<[AtomicI32]> = (0..config.limits.max_conns)
        .map(|_| AtomicI32::new(-1))
        .collect();
    let mut proto = Proto::new(
        Some(TcpListener::from_std(listener)),
        config.limits.clone(),
        stats.clone(),
        Some(open_fds.clone()),
    )?;
    proto.host_first = policy
        .as_ref()
        .is_some_and(|p| p.priority() == Priority::HostFirst);
    let mut host_proto = Proto::new(None, config.limits.clone(), stats.clone(), None)?;
    proto.account = account;
    host_proto.account = account;
    host_proto.counts_wakeups = true;
    let engine_wake = Wake::new(proto.waker()?);
    let host_wake = Wake::new(host_proto.waker()?);
    let (cmd_tx, cmd_rx) = ring::channel(RING_SLOTS, engine_wake.clone());
    let (event_tx, event_rx) = ring::channel(RING_SLOTS, host_wake.clone());
    let shared = Arc::new(Shared {
        control,
        stats: stats.clone(),
        revoked: AtomicBool::new(false),
        engine_tid: AtomicI32::new(0),
    });
    if let Some(policy) = &policy {
        // Advertised before the first connection, for the host's offers.
        let limit = u64::from(policy.soft_limit());
        stats.handoff.soft_limit.store(limit, Ordering::Relaxed);
    }

    let engine = {
        let shared = shared.clone();
        let side = EngineSide {
            events: event_tx,
            requests: 0,
            fault: config.fault,
            shared: shared.clone(),
            policy: policy.clone(),
            placer,
            slow: Slowdown {
                mode: config.engine_slowdown_mode,
                per_message: config.engine_message_cost.as_secs_f64(),
                ..Slowdown::default()
            },
            proxy: config
                .cache
                .as_ref()
                .map(|cache| Proxy::new(cache, stats.clone())),
            forwarded: HashMap::new(),
            asked: HashMap::new(),
        };
        let (core, wait) = (config.engine_core, config.engine_wait);
        std::thread::Builder::new()
            .name("offload-engine".into())
            .spawn(move || {
                if let Some(core) = core {
                    cpu::pin(core)?;
                }
                shared.stats.register_thread("engine", core);
                // SAFETY: gettid has no preconditions.
                shared
                    .engine_tid
                    .store(unsafe { libc::gettid() }, Ordering::Relaxed);
                let looped = engine_loop(proto, side, cmd_rx, &engine_wake, &shared, wait);
                shared.stats.sample_threads();
                looped
            })?
    };
    let mut host = Host {
        app: HostApp {
            inline: Inline {
                origin: handler,
                proxy: None,
            },
            commands: cmd_tx,
            policy,
            account,
            stats: stats.clone(),
        },
        events: event_rx,
        shared: shared.clone(),
    };
    let outcome = host.serve(&mut host_proto, &host_wake, &engine);
    match outcome {
        Ok(None) => {
            let joined = engine.join();
            joined.unwrap_or_else(|_| Err(io::Error::other("the engine thread panicked")))
        }
        Ok(Some(reason)) => {
            // Leave the engine thread behind: it may be stuck for good. It exits on stop.
            host.take_over(&reason, &open_fds, &mut host_proto);
            host_proto.listen(TcpListener::from_std(backup))?;
            crate::inline::serve(host_proto, &mut host.app, &shared.control)
        }
        Err(e) => Err(e),
    }
}

/// Extra engine CPU, to emulate a slower engine processor or a costlier host–engine
/// interface: burned in proportion to the engine's own work (a factor F makes it F + 1
/// times slower; a knob, `Control::knobs`, read at the start of each turn), plus a fixed
/// cost for each message that crosses the rings (an event published, a command
/// applied), as seed 000's emulator paid a round trip per socket call. A fixed cost
/// also makes the engine's capacity independent of how its own CPU time varies.
/// `mode` says when the debt is paid: after each busy turn, or after each operation.
#[derive(Default)]
struct Slowdown {
    mode: SlowdownMode,
    factor: f64,
    /// The engine's CPU clock when the work not yet paid for began.
    since: f64,
    /// Seconds burned per message.
    per_message: f64,
    /// Messages not yet paid for.
    messages: u32,
    /// Seconds of work before the engine last went idle, not yet paid for (per
    /// operation).
    owed: f64,
    /// Seconds burned beyond the debt so far, taken off the next payment.
    overpaid: f64,
}

impl Slowdown {
    /// Work from now on is to be paid for at `factor`, at the start of a turn. Per
    /// turn, only busy turns' work is owed: an idle turn's is forgiven here. Per
    /// operation, all of the engine's CPU time is owed but its idle polling (`pause` to
    /// `resume`, the stats' `idle_poll_ns`), so that its busy CPU per request is 1 + F
    /// times its own: the empty turn before a sleep and the wake-up after it are work a
    /// slower processor does slower too.
    fn start(&mut self, factor: f64) {
        let was = std::mem::replace(&mut self.factor, factor);
        if factor > 0.0 && (self.mode == SlowdownMode::Turn || was == 0.0) {
            self.since = cpu::thread_seconds();
        }
    }

    /// Per operation: the engine found nothing to do at CPU time `at`; what it works
    /// from here to `resume` is idle polling, not owed.
    fn pause(&mut self, at: f64) {
        if self.factor > 0.0 && self.mode == SlowdownMode::Operation {
            self.owed += at - self.since;
        }
    }

    /// Per operation: a turn after one or more idle ones begins at CPU time `at`.
    fn resume(&mut self, at: f64) {
        if self.mode == SlowdownMode::Operation {
            self.since = at;
        }
    }

    /// Burns the debt of the work since `start` (or the last payment) and of the
    /// messages since the last payment, in slices separated by `beat()`: a slow engine
    /// is not a stuck one.
    fn pay(&mut self, stats: &Stats) {
        if self.factor <= 0.0 && self.messages == 0 {
            return;
        }
        // The burn runs to a clock reading, from this one on, so that the payment's own
        // clock reads are part of it rather than unpaid work (about 1 us each on this
        // VM, where a thread's CPU clock is a system call).
        let now = cpu::thread_seconds();
        let mut debt = f64::from(std::mem::take(&mut self.messages)) * self.per_message;
        if self.factor > 0.0 {
            let work = std::mem::take(&mut self.owed) + now - self.since;
            debt += work * self.factor;
        }
        debt -= std::mem::take(&mut self.overpaid);
        self.since = now;
        if debt <= 0.0 {
            self.overpaid = -debt;
            return;
        }
        let end = cpu::burn_until(now + debt, BURN_SLICE, || {
            beat(stats);
            true
        });
        // The burn is not work to pay for again; what it ran past its debt (up to a
        // clock read) comes off the next payment, so many small ones add up right.
        self.overpaid = end - now - debt;
        self.since = end;
        let socket = &stats.socket;
        socket.slowdown_payments.fetch_add(1, Ordering::Relaxed);
        let burned = ((end - now) * 1e9) as u64;
        socket.slowdown_ns.fetch_add(burned, Ordering::Relaxed);
        let owed = (debt * 1e9) as u64;
        socket
            .slowdown_longest_ns
            .fetch_max(owed, Ordering::Relaxed);
    }
}

/// The engine's side of `Dispatch`: requests go to the host; in `handoff` mode the
/// policy decides which connections stay.
struct EngineSide {
    events: Sender<Event>,
    requests: u64,
    fault: Option<Fault>,
    shared: Arc<Shared>,
    /// None in `engine` mode: every connection stays.
    policy: Option<Paper>,
    /// Model-driven placement: decides at each connection's first request.
    placer: Option<Placer>,
    slow: Slowdown,
    /// Seed 001's set-up C: the cache on the engine, and the requests it sent on to
    /// the host (the application) whose answers have not all come back.
    proxy: Option<Proxy>,
    forwarded: HashMap<ConnId, Forwarded>,
    /// When each connection's request still waiting for the host was passed up. The
    /// host answers every request it is passed, also on a connection closed meanwhile,
    /// so an entry leaves with its answer's first command (as `forwarded`'s do).
    asked: HashMap<ConnId, Instant>,
}

/// One piece of a host's answer.
enum Piece {
    Bytes(Vec<u8>),
    File(FileRange),
}

/// A request the cache sent to the host, and the head of the host's answer while the
/// file that follows it has not come yet.
struct Forwarded {
    ticket: Ticket,
    head: Vec<u8>,
}

impl EngineSide {
    fn pay(&mut self) {
        self.slow.pay(&self.shared.stats);
    }

    /// An operation is done (a request passed up, a command carried out): in
    /// per-operation mode, pay for it now, so that what comes next waits as it would
    /// behind a slower processor.
    fn operation_done(&mut self) {
        if self.slow.mode == SlowdownMode::Operation {
            self.pay();
        }
    }

    /// Queues an event for the host, owing its message cost.
    fn emit(&mut self, event: Event) {
        self.slow.messages += 1;
        self.events.push(event);
    }

    /// Carries out a host command. The host's answers to requests the cache forwarded
    /// go through the cache, once whole; the rest go straight to the sockets.
    fn apply(&mut self, proto: &mut Proto, command: Command) {
        self.slow.messages += 1;
        let (conn, piece, then) = match command {
            Command::Adopt(conn) => return self.adopt(proto, *conn),
            Command::Send { conn, buf, then } => (conn, Piece::Bytes(buf), then),
            Command::Sendfile { conn, file, then } => (conn, Piece::File(file), then),
        };
        if let Some(asked) = self.asked.remove(&conn) {
            let socket = &self.shared.stats.socket;
            socket.turnarounds.fetch_add(1, Ordering::Relaxed);
            let ns = asked.elapsed().as_nanos() as u64;
            socket.turnaround_ns.fetch_add(ns, Ordering::Relaxed);
        }
        let Some(mut forwarded) = self.forwarded.remove(&conn) else {
            return match piece {
                Piece::Bytes(buf) => proto.send(self, conn, buf, then),
                Piece::File(file) => proto.sendfile(self, conn, file, then),
            };
        };
        let (bytes, body) = match piece {
            Piece::Bytes(buf) if then == Then::More => {
                forwarded.head = buf;
                self.forwarded.insert(conn, forwarded);
                return;
            }
            Piece::Bytes(buf) => (buf, Body::None),
            Piece::File(file) => (forwarded.head, Body::File(file)),
        };
        let origin = Reply {
            bytes,
            body,
            keep_alive: then == Then::KeepAlive,
        };
        let proxy = self.proxy.as_mut().expect("only the cache forwards");
        let reply = proxy.complete(forwarded.ticket, origin, &mut proto.pool);
        proto.reply(self, conn, reply);
    }

    /// Publishes the events queued for the host.
    fn publish(&mut self) -> io::Result<()> {
        let published = self.events.flush()?;
        self.shared.stats.socket.events.add(published as u64);
        Ok(())
    }

    /// A connection the host offers: take it within the limit, else send it back.
    fn adopt(&mut self, proto: &mut Proto, conn: Conn) {
        let handoff = &self.shared.stats.handoff;
        let held = proto.held() as u32;
        if self.policy.as_ref().is_some_and(|p| p.admit(held)) {
            handoff.adopted.fetch_add(1, Ordering::Relaxed);
            proto.adopt(self, conn);
        } else {
            handoff.returned.fetch_add(1, Ordering::Relaxed);
            self.emit(Event::Conn(Box::new(conn)));
        }
    }

    /// Seconds of engine work, with the slowdown it incurs: the burns proportional to
    /// the work, and the cost of `messages` crossings of the rings.
    fn slowed(&self, work: Duration, messages: u32) -> f64 {
        work.as_secs_f64() * (1.0 + self.slow.factor) + f64::from(messages) * self.slow.per_message
    }

    /// Load control on this turn's backlog, and the gauges the host reads.
    fn observe(&mut self, qlen: usize, held: usize) {
        let Some(policy) = &mut self.policy else {
            return;
        };
        policy.observe(qlen as u32, held as u32);
        let handoff = &self.shared.stats.handoff;
        handoff.held.store(held as u64, Ordering::Relaxed);
        let limit = u64::from(policy.soft_limit());
        handoff.soft_limit.store(limit, Ordering::Relaxed);
        handoff.qlen.store(qlen as u64, Ordering::Relaxed);
    }
}

impl Dispatch for EngineSide {
    fn request(
        &mut self,
        conn: ConnId,
        class: u8,
        head: Head,
        path: &mut Vec<u8>,
        pool: &mut Pool,
    ) -> Option<Reply> {
        let head = match &mut self.proxy {
            None => head,
            Some(proxy) => match proxy.lookup(head, path, pool) {
                Lookup::Hit(reply) => return Some(reply),
                Lookup::Forward(head, ticket) => {
                    let head_bytes = Vec::new();
                    let forwarded = Forwarded {
                        ticket,
                        head: head_bytes,
                    };
                    self.forwarded.insert(conn, forwarded);
                    head
                }
            },
        };
        let path = std::mem::replace(path, pool.take());
        self.emit(Event::Request {
            conn,
            class,
            head,
            path,
        });
        self.asked.insert(conn, Instant::now());
        self.requests += 1;
        if self.policy.is_some() {
            let handoff = &self.shared.stats.handoff;
            handoff.engine_requests.fetch_add(1, Ordering::Relaxed);
        }
        match self.fault {
            Some(Fault::Stall { after }) if self.requests == after => {
                while !self.shared.control.is_stopped() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            Some(Fault::Panic { after }) if self.requests == after => {
                panic!("injected engine fault after {after} requests")
            }
            _ => {}
        }
        self.operation_done();
        None
    }

    fn keep_new(&mut self, held: usize) -> bool {
        match &self.policy {
            None => true,
            Some(p) => p.select(Trigger::Established) && p.admit(held as u32),
        }
    }

    /// A connection's first request decides where it is served (the rest follow it).
    fn keep_request(&mut self, path: &[u8], served: u64, class: &mut u8) -> bool {
        let Some(placer) = &mut self.placer else {
            return true;
        };
        if served > 0 {
            return true;
        }
        let keep;
        (*class, keep) = placer.place(path, &self.shared.control.knobs);
        keep
    }

    fn answered(&mut self, class: u8, work: Duration) {
        let engine = &self.shared.stats.placement.engine;
        // Its request went up and the host's answer came down: two messages. An answer
        // with a file comes as two commands (head, then file), and this account leaves
        // that third message's cost out; the stats' per-request engine CPU has it.
        placement::charge(engine, class, self.slowed(work, 2));
    }

    fn hand_over(&mut self, conn: Conn) {
        let stats = &self.shared.stats;
        stats.handoff.passed.fetch_add(1, Ordering::Relaxed);
        if self.placer.is_some() {
            stats.placement.passed.add(self.slowed(conn.work, 1));
        }
        self.emit(Event::Conn(Box::new(conn)));
    }

    /// Host first: pay for the work so far and give the host what it waits for now,
    /// rather than after the rest of the turn.
    fn pace(&mut self) {
        self.pay();
        if let Err(e) = self.publish() {
            self.shared.stats.note_error(&e);
        }
    }
}

fn engine_loop(
    mut proto: Proto,
    mut side: EngineSide,
    mut commands: Receiver<Command>,
    wake: &Wake,
    shared: &Shared,
    wait: EngineWait,
) -> io::Result<()> {
    let stats = &shared.stats;
    let mut idle_since = Instant::now();
    // CPU clock when the engine last found nothing to do. Read only while idle, so a
    // busy engine pays no clock reads for this account.
    let mut idle_from: Option<f64> = None;
    while !shared.engine_must_stop() {
        let turn_start = idle_from.map(|_| cpu::thread_seconds());
        beat(stats);
        side.slow.start(shared.control.knobs.slowdown());
        if let Some(start) = turn_start {
            side.slow.resume(start);
        }
        let applied = commands.drain(|command| {
            side.apply(&mut proto, command);
            side.operation_done();
        });
        let mut timeout = Duration::ZERO;
        let idle = applied == 0 && side.events.backlog() == 0;
        if idle && wait.spin().is_some_and(|spin| idle_since.elapsed() >= spin) {
            wake.sleep_begin();
            if commands.is_empty() {
                timeout = TICK;
            }
        }
        let seen = proto.turn(&mut side, timeout)?;
        wake.sleep_end();
        side.observe(applied + seen, proto.held());
        side.publish()?;
        if applied + seen > 0 {
            // Work after one or more turns without, or after a sleep: a busy period
            // begins.
            if idle_from.is_some() || timeout > Duration::ZERO {
                stats.socket.wakeups.fetch_add(1, Ordering::Relaxed);
            }
            if let (Some(from), Some(start)) = (idle_from.take(), turn_start) {
                add_idle(stats, start - from);
            }
            idle_since = Instant::now();
            side.pay();
        } else if idle_from.is_none() {
            let now = cpu::thread_seconds();
            idle_from = Some(now);
            side.slow.pause(now);
        }
    }
    if let Some(from) = idle_from {
        add_idle(stats, cpu::thread_seconds() - from);
    }
    Ok(())
}

/// The engine's proof of life for the host's watchdog.
fn beat(stats: &Stats) {
    stats.socket.heartbeat.fetch_add(1, Ordering::Relaxed);
}

fn add_idle(stats: &Stats, seconds: f64) {
    let ns = (seconds.max(0.0) * 1e9) as u64;
    stats.socket.idle_poll_ns.fetch_add(ns, Ordering::Relaxed);
}

/// The host's side of `Dispatch`: it answers the requests of the connections it holds
/// itself (inline) and, in `handoff` mode under selection T(n), offers a connection to
/// the engine after its n-th answer if the engine advertises room.
struct HostApp {
    inline: Inline,
    commands: Sender<Command>,
    /// None in `engine` mode and after a takeover: nothing is offered.
    policy: Option<Paper>,
    /// Placement's accounts: time the answers to the engine's requests too.
    account: bool,
    stats: Arc<Stats>,
}

impl HostApp {
    /// Answers a request of an engine-held connection with commands.
    fn answer(&mut self, conn: ConnId, class: u8, head: Head, path: Vec<u8>, pool: &mut Pool) {
        let start = self.account.then(Instant::now);
        let reply = self.inline.origin.respond(head, &path, pool.take());
        pool.give(path);
        let (bytes, file, keep_alive) = reply.into_file_reply();
        let then = if keep_alive {
            Then::KeepAlive
        } else {
            Then::Close
        };
        let commands = &mut self.commands;
        match file {
            None => commands.push(Command::Send {
                conn,
                buf: bytes,
                then,
            }),
            Some(file) => {
                commands.push(Command::Send {
                    conn,
                    buf: bytes,
                    then: Then::More,
                });
                commands.push(Command::Sendfile { conn, file, then });
            }
        }
        if let Some(start) = start {
            let offloaded = &self.stats.placement.offloaded_host;
            placement::charge(offloaded, class, start.elapsed().as_secs_f64());
        }
    }
}

impl Dispatch for HostApp {
    fn request(
        &mut self,
        id: ConnId,
        class: u8,
        head: Head,
        path: &mut Vec<u8>,
        pool: &mut Pool,
    ) -> Option<Reply> {
        self.inline.request(id, class, head, path, pool)
    }

    fn answered(&mut self, class: u8, work: Duration) {
        let host = &self.stats.placement.host;
        placement::charge(host, class, work.as_secs_f64());
    }

    fn let_go(&mut self, served: u64) -> bool {
        let Some(policy) = &self.policy else {
            return false;
        };
        let nth = u32::try_from(served).unwrap_or(u32::MAX);
        let handoff = &self.stats.handoff;
        let room =
            handoff.held.load(Ordering::Relaxed) < handoff.soft_limit.load(Ordering::Relaxed);
        policy.select(Trigger::Enqueue(nth)) && room
    }

    fn hand_over(&mut self, conn: Conn) {
        self.stats.handoff.offered.fetch_add(1, Ordering::Relaxed);
        self.commands.push(Command::Adopt(Box::new(conn)));
    }
}

struct Host {
    app: HostApp,
    events: Receiver<Event>,
    shared: Arc<Shared>,
}

/// Tells a stuck engine from a descheduled one by its heartbeat, and, while the
/// heartbeat is overdue, by the engine thread's state and CPU time.
struct Watchdog {
    tid: i32,
    last_beat: u64,
    beat_seen: Instant,
    /// While the heartbeat is overdue (from `SUSPECT` on): the last look at the engine.
    suspect: Option<Look>,
}

/// When the host last looked at an overdue engine, its CPU time then, and how much of
/// the engine's own time has passed without a heartbeat so far.
#[derive(Clone, Copy)]
struct Look {
    at: Instant,
    cpu_s: Option<f64>,
    own_s: f64,
}

impl Watchdog {
    fn new(tid: i32) -> Watchdog {
        Watchdog {
            tid,
            last_beat: 0,
            beat_seen: Instant::now(),
            suspect: None,
        }
    }

    /// Whether the engine has made no progress for `STALL` of its own time. Its own
    /// time is the wall time it spent asleep plus the CPU time it ran: a runnable
    /// engine that gets no CPU (a busy core) accrues none. The host reads /proc only
    /// while a heartbeat is overdue, so a healthy engine costs it nothing.
    fn stuck(&mut self, beat: u64, shared: &Shared) -> bool {
        let now = Instant::now();
        if beat != self.last_beat {
            (self.last_beat, self.beat_seen, self.suspect) = (beat, now, None);
            return false;
        }
        if now.duration_since(self.beat_seen) < SUSPECT {
            return false;
        }
        if self.tid == 0 {
            self.tid = shared.engine_tid.load(Ordering::Relaxed);
        }
        let cpu_s = cpu::task_seconds(self.tid);
        let Some(last) = self.suspect else {
            self.suspect = Some(Look {
                at: now,
                cpu_s,
                own_s: SUSPECT.as_secs_f64(),
            });
            return false;
        };
        let wall = now.duration_since(last.at).as_secs_f64();
        let own = match (cpu::task_runnable(self.tid), cpu_s, last.cpu_s) {
            (Some(true), Some(cpu), Some(before)) => cpu - before,
            // Asleep, or unknown: all of it counts.
            _ => wall,
        };
        let own_s = last.own_s + own;
        self.suspect = Some(Look {
            at: now,
            cpu_s,
            own_s,
        });
        own_s > STALL.as_secs_f64()
    }
}

impl Host {
    /// Answers requests and serves the host's own connections until stop (Ok(None)) or
    /// until the engine fails (Ok(Some(why))).
    fn serve(
        &mut self,
        proto: &mut Proto,
        wake: &Wake,
        engine: &JoinHandle<io::Result<()>>,
    ) -> io::Result<Option<String>> {
        let stats = self.shared.stats.clone();
        let mut watch = Watchdog::new(self.shared.engine_tid.load(Ordering::Relaxed));
        while !self.shared.control.is_stopped() {
            let app = &mut self.app;
            let handled = self.events.drain(|event| match event {
                Event::Request {
                    conn,
                    class,
                    head,
                    path,
                } => app.answer(conn, class, head, path, &mut proto.pool),
                Event::Conn(conn) => proto.adopt(app, *conn),
            });
            let sent = self.app.commands.flush()?;
            stats.app.commands.add(sent as u64);
            // A stop makes the engine exit too: that is no failure.
            let stopping = self.shared.control.is_stopped();
            let beat = stats.socket.heartbeat.load(Ordering::Relaxed);
            if watch.stuck(beat, &self.shared) && !stopping {
                return Ok(Some(format!(
                    "no engine progress for {} ms of its own time",
                    STALL.as_millis()
                )));
            }
            if engine.is_finished() && !stopping {
                return Ok(Some("the engine thread exited".into()));
            }
            // The host does not spin: its CPU is the application's, and CPU spent
            // waiting would count against it. It sleeps in its own socket loop, which
            // the engine's events wake; while busy it polls that loop only if it holds
            // connections (an empty poll per turn would add to engine mode's X_o).
            let mut timeout = Duration::ZERO;
            if handled == 0 && self.app.commands.backlog() == 0 {
                wake.sleep_begin();
                if self.events.is_empty() {
                    timeout = TICK;
                }
            }
            if timeout > Duration::ZERO || proto.held() > 0 {
                proto.turn(&mut self.app, timeout)?;
            }
            wake.sleep_end();
        }
        Ok(None)
    }

    /// Ends every connection the engine held, so no client waits for an answer that
    /// will not come, records the failure, and keeps the connections already passed
    /// to the host.
    fn take_over(&mut self, reason: &str, open_fds: &[AtomicI32], proto: &mut Proto) {
        self.shared.revoked.store(true, Ordering::Relaxed);
        self.shared.stats.record_takeover(reason);
        self.app.policy = None;
        let app = &mut self.app;
        self.events.drain(|event| match event {
            Event::Request { path, .. } => proto.pool.give(path),
            Event::Conn(conn) => proto.adopt(app, *conn),
        });
        for slot in open_fds {
            let fd = slot.load(Ordering::Acquire);
            if fd >= 0 {
                // SAFETY: shutdown takes any descriptor. The engine registered this one as
                // a live connection; a stuck engine never closes it, and a merely slow one
                // stops at its next turn, so the chance of hitting a reused number is a
                // race of a few instructions.
                unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            }
        }
    }
}
