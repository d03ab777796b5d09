//! One client connection: the bytes read and not yet parsed, the response bytes and
//! file ranges waiting to be written, and where the connection is in its life. The
//! event loop (`proto`) decides; this module only does the socket calls.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;

use crate::placement::UNCLASSED;
use crate::pool::Pool;

/// A byte range of an open file, sent with sendfile. It holds the file open until the
/// range is sent, even if the table of open files lets the file go meanwhile.
#[derive(Clone, Debug)]
pub struct FileRange {
    pub file: Arc<File>,
    pub offset: u64,
    pub len: u64,
}

impl FileRange {
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// One piece of a response.
#[derive(Debug)]
pub enum Segment {
    /// Bytes to write (a head, a small body); `pos` of them are written already.
    Bytes {
        buf: Vec<u8>,
        pos: usize,
    },
    /// Bytes shared with the cache.
    Shared {
        buf: Arc<[u8]>,
        pos: usize,
    },
    File(FileRange),
}

/// Sends `buf[*pos..]`, advancing `pos` by what was sent; returns send's result.
/// `more`: another segment follows.
fn send(fd: RawFd, buf: &[u8], pos: &mut usize, more: bool) -> isize {
    // MSG_MORE lets the kernel put a head and the file after it in the same segments,
    // as TCP_CORK would.
    let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
    let rest = &buf[*pos..];
    // SAFETY: `rest` is a live slice; send reads at most its length.
    let n = unsafe { libc::send(fd, rest.as_ptr().cast(), rest.len(), flags) };
    if n >= 0 {
        *pos += n as usize;
    }
    n
}

/// Where a connection is between requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Reading and parsing the next request.
    Reading,
    /// A request went to the application; its answer has not all come yet.
    Waiting,
    /// The answer is queued; once written, read the next request or close.
    Draining { keep_alive: bool },
    /// A refused request's answer is written and our side shut down; what the client
    /// still sends is read and dropped until it closes, so the close is clean (closing
    /// with unread bytes would reset the connection, and could destroy the answer
    /// before the client reads it).
    Lingering,
}

/// Outcome of a flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushed {
    /// Everything queued is written.
    Done,
    /// The socket is full; wait for it to become writable.
    Blocked,
}

pub struct Conn {
    pub stream: TcpStream,
    /// Generation, so late answers for a closed connection in the same slot are dropped.
    pub gen: u32,
    pub state: State,
    /// Bytes read; `rbuf[start..]` are not parsed yet.
    pub rbuf: Vec<u8>,
    pub start: usize,
    pub out: VecDeque<Segment>,
    /// Edge-triggered readiness not yet consumed to WouldBlock.
    pub readable: bool,
    pub writable: bool,
    /// The peer's FIN has arrived (epoll said so): reads go on to the end of stream,
    /// since no further edge will come.
    pub read_closed: bool,
    /// A read returned the end of stream: every byte the client will send is in `rbuf`.
    pub eof: bool,
    /// Close by lingering (see `State::Lingering`): the request was refused unread.
    pub linger: bool,
    /// Requests answered on this connection.
    pub served: u64,
    /// When the current phase began (accept, end of the last response, first byte of a
    /// request, last write progress): the reference point of the timeouts.
    pub since: Instant,
    /// Placement: the size class of the connection's first request, and the loop's work
    /// for it not yet charged to an answer (see `Proto::account`).
    pub class: u8,
    pub work: Duration,
}

impl Conn {
    pub fn new(stream: TcpStream, gen: u32, rbuf: Vec<u8>, now: Instant) -> Conn {
        Conn {
            stream,
            gen,
            state: State::Reading,
            rbuf,
            start: 0,
            out: VecDeque::new(),
            readable: false,
            writable: true,
            read_closed: false,
            eof: false,
            linger: false,
            served: 0,
            since: now,
            class: UNCLASSED,
            work: Duration::ZERO,
        }
    }

    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// The unparsed bytes.
    pub fn pending(&self) -> &[u8] {
        &self.rbuf[self.start..]
    }

    /// Reads until the socket is drained, the stream has ended (`eof`), or `cap`
    /// unparsed bytes are buffered.
    pub fn fill(&mut self, cap: usize) -> io::Result<()> {
        if self.start > 0 {
            self.rbuf.drain(..self.start);
            self.start = 0;
        }
        let fd = self.fd();
        while self.rbuf.len() < cap {
            let len = self.rbuf.len();
            let want = cap - len;
            self.rbuf.reserve(want);
            let spare = &mut self.rbuf.spare_capacity_mut()[..want];
            // SAFETY: recv writes at most `want` bytes into the reserved spare capacity,
            // and only the bytes it reports are then marked initialised.
            let n = unsafe { libc::recv(fd, spare.as_mut_ptr().cast(), want, 0) };
            if n == 0 {
                self.eof = true;
                self.readable = false;
                return Ok(());
            }
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => {
                        self.readable = false;
                        return Ok(());
                    }
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            // SAFETY: recv initialised the first n spare bytes.
            unsafe { self.rbuf.set_len(len + n as usize) };
            if (n as usize) < want && !self.read_closed {
                // A short read emptied the socket; anything arriving later is a new
                // edge, so this saves the read that would only say WouldBlock. Not
                // after a FIN: it came with this edge, and only a read sees it.
                self.readable = false;
                return Ok(());
            }
        }
        Ok(())
    }

    /// Writes queued segments until done or the socket is full; spent byte buffers go
    /// to `spent` for reuse. Adds the bytes written to `sent`.
    pub fn flush(&mut self, spent: &mut Pool, sent: &mut u64) -> io::Result<Flushed> {
        let fd = self.fd();
        loop {
            let more = self.out.len() > 1;
            let Some(front) = self.out.front_mut() else {
                break;
            };
            let n = match front {
                Segment::Bytes { buf, pos } => send(fd, &buf[..], pos, more),
                Segment::Shared { buf, pos } => send(fd, &buf[..], pos, more),
                Segment::File(range) => {
                    let mut off = range.offset as libc::off_t;
                    let count = range.len.min(1 << 30) as usize;
                    // SAFETY: both are open descriptors; `off` is a local the call advances.
                    let n = unsafe { libc::sendfile(fd, range.fd(), &mut off, count) };
                    if n == 0 && range.len > 0 {
                        // The file is shorter than when it was opened: the promised
                        // Content-Length cannot be met, so the connection must end.
                        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank"));
                    }
                    if n > 0 {
                        range.offset += n as u64;
                        range.len -= n as u64;
                    }
                    n
                }
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => {
                        self.writable = false;
                        return Ok(Flushed::Blocked);
                    }
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            *sent += n as u64;
            let finished = match self.out.front() {
                Some(Segment::Bytes { buf, pos }) => *pos == buf.len(),
                Some(Segment::Shared { buf, pos }) => *pos == buf.len(),
                Some(Segment::File(range)) => range.len == 0,
                None => false,
            };
            if finished {
                if let Some(Segment::Bytes { buf, .. }) = self.out.pop_front() {
                    spent.give(buf);
                }
            }
        }
        Ok(Flushed::Done)
    }

    /// Gives back every buffer this connection holds.
    pub fn release(self, spent: &mut Pool) {
        spent.give(self.rbuf);
        for segment in self.out {
            if let Segment::Bytes { buf, .. } = segment {
                spent.give(buf);
            }
        }
    }
}
