//! What the server counts and what it costs: requests, bytes, statuses, connections,
//! ring traffic, and CPU seconds per thread (our threads' clocks, the SQPOLL kernel
//! thread's schedstat) and per core (`/proc/stat`). From these the testbed derives the
//! service demands the model needs: host and engine CPU seconds per request.
//!
//! Counters are atomics grouped by the thread that writes them, each group on its own
//! cache lines so host and engine do not slow each other down.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use crate::config::Mode;
use crate::cpu::{self, ThreadClock};
use crate::http::Status;
use crate::placement::Accounts;
use crate::{cache, placement};

/// Items crossing between host and engine, published in batches: the items, the
/// batches, and the sum of each batch's size squared. An item's batch-mates, on average
/// over items, are squares / items - 1 (E[X^2] / E[X] - 1 for batch size X): what a
/// batch adds to the wait of a queue its items reach together (M^X/G/1).
#[derive(Debug, Default)]
pub struct Batches {
    pub items: AtomicU64,
    pub batches: AtomicU64,
    pub squares: AtomicU64,
}

impl Batches {
    /// One batch of `n` items (none counted when `n` is 0).
    pub fn add(&self, n: u64) {
        if n > 0 {
            self.items.fetch_add(n, Ordering::Relaxed);
            self.batches.fetch_add(1, Ordering::Relaxed);
            self.squares.fetch_add(n * n, Ordering::Relaxed);
        }
    }

    /// Batch-mates per item, E[X^2] / E[X] - 1; None before the first batch.
    fn others(&self) -> Option<f64> {
        let items = self.items.load(Ordering::Relaxed);
        let squares = self.squares.load(Ordering::Relaxed);
        (items > 0).then(|| squares as f64 / items as f64 - 1.0)
    }
}

/// Counters of the thread that makes the socket calls (host inline, else the engine).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Socket {
    pub accepted: AtomicU64,
    /// Connections answered 503 because `max_conns` were open.
    pub refused: AtomicU64,
    pub timed_out: AtomicU64,
    /// Bytes written to clients (heads and bodies).
    pub bytes: AtomicU64,
    /// Engine → host events and the batches they went in.
    pub events: Batches,
    /// Advanced by the engine on every loop turn: the host's proof of life.
    pub heartbeat: AtomicU64,
    /// Engine CPU spent polling with nothing to do (adaptive or busy-poll wait), in
    /// nanoseconds: part of its CPU time, not of its service demand.
    pub idle_poll_ns: AtomicU64,
    /// Engine wake-ups (engine and handoff modes): loop turns that found work (commands
    /// or socket events) right after one or more that found none, i.e. busy periods
    /// begun, whether the engine slept in between or only spun. Turns with work inside a
    /// busy period are not counted: the model charges its per-wake-up cost once per
    /// busy period.
    pub wakeups: AtomicU64,
    /// Engine and handoff modes: requests passed up to the host whose answer has come
    /// back, and the nanoseconds from passing each up to its answer's first command
    /// reaching the engine (both rings, the host's queue and its work).
    pub turnarounds: AtomicU64,
    pub turnaround_ns: AtomicU64,
    /// The engine's slowdown (`Config::engine_slowdown`, `engine_message_cost`):
    /// payments made, nanoseconds of CPU burned in all, and the largest debt a single
    /// payment paid.
    pub slowdown_payments: AtomicU64,
    pub slowdown_ns: AtomicU64,
    pub slowdown_longest_ns: AtomicU64,
}

/// Counters of the application (the host thread).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct App {
    /// Requests the application answered (any status).
    pub requests: AtomicU64,
    /// Host → engine commands and the batches they went in.
    pub commands: Batches,
    /// Application work X_a burned, nanoseconds of host thread CPU time.
    pub work_ns: AtomicU64,
    /// Host CPU spent polling an empty completion ring (uring mode), nanoseconds.
    pub idle_poll_ns: AtomicU64,
    /// Host wake-ups: returns of the host loop's blocking wait with something to do (see
    /// `docs/testbed.md`), for the model's per-wake-up cost.
    pub wakeups: AtomicU64,
    /// Host loop turns that found work, whether the wait blocked or only polled: under
    /// overload the loop never blocks, and the turns per request still fall with load.
    pub turns: AtomicU64,
    /// Database queries of dynamic pages, and the time spent in them (wall clock).
    pub db_queries: AtomicU64,
    pub db_ns: AtomicU64,
    /// The memory tier: files and bytes held, and answers it gave.
    pub memory_files: AtomicU64,
    pub memory_bytes: AtomicU64,
    pub memory_hits: AtomicU64,
}

