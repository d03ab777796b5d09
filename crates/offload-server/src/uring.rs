//! `uring` mode: io_uring with an SQPOLL kernel thread as the offload engine.
//!
//! The host thread runs the application and prepares submissions; the SQPOLL thread,
//! pinned to the engine core, takes them from the shared submission ring and makes the
//! socket calls (accept, recv, send, close). Operations that must wait for a socket
//! finish as task work on that same thread. The host reaps completions, asks each
//! connection's `Session` what comes next (the HTTP rules `proto` follows too), calls
//! `Handler::respond` and queues the next operations. So the submission ring plays the
//! command ring of `engine` mode and the completion ring its event ring, and the
//! accounting counts them that way.
//!
//! A connection has exactly one thing in flight: a recv while it reads a request, a send
//! (or a read+send pair) while it writes an answer, then its close. A connection's
//! buffers are touched only when nothing is in flight on it, its slot is freed only by
//! the completion of its close, and `user_data` holds slot, generation and operation,
//! so a completion always finds its own connection. A connection that times out is
//! shut down, which ends whatever it has in flight, and then closed. Two rare socket
//! calls stay on the host: that shutdown, and the 503 (a non-blocking send and a
//! close) for a client beyond `max_conns`, as `proto` sends it.
//! Sixteen single accepts are kept in flight, so at most that many connections are taken
//! per turn, as in `proto`.
//!
//! io_uring has no sendfile. File ranges go by read+send: a READ of up to 64 KiB of the
//! file into a chunk buffer, linked to a SEND of that chunk. Splice (file→pipe→socket)
//! would save a copy, but io_uring always hands splice to io-wq worker threads, which
//! are children of the host thread and run on the host's core: the socket work would
//! leave the engine and its accounting, at two thread hand-offs per chunk. A read from
//! the page cache and a send both complete inline on the SQPOLL thread. Measured with
//! wrk (16 connections, host and engine pinned on this two-core machine, medians of 5
//! alternating runs): 1 MiB files, read+send 2570 requests/s at 455 us of process CPU
//! per request, splice 1550 requests/s at 855 us (230 us of it in io-wq workers);
//! 100 KiB files, 24.0k against 13.0k requests/s, 58 against 129 us. Splice also needs a
//! pipe per connection. The price of read+send is one more copy of each body byte.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::squeue::{Entry, Flags};
use io_uring::types::{CancelBuilder, Fd, SubmitArgs, Timespec};
use io_uring::{opcode, IoUring};
use slab::Slab;

use crate::app::Handler;
use crate::config::{Config, EngineWait};
use crate::conn::FileRange;
use crate::cpu;
use crate::pool::Pool;
use crate::proto::{self, Reply, ACCEPT_BATCH, TICK};
use crate::session::{Codec, Next, Phase, Session};
use crate::stats::Stats;
use crate::Control;

/// Submission ring entries; the completion ring has room for every connection's.
const ENTRIES: u32 = 4096;
/// File bytes per read+send.
const CHUNK: usize = 64 * 1024;
/// Bytes asked of one recv at most.
const RECV: usize = 16 * 1024;
/// How long the idle host polls the completion ring before it sleeps.
const SPIN: Duration = Duration::from_micros(50);
/// How long a stopping server waits for its operations to finish.
const DRAIN: Duration = Duration::from_secs(2);
/// Slots fit in 24 bits of `user_data`.
const MAX_SLOTS: usize = 1 << 24;

/// What a completion is for: the low byte of its `user_data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Accept = 1,
    Recv,
    Send,
    Read,
    Close,
    /// The cancel of the accepts on stop.
    Cancel,
}

const OPS: [Op; 6] = [
    Op::Accept,
    Op::Recv,
    Op::Send,
    Op::Read,
    Op::Close,
    Op::Cancel,
];

/// `user_data`: the slot's generation in the high 32 bits, the slot in the next 24 bits,
/// the operation in the low 8.
fn tag(slot: usize, gen: u32, op: Op) -> u64 {
    (u64::from(gen) << 32) | ((slot % MAX_SLOTS) as u64) << 8 | op as u64
}

fn untag(data: u64) -> (usize, u32, Option<Op>) {
    let op = OPS.into_iter().find(|&op| op as u64 == data & 0xff);
    ((data >> 8) as usize % MAX_SLOTS, (data >> 32) as u32, op)
}

