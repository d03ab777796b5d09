//! One connection slot: a socket, the request in flight on it, and the response being
//! read. A slot serves one lane at a time (see `lanes`), so at most one request is in
//! flight on it (no pipelining), and its buffers live as long as the slot: nothing is
//! allocated per request.
//!
//! Phases of a request: `Connecting` (only when no suitable connection is open) →
//! `Writing` → `Reading` → back to `Idle`. Sockets are registered edge-triggered for
//! both directions once, when created, and never re-registered.
//!
//! Edge-triggered readiness must be drained, but a read that returns less than asked
//! for has drained the socket (epoll(7), "for stream-oriented files"), so one read per
//! response is the usual cost, as in wrk. A readable edge that comes while the slot is
//! not reading is remembered (`readable`) and acted on when it starts to.
//!
//! With `Options::rcvlowat` the socket also carries a mark (`SO_RCVLOWAT`): readiness is
//! reported only once that many bytes of the answer are there. The mark never exceeds
//! the expected body size, so a correct answer always reaches it, and it is dropped as
//! soon as the rest of an answer might fall short of it (a partial read, or a tick
//! with nothing read).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use sha2::{Digest, Sha256};

use crate::body::{Body, Fed};
use crate::error::ErrorKind;
use crate::http::{parse_head, RequestBytes};
use crate::lanes::Req;
use crate::options::Verify;
use crate::plan::Object;
use crate::timer::Clock;

/// A response head longer than this is refused as unparseable.
const MAX_HEAD: usize = 64 * 1024;
/// Reads per readiness event before other connections get their turn.
const MAX_READS: usize = 8;
/// Most body bytes one discarding read asks the kernel to drop (`Options::discard`).
const MAX_DISCARD: u64 = 1 << 20;

/// What a slot needs besides itself: the run's read-only tables and the thread's
/// receive buffer (bodies stream through it; only split heads are copied out).
pub(crate) struct Io<'a> {
    pub registry: &'a Registry,
    pub addr: SocketAddr,
    pub requests: &'a RequestBytes,
    pub reqs: &'a [Req],
    pub objects: &'a [Object],
    pub verify: Verify,
    pub head_request: bool,
    /// `Options::discard`.
    pub discard: bool,
    /// `Options::rcvlowat`.
    pub rcvlowat: u32,
    pub scratch: &'a mut [u8],
    pub clock: Clock,
}

/// Readiness reported for a slot's socket.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ready {
    pub readable: bool,
    pub writable: bool,
    /// The peer closed its side or the connection failed (RDHUP, HUP, ERR).
    pub closed: bool,
}

/// What happened to the request in flight.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Waiting for the socket.
    Pending,
    /// More to read than one turn allows: call `resume` again soon.
    Again,
    /// The request ended, correctly or with an error.
    Done(Result<(), ErrorKind>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Idle,
    Connecting,
    Writing,
    Reading,
}

#[derive(Debug)]
pub(crate) struct Slot {
    // The lane this slot serves (kept here for the event loop).
    pub lane: u32,
    /// Next position in the lane's requests.
    pub pos: u32,
    /// Bumped when a wake-up is scheduled, so stale ones are recognised.
    pub gen: u32,
    pub active: bool,
    /// The request waiting for its start time, when there is one.
    pub waiting: Option<u32>,

    sock: Option<TcpStream>,
    /// Plan connection id the open socket carries.
    sock_conn: u64,
    readable: bool,
    /// The open socket's `SO_RCVLOWAT` (1, the kernel's default, when none was set).
    mark: u32,
    /// The peer closed or reset: read on to the end, and never reuse the socket.
    peer_closed: bool,
    pub phase: Phase,

    // The request in flight.
    pub req: u32,
    pub intended: u64,
    pub started: u64,
    connect_start: u64,
    pub connect_ns: Option<u64>,
    pub first_byte: Option<u64>,
    written: usize,

    // Its response.
    head: Vec<u8>,
    head_done: bool,
    body: Body,
    pub status: u16,
    content_length: Option<u64>,
    pub bytes: u64,
    hasher: Option<Sha256>,
    close_after: bool,
}

