//! One client connection of the epoll loop: its socket, its HTTP session (`session`:
//! the bytes read and not yet parsed, where it is between requests), and the response
//! bytes and file ranges waiting to be written. The session and the loop (`proto`)
//! decide; this module only does the socket calls.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;

use crate::placement::UNCLASSED;
use crate::pool::Pool;
use crate::session::Session;

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
    pub session: Session,
    pub out: VecDeque<Segment>,
    /// Edge-triggered readiness not yet consumed to WouldBlock.
    pub readable: bool,
    pub writable: bool,
    /// The peer's FIN has arrived (epoll said so): reads go on to the end of stream,
    /// since no further edge will come.
    pub read_closed: bool,
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
            session: Session::new(rbuf, now),
            out: VecDeque::new(),
            readable: false,
            writable: true,
            read_closed: false,
            class: UNCLASSED,
            work: Duration::ZERO,
        }
    }

    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Reads until the socket is drained, the stream has ended, or `want` bytes are
    /// read, into the session; says whether anything came (bytes or the end).
    pub fn fill(&mut self, want: usize, now: Instant) -> io::Result<bool> {
        let fd = self.fd();
        let mut got = 0;
        while got < want {
            let spare = self.session.spare(want - got);
            let asked = spare.len();
            // SAFETY: recv writes at most `asked` bytes into the session's spare room.
            let n = unsafe { libc::recv(fd, spare.as_mut_ptr().cast(), asked, 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => {
                        self.readable = false;
                        return Ok(got > 0);
                    }
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            // SAFETY: recv initialised the first n bytes of the room, just given.
            unsafe { self.session.filled(n as usize, now) };
            if n == 0 {
                self.readable = false;
                return Ok(true);
            }
            got += n as usize;
            if (n as usize) < asked && !self.read_closed {
                // A short read emptied the socket; anything arriving later is a new
                // edge, so this saves the read that would only say WouldBlock. Not
                // after a FIN: it came with this edge, and only a read sees it.
                self.readable = false;
                break;
            }
        }
        Ok(true)
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
        self.session.release(spent);
        for segment in self.out {
            if let Segment::Bytes { buf, .. } = segment {
                spent.give(buf);
            }
        }
    }
}