struct Conn {
    fd: RawFd,
    gen: u32,
    session: Session,
    /// Operations submitted and not completed.
    inflight: u8,
    /// The answer's head (and small body); `pos` bytes of it are sent.
    out: Vec<u8>,
    pos: usize,
    /// What of the answer's file range is still to be read.
    file: Option<FileRange>,
    /// The file chunk in hand: `chunk[sent..filled]` is still to be sent.
    chunk: Option<Box<[u8]>>,
    filled: usize,
    sent: usize,
}

impl Conn {
    /// Queues a whole answer.
    fn queue(&mut self, reply: Reply) {
        let keep_alive;
        (self.out, self.file, keep_alive) = reply.into_file_reply();
        self.session.answer(keep_alive);
    }
}

struct Uring<'a> {
    ring: IoUring,
    listener: RawFd,
    conns: Slab<Conn>,
    next_gen: u32,
    handler: Handler,
    pool: Pool,
    chunks: Vec<Box<[u8]>>,
    codec: Codec,
    /// Accepts in flight; after an accept error none are added until the next sweep.
    accepts: usize,
    accept_paused: bool,
    stopping: bool,
    config: &'a Config,
    stats: &'a Stats,
    cqes: Vec<(u64, i32)>,
    expired: Vec<usize>,
    now: Instant,
    last_sweep: Instant,
    /// SQEs queued since the last submit, bytes sent since the last publish.
    pushed: u64,
    bytes: u64,
}

pub fn run(
    config: &Config,
    listener: std::net::TcpListener,
    handler: Handler,
    control: Arc<Control>,
    stats: Arc<Stats>,
) -> io::Result<()> {
    let ring = build_ring(config)?;
    match find_sqpoll_thread() {
        Some(tid) => stats.register_task("engine", tid, config.engine_core),
        None => stats.note_error(&io::Error::other("no iou-sqp thread in /proc/self/task")),
    }
    let now = Instant::now();
    let mut uring = Uring {
        ring,
        listener: listener.as_raw_fd(),
        conns: Slab::with_capacity(config.limits.max_conns.min(1 << 16)),
        next_gen: 0,
        handler,
        pool: Pool::default(),
        chunks: Vec::new(),
        codec: Codec::new(config.limits.clone()),
        accepts: 0,
        accept_paused: false,
        stopping: false,
        config,
        stats: &stats,
        cqes: Vec::with_capacity(1024),
        expired: Vec::new(),
        now,
        last_sweep: now,
        pushed: 0,
        bytes: 0,
    };
    // Declared after `uring`, so it ends before `uring` closes the ring, however this
    // returns.
    let _watch = stats.watch_ring(uring.ring.as_raw_fd());
    // Accepts go out before the first wait, or the first client waits a whole TICK.
    uring.accept();
    while !control.is_stopped() {
        uring.turn()?;
    }
    let drained = uring.drain();
    stats.sample_threads(); // the SQPOLL thread's last reading, while it still exists
    if !drained {
        // Operations still in flight may write into these buffers: never free them.
        std::mem::forget(uring);
    }
    drop(listener);
    Ok(())
}

/// io_uring_enter's flags from the kernel's uapi header (neither the io-uring crate
/// nor libc exports them).
const ENTER_GETEVENTS: u32 = 1;
const ENTER_EXT_ARG: u32 = 1 << 3;

fn build_ring(config: &Config) -> io::Result<IoUring> {
    // 1 ms is the shortest idle time the kernel takes (0 means its default, 1 s).
    let idle_ms = match config.engine_wait {
        EngineWait::Poll => 600_000,
        EngineWait::Adaptive | EngineWait::Sleep => 1,
    };
    let cq = (4 * config.limits.max_conns).clamp(2 * ENTRIES as usize, 1 << 16);
    let mut builder = IoUring::builder();
    builder
        .setup_sqpoll(idle_ms)
        .setup_cqsize(cq as u32)
        .setup_clamp();
    if let Some(core) = config.engine_core {
        builder.setup_sqpoll_cpu(core as u32);
    }
    builder.build(ENTRIES).map_err(|e| {
        let core = config
            .engine_core
            .map_or("any core".into(), |c| format!("core {c}"));
        io::Error::new(
            e.kind(),
            format!("io_uring with an SQPOLL thread on {core}: {e}"),
        )
    })
}

