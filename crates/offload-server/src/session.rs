//! The HTTP side of one client connection, without its socket calls: the bytes read
//! and not yet parsed, and where the connection is between requests. Given what was
//! read, [`Session::next`] says what comes next: read more, hand a request to the
//! application, send the answer to a refused request, write the answer, or close; and
//! once an answer is written, [`Session::answered`] says whether the connection reads
//! the next request, lingers or closes.
//!
//! Both socket loops drive it, `proto` on readiness (epoll) and `uring` on completion
//! (io_uring), so parsing and its limits, refusals, keep-alive, pipelining, the
//! lingering close, the client's end of stream and the timeouts follow one set of
//! rules in every mode; only the socket calls differ.
//!
//! Requests are parsed one at a time, the next only once the answer to the previous
//! one is written, so pipelined answers keep their order.

use std::mem::MaybeUninit;
use std::time::Instant;

use crate::config::{Awaiting, Limits};
use crate::http::{self, Head, Parsed, Status};
use crate::pool::Pool;
use crate::stats::Stats;

/// Bytes a lingering connection reads (and drops) per read at most.
const LINGER_READ: usize = 64 * 1024;

/// What the connections of one loop share to parse requests and refuse them.
pub struct Codec {
    pub limits: Limits,
    /// The path of the request last parsed; one buffer, so it stops growing.
    pub path: Vec<u8>,
    pub date: http::Date,
}

impl Codec {
    pub fn new(limits: Limits) -> Codec {
        Codec {
            limits,
            path: Vec::new(),
            date: http::Date::new(),
        }
    }
}

/// Where a connection is between requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Reading and parsing the next request.
    Reading,
    /// A request went to the application; its answer has not all come yet.
    Waiting,
    /// The answer is queued; once written, read the next request or close.
    Answering { keep_alive: bool },
    /// A refused request's answer is written and our side shut down; what the client
    /// still sends is read and dropped until it closes, so the close is clean (closing
    /// with unread bytes would reset the connection, and could destroy the answer
    /// before the client reads it).
    Lingering,
    /// Done: the loop closes the connection.
    Closing,
}

/// What a loop is to do next for a connection.
#[derive(Debug)]
pub enum Next {
    /// Read up to this many bytes into [`Session::spare`] (then [`Session::filled`]).
    Read(usize),
    /// A request to hand to the application, after [`Session::begin`].
    Request(Head),
    /// The answer to a refused request, to queue and write; then the connection closes.
    Refuse(Vec<u8>),
    /// Write the queued answer, then call [`Session::answered`].
    Write,
    /// The application's answer has not all come yet.
    Wait,
    /// Close the connection.
    Close,
}

pub struct Session {
    /// Bytes read; `rbuf[start..]` are not parsed yet.
    rbuf: Vec<u8>,
    start: usize,
    phase: Phase,
    /// The client's stream has ended: every byte it will send is in `rbuf`.
    eof: bool,
    /// Close by lingering: a request was refused unread.
    linger: bool,
    /// Requests answered on this connection.
    pub served: u64,
    /// When the current phase began (accept, end of the last answer, first byte of a
    /// request, last write progress): the reference point of the timeouts.
    pub since: Instant,
}

