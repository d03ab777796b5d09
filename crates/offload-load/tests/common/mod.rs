//! A small HTTP/1.x test server on an ephemeral loopback port: one thread accepting,
//! one per connection, all stopped and joined when the `Server` is dropped.
//!
//! `GET /N` answers N bytes of `content(N)`; the `Behavior` bends the answer to
//! produce each error the load generator must classify.

#![allow(dead_code)] // each test file uses part of it

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use offload_load::plan::Object;
use offload_load::Target;
use sha2::{Digest, Sha256};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Behavior {
    /// A correct response, keep-alive as the request asks.
    Normal,
    /// Correct, but `Connection: close` on every response.
    CloseEach,
    /// Announces N bytes, sends N/2, closes.
    ShortBody,
    /// Announces and sends N − 1 bytes.
    WrongLength,
    /// N bytes, the first one changed.
    WrongContent,
    /// Chunked transfer coding, 100-byte chunks.
    Chunked,
    /// This status, with a correct body.
    Status(u16),
    /// This status with a 9-byte page, whatever was asked: an error page shorter than
    /// the object.
    ErrorPage(u16),
    /// Correct, in two writes: the head and the body's first `first` bytes, then after
    /// `gap_ms` the rest.
    Split { first: u64, gap_ms: u64 },
    /// Reads requests and never answers.
    Silent,
    /// Answers normally, except that a response due between `from_s` and `until_s`
    /// after the first request waits until `until_s`.
    Stall { from_s: f64, until_s: f64 },
}

/// The body of `/N`.
pub fn content(n: u64) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

pub fn object(size: u64) -> Object {
    Object {
        path: format!("/{size}"),
        size,
        sha256: Some(Sha256::digest(content(size)).into()),
        class: if size <= 1024 { 0 } else { 1 },
    }
}

#[derive(Default)]
pub struct Counts {
    pub accepted: AtomicU64,
    pub requests: AtomicU64,
    pub http10: AtomicU64,
}

pub struct Server {
    pub addr: SocketAddr,
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(behavior: Behavior) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counts.clone(), stop.clone());
        let acceptor = std::thread::spawn(move || accept_loop(listener, behavior, c, s));
        Server {
            addr,
            counts,
            stop,
            acceptor: Some(acceptor),
        }
    }

    pub fn target(&self) -> Target {
        Target::new(self.addr, "test", false).unwrap()
    }

    pub fn accepted(&self) -> u64 {
        self.counts.accepted.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> u64 {
        self.counts.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = self.acceptor.take() {
            a.join().unwrap();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    behavior: Behavior,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) {
    let first: Arc<Mutex<Option<Instant>>> = Arc::default();
    let mut handlers = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((sock, _)) => {
                counts.accepted.fetch_add(1, Ordering::SeqCst);
                let (c, s, f) = (counts.clone(), stop.clone(), first.clone());
                handlers.push(std::thread::spawn(move || serve(sock, behavior, c, s, f)));
            }
            Err(_) => std::thread::sleep(Duration::from_micros(200)),
        }
        handlers.retain(|h: &JoinHandle<()>| !h.is_finished());
    }
    for h in handlers {
        h.join().unwrap();
    }
}

/// Serves one connection until the client closes, the behaviour closes, or stop.
fn serve(
    mut sock: TcpStream,
    behavior: Behavior,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    first: Arc<Mutex<Option<Instant>>>,
) {
    sock.set_nonblocking(false).unwrap();
    sock.set_nodelay(true).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match sock.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return,
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end + 4);
        counts.requests.fetch_add(1, Ordering::SeqCst);
        let start = *first.lock().unwrap().get_or_insert_with(Instant::now);
        let line = head.lines().next().unwrap_or_default().to_string();
        let mut words = line.split(' ');
        let method = words.next().unwrap_or_default();
        let n: u64 = words.next().unwrap_or("/0")[1..].parse().unwrap_or(0);
        let http10 = line.ends_with("HTTP/1.0");
        counts.http10.fetch_add(u64::from(http10), Ordering::SeqCst);
        let close = http10 || head.to_ascii_lowercase().contains("connection: close");
        if !respond(
            &mut sock,
            behavior,
            method == "HEAD",
            n,
            close,
            start,
            &stop,
        ) {
            return;
        }
        if close || behavior == Behavior::CloseEach {
            return;
        }
    }
}

/// Writes one response; false when the connection must end now.
fn respond(
    sock: &mut TcpStream,
    behavior: Behavior,
    head_only: bool,
    n: u64,
    close: bool,
    start: Instant,
    stop: &AtomicBool,
) -> bool {
    let conn = if close || behavior == Behavior::CloseEach {
        "Connection: close\r\n"
    } else {
        ""
    };
    let mut body = content(n);
    let mut status = 200;
    let mut announced = n;
    match behavior {
        Behavior::Silent => {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            return false;
        }
        Behavior::Stall { from_s, until_s } => {
            let t = start.elapsed().as_secs_f64();
            if (from_s..until_s).contains(&t) {
                std::thread::sleep(Duration::from_secs_f64(until_s - t));
            }
        }
        Behavior::ShortBody => body.truncate(n as usize / 2),
        Behavior::WrongLength => {
            body.pop();
            announced = n - 1;
        }
        Behavior::WrongContent => body[0] ^= 0xff,
        Behavior::Status(s) => status = s,
        Behavior::ErrorPage(s) => {
            status = s;
            body = b"not here\n".to_vec();
            announced = body.len() as u64;
        }
        Behavior::Chunked => {
            let mut out =
                format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n{conn}\r\n").into_bytes();
            if !head_only {
                for c in body.chunks(100) {
                    out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                    out.extend_from_slice(c);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            }
            return sock.write_all(&out).is_ok();
        }
        Behavior::Normal | Behavior::CloseEach | Behavior::Split { .. } => {}
    }
    let mut out =
        format!("HTTP/1.1 {status} X\r\nContent-Length: {announced}\r\n{conn}\r\n").into_bytes();
    let head_len = out.len();
    if !head_only {
        out.extend_from_slice(&body);
    }
    if let Behavior::Split { first, gap_ms } = behavior {
        let (a, b) = out.split_at((head_len + first as usize).min(out.len()));
        let ok = sock.write_all(a).is_ok();
        std::thread::sleep(Duration::from_millis(gap_ms));
        return ok && sock.write_all(b).is_ok();
    }
    let ok = sock.write_all(&out).is_ok();
    ok && behavior != Behavior::ShortBody
}

/// A port on which nothing listens (bound, then released).
pub fn refused_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    addr
}