/// Connection handoff (`handoff` mode). The engine writes all but `offered`.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Handoff {
    /// Accepted connections the engine passed to the host at once.
    pub passed: AtomicU64,
    /// Connections the host offered the engine mid-life (selection T(n)).
    pub offered: AtomicU64,
    /// Offers the engine took, and those it sent back (over its limit).
    pub adopted: AtomicU64,
    pub returned: AtomicU64,
    /// Requests on connections the engine held (the rest the host served inline).
    pub engine_requests: AtomicU64,
    /// Gauges: connections held (Cnum), Soft_limit, the last turn's backlog (Qlen).
    pub held: AtomicU64,
    pub soft_limit: AtomicU64,
    pub qlen: AtomicU64,
}

/// Most gauge samples kept (one per `SAMPLE_EVERY`: an hour).
const MAX_SAMPLES: usize = 36_000;
/// How often `sample_handoff` is meant to be called.
pub const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

const CODES: [u16; 12] = [200, 304, 400, 404, 405, 413, 414, 431, 500, 503, 505, 0];

/// The io_uring whose SQPOLL thread is the engine (uring mode): its descriptor while it
/// is open, and the last reading of its fdinfo.
#[derive(Debug, Default)]
struct Ring {
    fd: Option<RawFd>,
    times: Option<SqTimes>,
}

/// How the SQPOLL thread spent its time, in seconds: working on submissions, in all
/// (work plus polling an empty submission ring), and its CPU time by the scheduler,
/// read at the same moment, to check `total_s` against.
#[derive(Clone, Copy, Debug, PartialEq)]
struct SqTimes {
    work_s: f64,
    total_s: f64,
    cpu_s: Option<f64>,
}

/// Ends `Stats::watch_ring`; the last reading stays.
pub struct RingWatch<'a>(&'a Stats);

impl Drop for RingWatch<'_> {
    fn drop(&mut self) {
        self.0.ring.lock().unwrap().fd = None;
    }
}

/// A thread whose CPU time is accounted.
#[derive(Debug)]
struct Thread {
    role: &'static str,
    tid: i32,
    core: Option<usize>,
    clock: Option<ThreadClock>,
    /// Last reading, kept once the thread has exited.
    seconds: f64,
}

#[derive(Debug)]
pub struct Stats {
    pub socket: Socket,
    pub app: App,
    pub handoff: Handoff,
    /// Model-driven placement's per-class work (empty unless it is on).
    pub placement: Accounts,
    pub cache: cache::Counts,
    /// (seconds since start, Cnum, Soft_limit, Qlen), every `SAMPLE_EVERY`.
    series: Mutex<Vec<[f64; 4]>>,
    statuses: [AtomicU64; CODES.len()],
    mode: Mode,
    port: u16,
    start: Instant,
    start_cores: Vec<[u64; FIELDS.len()]>,
    threads: Mutex<Vec<Thread>>,
    ring: Mutex<Ring>,
    errors: AtomicU64,
    last_error: Mutex<String>,
    takeover: Mutex<Option<(f64, String)>>,
    engine_failed: AtomicBool,
}

impl Stats {
    pub fn new(mode: Mode, port: u16) -> Stats {
        Stats {
            socket: Socket::default(),
            app: App::default(),
            handoff: Handoff::default(),
            placement: Accounts::default(),
            cache: cache::Counts::default(),
            series: Mutex::new(Vec::new()),
            statuses: Default::default(),
            mode,
            port,
            start: Instant::now(),
            start_cores: core_times().unwrap_or_default(),
            threads: Mutex::new(Vec::new()),
            ring: Mutex::default(),
            errors: AtomicU64::new(0),
            last_error: Mutex::new(String::new()),
            takeover: Mutex::new(None),
            engine_failed: AtomicBool::new(false),
        }
    }