impl Slot {
    pub(crate) fn new() -> Slot {
        Slot {
            lane: 0,
            pos: 0,
            gen: 0,
            active: false,
            waiting: None,
            sock: None,
            sock_conn: 0,
            readable: false,
            mark: 1,
            peer_closed: false,
            phase: Phase::Idle,
            req: 0,
            intended: 0,
            started: 0,
            connect_start: 0,
            connect_ns: None,
            first_byte: None,
            written: 0,
            head: Vec::new(),
            head_done: false,
            body: Body::Empty,
            status: 0,
            content_length: None,
            bytes: 0,
            hasher: None,
            close_after: false,
        }
    }

    /// A request is in flight (so its timeout runs).
    pub(crate) fn busy(&self) -> bool {
        self.phase != Phase::Idle
    }

    /// Starts request `r` at `now`: on the open connection if it carries `r`'s
    /// connection, else on a new one.
    pub(crate) fn start(
        &mut self,
        io: &mut Io,
        token: Token,
        r: u32,
        intended: u64,
        now: u64,
    ) -> Step {
        let req = io.reqs[r as usize];
        self.req = r;
        self.intended = intended;
        self.started = now;
        self.connect_ns = None;
        self.first_byte = None;
        self.written = 0;
        self.head.clear();
        self.head_done = false;
        self.body = Body::Empty;
        self.status = 0;
        self.content_length = None;
        self.bytes = 0;
        let object = &io.objects[req.object as usize];
        // A HEAD response has no body to hash: its Content-Length is what is checked.
        let hash = io.verify == Verify::Checksum && object.sha256.is_some() && !io.head_request;
        self.hasher = hash.then(Sha256::new);
        self.close_after = !req.keep_alive;
        let mark = if io.rcvlowat > 1 && !io.head_request && object.size > 0 {
            object.size.min(u64::from(io.rcvlowat)) as u32
        } else {
            1
        };
        if self.sock.is_some() && self.sock_conn == req.conn {
            if let Err(kind) = self.set_mark(mark) {
                return Step::Done(Err(kind));
            }
            self.phase = Phase::Writing;
            return self.write(io, now);
        }
        self.close();
        let mut sock = match TcpStream::connect(io.addr) {
            Ok(s) => s,
            Err(e) => return Step::Done(Err(ErrorKind::of_connect(&e))),
        };
        // Requests are one small write each: send them now, not after Nagle's delay.
        let _ = sock.set_nodelay(true);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = io.registry.register(&mut sock, token, interest) {
            return Step::Done(Err(ErrorKind::of_io(&e)));
        }
        self.sock = Some(sock);
        self.sock_conn = req.conn;
        if let Err(kind) = self.set_mark(mark) {
            return Step::Done(Err(kind));
        }
        self.connect_start = now;
        self.phase = Phase::Connecting;
        // Over loopback the kernel has usually finished the handshake by the time
        // connect() returns. Its readiness event would reach this socket only after the
        // rest of the loop's batch, milliseconds later behind a burst of answers, and
        // set-up would time the generator's loop, not the handshake.
        match self.connected() {
            Ok(true) => {
                let at = io.clock.now();
                self.connect_ns = Some(at - now);
                self.phase = Phase::Writing;
                self.write(io, at)
            }
            Ok(false) => Step::Pending,
            Err(kind) => Step::Done(Err(kind)),
        }
    }

    /// The socket reported readiness (or `resume` after `Step::Again`).
    pub(crate) fn ready(&mut self, io: &mut Io, ready: Ready, now: u64) -> Step {
        if self.sock.is_none() {
            return Step::Pending; // a stale event of a socket already closed
        }
        self.readable |= ready.readable;
        self.peer_closed |= ready.closed;
        match self.phase {
            Phase::Idle => {
                if self.readable {
                    self.drain_idle(io);
                }
                Step::Pending
            }
            Phase::Connecting => match self.connected() {
                Ok(false) => Step::Pending,
                Ok(true) => {
                    self.connect_ns = Some(now - self.connect_start);
                    self.phase = Phase::Writing;
                    self.write(io, now)
                }
                Err(kind) => Step::Done(Err(kind)),
            },
            Phase::Writing if ready.writable => self.write(io, now),
            Phase::Writing => Step::Pending,
            Phase::Reading if self.readable => self.read(io, now),
            Phase::Reading => Step::Pending,
        }
    }

    /// Ends the request in flight. `in_sync`: the response was framed correctly, so
    /// the connection can carry another request (false after a transport or framing
    /// error). It is closed too when either side asked for it or the peer is gone.
    /// The slot is idle afterwards.
    pub(crate) fn end(&mut self, in_sync: bool) {
        if !in_sync || self.close_after || self.peer_closed {
            self.close();
        }
        self.phase = Phase::Idle;
    }

