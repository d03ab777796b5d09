//! `engine` mode: a software offload engine. The engine thread runs the socket loop
//! (`proto`) and makes every socket call; the host thread runs the application. A
//! request crosses as one event on the completion ring; its answer comes back as one or
//! two commands on the command ring (send these bytes; sendfile this range), the last
//! saying whether to keep the connection. Both sides batch what they publish.
//!
//! Unlike seed 000's emulator, nothing here waits on a connection: the host never
//! blocks on a busy connection (answers queue on the engine per connection) and the
//! engine never waits for the host (requests queue on the ring).
//!
//! The host watches the engine's heartbeat. If it stops for `STALL` (or the engine
//! thread dies), the host shuts down the engine's connections, so their clients see a
//! clean close instead of a hang, and serves new connections itself, inline.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Events, Poll, Token, Waker};

use crate::app::Handler;
use crate::config::{Config, EngineWait, Fault};
use crate::conn::FileRange;
use crate::cpu;
use crate::http::Head;
use crate::pool::Pool;
use crate::proto::{ConnId, Dispatch, Proto, Reply, Then, TICK};
use crate::ring::{self, Receiver, Sender, Wake};
use crate::stats::Stats;
use crate::Control;

/// Slots per ring: room for a burst of requests from every connection.
const RING_SLOTS: usize = 4096;
/// How long an idle engine spins before it sleeps (adaptive wait).
const SPIN: Duration = Duration::from_micros(50);
/// Longest stretch of slowdown burned between two heartbeats.
const BURN_SLICE: f64 = 0.005;
/// A heartbeat unchanged this long means the engine is stuck.
pub const STALL: Duration = Duration::from_millis(500);

/// Engine → host: a parsed request.
pub struct Request {
    pub conn: ConnId,
    pub head: Head,
    pub path: Vec<u8>,
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
}

/// State both threads see besides the rings.
struct Shared {
    control: Arc<Control>,
    stats: Arc<Stats>,
    /// Set by the host when it takes over: a late engine must not touch anything.
    revoked: AtomicBool,
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
    let backup = listener.try_clone()?;
    let open_fds: Arc<[AtomicI32]> = (0..config.limits.max_conns)
        .map(|_| AtomicI32::new(-1))
        .collect();
    let proto = Proto::new(
        TcpListener::from_std(listener),
        config.limits.clone(),
        stats.clone(),
        Some(open_fds.clone()),
    )?;
    let engine_wake = Wake::new(proto.waker()?);
    let mut host_poll = Poll::new()?;
    let host_wake = Wake::new(Waker::new(host_poll.registry(), Token(0))?);
    let (cmd_tx, cmd_rx) = ring::channel(RING_SLOTS, engine_wake.clone());
    let (event_tx, event_rx) = ring::channel(RING_SLOTS, host_wake.clone());
    let shared = Arc::new(Shared {
        control,
        stats: stats.clone(),
        revoked: AtomicBool::new(false),
    });

    let engine = {
        let shared = shared.clone();
        let side = EngineSide {
            events: event_tx,
            requests: 0,
            fault: config.fault,
            shared: shared.clone(),
        };
        let (core, wait, slowdown) = (
            config.engine_core,
            config.engine_wait,
            config.engine_slowdown,
        );
        std::thread::Builder::new()
            .name("offload-engine".into())
            .spawn(move || {
                if let Some(core) = core {
                    cpu::pin(core)?;
                }
                shared.stats.register_thread("engine", core);
                let looped =
                    engine_loop(proto, side, cmd_rx, &engine_wake, &shared, wait, slowdown);
                shared.stats.sample_threads();
                looped
            })?
    };
    let mut host = Host {
        handler,
        events: event_rx,
        commands: cmd_tx,
        pool: Pool::default(),
        shared: shared.clone(),
    };
    let outcome = host.serve(&mut host_poll, &host_wake, &engine);
    match outcome {
        Ok(None) => {
            let joined = engine.join();
            joined.unwrap_or_else(|_| Err(io::Error::other("the engine thread panicked")))
        }
        Ok(Some(reason)) => {
            // Leave the engine thread behind: it may be stuck for good. It exits on stop.
            host.take_over(&reason, &open_fds);
            let proto = Proto::new(
                TcpListener::from_std(backup),
                config.limits.clone(),
                stats,
                None,
            )?;
            crate::server::serve_inline(proto, host.handler, &shared.control)
        }
        Err(e) => Err(e),
    }
}

/// The engine's side of `Dispatch`: requests go to the host.
struct EngineSide {
    events: Sender<Request>,
    requests: u64,
    fault: Option<Fault>,
    shared: Arc<Shared>,
}

impl Dispatch for EngineSide {
    fn request(
        &mut self,
        conn: ConnId,
        head: Head,
        path: &mut Vec<u8>,
        pool: &mut Pool,
    ) -> Option<Reply> {
        let path = std::mem::replace(path, pool.take());
        self.events.push(Request { conn, head, path });
        self.requests += 1;
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
        None
    }
}