    pub fn count_status(&self, status: Status) {
        let i = CODES
            .iter()
            .position(|&c| c == status.0)
            .unwrap_or(CODES.len() - 1);
        self.statuses[i].fetch_add(1, Ordering::Relaxed);
    }

    /// A socket call or a database query failed in a way no client caused
    /// (descriptors, memory, a lost database connection).
    pub fn note_error(&self, e: &dyn std::fmt::Display) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap() = e.to_string();
    }

    /// Accounts the calling thread's CPU time under `role`.
    pub fn register_thread(&self, role: &'static str, core: Option<usize>) {
        let clock = ThreadClock::current().ok();
        let tid = clock.map_or(0, |c| c.tid);
        self.threads.lock().unwrap().push(Thread {
            role,
            tid,
            core,
            clock,
            seconds: 0.0,
        });
    }

    /// Accounts a thread known only by its kernel id (io_uring's SQPOLL thread).
    pub fn register_task(&self, role: &'static str, tid: i32, core: Option<usize>) {
        self.threads.lock().unwrap().push(Thread {
            role,
            tid,
            core,
            clock: None,
            seconds: 0.0,
        });
    }

    /// Reads the SQPOLL thread's work and total time from this ring's fdinfo whenever
    /// threads are sampled, until the guard drops. Drop it before the ring closes: the
    /// descriptor's number may then be reused.
    #[must_use]
    pub fn watch_ring(&self, fd: RawFd) -> RingWatch<'_> {
        self.ring.lock().unwrap().fd = Some(fd);
        RingWatch(self)
    }

    /// The engine failed and the host took over `after_s` seconds into the run.
    pub fn record_takeover(&self, reason: &str) {
        self.engine_failed.store(true, Ordering::Relaxed);
        let after = self.start.elapsed().as_secs_f64();
        *self.takeover.lock().unwrap() = Some((after, reason.to_string()));
    }

    pub fn engine_failed(&self) -> bool {
        self.engine_failed.load(Ordering::Relaxed)
    }

    /// Records the handoff gauges now (for the document's time series).
    pub fn sample_handoff(&self) {
        let mut series = self.series.lock().unwrap();
        if series.len() < MAX_SAMPLES {
            let gauge = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
            let h = &self.handoff;
            let t = self.start.elapsed().as_secs_f64();
            series.push([t, gauge(&h.held), gauge(&h.soft_limit), gauge(&h.qlen)]);
        }
    }

    fn handoff_document(&self) -> HandoffCounts {
        let relaxed = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let h = &self.handoff;
        let series = self.series.lock().unwrap();
        let column = |i: usize| series.iter().map(|row| row[i]).collect();
        HandoffCounts {
            passed: relaxed(&h.passed),
            offered: relaxed(&h.offered),
            adopted: relaxed(&h.adopted),
            returned: relaxed(&h.returned),
            engine_requests: relaxed(&h.engine_requests),
            held: relaxed(&h.held),
            soft_limit: relaxed(&h.soft_limit),
            series: HandoffSeries {
                t_s: column(0),
                held: column(1),
                soft_limit: column(2),
                qlen: column(3),
            },
        }
    }

    /// Reads every accounted thread's CPU time now (and the SQPOLL thread's split of
    /// its time). Call it from a thread before it exits too, so its final time is kept.
    pub fn sample_threads(&self) {
        let mut ring = self.ring.lock().unwrap();
        if let Some(fd) = ring.fd {
            ring.times = sqpoll_times(fd).or(ring.times); // a failed read keeps the last
        }
        drop(ring);
        for t in self.threads.lock().unwrap().iter_mut() {
            let now = match t.clock {
                Some(clock) => clock.seconds(),
                None => cpu::task_seconds(t.tid),
            };
            if let Some(s) = now {
                t.seconds = s;
            }
        }
    }

    /// The stats document (see `docs/testbed.md` for its fields).
    pub fn document(&self, done: bool) -> Document {
        self.sample_threads();
        let relaxed = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let requests = relaxed(&self.app.requests);
        let per_request = |x: f64| (requests > 0).then(|| x / requests as f64);
        let threads = self.threads.lock().unwrap();
        let role_cpu = |role: &str| -> f64 {
            let times = threads.iter().filter(|t| t.role == role).map(|t| t.seconds);
            times.fold(0.0, |a, b| a + b) // not sum(): an empty f64 sum is -0.0
        };
        let (host_s, engine_s) = (role_cpu("host"), role_cpu("engine"));
        let host_wakeups = relaxed(&self.app.wakeups);
        let host_turns = relaxed(&self.app.turns);
        let turnarounds = relaxed(&self.socket.turnarounds);
        let traits = self.mode.traits();
        let engine_wakeups = traits
            .counts_engine_wakeups
            .then(|| relaxed(&self.socket.wakeups));
        let kernel = traits.engine_busy_from_kernel;
        let sq = self.ring.lock().unwrap().times.filter(|_| kernel);
        let idle_poll_s = relaxed(&self.socket.idle_poll_ns) as f64 * 1e-9;
        let host_idle_poll_s = relaxed(&self.app.idle_poll_ns) as f64 * 1e-9;
        let commands = relaxed(&self.app.commands.items);
        let batches = relaxed(&self.app.commands.batches);
        let statuses = CODES
            .iter()
            .zip(&self.statuses)
            .filter(|(_, n)| relaxed(n) > 0)
            .map(|(code, n)| {
                let key = if *code == 0 {
                    "other".to_string()
                } else {
                    code.to_string()
                };
                (key, relaxed(n))
            })
            .collect();
        let takeover = self.takeover.lock().unwrap().clone();
        Document {
            mode: self.mode.name(),
            pid: std::process::id(),
            port: self.port,
            elapsed_s: self.start.elapsed().as_secs_f64(),
            done,
            requests,
            bytes: relaxed(&self.socket.bytes),
            statuses,
            connections: Connections {
                accepted: relaxed(&self.socket.accepted),
                refused: relaxed(&self.socket.refused),
                timed_out: relaxed(&self.socket.timed_out),
            },
            threads: threads
                .iter()
                .map(|t| ThreadTime {
                    role: t.role,
                    tid: t.tid,
                    core: t.core,
                    cpu_s: t.seconds,
                })
                .collect(),
            engine: EngineCounts {
                commands,
                command_batches: batches,
                events: relaxed(&self.socket.events.items),
                event_batches: relaxed(&self.socket.events.batches),
                command_batch_squares: relaxed(&self.app.commands.squares),
                event_batch_squares: relaxed(&self.socket.events.squares),
                idle_poll_s,
                failed: self.engine_failed(),
                takeover_after_s: takeover.as_ref().map(|t| t.0),
                takeover_reason: takeover.map(|t| t.1),
                slowdown_payments: relaxed(&self.socket.slowdown_payments),
                slowdown_s: relaxed(&self.socket.slowdown_ns) as f64 * 1e-9,
                slowdown_longest_s: relaxed(&self.socket.slowdown_longest_ns) as f64 * 1e-9,
            },
            per_request: PerRequest {
                host_cpu_s: per_request(host_s),
                host_busy_cpu_s: per_request((host_s - host_idle_poll_s).max(0.0)),
                app_cpu_s: per_request(relaxed(&self.app.work_ns) as f64 * 1e-9),
                db_s: per_request(relaxed(&self.app.db_ns) as f64 * 1e-9),
                engine_cpu_s: per_request(engine_s),
                engine_busy_cpu_s: per_request((engine_s - idle_poll_s).max(0.0)),
                commands: per_request(commands as f64),
                batch_mean: (batches > 0).then(|| commands as f64 / batches as f64),
                command_batch_others: self.app.commands.others(),
                event_batch_others: self.socket.events.others(),
                host_wakeups: per_request(host_wakeups as f64),
                host_turns: per_request(host_turns as f64),
                engine_wakeups: engine_wakeups.and_then(|n| per_request(n as f64)),
                engine_sq_work_s: sq.and_then(|t| per_request(t.work_s)),
                host_turnaround_s: (turnarounds > 0).then(|| {
                    relaxed(&self.socket.turnaround_ns) as f64 * 1e-9 / turnarounds as f64
                }),
            },
            wakeups: Wakeups {
                host: host_wakeups,
                engine: engine_wakeups,
                host_turns,
            },
            sqpoll: Sqpoll {
                work_s: sq.map(|t| t.work_s),
                total_s: sq.map(|t| t.total_s),
                cpu_s: sq.and_then(|t| t.cpu_s),
            },
            cores: self.core_deltas(),
            handoff: (self.mode == Mode::Handoff).then(|| self.handoff_document()),
            placement: self.placement.document(),
            cache: self.cache.document(),
            memory_tier: MemoryTier {
                files: relaxed(&self.app.memory_files),
                bytes: relaxed(&self.app.memory_bytes),
                hits: relaxed(&self.app.memory_hits),
            },
            database: Database {
                queries: relaxed(&self.app.db_queries),
                time_s: relaxed(&self.app.db_ns) as f64 * 1e-9,
            },
            host: HostTimes {
                idle_poll_s: host_idle_poll_s,
            },
            errors: Errors {
                count: relaxed(&self.errors),
                last: self.last_error.lock().unwrap().clone(),
            },
        }
    }

    fn core_deltas(&self) -> Vec<CoreTimes> {
        let now = core_times().unwrap_or_default();
        let tick = 1.0 / clock_ticks_per_second();
        now.iter()
            .zip(&self.start_cores)
            .enumerate()
            .map(|(core, (a, b))| {
                let d = |i: usize| a[i].saturating_sub(b[i]) as f64 * tick;
                CoreTimes {
                    core,
                    user_s: d(0) + d(1),
                    system_s: d(2),
                    idle_s: d(3) + d(4),
                    irq_s: d(5),
                    softirq_s: d(6),
                    steal_s: d(7),
                }
            })
            .collect()
    }
}

