//! The socket side of the server: one epoll loop (mio, edge-triggered) that accepts,
//! reads, parses, enforces the limits and timeouts, and writes answers with send and
//! sendfile. In `inline` mode the host thread runs it and answers each request itself;
//! in `engine` mode the engine thread runs it and hands requests to the host, whose
//! answers come back as commands.
//!
//! A connection has at most one request with the application at a time; pipelined
//! requests wait, parsed in order as each answer is written, so answers keep their order.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::config::{Awaiting, Limits};
use crate::conn::{Conn, FileRange, Flushed, Segment, State};
use crate::http::{self, Head, Parsed, Status};
use crate::pool::Pool;
use crate::stats::Stats;

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
/// Connections accepted per turn at most (see `accept_some`).
pub(crate) const ACCEPT_BATCH: usize = 16;
/// How often timeouts are checked; also the longest a `turn` sleeps.
pub const TICK: Duration = Duration::from_millis(100);

/// A connection as the application sees it: its slot and the slot's generation, so an
/// answer for a connection that has since closed is recognised and dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnId {
    pub slot: u32,
    pub gen: u32,
}

/// The application's answer to one request: head and small body in `bytes`, then
/// optionally a file range, then keep the connection or close it.
#[derive(Debug)]
pub struct Reply {
    pub bytes: Vec<u8>,
    pub file: Option<FileRange>,
    pub keep_alive: bool,
}

/// What follows a piece of an answer sent by command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// More pieces of this answer follow.
    More,
    /// The answer is complete; read the next request.
    KeepAlive,
    /// The answer is complete; close once it is written.
    Close,
}

/// Where parsed requests go.
pub trait Dispatch {
    /// Answer now (`Some`), or later through [`Proto::send`] and [`Proto::sendfile`].
    fn request(
        &mut self,
        id: ConnId,
        head: Head,
        path: &mut Vec<u8>,
        pool: &mut Pool,
    ) -> Option<Reply>;
}

pub struct Proto {
    poll: Poll,
    events: Events,
    ready: Vec<(Token, bool, bool)>,
    listener: TcpListener,
    conns: Slab<Conn>,
    next_gen: u32,
    pub pool: Pool,
    limits: Limits,
    date: http::Date,
    path: Vec<u8>,
    stats: Arc<Stats>,
    /// Descriptor of each slot's connection (-1: none), for a host that must shut down
    /// an engine's connections after taking over from it.
    open_fds: Option<Arc<[AtomicI32]>>,
    now: Instant,
    last_sweep: Instant,
    sent: u64,
    /// The listener has connections to accept (an event came, or the last batch
    /// ended before the backlog was empty).
    accept_pending: bool,
}

impl Proto {
    pub fn new(
        mut listener: TcpListener,
        limits: Limits,
        stats: Arc<Stats>,
        open_fds: Option<Arc<[AtomicI32]>>,
    ) -> io::Result<Proto> {
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let now = Instant::now();
        Ok(Proto {
            poll,
            events: Events::with_capacity(1024),
            ready: Vec::with_capacity(1024),
            listener,
            conns: Slab::with_capacity(limits.max_conns.min(1 << 16)),
            next_gen: 0,
            pool: Pool::default(),
            limits,
            date: http::Date::new(),
            path: Vec::new(),
            stats,
            open_fds,
            now,
            last_sweep: now,
            sent: 0,
            accept_pending: false,
        })
    }

    /// A waker that interrupts this loop's sleep (one per loop).
    pub fn waker(&self) -> io::Result<Waker> {
        Waker::new(self.poll.registry(), WAKER)
    }

