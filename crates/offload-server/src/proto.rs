//! The socket side of the server: one epoll loop (mio, edge-triggered) that accepts,
//! reads, checks the timeouts, and writes answers with send and sendfile, for what each
//! connection's `Session` asks (parsing, refusals, keep-alive and closes are the
//! session's, shared with `uring`). In `inline` mode the host thread runs it and
//! answers each request itself; in `engine` mode the engine thread runs it and hands
//! requests to the host, whose answers come back as commands.
//!
//! In `handoff` mode connections move between two loops, the engine's and the host's:
//! a loop lets a connection go (`Dispatch::hand_over`) at accept or between two
//! answers, and the other adopts it with the bytes it had read and not yet parsed, so
//! nothing the client sent is lost or reordered.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::config::Limits;
use crate::conn::{Conn, FileRange, Flushed, Segment};
use crate::http::{self, Head, Status};
use crate::pool::Pool;
use crate::session::{self, Codec, Next, Phase};
use crate::stats::Stats;

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
/// Connections accepted per turn at most (see `accept_some`).
pub(crate) const ACCEPT_BATCH: usize = 16;
/// Under host-first priority, the socket events handled between two looks at the
/// listener (and two installments of the engine's slowdown).
const HOST_FIRST_CHUNK: usize = 16;
/// How often timeouts are checked; also the longest a `turn` sleeps.
pub const TICK: Duration = Duration::from_millis(100);

/// One socket event, copied out of mio's buffer.
#[derive(Clone, Copy)]
struct Ready {
    token: Token,
    readable: bool,
    read_closed: bool,
    writable: bool,
}

/// A connection as the application sees it: its slot and the slot's generation, so an
/// answer for a connection that has since closed is recognised and dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId {
    pub slot: u32,
    pub gen: u32,
}

/// The application's answer to one request: head and small body in `bytes`, then
/// the rest of the body, then keep the connection or close it.
#[derive(Debug)]
pub struct Reply {
    pub bytes: Vec<u8>,
    pub body: Body,
    pub keep_alive: bool,
}

impl Reply {
    /// Bytes and an optional file range: shared bytes are copied after the others (for
    /// the paths that carry no shared segment: the rings, io_uring).
    pub fn into_file_reply(self) -> (Vec<u8>, Option<FileRange>, bool) {
        let Reply {
            mut bytes,
            body,
            keep_alive,
        } = self;
        let file = match body {
            Body::None => None,
            Body::File(file) => Some(file),
            Body::Shared(buf) => {
                bytes.extend_from_slice(&buf);
                None
            }
        };
        (bytes, file, keep_alive)
    }
}

fn body_segment(body: Body) -> Option<Segment> {
    match body {
        Body::None => None,
        Body::File(file) => Some(Segment::File(file)),
        Body::Shared(buf) => Some(Segment::Shared { buf, pos: 0 }),
    }
}

/// The part of an answer's body that is not in its bytes.
#[derive(Debug)]
pub enum Body {
    None,
    /// A file range, for sendfile.
    File(FileRange),
    /// Bytes shared with the cache that stores them.
    Shared(Arc<[u8]>),
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

/// Where parsed requests go, and where connections are served.
pub trait Dispatch {
    /// Answer now (`Some`), or later through [`Proto::send`] and [`Proto::sendfile`].
    /// `class` is the connection's size class (`placement::UNCLASSED` without placement).
    fn request(
        &mut self,
        id: ConnId,
        class: u8,
        head: Head,
        path: &mut Vec<u8>,
        pool: &mut Pool,
    ) -> Option<Reply>;

    /// A request for `path` is parsed on a connection that has had `served` answers:
    /// serve it here (true) or let the connection go with the request still unread
    /// (false)? May set the connection's `class`.
    fn keep_request(&mut self, _path: &[u8], _served: u64, _class: &mut u8) -> bool {
        true
    }

    /// An answer on a connection of `class` is written; this loop's work for it was
    /// `work` (reported only when `Proto::account` is on).
    fn answered(&mut self, _class: u8, _work: Duration) {}

    /// A connection was just accepted and this loop holds `held` others: serve it here
    /// (true) or let it go to the other loop (false)?
    fn keep_new(&mut self, _held: usize) -> bool {
        true
    }

    /// A connection's `served`-th answer is written: let it go to the other loop now?
    fn let_go(&mut self, _served: u64) -> bool {
        false
    }

    /// Takes a connection this loop let go (after `keep_new` said false or `let_go`
    /// true), to pass it to the other loop. Without one, it is closed.
    fn hand_over(&mut self, conn: Conn) {
        drop(conn);
    }