/// The stats document: the server's counters, CPU times and service demands at one
/// moment (field by field in `docs/testbed.md`). Python reads it into
/// `offloadlab.documents.ServerStats`, which must follow any change here.
/// Options are null, never left out.
#[derive(Debug, Serialize)]
pub struct Document {
    mode: &'static str,
    pid: u32,
    port: u16,
    elapsed_s: f64,
    /// The server has stopped: this is its last document.
    #[serde(rename = "final")]
    done: bool,
    requests: u64,
    bytes: u64,
    /// Responses by status code ("other" for codes outside `CODES`), codes seen only.
    statuses: BTreeMap<String, u64>,
    connections: Connections,
    threads: Vec<ThreadTime>,
    engine: EngineCounts,
    per_request: PerRequest,
    wakeups: Wakeups,
    sqpoll: Sqpoll,
    cores: Vec<CoreTimes>,
    /// Handoff mode only.
    handoff: Option<HandoffCounts>,
    placement: Option<placement::Document>,
    cache: Option<cache::Document>,
    memory_tier: MemoryTier,
    database: Database,
    host: HostTimes,
    errors: Errors,
}

#[derive(Debug, Serialize)]
struct Connections {
    accepted: u64,
    refused: u64,
    timed_out: u64,
}

/// An accounted thread's CPU time so far.
#[derive(Debug, Serialize)]
struct ThreadTime {
    role: &'static str,
    tid: i32,
    core: Option<usize>,
    cpu_s: f64,
}