/// The SQPOLL thread's core: `--engine-core`, or when that is not given a core of its
/// own, the first of `allowed` (the cores the server may use) that the host is not
/// pinned to, skipping one more when the host is not pinned (so host and SQPOLL thread
/// take the first two cores, as `testbed/cores.py` pins them). None on a single core.
///
/// The SQPOLL thread spins for its idle time after each submission (1 ms at the least,
/// a jiffy on some kernels), at the host's priority. Left unpinned, the scheduler kept
/// it, the host and a loopback client on one core, since they wake one another, and a
/// woken thread waited there for the spin to end: one request at a time at 20 req/s
/// took 1.18 ms (median) against 0.56 ms with the threads pinned apart; with the SQPOLL
/// thread alone pinned, 0.43-0.62 ms (`bench/mode_latency.py`, 29 Nov 2026). The scheduler
/// then wakes the others on the free core. Keeping the unpinned host off the SQPOLL
/// core as well gained nothing there, and its CPU account took more of the loopback
/// interrupts (`application_work_shows_up_as_host_cpu_per_request` at 10.1% in 3 of
/// 10 runs).
pub fn sqpoll_core(config: &Config, allowed: &[usize]) -> Option<usize> {
    config.engine_core.or_else(|| {
        let skip = usize::from(config.host_core.is_none());
        allowed
            .iter()
            .copied()
            .filter(|&c| Some(c) != config.host_core)
            .nth(skip)
    })
}

/// The kernel names the SQPOLL thread "iou-sqp-TID" after the thread that made the ring.
fn find_sqpoll_thread() -> Option<i32> {
    // SAFETY: gettid has no preconditions.
    let name = format!("iou-sqp-{}", unsafe { libc::gettid() });
    for _ in 0..100 {
        for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim_end() == name {
                return task.file_name().to_str()?.parse().ok();
            }
        }
        std::thread::sleep(Duration::from_millis(1)); // it names itself once it runs
    }
    None
}