    /// One round: wait up to `timeout` for socket events, handle them, and check the
    /// timeouts when due. Returns how many events there were.
    pub fn turn<D: Dispatch>(&mut self, app: &mut D, timeout: Duration) -> io::Result<usize> {
        // Connections left in the backlog by the last turn are work: do not sleep.
        let timeout = if self.accept_pending {
            Duration::ZERO
        } else {
            timeout
        };
        match self.poll.poll(&mut self.events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
            Err(e) => return Err(e),
        }
        self.now = Instant::now();
        // Copied out so the handlers below can borrow `self`; the vector is reused.
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        ready.extend(self.events.iter().map(|e| {
            let readable = e.is_readable() || e.is_read_closed() || e.is_error();
            (e.token(), readable, e.is_writable() || e.is_write_closed())
        }));
        for &(token, readable, writable) in &ready {
            match token {
                LISTENER => self.accept_pending = true,
                WAKER => {}
                Token(slot) => {
                    if let Some(conn) = self.conns.get_mut(slot) {
                        conn.readable |= readable;
                        conn.writable |= writable;
                        self.advance(slot, app);
                    }
                }
            }
        }
        let mut n = ready.len();
        self.ready = ready;
        // New connections after the ones already open, which get served first.
        if self.accept_pending {
            n += self.accept_some();
        }
        if self.now.duration_since(self.last_sweep) >= TICK {
            self.sweep();
        }
        self.publish();
        Ok(n)
    }

    /// Adds bytes to the answer on `id`; a stale id is ignored.
    pub fn send<D: Dispatch>(&mut self, app: &mut D, id: ConnId, buf: Vec<u8>, then: Then) {
        self.answer(app, id, Segment::Bytes { buf, pos: 0 }, then);
    }

    /// Adds a file range to the answer on `id`.
    pub fn sendfile<D: Dispatch>(&mut self, app: &mut D, id: ConnId, file: FileRange, then: Then) {
        self.answer(app, id, Segment::File(file), then);
    }

    fn live(&self, id: ConnId) -> bool {
        self.conns
            .get(id.slot as usize)
            .is_some_and(|c| c.gen == id.gen)
    }

    fn answer<D: Dispatch>(&mut self, app: &mut D, id: ConnId, segment: Segment, then: Then) {
        if !self.live(id) {
            if let Segment::Bytes { buf, .. } = segment {
                self.pool.give(buf);
            }
            return;
        }
        let slot = id.slot as usize;
        let conn = &mut self.conns[slot];
        conn.out.push_back(segment);
        match then {
            Then::More => {}
            Then::KeepAlive => conn.state = State::Draining { keep_alive: true },
            Then::Close => conn.state = State::Draining { keep_alive: false },
        }
        if then != Then::More {
            self.now = Instant::now();
            self.advance(slot, app);
        }
    }