/// The rings between host and engine, and the engine's health.
#[derive(Debug, Serialize)]
struct EngineCounts {
    commands: u64,
    command_batches: u64,
    events: u64,
    event_batches: u64,
    command_batch_squares: u64,
    event_batch_squares: u64,
    idle_poll_s: f64,
    failed: bool,
    takeover_after_s: Option<f64>,
    takeover_reason: Option<String>,
    slowdown_payments: u64,
    slowdown_s: f64,
    slowdown_longest_s: f64,
}

/// Service demands: each None before the first request, or where the mode has no such
/// thing (engine wake-ups without an engine thread, SQPOLL work outside uring mode).
#[derive(Debug, Serialize)]
struct PerRequest {
    host_cpu_s: Option<f64>,
    host_busy_cpu_s: Option<f64>,
    app_cpu_s: Option<f64>,
    db_s: Option<f64>,
    engine_cpu_s: Option<f64>,
    engine_busy_cpu_s: Option<f64>,
    commands: Option<f64>,
    /// Commands per batch: None before the first batch.
    batch_mean: Option<f64>,
    /// A command's and an event's batch-mates, on average (Batches::others).
    command_batch_others: Option<f64>,
    event_batch_others: Option<f64>,
    host_wakeups: Option<f64>,
    host_turns: Option<f64>,
    engine_wakeups: Option<f64>,
    engine_sq_work_s: Option<f64>,
    /// Mean seconds from the engine passing a request up to its answer coming back
    /// (Socket::turnaround_ns): None without answers that went through the rings.
    host_turnaround_s: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Wakeups {
    host: u64,
    /// None without an engine thread of our own.
    engine: Option<u64>,
    host_turns: u64,
}

/// The SQPOLL thread's times (uring mode, on kernels that report them).
#[derive(Debug, Serialize)]
struct Sqpoll {
    work_s: Option<f64>,
    total_s: Option<f64>,
    cpu_s: Option<f64>,
}

/// One core's time since the server started, by kind (`/proc/stat`).
#[derive(Debug, Serialize)]
struct CoreTimes {
    core: usize,
    user_s: f64,
    system_s: f64,
    idle_s: f64,
    irq_s: f64,
    softirq_s: f64,
    steal_s: f64,
}

#[derive(Debug, Serialize)]
struct HandoffCounts {
    passed: u64,
    offered: u64,
    adopted: u64,
    returned: u64,
    engine_requests: u64,
    held: u64,
    soft_limit: u64,
    series: HandoffSeries,
}

/// The handoff gauges every `SAMPLE_EVERY`, one column each.
#[derive(Debug, Serialize)]
struct HandoffSeries {
    t_s: Vec<f64>,
    held: Vec<f64>,
    soft_limit: Vec<f64>,
    qlen: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct MemoryTier {
    files: u64,
    bytes: u64,
    hits: u64,
}

#[derive(Debug, Serialize)]
struct Database {
    queries: u64,
    time_s: f64,
}

#[derive(Debug, Serialize)]
struct HostTimes {
    idle_poll_s: f64,
}

/// Failures no client caused, and the last one's message.
#[derive(Debug, Serialize)]
struct Errors {
    count: u64,
    last: String,
}

/// The `/proc/stat` fields read per core, in their order there.
const FIELDS: [&str; 8] = [
    "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
];

/// Cumulative ticks per core from `/proc/stat`.
fn core_times() -> io::Result<Vec<[u64; FIELDS.len()]>> {
    let text = std::fs::read_to_string("/proc/stat")?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|line| {
            let mut row = [0u64; FIELDS.len()];
            for (slot, value) in row.iter_mut().zip(line.split_whitespace().skip(1)) {
                *slot = value.parse().unwrap_or(0);
            }
            row
        })
        .collect())
}

