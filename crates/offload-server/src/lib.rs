//! OffloadLab's testbed server: static files over HTTP/1.0 and HTTP/1.1 keep-alive, whose
//! socket work runs on the host thread (`inline`), on a software offload engine pinned
//! to another core (`engine`, a modern TOE emulator), on io_uring's SQPOLL kernel thread
//! (`uring`), or is split per connection between engine and host by seed 004's policies
//! (`handoff`). [`Mode::ALL`] lists them.
//!
//! Modules, one concept each:
//!
//! - [`config`]: what a run is told; [`Control`]: stop flag and live state for a watcher;
//! - [`http`]: request parsing with its limits, response heads, status codes;
//! - [`files`]: the document root (no path escapes it) and the open-file table;
//! - `app`: the host's application: a parsed request in, a response out, X_a burned;
//! - [`cache`]: the reverse-proxy object cache of seed 001, on the engine or the host;
//! - [`db`]: the database tier of dynamic pages (SQLite or PostgreSQL, seed 003);
//! - `conn`: one client connection of the epoll loop: socket, session, output queue;
//! - `session`: the HTTP side of one connection without its socket calls (parsing,
//!   refusals, keep-alive, closes, timeouts), shared by the `proto` and `uring` loops;
//! - `proto`: the epoll loop that makes the socket calls (the host's in `inline`, the
//!   engine's in `engine`);
//! - `pool`: recycled byte buffers;
//! - `ring`: single-producer single-consumer rings with batching and sleep/wake;
//! - `inline`: the `inline` mode, the host's own socket loop (also the takeover's);
//! - `engine`: the host side of `engine` mode, the engine's watchdog and the takeover;
//! - `uring`: the io_uring mode;
//! - [`placement`]: model-driven placement in `handoff` mode: the live knobs, the
//!   engine's per-class decision, per-class accounts;
//! - `server`: start, stop, the stats file;
//! - `cpu`: thread CPU clocks, pinning, burning CPU on purpose;
//! - `stats`: counters, per-thread and per-core CPU accounting, the stats document.

mod app;
pub mod cache;
pub mod config;
mod conn;
mod cpu;
pub mod db;
mod engine;
pub mod files;
pub mod http;
mod inline;
pub mod placement;
mod pool;
mod proto;
mod ring;
mod server;
mod session;
mod stats;
mod uring;

pub use config::{
    default_handoff, Config, EngineWait, Fault, Limits, Mode, ModeTraits, SlowdownMode,
    TESTBED_WATERMARKS,
};
pub use server::serve;
pub use stats::Document as StatsDocument;

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

/// Shared between a running server and whoever watches it.
#[derive(Debug, Default)]
pub struct Control {
    stop: AtomicBool,
    /// The port the server listens on, once it does (0 before).
    port: AtomicU16,
    /// What a controller may change while the server runs (set from the config at start).
    pub knobs: placement::Knobs,
    /// The stats of the run in progress (or the last one).
    stats: Mutex<Option<Arc<stats::Stats>>>,
}

impl Control {
    pub fn new() -> Self {
        Self::default()
    }

    /// Ask the server to stop; it writes its final stats and returns.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The bound port, or 0 while the server is not listening yet.
    pub fn port(&self) -> u16 {
        self.port.load(Ordering::Acquire)
    }

    fn set_port(&self, port: u16) {
        self.port.store(port, Ordering::Release);
    }

    fn watch(&self, stats: Arc<stats::Stats>) {
        *self.stats.lock().unwrap() = Some(stats);
    }

    /// The running server's stats document as of now (None before it starts).
    pub fn document(&self) -> Option<StatsDocument> {
        let stats = self.stats.lock().unwrap().clone();
        stats.map(|s| s.document(false))
    }
}

/// Version of the server crate.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