    /// A point between two pieces of work (see `HOST_FIRST_CHUNK`).
    fn pace(&mut self) {}
}

pub struct Proto {
    poll: Poll,
    events: Events,
    ready: Vec<Ready>,
    /// None for a loop that only serves connections handed to it.
    listener: Option<TcpListener>,
    conns: Slab<Conn>,
    /// Accept before socket events and between chunks of them (seed 004's host-first
    /// order: the connections the host waits for go before the engine's own work).
    pub host_first: bool,
    /// Time the work done for each connection and charge it to its answers
    /// (`Dispatch::answered`): placement's per-class accounts.
    pub account: bool,
    /// The host thread's loop: its blocking waits that return events are the host's
    /// wake-ups (`stats::App::wakeups`), and all its waits that do its turns
    /// (`stats::App::turns`). The engine counts its own (`engine_loop`).
    pub counts_wakeups: bool,
    /// Accounting: when the work not yet charged began.
    mark: Instant,
    next_gen: u32,
    pub pool: Pool,
    codec: Codec,
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
        listener: Option<TcpListener>,
        limits: Limits,
        stats: Arc<Stats>,
        open_fds: Option<Arc<[AtomicI32]>>,
    ) -> io::Result<Proto> {
        let now = Instant::now();
        let mut proto = Proto {
            poll: Poll::new()?,
            events: Events::with_capacity(1024),
            ready: Vec::with_capacity(1024),
            listener: None,
            conns: Slab::with_capacity(limits.max_conns.min(1 << 16)),
            host_first: false,
            account: false,
            counts_wakeups: false,
            mark: now,
            next_gen: 0,
            pool: Pool::default(),
            codec: Codec::new(limits),
            stats,
            open_fds,
            now,
            last_sweep: now,
            sent: 0,
            accept_pending: false,
        };
        if let Some(listener) = listener {
            proto.listen(listener)?;
        }
        Ok(proto)
    }

    /// Starts accepting on `listener` (a host taking over from a failed engine).
    pub fn listen(&mut self, mut listener: TcpListener) -> io::Result<()> {
        self.poll
            .registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        self.listener = Some(listener);
        self.accept_pending = true; // connections may be waiting already
        Ok(())
    }