fn add(counter: &AtomicU64, n: u64) {
    if n > 0 {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Passes on a submit error unless it only means "again" (or `also`, e.g. "timed out").
fn benign(submitted: io::Result<usize>, also: i32) -> io::Result<()> {
    match submitted {
        Err(e) if ![libc::EINTR, libc::EBUSY, also].contains(&e.raw_os_error().unwrap_or(0)) => {
            Err(e)
        }
        _ => Ok(()),
    }
}

/// MSG_MORE while file bytes follow, so a head shares segments with the body after it.
fn send_flags(more: bool) -> i32 {
    libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 }
}

impl Uring<'_> {
    /// One round: submit, wait for completions (at most `TICK`), handle them, check the
    /// timeouts when due, and keep the accepts going.
    fn turn(&mut self) -> io::Result<()> {
        self.wait()?;
        self.reap();
        if self.now.duration_since(self.last_sweep) >= TICK {
            self.sweep();
        }
        self.accept();
        add(&self.stats.socket.bytes, std::mem::take(&mut self.bytes));
        Ok(())
    }

    fn wait(&mut self) -> io::Result<()> {
        self.flush()?;
        if !self.ring.completion().is_empty() {
            return Ok(());
        }
        // The host has its core to itself: it spins before it sleeps unless told to
        // poll. (`sleep` is for a side whose core other work shares: here, SQPOLL's.)
        let poll = self.config.engine_wait == EngineWait::Poll;
        let spin = if poll { TICK } else { SPIN };
        let started = Instant::now();
        // Polling an empty ring is not work: it is accounted apart (two clock reads,
        // paid only when there is nothing to do).
        let spin_from = cpu::thread_seconds();
        while self.ring.completion().is_empty() && started.elapsed() < spin {
            std::hint::spin_loop();
        }
        let spun = cpu::thread_seconds() - spin_from;
        add(&self.stats.app.idle_poll_ns, (spun.max(0.0) * 1e9) as u64);
        if !poll && self.ring.completion().is_empty() {
            let ts = Timespec::from(TICK);
            let args = SubmitArgs::new().timespec(&ts);
            let waited = if self.ring.submission().is_empty() {
                // Nothing to submit: wait without the crate's submit, which wakes a
                // sleeping SQPOLL thread even then, and each needless wake-up costs
                // the thread its idle spin (a jiffy, 4 ms): 5% of a core when idle.
                let flags = ENTER_GETEVENTS | ENTER_EXT_ARG;
                // SAFETY: `args` (and the timespec it points to) outlive the call, and
                // EXT_ARG is the form `submit_with_args` passes them in.
                unsafe { self.ring.submitter().enter(0, 1, flags, Some(&args)) }
            } else {
                self.ring.submitter().submit_with_args(1, &args)
            };
            benign(waited, libc::ETIME)?;
        }
        // Completions after the ring was found empty: a busy period begins, whether
        // they came while the host spun or while it slept.
        if !self.ring.completion().is_empty() {
            add(&self.stats.app.wakeups, 1);
        }
        Ok(())
    }

    /// Hands the queued SQEs to the kernel (a syscall only if its thread sleeps, and
    /// none when there are none: an empty submit would wake it for nothing).
    fn flush(&mut self) -> io::Result<()> {
        if !self.ring.submission().is_empty() {
            benign(self.ring.submit(), libc::EAGAIN)?;
        }
        self.stats
            .app
            .commands
            .add(std::mem::take(&mut self.pushed));
        Ok(())
    }

    /// Queues entries that must reach the kernel together (a linked pair stays whole).
    /// Callers make sure every buffer an entry points to stays allocated and untouched
    /// until that entry's completion.
    fn push(&mut self, entries: &[Entry]) {
        loop {
            // SAFETY: the entries' buffers outlive their operations (see above).
            if unsafe { self.ring.submission().push_multiple(entries) }.is_ok() {
                self.pushed += entries.len() as u64;
                return;
            }
            // Full: submit, then wait until the kernel thread has taken some.
            let _ = self.flush();
            let _ = self.ring.submitter().squeue_wait();
        }
    }

    fn reap(&mut self) {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.clear();
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        self.now = Instant::now();
        self.stats.socket.events.add(cqes.len() as u64);
        if !cqes.is_empty() {
            add(&self.stats.app.turns, 1);
        }
        for &(data, res) in &cqes {
            self.complete(data, res);
        }
        self.cqes = cqes;
    }

    fn complete(&mut self, data: u64, res: i32) {
        let (slot, gen, op) = untag(data);
        match op {
            Some(Op::Accept) => return self.accepted(res),
            Some(Op::Cancel) | None => return,
            _ => {}
        }
        let Some(conn) = self.conns.get_mut(slot).filter(|c| c.gen == gen) else {
            return; // cannot happen: a slot is freed only when nothing is in flight
        };
        conn.inflight -= 1;
        let failed = match op {
            Some(Op::Recv | Op::Send) if res == -libc::EINTR || res == -libc::EAGAIN => false,
            Some(Op::Recv) if res >= 0 => {
                // SAFETY: the kernel initialised the first `res` bytes of the room the
                // recv was given, and nothing touched the session while it was in flight.
                unsafe { conn.session.filled(res as usize, self.now) };
                false
            }
            Some(Op::Send) if res > 0 => {
                self.bytes += res as u64;
                conn.session.since = self.now;
                if conn.pos < conn.out.len() {
                    conn.pos += res as usize;
                } else {
                    conn.sent += res as usize;
                }
                false
            }
            // A short read means the file shrank: the promised length cannot be met.
            Some(Op::Read) => res < 0 || res as usize != conn.filled,
            Some(Op::Close) => {
                let conn = self.conns.remove(slot);
                conn.session.release(&mut self.pool);
                self.pool.give(conn.out);
                self.chunks.extend(conn.chunk);
                return;
            }
            _ => true, // reset, or a send cut short by a shutdown
        };
        if failed {
            conn.session.close();
        }
        self.advance(slot);
    }

    /// Keeps `ACCEPT_BATCH` accepts in flight. Each takes one connection, so no more are
    /// taken between two reaps and the rest wait in the kernel's backlog, as in `proto`
    /// (accepting more than can be served only feeds a receive livelock).
    fn accept(&mut self) {
        if self.stopping || self.accept_paused {
            return;
        }
        let none = std::ptr::null_mut();
        let accept = opcode::Accept::new(Fd(self.listener), none, none.cast());
        let accept = accept
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(tag(0, 0, Op::Accept));
        while self.accepts < ACCEPT_BATCH {
            self.push(std::slice::from_ref(&accept));
            self.accepts += 1;
        }
    }

    fn accepted(&mut self, res: i32) {
        self.accepts -= 1;
        if res < 0 {
            // Out of descriptors or memory: try again at the next sweep, not in a loop.
            if ![
                libc::ECONNABORTED,
                libc::EINTR,
                libc::EAGAIN,
                libc::ECANCELED,
            ]
            .contains(&-res)
            {
                self.stats.note_error(&io::Error::from_raw_os_error(-res));
                self.accept_paused = true;
            }
        } else if self.stopping {
            // SAFETY: a descriptor just accepted, with nothing in flight on it.
            unsafe { libc::close(res) };
        } else if self.conns.len() >= self.codec.limits.max_conns.min(MAX_SLOTS) {
            self.refuse(res);
        } else {
            self.admit(res);
        }
    }

    /// Answers 503 and closes here and now, as `proto` does.
    fn refuse(&mut self, fd: RawFd) {
        proto::refuse(fd, &mut self.codec.date, &mut self.pool, self.stats);
        // SAFETY: `fd` was just accepted and nothing is in flight on it.
        unsafe { libc::close(fd) };
    }

    fn admit(&mut self, fd: RawFd) {
        self.next_gen = self.next_gen.wrapping_add(1);
        let conn = Conn {
            fd,
            gen: self.next_gen,
            session: Session::new(self.pool.take(), self.now),
            inflight: 0,
            out: Vec::new(),
            pos: 0,
            file: None,
            chunk: None,
            filled: 0,
            sent: 0,
        };
        let slot = self.conns.insert(conn);
        add(&self.stats.socket.accepted, 1);
        self.advance(slot);
    }

    /// Moves a connection on until it has an operation in flight again.
    fn advance(&mut self, slot: usize) {
        loop {
            let conn = &mut self.conns[slot];
            if conn.inflight > 0 {
                return;
            }
            let (fd, gen) = (Fd(conn.fd), conn.gen);
            let data = |op| tag(slot, gen, op);
            match conn
                .session
                .next(&mut self.codec, &mut self.pool, self.stats)
            {
                Next::Close => {
                    conn.inflight = 1;
                    let close = opcode::Close::new(fd).build();
                    return self.push(&[close.user_data(data(Op::Close))]);
                }
                Next::Read(want) => return self.recv(slot, want),
                Next::Refuse(answer) => conn.out = answer,
                Next::Request(head) => {
                    conn.session.begin(&head);
                    let reply = self
                        .handler
                        .respond(head, &self.codec.path, self.pool.take());
                    conn.queue(reply);
                }
                Next::Wait => unreachable!("uring answers each request as it takes it"),
                Next::Write => {
                    let more = conn.file.as_ref().is_some_and(|f| f.len > 0);
                    let rest = match &conn.chunk {
                        _ if conn.pos < conn.out.len() => &conn.out[conn.pos..],
                        Some(chunk) => &chunk[conn.sent..conn.filled],
                        None => &[],
                    };
                    if !rest.is_empty() {
                        conn.inflight = 1;
                        let send = opcode::Send::new(fd, rest.as_ptr(), rest.len() as u32);
                        let send = send.flags(send_flags(more)).build();
                        return self.push(&[send.user_data(data(Op::Send))]);
                    }
                    let Some(file) = conn.file.as_mut().filter(|f| f.len > 0) else {
                        self.answered(slot);
                        continue;
                    };
                    let n = file.len.min(CHUNK as u64) as usize;
                    let chunk = conn.chunk.get_or_insert_with(|| {
                        self.chunks
                            .pop()
                            .unwrap_or_else(|| vec![0; CHUNK].into_boxed_slice())
                    });
                    let read = opcode::Read::new(Fd(file.fd()), chunk.as_mut_ptr(), n as u32);
                    let read = read.offset(file.offset).build().flags(Flags::IO_LINK);
                    let send = opcode::Send::new(fd, chunk.as_ptr(), n as u32);
                    let send = send.flags(send_flags(file.len > n as u64)).build();
                    (file.offset, file.len) = (file.offset + n as u64, file.len - n as u64);
                    (conn.filled, conn.sent, conn.inflight) = (n, 0, 2);
                    // Linked: the send starts once the whole chunk is read (a short read
                    // cancels it).
                    return self.push(&[
                        read.user_data(data(Op::Read)),
                        send.user_data(data(Op::Send)),
                    ]);
                }
            }
        }
    }

    /// The answer is written: give its buffers back, and shut our side down if the
    /// session lingers.
    fn answered(&mut self, slot: usize) {
        let conn = &mut self.conns[slot];
        self.pool.give(std::mem::take(&mut conn.out));
        self.chunks.extend(conn.chunk.take());
        (conn.pos, conn.file, conn.filled, conn.sent) = (0, None, 0, 0);
        if conn.session.answered(self.now) == Phase::Lingering {
            // SAFETY: shutdown takes any descriptor; this one is open until its close.
            unsafe { libc::shutdown(conn.fd, libc::SHUT_WR) };
        }
    }

    fn recv(&mut self, slot: usize, want: usize) {
        let conn = &mut self.conns[slot];
        let want = want.min(RECV);
        let spare = conn.session.spare(want).as_mut_ptr().cast();
        conn.inflight = 1;
        let recv = opcode::Recv::new(Fd(conn.fd), spare, want as u32).build();
        let data = tag(slot, conn.gen, Op::Recv);
        self.push(&[recv.user_data(data)]);
    }

    /// Ends a connection whatever it has in flight: the shutdown makes a pending recv
    /// see the end of the stream and a pending send fail, then the close follows.
    fn kill(&mut self, slot: usize) {
        let conn = &mut self.conns[slot];
        if conn.session.phase() != Phase::Closing {
            conn.session.close();
            // SAFETY: shutdown takes any descriptor; this one stays open until the close
            // that follows the completion of everything in flight.
            unsafe { libc::shutdown(conn.fd, libc::SHUT_RDWR) };
            self.advance(slot);
        }
    }

    /// Closes connections past their timeout (`Limits::timeout`).
    fn sweep(&mut self) {
        self.last_sweep = self.now;
        self.accept_paused = false;
        let limits = &self.codec.limits;
        let mut expired = std::mem::take(&mut self.expired);
        expired.clear();
        expired.extend(
            self.conns
                .iter()
                .filter_map(|(slot, c)| c.session.expired(limits, self.now).then_some(slot)),
        );
        for &slot in &expired {
            add(&self.stats.socket.timed_out, 1);
            self.kill(slot);
        }
        self.expired = expired;
    }

    /// On stop: cancels the accepts, ends every connection and waits until nothing is in
    /// flight. False if something still is after `DRAIN`.
    fn drain(&mut self) -> bool {
        self.stopping = true;
        let accepts = CancelBuilder::user_data(tag(0, 0, Op::Accept)).all();
        let cancel = opcode::AsyncCancel2::new(accepts).build();
        self.push(&[cancel.user_data(tag(0, 0, Op::Cancel))]);
        let slots: Vec<usize> = self.conns.iter().map(|(slot, _)| slot).collect();
        for slot in slots {
            self.kill(slot);
        }
        let deadline = Instant::now() + DRAIN;
        while !self.conns.is_empty() || self.accepts > 0 {
            if Instant::now() > deadline || self.wait().is_err() {
                return false;
            }
            self.reap();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    #[test]
    fn user_data_round_trips() {
        for op in OPS {
            let data = tag(0xab_cdef, 0xdead_beef, op);
            assert_eq!(untag(data), (0xab_cdef, 0xdead_beef, Some(op)));
        }
        assert_eq!(untag(0).2, None);
    }

    /// The SQPOLL thread is found and accounted as the engine, and the rings are counted.
    #[test]
    fn the_sqpoll_thread_is_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), vec![b'a'; 100_000]).unwrap();
        let mut config = crate::Config::new("127.0.0.1:0".parse().unwrap(), dir.path().into());
        config.mode = crate::Mode::Uring;
        let control = Arc::new(Control::new());
        let server = {
            let control = control.clone();
            std::thread::spawn(move || crate::serve(config, control))
        };
        while control.port() == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut client = TcpStream::connect(("127.0.0.1", control.port())).unwrap();
        client.write_all(b"GET /a.txt HTTP/1.0\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200") && answer.ends_with(&[b'a'; 1000]));
        control.stop();
        let doc = serde_json::to_value(server.join().unwrap().unwrap()).unwrap();
        let threads = doc["threads"].as_array().unwrap();
        let engine = threads
            .iter()
            .find(|t| t["role"] == "engine")
            .expect("engine thread");
        assert!(engine["cpu_s"].as_f64().unwrap() > 0.0, "{engine}");
        // Not pinned by the caller, the SQPOLL thread still gets a core of its own.
        if cpu::allowed().unwrap().len() >= 2 {
            assert!(engine["core"].is_u64(), "{engine}");
            assert!(threads
                .iter()
                .any(|t| t["role"] == "host" && t["core"].is_null()));
        }
        // Accepts, recv, read+send pairs for the 64 KiB chunks and the head, close.
        assert!(doc["engine"]["commands"].as_u64().unwrap() >= 7, "{doc}");
        assert!(doc["engine"]["events"].as_u64().unwrap() >= 5, "{doc}");
        assert_eq!(doc["bytes"].as_u64().unwrap(), answer.len() as u64);
    }
}