fn engine_loop(
    mut proto: Proto,
    mut side: EngineSide,
    mut commands: Receiver<Command>,
    wake: &Wake,
    shared: &Shared,
    wait: EngineWait,
    slowdown: f64,
) -> io::Result<()> {
    let stats = &shared.stats;
    let mut beat = 0u64;
    let mut idle_since = Instant::now();
    // CPU clock when the engine last found nothing to do. Read only while idle, so a
    // busy engine pays no clock reads for this account.
    let mut idle_from: Option<f64> = None;
    while !shared.engine_must_stop() {
        let turn_start = idle_from.map(|_| cpu::thread_seconds());
        beat += 1;
        stats.socket.heartbeat.store(beat, Ordering::Relaxed);
        let started = (slowdown > 0.0).then(cpu::thread_seconds);
        let applied = commands.drain(|command| match command {
            Command::Send { conn, buf, then } => proto.send(&mut side, conn, buf, then),
            Command::Sendfile { conn, file, then } => proto.sendfile(&mut side, conn, file, then),
        });
        let mut timeout = Duration::ZERO;
        let idle = applied == 0 && side.events.backlog() == 0;
        if idle && wait == EngineWait::Adaptive && idle_since.elapsed() > SPIN {
            wake.sleep_begin();
            if commands.is_empty() {
                timeout = TICK;
            }
        }
        let seen = proto.turn(&mut side, timeout)?;
        wake.sleep_end();
        let published = side.events.flush()?;
        if published > 0 {
            stats
                .socket
                .events
                .fetch_add(published as u64, Ordering::Relaxed);
            stats.socket.event_batches.fetch_add(1, Ordering::Relaxed);
        }
        if applied + seen > 0 {
            if let (Some(from), Some(start)) = (idle_from.take(), turn_start) {
                add_idle(stats, start - from);
            }
            idle_since = Instant::now();
            if let Some(started) = started {
                // In slices, beating the heart: a slow engine is not a stuck one.
                let mut debt = (cpu::thread_seconds() - started) * slowdown;
                while debt > 0.0 {
                    cpu::burn(debt.min(BURN_SLICE));
                    debt -= BURN_SLICE;
                    beat += 1;
                    stats.socket.heartbeat.store(beat, Ordering::Relaxed);
                }
            }
        } else if idle_from.is_none() {
            idle_from = Some(cpu::thread_seconds());
        }
    }
    if let Some(from) = idle_from {
        add_idle(stats, cpu::thread_seconds() - from);
    }
    Ok(())
}

fn add_idle(stats: &Stats, seconds: f64) {
    let ns = (seconds.max(0.0) * 1e9) as u64;
    stats.socket.idle_poll_ns.fetch_add(ns, Ordering::Relaxed);
}

struct Host {
    handler: Handler,
    events: Receiver<Request>,
    commands: Sender<Command>,
    pool: Pool,
    shared: Arc<Shared>,
}

impl Host {
    /// Answers requests until stop (Ok(None)) or until the engine fails (Ok(Some(why))).
    fn serve(
        &mut self,
        poll: &mut Poll,
        wake: &Wake,
        engine: &JoinHandle<io::Result<()>>,
    ) -> io::Result<Option<String>> {
        let stats = self.shared.stats.clone();
        let mut events = Events::with_capacity(4);
        let (mut last_beat, mut beat_seen) = (0, Instant::now());
        while !self.shared.control.is_stopped() {
            let (handler, pool, commands) = (&mut self.handler, &mut self.pool, &mut self.commands);
            let handled = self.events.drain(|request| {
                let reply = handler.respond(request.head, &request.path, pool.take());
                pool.give(request.path);
                let then = if reply.keep_alive {
                    Then::KeepAlive
                } else {
                    Then::Close
                };
                match reply.file {
                    None => commands.push(Command::Send {
                        conn: request.conn,
                        buf: reply.bytes,
                        then,
                    }),
                    Some(file) => {
                        commands.push(Command::Send {
                            conn: request.conn,
                            buf: reply.bytes,
                            then: Then::More,
                        });
                        commands.push(Command::Sendfile {
                            conn: request.conn,
                            file,
                            then,
                        });
                    }
                }
            });
            let sent = self.commands.flush()?;
            if sent > 0 {
                stats.app.commands.fetch_add(sent as u64, Ordering::Relaxed);
                stats.app.command_batches.fetch_add(1, Ordering::Relaxed);
            }
            let now = Instant::now();
            let beat = stats.socket.heartbeat.load(Ordering::Relaxed);
            if beat != last_beat {
                (last_beat, beat_seen) = (beat, now);
            } else if now.duration_since(beat_seen) > STALL {
                return Ok(Some(format!(
                    "no engine progress for {} ms",
                    STALL.as_millis()
                )));
            }
            if engine.is_finished() {
                return Ok(Some("the engine thread exited".into()));
            }
            if handled == 0 && self.commands.backlog() == 0 {
                // The host does not spin: its CPU is the application's, and CPU spent
                // waiting would count against it.
                wake.sleep_begin();
                if self.events.is_empty() {
                    match poll.poll(&mut events, Some(TICK)) {
                        Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(e),
                        _ => {}
                    }
                }
                wake.sleep_end();
            }
        }
        Ok(None)
    }

    /// Ends every connection the engine held, so no client waits for an answer that
    /// will not come, and records the failure.
    fn take_over(&mut self, reason: &str, open_fds: &[AtomicI32]) {
        self.shared.revoked.store(true, Ordering::Relaxed);
        self.shared.stats.record_takeover(reason);
        let pool = &mut self.pool;
        self.events.drain(|request| pool.give(request.path));
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