impl Session {
    /// A new connection, reading into `rbuf` (an empty recycled buffer).
    pub fn new(rbuf: Vec<u8>, now: Instant) -> Session {
        Session {
            rbuf,
            start: 0,
            phase: Phase::Reading,
            eof: false,
            linger: false,
            served: 0,
            since: now,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// What the loop is to do next. A refusal's answer is made here, in a buffer from
    /// `pool`, and its status counted in `stats`.
    pub fn next(&mut self, codec: &mut Codec, pool: &mut Pool, stats: &Stats) -> Next {
        match self.phase {
            Phase::Reading => {}
            Phase::Waiting => return Next::Wait,
            Phase::Answering { .. } => return Next::Write,
            Phase::Lingering => {
                self.start = self.rbuf.len(); // read only to be dropped
                if self.eof {
                    self.close();
                    return Next::Close;
                }
                return Next::Read(LINGER_READ);
            }
            Phase::Closing => return Next::Close,
        }
        let pending = &self.rbuf[self.start..];
        if !pending.is_empty() {
            match http::parse(pending, &codec.limits, &mut codec.path) {
                Parsed::Partial => {}
                Parsed::Done(head) => return Next::Request(head),
                Parsed::Reject(status) => {
                    // The rest can no longer be trusted to start at a request: it is
                    // dropped, and so is whatever the client still sends.
                    self.start = self.rbuf.len();
                    self.linger = true;
                    self.answer(false);
                    return Next::Refuse(refusal(status, &mut codec.date, pool, stats));
                }
            }
        }
        if self.eof {
            // Every complete request the client sent is answered; what is left can
            // never become one.
            self.close();
            return Next::Close;
        }
        // Up to one byte past a head's limit, which parse then refuses (it refuses a
        // partial head at the limit, so this is never 0).
        Next::Read(codec.limits.max_header_bytes + 1 - pending.len())
    }

    /// The request `next` returned goes to the application: its bytes are used up.
    pub fn begin(&mut self, head: &Head) {
        self.start += head.len;
        self.phase = Phase::Waiting;
    }

    /// The answer (or its last piece) is queued: write it, then keep the connection or
    /// close it.
    pub fn answer(&mut self, keep_alive: bool) {
        self.phase = Phase::Answering { keep_alive };
    }

    /// The answer is written: read the next request, linger (the loop shuts down its
    /// side for writing) or close. Returns the new phase.
    pub fn answered(&mut self, now: Instant) -> Phase {
        self.since = now;
        self.phase = match self.phase {
            Phase::Answering { keep_alive: true } => {
                self.served += 1;
                Phase::Reading
            }
            // A client that has closed already has nothing left to drain.
            _ if self.linger && !self.eof => Phase::Lingering,
            _ => Phase::Closing,
        };
        self.phase
    }

    /// Ends the connection whatever its phase (an I/O error, a timeout, a stop).
    pub fn close(&mut self) {
        self.phase = Phase::Closing;
    }

    /// Room for `want` more bytes after the unparsed ones (the parsed ones go first).
    pub fn spare(&mut self, want: usize) -> &mut [MaybeUninit<u8>] {
        if self.start > 0 {
            self.rbuf.drain(..self.start);
            self.start = 0;
        }
        self.rbuf.reserve(want);
        &mut self.rbuf.spare_capacity_mut()[..want]
    }

    /// `n` bytes were read into the room [`Session::spare`] gave; 0 is the end of the
    /// client's stream.
    ///
    /// # Safety
    /// The first `n` bytes of that room are initialised, and nothing touched the
    /// session's buffer since `spare`.
    pub unsafe fn filled(&mut self, n: usize, now: Instant) {
        if n == 0 {
            self.eof = true;
            return;
        }
        if self.phase == Phase::Reading && self.start == self.rbuf.len() {
            self.since = now; // a request starts: header timeout
        }
        // SAFETY: the caller vouches for these bytes.
        unsafe { self.rbuf.set_len(self.rbuf.len() + n) };
    }

    /// Past its timeout (`Limits::timeout`) at `now`?
    pub fn expired(&self, limits: &Limits, now: Instant) -> bool {
        let awaiting = match self.phase {
            Phase::Waiting | Phase::Closing => Awaiting::Server,
            Phase::Reading => Awaiting::Head {
                between: self.start == self.rbuf.len() && self.served > 0,
            },
            Phase::Answering { .. } => Awaiting::ClientRead,
            Phase::Lingering => Awaiting::ClientClose,
        };
        limits
            .timeout(awaiting)
            .is_some_and(|limit| now.duration_since(self.since) > limit)
    }

    /// Gives the read buffer back.
    pub fn release(self, spent: &mut Pool) {
        spent.give(self.rbuf);
    }
}

/// The answer to a request this server will not serve (`status`), counted, after which
/// the connection closes.
pub fn refusal(status: Status, date: &mut http::Date, pool: &mut Pool, stats: &Stats) -> Vec<u8> {
    let mut buf = pool.take();
    http::response::error(&mut buf, status, false, false, date.now());
    stats.count_status(status);
    buf
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{Mode, LINGER};

    fn setup() -> (Codec, Pool, Stats) {
        (
            Codec::new(Limits::default()),
            Pool::default(),
            Stats::new(Mode::Inline, 0),
        )
    }

    /// What a loop does with a read: `bytes` land in the room the session gives.
    fn feed(session: &mut Session, bytes: &[u8], now: Instant) {
        let room = session.spare(bytes.len());
        for (slot, &byte) in room.iter_mut().zip(bytes) {
            slot.write(byte);
        }
        // SAFETY: every byte of the room was just written.
        unsafe { session.filled(bytes.len(), now) };
    }

    fn end(session: &mut Session) {
        // SAFETY: no byte is claimed.
        unsafe { session.filled(0, Instant::now()) };
    }

    const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n";

    #[test]
    fn pipelined_requests_come_one_at_a_time_each_after_the_last_answer() {
        let (mut codec, mut pool, stats) = setup();
        let mut s = Session::new(Vec::new(), Instant::now());
        feed(&mut s, &[GET, GET].concat(), Instant::now());
        for served in 0..2 {
            let Next::Request(head) = s.next(&mut codec, &mut pool, &stats) else {
                panic!("request {served}");
            };
            assert_eq!((head.len, codec.path.as_slice()), (GET.len(), &b"/a"[..]));
            s.begin(&head);
            assert!(matches!(s.next(&mut codec, &mut pool, &stats), Next::Wait));
            s.answer(true);
            assert!(matches!(s.next(&mut codec, &mut pool, &stats), Next::Write));
            assert_eq!(s.answered(Instant::now()), Phase::Reading);
            assert_eq!(s.served, served + 1);
        }
        let limit = codec.limits.max_header_bytes;
        assert!(matches!(s.next(&mut codec, &mut pool, &stats), Next::Read(n) if n == limit + 1));
    }

    #[test]
    fn a_partial_head_is_read_up_to_one_byte_past_the_limit_then_refused() {
        let (mut codec, mut pool, stats) = setup();
        codec.limits.max_header_bytes = 64;
        let mut s = Session::new(Vec::new(), Instant::now());
        feed(&mut s, b"GET /a HTTP/1.1\r\nX: ", Instant::now());
        let Next::Read(want) = s.next(&mut codec, &mut pool, &stats) else {
            panic!("a partial head reads on");
        };
        assert_eq!(want, 65 - 20);
        feed(&mut s, &[b'a'; 45], Instant::now());
        let Next::Refuse(answer) = s.next(&mut codec, &mut pool, &stats) else {
            panic!("a head past the limit is refused");
        };
        assert!(answer.starts_with(b"HTTP/1.1 431 "));
    }

    #[test]
    fn a_refused_request_is_answered_counted_and_lingered_on_until_the_client_closes() {
        let (mut codec, mut pool, stats) = setup();
        let mut s = Session::new(Vec::new(), Instant::now());
        feed(
            &mut s,
            b"POST /a HTTP/1.1\r\nHost: t\r\n\r\n",
            Instant::now(),
        );
        feed(&mut s, GET, Instant::now()); // never parsed: it follows a refused request
        let Next::Refuse(answer) = s.next(&mut codec, &mut pool, &stats) else {
            panic!("refused");
        };
        assert!(answer.starts_with(b"HTTP/1.1 405 "));
        let doc = serde_json::to_value(stats.document(false)).unwrap();
        assert_eq!(doc["statuses"]["405"], 1);
        assert!(matches!(s.next(&mut codec, &mut pool, &stats), Next::Write));
        assert_eq!(s.answered(Instant::now()), Phase::Lingering);
        for _ in 0..2 {
            let next = s.next(&mut codec, &mut pool, &stats);
            assert!(matches!(next, Next::Read(LINGER_READ)), "{next:?}");
            feed(&mut s, GET, Instant::now()); // dropped
        }
        end(&mut s);
        for _ in 0..2 {
            assert!(matches!(s.next(&mut codec, &mut pool, &stats), Next::Close));
        }
    }

    #[test]
    fn a_refused_client_that_has_closed_already_is_closed_at_once() {
        let (mut codec, mut pool, stats) = setup();
        let mut s = Session::new(Vec::new(), Instant::now());
        feed(&mut s, b"GET /a HTTP/2.0\r\n\r\n", Instant::now());
        end(&mut s);
        let Next::Refuse(_) = s.next(&mut codec, &mut pool, &stats) else {
            panic!("refused");
        };
        assert_eq!(s.answered(Instant::now()), Phase::Closing);
    }

    #[test]
    fn the_end_of_stream_closes_once_every_complete_request_is_answered() {
        let (mut codec, mut pool, stats) = setup();
        let mut s = Session::new(Vec::new(), Instant::now());
        feed(&mut s, &[GET, b"GET /b HT"].concat(), Instant::now());
        end(&mut s);
        let Next::Request(head) = s.next(&mut codec, &mut pool, &stats) else {
            panic!("the complete request is served");
        };
        s.begin(&head);
        s.answer(true);
        assert_eq!(s.answered(Instant::now()), Phase::Reading);
        assert!(matches!(s.next(&mut codec, &mut pool, &stats), Next::Close));
    }

    #[test]
    fn timeouts_run_from_the_start_of_each_phase() {
        let (mut codec, mut pool, stats) = setup();
        let limits = &Limits {
            header_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(10),
            ..Limits::default()
        };
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut s = Session::new(Vec::new(), t0);
        assert!(
            s.expired(limits, at(2)),
            "no head within the header timeout"
        );
        feed(&mut s, b"GET /a HTTP/1.1\r\n", at(5));
        feed(&mut s, b"Host: t\r\n", at(6)); // not a new request: the clock runs on
        assert!(!s.expired(limits, at(6)) && s.expired(limits, at(7)));
        feed(&mut s, b"\r\n", at(6));
        let Next::Request(head) = s.next(&mut codec, &mut pool, &stats) else {
            panic!("complete");
        };
        s.begin(&head);
        assert!(
            !s.expired(limits, at(1000)),
            "the server's own time is not limited"
        );
        s.answer(true);
        s.since = at(10); // the loop saw the answer's bytes go out
        assert!(!s.expired(limits, at(20)) && s.expired(limits, at(21)));
        s.answered(at(20));
        assert!(!s.expired(limits, at(30)) && s.expired(limits, at(31)));
        s.close();
        assert!(!s.expired(limits, at(1000)));
        let mut refused = Session::new(Vec::new(), t0);
        feed(&mut refused, b"BAD\r\n\r\n", t0);
        let Next::Refuse(_) = refused.next(&mut codec, &mut pool, &stats) else {
            panic!("refused");
        };
        refused.answered(t0);
        assert!(!refused.expired(limits, t0 + LINGER) && refused.expired(limits, at(3)));
    }
}