/// The SQPOLL thread's times from its ring's fdinfo (None if the file cannot be read).
fn sqpoll_times(fd: RawFd) -> Option<SqTimes> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    parse_sqpoll_times(&text)
}

/// `SqWorkTime` and `SqTotalTime` are microseconds (None on kernels without them). On
/// 6.18 `SqTotalTime` matched the thread's schedstat to within the microseconds between
/// the two reads. `SqThread` is the thread's kernel id; `SqThreadCpu` is only the core
/// it runs on, not a time.
fn parse_sqpoll_times(fdinfo: &str) -> Option<SqTimes> {
    let field = |name: &str| -> Option<i64> {
        let value = fdinfo
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?;
        value.trim().parse().ok()
    };
    let tid = field("SqThread").and_then(|t| i32::try_from(t).ok());
    Some(SqTimes {
        work_s: field("SqWorkTime")? as f64 / 1e6,
        total_s: field("SqTotalTime")? as f64 / 1e6,
        cpu_s: tid.and_then(cpu::task_seconds),
    })
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// Writes the document to `path` through a temporary file and a rename, so a reader
/// never sees half of it.
pub fn write_atomic(path: &Path, doc: &impl Serialize) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let text = serde_json::to_vec_pretty(doc).map_err(io::Error::other)?;
    // A failed write (a full disk) or rename leaves no temp file behind.
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// The document as the JSON its readers see.
    fn json_of(stats: &Stats) -> Value {
        serde_json::to_value(stats.document(true)).unwrap()
    }

    #[test]
    fn per_core_times_are_read_for_every_core() {
        let rows = core_times().unwrap();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(rows.len() >= cores);
        assert!(
            rows.iter().all(|r| r[3] > 0),
            "every core has idled at some point"
        );
    }

    #[test]
    fn the_document_divides_cpu_time_by_requests() {
        let stats = Stats::new(Mode::Inline, 8080);
        stats.register_thread("host", None);
        cpu::burn(0.01);
        stats.app.requests.store(4, Ordering::Relaxed);
        stats.count_status(Status::OK);
        stats.count_status(Status(418));
        let doc = json_of(&stats);
        let per = doc["per_request"]["host_cpu_s"].as_f64().unwrap();
        assert!(per >= 0.01 / 4.0, "{per}");
        assert_eq!(doc["statuses"]["200"], 1);
        assert_eq!(doc["statuses"]["other"], 1);
        assert!(doc["per_request"]["engine_cpu_s"].as_f64().unwrap() == 0.0);
    }

    #[test]
    fn wake_ups_are_counted_per_side_and_divided_by_requests() {
        let stats = Stats::new(Mode::Engine, 8080);
        stats.app.requests.store(4, Ordering::Relaxed);
        stats.app.wakeups.store(2, Ordering::Relaxed);
        stats.app.turns.store(3, Ordering::Relaxed);
        stats.socket.wakeups.store(6, Ordering::Relaxed);
        let doc = json_of(&stats);
        assert_eq!(
            doc["wakeups"],
            json!({"host": 2, "engine": 6, "host_turns": 3})
        );
        assert_eq!(doc["per_request"]["host_wakeups"], 0.5);
        assert_eq!(doc["per_request"]["host_turns"], 0.75);
        assert_eq!(doc["per_request"]["engine_wakeups"], 1.5);
        assert!(doc["sqpoll"]["work_s"].is_null() && doc["sqpoll"]["cpu_s"].is_null());
        // Inline has no engine thread to count.
        let doc = json_of(&Stats::new(Mode::Inline, 8080));
        assert_eq!(
            doc["wakeups"],
            json!({"host": 0, "engine": null, "host_turns": 0})
        );
        assert!(doc["per_request"]["engine_wakeups"].is_null());
    }

    #[test]
    fn sqpoll_times_are_read_in_microseconds_and_missing_ones_are_none() {
        let fdinfo = "SqMask:\t0xff\nSqThread:\t0\nSqThreadCpu:\t1\n\
                      SqTotalTime:\t622225\nSqWorkTime:\t236146\nUserFiles:\t0\n";
        let times = parse_sqpoll_times(fdinfo).unwrap();
        assert_eq!((times.work_s, times.total_s), (0.236146, 0.622225));
        assert_eq!(times.cpu_s, None, "no thread 0 under /proc/self/task");
        let older_kernel = "SqMask:\t0xff\nSqThread:\t4846\nSqThreadCpu:\t0\n";
        assert_eq!(parse_sqpoll_times(older_kernel), None);
    }

    #[test]
    fn written_documents_replace_the_old_one_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats.json");
        write_atomic(&path, &json!({"a": 1})).unwrap();
        write_atomic(&path, &json!({"a": 2})).unwrap();
        let back: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(back["a"], 2);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_full_disk_leaves_the_old_document_and_no_temp_file() {
        // A one-page tmpfs stands in for a full disk (mounting needs root, as CI is).
        let dir = tempfile::tempdir().unwrap();
        let target = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: NUL-terminated strings that outlive the call.
        let mounted = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                c"size=4k".as_ptr().cast(),
            )
        };
        assert_eq!(mounted, 0, "mount tmpfs: {}", io::Error::last_os_error());
        let path = dir.path().join("stats.json");
        write_atomic(&path, &json!({"a": 1})).unwrap();
        let big = json!({"pad": "x".repeat(64 * 1024)});
        assert!(write_atomic(&path, &big).is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let back: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        // SAFETY: unmounts what this test mounted.
        unsafe { libc::umount(target.as_ptr()) };
        assert_eq!(names, ["stats.json"]);
        assert_eq!(back["a"], 1);
    }
}