    pub(crate) fn close(&mut self) {
        // Dropping the socket closes it, which also takes it out of the epoll set.
        self.sock = None;
        self.readable = false;
        self.mark = 1;
        self.peer_closed = false;
    }

    /// Sets the socket's mark. A mark that cannot be raised is left as it was; one
    /// that cannot be lowered could hold a shorter answer back, so that fails the
    /// request.
    fn set_mark(&mut self, mark: u32) -> Result<(), ErrorKind> {
        if mark == self.mark {
            return Ok(());
        }
        let sock = self.sock.as_ref().expect("a mark needs a socket");
        let value = mark as libc::c_int;
        // SAFETY: a valid descriptor, and an option value of the size given.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            self.mark = mark;
        } else if mark < self.mark {
            return Err(ErrorKind::of_io(&io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Called every tick: a request still waiting for its first byte after `after_ns`
    /// may have a shorter answer than its mark waiting (an error page), which the kernel
    /// does not report. Drops the mark; true when the slot should be read now.
    pub(crate) fn mark_overdue(&mut self, now: u64, after_ns: u64) -> Result<bool, ErrorKind> {
        let overdue = self.phase == Phase::Reading
            && self.mark > 1
            && self.first_byte.is_none()
            && now.saturating_sub(self.started) >= after_ns;
        if overdue {
            self.set_mark(1)?;
            self.readable = true;
        }
        Ok(overdue)
    }

    /// Whether a non-blocking connect finished: Ok(false) while it is in progress.
    fn connected(&mut self) -> Result<bool, ErrorKind> {
        let sock = self.sock.as_ref().expect("connecting has a socket");
        match sock.take_error() {
            Ok(Some(e)) | Err(e) => return Err(ErrorKind::of_connect(&e)),
            Ok(None) => {}
        }
        match sock.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(ErrorKind::of_connect(&e)),
        }
    }

    fn write(&mut self, io: &mut Io, now: u64) -> Step {
        let req = io.reqs[self.req as usize];
        let bytes = io.requests.get(req.object, req.form);
        let sock = self.sock.as_mut().expect("writing has a socket");
        while self.written < bytes.len() {
            match sock.write(&bytes[self.written..]) {
                Ok(0) => return Step::Done(Err(ErrorKind::Reset)),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Step::Done(Err(ErrorKind::of_io(&e))),
            }
        }
        self.phase = Phase::Reading;
        if self.readable {
            self.read(io, now)
        } else {
            Step::Pending
        }
    }

    fn read(&mut self, io: &mut Io, now: u64) -> Step {
        for _ in 0..MAX_READS {
            let sock = self.sock.as_mut().expect("reading has a socket");
            // Past the head of a body of known length, a discarding run drops the
            // body's bytes in the kernel instead of copying them here: no more than the
            // body still owes, so nothing of a later response is lost.
            let dropping = match self.body {
                Body::Length(left) if io.discard && self.head_done && left > 0 => {
                    Some(left.min(MAX_DISCARD) as usize)
                }
                _ => None,
            };
            let got = match dropping {
                Some(len) => discard(sock, len),
                None => sock.read(io.scratch),
            };
            let asked = dropping.unwrap_or(io.scratch.len());
            let n = match got {
                Ok(0) => return self.eof(io),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.readable = false;
                    return Step::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Step::Done(Err(ErrorKind::of_io(&e))),
            };
            self.first_byte.get_or_insert(now);
            // A short read drained the socket, unless the peer's FIN (or an error) came
            // with the data: then no new edge will tell, so read on to find it.
            let drained = n < asked && !self.peer_closed;
            if drained {
                self.readable = false;
            }
            let taken = match dropping {
                Some(_) => Ok(self.skip(n as u64)),
                None => self.consume(&io.scratch[..n], io.head_request),
            };
            match taken {
                Ok(false) if drained => {
                    // The rest may be shorter than the mark: keep it only when the body
                    // still owed is known to reach it.
                    let owed = match self.body {
                        Body::Length(left) if self.head_done => left,
                        _ => 0,
                    };
                    if owed < u64::from(self.mark) {
                        if let Err(kind) = self.set_mark(1) {
                            return Step::Done(Err(kind));
                        }
                    }
                    return Step::Pending;
                }
                Ok(false) => {}
                Ok(true) => return Step::Done(self.check(io)),
                Err(kind) => return Step::Done(Err(kind)),
            }
        }
        Step::Again
    }

    /// The server closed the connection while a response was expected.
    fn eof(&mut self, io: &Io) -> Step {
        self.close();
        if !self.head_done {
            let nothing = self.first_byte.is_none();
            return Step::Done(Err(if nothing {
                ErrorKind::Reset
            } else {
                ErrorKind::ShortBody
            }));
        }
        if self.body.ends_at_close() {
            Step::Done(self.check(io))
        } else {
            Step::Done(Err(ErrorKind::ShortBody))
        }
    }

    /// Takes the next bytes of the response; true when it is complete.
    fn consume(&mut self, data: &[u8], head_request: bool) -> Result<bool, ErrorKind> {
        if self.head_done {
            return self.feed(data);
        }
        // Usually the whole head is in this read and is parsed where it lies; only a
        // head split across reads is gathered in `self.head`.
        let split = !self.head.is_empty();
        if split {
            self.head.extend_from_slice(data);
        }
        let buf = if split { &self.head[..] } else { data };
        let head = match parse_head(buf, head_request) {
            Err(()) => return Err(ErrorKind::Parse),
            Ok(None) => {
                if !split {
                    self.head.extend_from_slice(data);
                }
                if self.head.len() > MAX_HEAD {
                    return Err(ErrorKind::Parse);
                }
                return Ok(false);
            }
            Ok(Some(head)) => head,
        };
        self.head_done = true;
        self.status = head.status;
        self.body = head.body;
        self.content_length = head.content_length;
        self.close_after |= head.close;
        if split {
            let gathered = std::mem::take(&mut self.head);
            let done = self.feed(&gathered[head.len..]);
            self.head = gathered; // keep the buffer's capacity for the next split head
            done
        } else {
            self.feed(&data[head.len..])
        }
    }

    /// `n` body bytes the kernel dropped (a body of known length, `Options::discard`):
    /// counted only; true when the body is complete.
    fn skip(&mut self, n: u64) -> bool {
        let Body::Length(left) = &mut self.body else {
            unreachable!("only a body of known length is discarded")
        };
        *left -= n;
        self.bytes += n;
        *left == 0
    }

    /// Body bytes: counted, hashed when checked; true when the body is complete.
    fn feed(&mut self, data: &[u8]) -> Result<bool, ErrorKind> {
        let (bytes, hasher) = (&mut self.bytes, &mut self.hasher);
        let mut sink = |content: &[u8]| {
            *bytes += content.len() as u64;
            if let Some(h) = hasher {
                h.update(content);
            }
        };
        match self.body.feed(data, &mut sink) {
            Err(()) => Err(ErrorKind::Parse),
            Ok(Fed::More) => Ok(false),
            // Without pipelining nothing may follow a response.
            Ok(Fed::Done(used)) if used < data.len() => Err(ErrorKind::Parse),
            Ok(Fed::Done(_)) => Ok(true),
        }
    }

    /// A complete response: status, then length and content as `Verify` asks.
    fn check(&mut self, io: &Io) -> Result<(), ErrorKind> {
        if !(200..300).contains(&self.status) {
            return Err(ErrorKind::BadStatus);
        }
        if io.verify == Verify::None {
            return Ok(());
        }
        let object = &io.objects[io.reqs[self.req as usize].object as usize];
        let length = if io.head_request {
            self.content_length
        } else {
            Some(self.bytes)
        };
        if length.is_some_and(|n| n != object.size) {
            return Err(ErrorKind::WrongLength);
        }
        if let (Some(h), Some(want)) = (self.hasher.take(), object.sha256) {
            if h.finalize()[..] != want[..] {
                return Err(ErrorKind::BadContent);
            }
        }
        Ok(())
    }

    /// Readable while no request is in flight: the server closed the idle connection
    /// (or sent bytes nobody asked for). Either way it cannot carry the next request.
    fn drain_idle(&mut self, io: &mut Io) {
        let sock = self.sock.as_mut().expect("checked");
        match sock.read(io.scratch) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = false,
            _ => self.close(),
        }
    }
}

/// Drops up to `len` bytes waiting on `sock` without copying them: `recv` with
/// `MSG_TRUNC` on a TCP socket discards the data (tcp(7)). How many it dropped.
fn discard(sock: &TcpStream, len: usize) -> io::Result<usize> {
    // SAFETY: with MSG_TRUNC on TCP the kernel writes nothing to the buffer, so none is
    // given; the call only reads the descriptor.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
