//! How a run behaves, and the handle a watching thread holds while it runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The HTTP method of every request of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    #[default]
    Get,
    /// No body comes back; with `Verify::Length` the `Content-Length` is checked.
    Head,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
        }
    }
}

/// What a response must show to count as correct (beyond a 2xx status, always checked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verify {
    None,
    /// The body (HEAD: the `Content-Length`) has the object's size.
    #[default]
    Length,
    /// As `Length`, and the body's SHA-256 is the object's (when the plan gives one).
    Checksum,
}

/// Run options. `Options::default()` is a sensible start.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Event-loop threads; 0 means one per core. Never more than there are connections
    /// (open loop) or clients (closed loop) to share out.
    pub threads: usize,
    /// Per request, from the moment it starts (connect or write) to the last byte of its
    /// response: past it the request fails with a connect or response timeout.
    pub timeout_s: f64,
    /// Hard bound on the run: at this time from the start everything stops, and
    /// requests still in flight are reported as unfinished.
    pub max_duration_s: f64,
    pub method: Method,
    pub verify: Verify,
    /// Keep one record per request (`Report::records`).
    pub records: bool,
    /// Send a connection's only request (`keep_alive == false` on the first request of
    /// its connection) as HTTP/1.0, as seed 000's Webstone did; when false it is
    /// HTTP/1.1 with `Connection: close`. Either way the connection carries one request.
    pub http10_for_single: bool,
    /// Closed loop only: a client that finished its requests starts them over, until
    /// `max_duration_s` or cancellation (for saturation runs bounded by time alone).
    pub repeat: bool,
    /// Before sleeping in `epoll_wait`, keep polling without sleeping for up to this
    /// long (seconds; 0: never). A loop that never sleeps spares the server the cost
    /// of waking it for each response, which raises a saturated server's throughput
    /// on loopback, at the price of a whole core per load thread: use it only where
    /// the load generator has cores of its own.
    pub busy_poll_s: f64,
    /// Ask the kernel to report an answer's socket readable only once this many of its
    /// bytes are there (`SO_RCVLOWAT`), capped at each request's expected body size, so
    /// that a correct answer always reaches the mark (0 or 1: on its first byte; no
    /// mark for HEAD, or for objects of unknown size). The loop then wakes and reads
    /// once per small answer, instead of often twice, head first, when the server
    /// sends head and body apart; on loopback that spares the server's core a
    /// cache-line tug of war over the client's socket (docs/load.md). Costs:
    /// time-to-first-byte becomes the time the first `rcvlowat` bytes were there, and
    /// an answer shorter than the mark (an error page on a kept connection) is read
    /// 10–20 ms late, by the tick.
    pub rcvlowat: u32,
    /// Drop each response body of known length (`Content-Length`) in the kernel without
    /// copying it (`recv` with `MSG_TRUNC`, tcp(7)): the generator then pays per packet
    /// but not per byte, which matters where it shares a core with the server. Bodies
    /// are still counted, so `Verify::Length` still holds every answer to its size;
    /// their content is never seen, so `Verify::Checksum` is refused, and a chunked or
    /// close-delimited body is read as before.
    pub discard: bool,
    /// Pin the event-loop threads to these cores, round robin (empty: not pinned), so
    /// that on a small machine the generator stays off the cores being measured.
    pub cores: Vec<usize>,
    /// Niceness of the event-loop threads (0: unchanged; −20..=19). A generator that
    /// shares its core with a server thread that spins while idle (io_uring's SQPOLL
    /// thread spins for a jiffy after each submission) waits for the spinner's time
    /// slice whenever it wakes, and that lateness is counted in every measured delay:
    /// on this 2-core machine uring's mean delay at 5,500 req/s went from 1.2-1.5 ms at
    /// nice 0 to 0.36-0.40 ms at −20. Raising it needs root or CAP_SYS_NICE.
    pub nice: i32,
    /// Start at this wall-clock time (seconds since the Unix epoch) instead of at once:
    /// the run prepares its requests, then sleeps until then. Hosts that load one server
    /// together agree on one start this way (`offload load --cluster`); a time already
    /// past starts at once, and the report's `started_unix_s` says when it did.
    pub start_unix_s: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: 0,
            timeout_s: 5.0,
            max_duration_s: 60.0,
            method: Method::Get,
            verify: Verify::Length,
            records: false,
            http10_for_single: true,
            repeat: false,
            busy_poll_s: 0.0,
            rcvlowat: 0,
            discard: false,
            cores: Vec::new(),
            nice: 0,
            start_unix_s: None,
        }
    }
}

impl Options {
    pub fn check(&self) -> Result<(), String> {
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err(format!(
                "options.timeout_s = {}: give a positive number of seconds",
                self.timeout_s
            ));
        }
        if !(self.max_duration_s.is_finite() && self.max_duration_s > 0.0) {
            return Err(format!(
                "options.max_duration_s = {}: every run is bounded; give a positive number \
                 of seconds",
                self.max_duration_s
            ));
        }
        if !(self.busy_poll_s.is_finite() && self.busy_poll_s >= 0.0) {
            return Err(format!(
                "options.busy_poll_s = {}: give 0 (off) or a positive number of seconds",
                self.busy_poll_s
            ));
        }
        if !(-20..=19).contains(&self.nice) {
            return Err(format!(
                "options.nice = {}: give a niceness from -20 (first) to 19 (last)",
                self.nice
            ));
        }
        if self.nice < 0 && self.busy_poll_s > 0.0 {
            return Err(format!(
                "options.nice = {} with busy_poll_s = {}: a busy-polling generator ahead of \
                 everything else would starve the threads on its cores; give nice 0 or \
                 busy_poll_s 0",
                self.nice, self.busy_poll_s
            ));
        }
        if self.rcvlowat > i32::MAX as u32 {
            return Err(format!(
                "options.rcvlowat = {}: give 0 (off) or at most {} bytes",
                self.rcvlowat,
                i32::MAX
            ));
        }
        if let Some(t) = self.start_unix_s.filter(|t| !t.is_finite()) {
            return Err(format!(
                "options.start_unix_s = {t}: give a time in seconds since the Unix epoch"
            ));
        }
        if self.discard && self.verify == Verify::Checksum {
            return Err(
                "options.discard with verify = checksum: a body dropped unread \
                        cannot be hashed; verify length (or none), or do not discard"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Shared with a run while it goes: live counters a caller can poll (updated in batches,
/// every 10 ms or so, by each load thread) and a cancel flag (honoured within ~10 ms).
#[derive(Debug, Default)]
pub struct Control {
    /// Requests started (connect or write begun).
    pub sent: AtomicU64,
    /// Requests finished, correctly or not.
    pub done: AtomicU64,
    /// Requests finished with an error (any `ErrorKind`).
    pub errors: AtomicU64,
    /// Response body bytes received.
    pub bytes: AtomicU64,
    /// p99 of total time, µs, over the last one-second window of one load thread
    /// (the last to close a window): a live indication, exact with one thread.
    pub p99_us: AtomicU64,
    /// Set to stop the run early; it then returns its report as usual.
    pub cancel: AtomicBool,
}

impl Control {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}