    /// Open connections served by this loop.
    pub fn held(&self) -> usize {
        self.conns.len()
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
        // A wait that may block (not a busy loop's zero-timeout poll) and returned
        // events, also ones ready at once: each is an epoll_wait and a turn begun.
        // Every turn with events counts as a turn, blocking or not.
        if self.counts_wakeups && !self.events.is_empty() {
            self.stats.app.turns.fetch_add(1, Ordering::Relaxed);
            if !timeout.is_zero() {
                self.stats.app.wakeups.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.now = Instant::now();
        // Copied out so the handlers below can borrow `self`; the vector is reused.
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        ready.extend(self.events.iter().map(|e| Ready {
            token: e.token(),
            readable: e.is_readable() || e.is_read_closed() || e.is_error(),
            read_closed: e.is_read_closed() || e.is_error(),
            writable: e.is_writable() || e.is_write_closed(),
        }));
        let mut n = ready.len();
        let host_first = self.host_first && self.listener.is_some();
        for (i, &ready) in ready.iter().enumerate() {
            if host_first && i % HOST_FIRST_CHUNK == 0 {
                if i > 0 {
                    app.pace();
                }
                n += self.accept_some(app);
            }
            match ready.token {
                LISTENER => self.accept_pending = true,
                WAKER => {}
                Token(slot) => {
                    if let Some(conn) = self.conns.get_mut(slot) {
                        conn.readable |= ready.readable;
                        conn.read_closed |= ready.read_closed;
                        conn.writable |= ready.writable;
                        self.advance(slot, app);
                    }
                }
            }
        }
        self.ready = ready;
        // Otherwise new connections after the ones already open, which get served first.
        if self.accept_pending {
            n += self.accept_some(app);
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

    /// Queues a whole answer on `id`.
    pub fn reply<D: Dispatch>(&mut self, app: &mut D, id: ConnId, reply: Reply) {
        if !self.live(id) {
            return self.pool.give(reply.bytes);
        }
        queue(&mut self.conns[id.slot as usize], reply);
        self.now = Instant::now();
        self.advance(id.slot as usize, app);
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
        if then != Then::More {
            conn.session.answer(then == Then::KeepAlive);
            self.now = Instant::now();
            self.advance(slot, app);
        }
    }

    /// Accepts up to `ACCEPT_BATCH` connections; returns how many calls it made. Under overload the rest wait in the
    /// kernel's backlog (and beyond it the kernel drops SYNs, which clients retry):
    /// accepting more than can be served would spend the loop on connections whose
    /// clients give up, and goodput would collapse (receive livelock).
    fn accept_some<D: Dispatch>(&mut self, app: &mut D) -> usize {
        for accepted in 0..ACCEPT_BATCH {
            let Some(listener) = &self.listener else {
                return 0; // a loop that only adopts connections
            };
            let began = self.account.then(Instant::now);
            match listener.accept() {
                Ok((stream, _)) => {
                    self.stats.socket.accepted.fetch_add(1, Ordering::Relaxed);
                    let conn = Conn::new(stream, 0, self.pool.take(), self.now);
                    if app.keep_new(self.conns.len()) {
                        let slot = self.attach(conn);
                        if let (Some(slot), Some(began)) = (slot, began) {
                            self.conns[slot].work = began.elapsed(); // accepting it is its work
                        }
                    } else {
                        app.hand_over(conn);
                    }
                }
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

    /// Takes a connection another loop let go, with the bytes it had read and not
    /// parsed, and serves what is already there.
    pub fn adopt<D: Dispatch>(&mut self, app: &mut D, mut conn: Conn) {
        self.now = Instant::now();
        // Whatever arrived while it moved: one read finds it (or WouldBlock).
        conn.readable = true;
        conn.writable = true;
        conn.session.since = self.now;
        if let Some(slot) = self.attach(conn) {
            if self.account {
                // The other loop's work was its own; registering it is this loop's.
                self.conns[slot].work = self.now.elapsed();
            }
            self.advance(slot, app);
        }
    }

    /// Registers a connection with this loop (or answers 503 when `max_conns` are
    /// open); returns its slot.
    fn attach(&mut self, mut conn: Conn) -> Option<usize> {
        // TCP_NODELAY comes from the listener (see `server::bind`).
        if self.conns.len() >= self.codec.limits.max_conns {
            refuse(conn.fd(), &mut self.codec.date, &mut self.pool, &self.stats);
            conn.release(&mut self.pool); // closes it
            return None;
        }
        let entry = self.conns.vacant_entry();
        let slot = entry.key();
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut conn.stream, Token(slot), interest)
        {
            self.stats.note_error(&e);
            conn.release(&mut self.pool);
            return None;
        }
        if let Some(fds) = &self.open_fds {
            fds[slot].store(conn.fd(), Ordering::Release);
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        conn.gen = self.next_gen;
        entry.insert(conn);
        Some(slot)
    }

    /// Reports an answer's work, up to now, under `Proto::account`.
    fn charge<D: Dispatch>(&mut self, app: &mut D, class: u8, work: Duration) {
        if self.account {
            app.answered(class, work + lap(&mut self.mark));
        }
    }

    /// Takes a connection out of this loop and hands it over to the other one.
    fn detach<D: Dispatch>(&mut self, slot: usize, app: &mut D) {
        let mut conn = self.conns.remove(slot);
        if self.account {
            conn.work += lap(&mut self.mark); // the work of letting it go: the passer's
        }
        if let Some(fds) = &self.open_fds {
            fds[slot].store(-1, Ordering::Release);
        }
        match self.poll.registry().deregister(&mut conn.stream) {
            Ok(()) => app.hand_over(conn),
            Err(e) => {
                self.stats.note_error(&e);
                conn.release(&mut self.pool);
            }
        }
    }

    /// Moves a connection on as far as it can go without waiting.
    fn advance<D: Dispatch>(&mut self, slot: usize, app: &mut D) {
        if !self.account {
            return self.step(slot, app);
        }
        self.mark = Instant::now();
        self.step(slot, app);
        if let Some(conn) = self.conns.get_mut(slot) {
            conn.work += lap(&mut self.mark);
        }
    }

    fn step<D: Dispatch>(&mut self, slot: usize, app: &mut D) {
        loop {
            let Some(conn) = self.conns.get_mut(slot) else {
                return;
            };
            match conn
                .session
                .next(&mut self.codec, &mut self.pool, &self.stats)
            {
                Next::Wait => return,
                Next::Close => return self.drop_conn(slot),
                Next::Read(want) => {
                    if !conn.readable {
                        return;
                    }
                    match conn.fill(want, self.now) {
                        Ok(true) => {}
                        Ok(false) => return,
                        Err(_) => return self.drop_conn(slot),
                    }
                }
                Next::Refuse(buf) => conn.out.push_back(Segment::Bytes { buf, pos: 0 }),
                Next::Request(head) => {
                    let path = &self.codec.path;
                    if !app.keep_request(path, conn.session.served, &mut conn.class) {
                        return self.detach(slot, app);
                    }
                    conn.session.begin(&head);
                    let id = ConnId {
                        slot: slot as u32,
                        gen: conn.gen,
                    };
                    let (class, path, pool) = (conn.class, &mut self.codec.path, &mut self.pool);
                    if let Some(reply) = app.request(id, class, head, path, pool) {
                        queue(conn, reply);
                    }
                }
                Next::Write => {
                    if !conn.writable {
                        return;
                    }
                    let before = self.sent;
                    match conn.flush(&mut self.pool, &mut self.sent) {
                        Err(_) => return self.drop_conn(slot),
                        Ok(Flushed::Blocked) => {
                            if self.sent > before {
                                conn.session.since = self.now;
                            }
                            return;
                        }
                        Ok(Flushed::Done) => {
                            let (class, work) = (conn.class, std::mem::take(&mut conn.work));
                            match conn.session.answered(self.now) {
                                Phase::Reading => {
                                    let served = conn.session.served;
                                    self.charge(app, class, work);
                                    if app.let_go(served) {
                                        return self.detach(slot, app);
                                    }
                                }
                                Phase::Lingering => {
                                    // SAFETY: shutdown takes any descriptor; this one is open.
                                    unsafe { libc::shutdown(conn.fd(), libc::SHUT_WR) };
                                    self.charge(app, class, work);
                                }
                                _ => {
                                    self.drop_conn(slot); // the close is part of the answer
                                    return self.charge(app, class, work);
                                }
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
        let limits = &self.codec.limits;
        let expired: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.session.expired(limits, self.now))
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

/// Queues a whole answer on a connection.
fn queue(conn: &mut Conn, reply: Reply) {
    conn.out.push_back(Segment::Bytes {
        buf: reply.bytes,
        pos: 0,
    });
    conn.out.extend(body_segment(reply.body));
    conn.session.answer(reply.keep_alive);
}

/// The time since `mark`, and `mark` moved to now.
fn lap(mark: &mut Instant) -> Duration {
    let now = Instant::now();
    let since = now.duration_since(*mark);
    *mark = now;
    since
}

/// Tells a client over the connection limit to come back later, without waiting on it
/// (a short or failed write only loses this courtesy answer), and counts it. The caller
/// closes the connection.
pub(crate) fn refuse(fd: RawFd, date: &mut http::Date, pool: &mut Pool, stats: &Stats) {
    let buf = session::refusal(Status::UNAVAILABLE, date, pool, stats);
    let flags = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
    // SAFETY: `buf` is live and send reads at most its length.
    unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) };
    pool.give(buf);
    stats.socket.refused.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::config::Mode;

    /// Records the order in which the loop calls its application.
    #[derive(Default)]
    struct Order(Vec<&'static str>);

    impl Dispatch for Order {
        fn request(
            &mut self,
            _: ConnId,
            _: u8,
            _: Head,
            _: &mut Vec<u8>,
            _: &mut Pool,
        ) -> Option<Reply> {
            self.0.push("request");
            None
        }

        fn keep_new(&mut self, _: usize) -> bool {
            self.0.push("accept");
            true
        }
    }

    /// One open connection with a request waiting and one new connection in the
    /// backlog: which does one turn serve first?
    fn first_served(host_first: bool) -> Vec<&'static str> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(Stats::new(Mode::Handoff, addr.port()));
        let listener = Some(TcpListener::from_std(listener));
        let mut proto = Proto::new(listener, Limits::default(), stats, None).unwrap();
        proto.host_first = host_first;
        let mut app = Order::default();
        let mut open = std::net::TcpStream::connect(addr).unwrap();
        while proto.held() == 0 {
            proto.turn(&mut app, Duration::from_millis(10)).unwrap();
        }
        app.0.clear();
        open.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let _new = std::net::TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(50)); // both are ready in the kernel
        proto.turn(&mut app, Duration::from_millis(10)).unwrap();
        app.0
    }

    #[test]
    fn host_first_accepts_before_serving_open_connections_and_fcfs_after() {
        assert_eq!(first_served(true), ["accept", "request"]);
        assert_eq!(first_served(false), ["request", "accept"]);
    }
}