    /// Accepts up to `ACCEPT_BATCH` connections; returns how many calls it made. Under overload the rest wait in the
    /// kernel's backlog (and beyond it the kernel drops SYNs, which clients retry):
    /// accepting more than can be served would spend the loop on connections whose
    /// clients give up, and goodput would collapse (receive livelock).
    fn accept_some(&mut self) -> usize {
        for accepted in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_pending = false;
                    return accepted;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) => {
                    // Out of descriptors or memory: the connection stays in the
                    // backlog and is taken on the next event.
                    self.stats.note_error(&e);
                    self.accept_pending = false;
                    return accepted;
                }
            }
        }
        ACCEPT_BATCH
    }

    fn admit(&mut self, mut stream: TcpStream) {
        // TCP_NODELAY comes from the listener (see `server::bind`).
        if self.conns.len() >= self.limits.max_conns {
            let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
            refuse(fd, &mut self.date, &mut self.pool, &self.stats);
            return; // dropping the stream closes it
        }
        let entry = self.conns.vacant_entry();
        let slot = entry.key();
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, Token(slot), interest)
        {
            self.stats.note_error(&e);
            return;
        }
        if let Some(fds) = &self.open_fds {
            fds[slot].store(std::os::fd::AsRawFd::as_raw_fd(&stream), Ordering::Release);
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        entry.insert(Conn::new(stream, self.next_gen, self.pool.take(), self.now));
        self.stats.socket.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// Moves a connection on as far as it can go without waiting.
    fn advance<D: Dispatch>(&mut self, slot: usize, app: &mut D) {
        loop {
            let Some(conn) = self.conns.get_mut(slot) else {
                return;
            };
            match conn.state {
                State::Waiting => return,
                State::Draining { keep_alive } => {
                    if !conn.writable {
                        return;
                    }
                    let before = self.sent;
                    match conn.flush(&mut self.pool, &mut self.sent) {
                        Err(_) => return self.drop_conn(slot),
                        Ok(Flushed::Blocked) => {
                            if self.sent > before {
                                conn.since = self.now;
                            }
                            return;
                        }
                        Ok(Flushed::Done) if !keep_alive => return self.drop_conn(slot),
                        Ok(Flushed::Done) => {
                            conn.state = State::Reading;
                            conn.served += 1;
                            conn.since = self.now;
                        }
                    }
                }
                State::Reading => {
                    if !conn.pending().is_empty() {
                        match http::parse(conn.pending(), &self.limits, &mut self.path) {
                            Parsed::Partial => {}
                            Parsed::Reject(status) => {
                                let mut buf = self.pool.take();
                                http::response::error(
                                    &mut buf,
                                    status,
                                    false,
                                    false,
                                    self.date.now(),
                                );
                                conn.out.push_back(Segment::Bytes { buf, pos: 0 });
                                conn.state = State::Draining { keep_alive: false };
                                conn.start = conn.rbuf.len();
                                self.stats.count_status(status);
                                continue;
                            }
                            Parsed::Done(head) => {
                                conn.start += head.len;
                                conn.state = State::Waiting;
                                let id = ConnId {
                                    slot: slot as u32,
                                    gen: conn.gen,
                                };
                                if let Some(reply) =
                                    app.request(id, head, &mut self.path, &mut self.pool)
                                {
                                    let conn = &mut self.conns[slot];
                                    conn.out.push_back(Segment::Bytes {
                                        buf: reply.bytes,
                                        pos: 0,
                                    });
                                    if let Some(file) = reply.file {
                                        conn.out.push_back(Segment::File(file));
                                    }
                                    conn.state = State::Draining {
                                        keep_alive: reply.keep_alive,
                                    };
                                }
                                continue;
                            }
                        }
                    }
                    if !conn.readable {
                        return;
                    }
                    let had = conn.pending().len();
                    match conn.fill(self.limits.max_header_bytes + 1) {
                        Err(_) | Ok(false) => return self.drop_conn(slot),
                        Ok(true) if conn.pending().len() == had => return,
                        Ok(true) => {
                            if had == 0 {
                                conn.since = self.now; // a request starts: header timeout
                            }
                        }
                    }
                }
            }
        }
    }

    /// Closes connections past their timeout (`Limits::timeout`).
    fn sweep(&mut self) {
        self.last_sweep = self.now;
        let expired: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                let awaiting = match c.state {
                    State::Waiting => Awaiting::Server,
                    State::Reading => Awaiting::Head {
                        between: c.pending().is_empty() && c.served > 0,
                    },
                    State::Draining { .. } => Awaiting::ClientRead,
                };
                let limit = self.limits.timeout(awaiting);
                limit.is_some_and(|limit| self.now.duration_since(c.since) > limit)
            })
            .map(|(slot, _)| slot)
            .collect();
        for slot in expired {
            self.stats.socket.timed_out.fetch_add(1, Ordering::Relaxed);
            self.drop_conn(slot);
        }
    }

    fn drop_conn(&mut self, slot: usize) {
        let conn = self.conns.remove(slot);
        if let Some(fds) = &self.open_fds {
            fds[slot].store(-1, Ordering::Release);
        }
        // Closing the socket also removes it from the epoll set.
        conn.release(&mut self.pool);
    }

    fn publish(&mut self) {
        if self.sent > 0 {
            self.stats
                .socket
                .bytes
                .fetch_add(self.sent, Ordering::Relaxed);
            self.sent = 0;
        }
    }
}

impl Drop for Proto {
    /// Connections close with the loop (also when an engine thread unwinds): their
    /// descriptors must leave the table first, or a host taking over could shut down
    /// whatever reuses the numbers.
    fn drop(&mut self) {
        if let Some(fds) = &self.open_fds {
            for (slot, _) in self.conns.iter() {
                fds[slot].store(-1, Ordering::Release);
            }
        }
    }
}

/// Tells a client over the connection limit to come back later, without waiting on it
/// (a short or failed write only loses this courtesy answer), and counts it. The caller
/// closes the connection.
pub(crate) fn refuse(fd: RawFd, date: &mut http::Date, pool: &mut Pool, stats: &Stats) {
    let mut buf = pool.take();
    http::response::error(&mut buf, Status::UNAVAILABLE, false, false, date.now());
    let flags = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
    // SAFETY: `buf` is live and send reads at most its length.
    unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) };
    pool.give(buf);
    stats.socket.refused.fetch_add(1, Ordering::Relaxed);
    stats.count_status(Status::UNAVAILABLE);
}
