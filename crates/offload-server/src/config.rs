//! What a server run is told: address, document root, mode, cores, limits, application
//! work and accounting. Python checks user input and builds this; Rust trusts it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use offload_sim::dist::Dist;
use offload_sim::handoff::{Paper, Priority, Selection, Watermarks};

use crate::cache::CacheConfig;
use crate::db::DbConfig;
use crate::placement::Placement;

/// Who makes the socket calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The host thread does everything (epoll + sendfile): the baseline.
    Inline,
    /// A software offload engine on its own thread makes every socket call; the host
    /// talks to it through command and completion rings.
    Engine,
    /// io_uring with its SQPOLL kernel thread as the engine.
    Uring,
    /// The engine accepts every connection and a policy (`Config::handoff`) decides which it
    /// serves as in `Engine`; the rest go to the host thread, which serves them inline.
    Handoff,
}

impl Mode {
    /// Every mode, in the order reports list them. The Python side derives its lists of
    /// modes from this one (`offloadlab._core.MODES`).
    pub const ALL: [Mode; 4] = [Mode::Inline, Mode::Engine, Mode::Uring, Mode::Handoff];

    /// The mode's name on the command line, in the stats document and in results.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Inline => "inline",
            Mode::Engine => "engine",
            Mode::Uring => "uring",
            Mode::Handoff => "handoff",
        }
    }

    /// The mode called `name`, if there is one.
    pub fn named(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// What the mode does: the one table the server and Python decide by, never a name.
    pub const fn traits(self) -> ModeTraits {
        match self {
            Mode::Inline => ModeTraits {
                engine_thread: false,
                counts_engine_wakeups: false,
                engine_busy_from_kernel: false,
                engine_spins: false,
                answers_in_rounds: false,
                answers_wake_engine: false,
                app_cache: true,
                places_connections: false,
                engine_faults: false,
                studied: true,
            },
            Mode::Engine => ModeTraits {
                engine_thread: true,
                counts_engine_wakeups: true,
                engine_busy_from_kernel: false,
                engine_spins: false,
                answers_in_rounds: true,
                answers_wake_engine: true,
                app_cache: true,
                places_connections: false,
                engine_faults: true,
                studied: true,
            },
            // The kernel's SQPOLL thread takes each submission as it is queued while it
            // polls, which it does at every rate the study runs (its idle time is 1 ms).
            Mode::Uring => ModeTraits {
                engine_thread: true,
                counts_engine_wakeups: false,
                engine_busy_from_kernel: true,
                engine_spins: true,
                answers_in_rounds: false,
                answers_wake_engine: false,
                app_cache: false,
                places_connections: false,
                engine_faults: false,
                studied: true,
            },
            // Engine mode's two loops (`engine.rs`) under a policy; the host serves the
            // connections it is handed as inline does.
            Mode::Handoff => ModeTraits {
                engine_thread: true,
                counts_engine_wakeups: true,
                engine_busy_from_kernel: false,
                engine_spins: false,
                answers_in_rounds: true,
                answers_wake_engine: true,
                app_cache: false,
                places_connections: true,
                engine_faults: false,
                studied: false,
            },
        }
    }
}

/// What a mode does, trait by trait (`Mode::traits`). Python reads the same table as
/// `offloadlab._core.MODE_TRAITS`, so a new mode is its loop and its row here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ModeTraits {
    /// A thread besides the host makes the socket calls (our engine, or io_uring's SQPOLL
    /// thread): the mode has engine CPU, a core for it and the model's offload columns.
    /// The one mode without it is the host-alone baseline.
    pub engine_thread: bool,
    /// The server counts the engine's wake-ups (`wakeups.engine`); SQPOLL is the kernel's
    /// thread, whose sleeps the server cannot see.
    pub counts_engine_wakeups: bool,
    /// The engine's busy time is the kernel's account (SQPOLL's `SqWorkTime`, sampled at
    /// scheduler ticks), as its CPU time includes its idle spin.
    pub engine_busy_from_kernel: bool,
    /// The engine spins on its core under load whatever `EngineWait` says (SQPOLL polls
    /// its submission queue), so a load generator on that core must run ahead of it.
    pub engine_spins: bool,
    /// The host hands the engine its answers in gated rounds, after answering every
    /// request it drained (docs/model.md §16): the model's `release = "round"`.
    pub answers_in_rounds: bool,
    /// The host's answers wake a sleeping engine as well as the requests do
    /// (docs/model.md §17): the model's `answers_wake`, and the wake-up fit's count.
    pub answers_wake_engine: bool,
    /// The application cache (seed 001) may run: on the host thread (set-up B) or on our
    /// engine (set-up C).
    pub app_cache: bool,
    /// The engine decides per connection whether it or the host serves it: seed 004's
    /// policy (`Config::handoff`) and model-driven placement (`Config::placement`).
    pub places_connections: bool,
    /// A fault may be injected into the engine (`Config::fault`) to test that the host
    /// takes its connections over.
    pub engine_faults: bool,
    /// `offload study` runs it: the model has every request on the host or every one
    /// through the engine, and a mode that splits them is an experiment of its own.
    pub studied: bool,
}

/// Load control's watermarks on the testbed, in work items per engine turn. An engine
/// that keeps up finds a few items per turn; one that falls behind finds about one per
/// connection it holds, so `hiwat` bounds the connections a saturated engine keeps.
pub const TESTBED_WATERMARKS: Watermarks = Watermarks {
    hiwat: 16,
    lowat: 4,
    step_down: 4,
    step_up: 2,
};

/// Seed 004's best policy, the default of `handoff` mode: host first, load control on
/// the engine's backlog (`Qlen`: the socket events and host commands it found waiting
/// in one turn of its loop), every connection offered at accept.
pub fn default_handoff() -> Paper {
    let marks = Some(TESTBED_WATERMARKS);
    Paper::new(4096, Priority::HostFirst, marks, Selection::Fcfs).expect("valid watermarks")
}

/// How an idle engine waits for work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineWait {
    /// Never sleep (a NIC processor polling its queues).
    Poll,
    /// Spin a little, then sleep on an eventfd until the host or a socket wakes it.
    Adaptive,
    /// Sleep as soon as there is nothing to do: for an engine whose core runs other
    /// work (the load generator on a 2-core machine), which a spin would take CPU from.
    Sleep,
}

impl EngineWait {
    /// How long an idle side spins before it sleeps; None: it never sleeps.
    pub fn spin(self) -> Option<Duration> {
        match self {
            EngineWait::Poll => None,
            EngineWait::Adaptive => Some(Duration::from_micros(50)),
            EngineWait::Sleep => Some(Duration::ZERO),
        }
    }
}

/// When the engine pays the slowdown it owes (`Config::engine_slowdown` and
/// `Config::engine_message_cost`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SlowdownMode {
    /// Once per busy loop turn, for all of the turn's work, in bursts of up to 5 ms:
    /// the requests of a turn wait for the whole turn's debt, as if the engine stalled
    /// after every batch.
    #[default]
    Turn,
    /// Right after each request the engine passes up and each command it carries out:
    /// a slower engine then queues like a slower processor, each operation taking
    /// (1 + factor) times as long.
    Operation,
}

impl SlowdownMode {
    pub const ALL: [SlowdownMode; 2] = [SlowdownMode::Turn, SlowdownMode::Operation];

    pub fn name(self) -> &'static str {
        match self {
            SlowdownMode::Turn => "turn",
            SlowdownMode::Operation => "operation",
        }
    }

    pub fn named(name: &str) -> Option<SlowdownMode> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// A fault injected into the engine, to test that the host takes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// After this many requests the engine stops making progress (sleeps for ever).
    Stall { after: u64 },
    /// After this many requests the engine thread panics.
    Panic { after: u64 },
}

/// Protection against bad or slow clients.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Request line plus headers; beyond it, 431.
    pub max_header_bytes: usize,
    /// Request target; beyond it, 414.
    pub max_uri_bytes: usize,
    /// Number of header fields; beyond it, 431.
    pub max_headers: usize,
    /// Open client connections; a connection beyond it gets 503 and is closed.
    pub max_conns: usize,
    /// From the first byte of a request (or from accept) to the end of its head.
    pub header_timeout: Duration,
    /// A kept-alive connection with no request in progress is closed after this.
    pub idle_timeout: Duration,
    /// CPU a dynamic page may ask for (`?work=`); beyond it, 400. One request's work
    /// holds up every other client of its thread, so it must be bounded.
    pub max_work: Duration,
}

/// The longest a refused client is read from and its bytes dropped before its
/// connection closes (nginx's `lingering_timeout` is 5 s).
pub const LINGER: Duration = Duration::from_secs(2);

/// What an open connection waits for, which decides its timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Awaiting {
    /// The client's request head; `between` once a request was answered and nothing of
    /// the next one has come yet (a kept-alive connection at rest).
    Head { between: bool },
    /// The client to read the answer being written.
    ClientRead,
    /// A refused client to close its side, while what it sends is dropped.
    ClientClose,
    /// The server itself (the application, an operation in flight): no timeout.
    Server,
}

impl Limits {
    /// How long a connection may wait for `awaiting`: the header timeout while a head
    /// is incomplete (slowloris), the idle timeout between requests and while a client
    /// does not read its answer.
    pub fn timeout(&self, awaiting: Awaiting) -> Option<Duration> {
        match awaiting {
            Awaiting::Head { between: false } => Some(self.header_timeout),
            Awaiting::Head { between: true } | Awaiting::ClientRead => Some(self.idle_timeout),
            Awaiting::ClientClose => Some(LINGER),
            Awaiting::Server => None,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 8192,
            max_uri_bytes: 4096,
            max_headers: 64,
            max_conns: 4096,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            max_work: Duration::from_secs(1),
        }
    }
}

/// One server run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen (loopback unless the caller allowed otherwise; port 0 = any).
    pub addr: SocketAddr,
    /// Document root; no request resolves outside it.
    pub root: PathBuf,
    pub mode: Mode,
    /// Core of the host thread (None: not pinned).
    pub host_core: Option<usize>,
    /// Core of the engine thread, or of io_uring's SQPOLL thread.
    pub engine_core: Option<usize>,
    /// Bodies longer than this go by sendfile; shorter ones are copied and written with
    /// the head (Apache's threshold is 8000 bytes, which makes seed 000's small/large split).
    pub sendfile_above: u64,
    /// Application work X_a per request, burned as CPU time on the host thread.
    pub work: Option<Dist>,
    /// Seed of the application-work draws.
    pub seed: u64,
    pub engine_wait: EngineWait,
    /// Extra engine CPU burned per unit of its own work (0: none; 3: a 4x slower engine).
    pub engine_slowdown: f64,
    /// Engine CPU burned per message between host and engine (an event or a command),
    /// to emulate a costly interface (seed 000's round trip per socket call).
    pub engine_message_cost: Duration,
    /// When the engine pays for both.
    pub engine_slowdown_mode: SlowdownMode,
    pub limits: Limits,
    /// Stats file, rewritten atomically every `stats_interval` and at exit.
    pub stats_path: Option<PathBuf>,
    pub stats_interval: Duration,
    /// Answer `GET /.offload/stats` with the stats document.
    pub stats_endpoint: bool,
    pub fault: Option<Fault>,
    /// The policy of `handoff` mode.
    pub handoff: Paper,
    /// `handoff` mode only: the engine places each new connection by its class's offload
    /// fraction (at its first request) instead of by `handoff`'s selection.
    pub placement: Option<Placement>,
    /// `Cache-Control: max-age` the application gives static files, seconds.
    pub max_age: u32,
    /// A reverse-proxy cache in front of the application: on the host thread in
    /// `inline` mode (seed 001's set-up B), on the engine in `engine` mode (set-up C).
    pub cache: Option<CacheConfig>,
    /// The database tier of dynamic pages that ask for items (`query=`).
    pub db: Option<DbConfig>,
    /// Request paths of the files held in memory (seed 003's hybrid placement).
    pub memory: Vec<String>,
    /// The other files are dropped from the page cache before each use, so every read
    /// goes to the disk.
    pub uncached: bool,
}

impl Config {
    /// Defaults for everything but the address and the document root.
    pub fn new(addr: SocketAddr, root: PathBuf) -> Self {
        Config {
            addr,
            root,
            mode: Mode::Inline,
            host_core: None,
            engine_core: None,
            sendfile_above: 8000,
            work: None,
            seed: 1,
            engine_wait: EngineWait::Adaptive,
            engine_slowdown: 0.0,
            engine_message_cost: Duration::ZERO,
            engine_slowdown_mode: SlowdownMode::Turn,
            limits: Limits::default(),
            stats_path: None,
            stats_interval: Duration::from_secs(1),
            stats_endpoint: false,
            fault: None,
            handoff: default_handoff(),
            placement: None,
            max_age: 3600,
            cache: None,
            db: None,
            memory: Vec::new(),
            uncached: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wait_has_its_timeout() {
        let limits = Limits::default();
        let head = limits.timeout(Awaiting::Head { between: false });
        assert_eq!(head, Some(limits.header_timeout));
        let rest = limits.timeout(Awaiting::Head { between: true });
        assert_eq!(rest, Some(limits.idle_timeout));
        assert_eq!(
            limits.timeout(Awaiting::ClientRead),
            Some(limits.idle_timeout)
        );
        assert_eq!(limits.timeout(Awaiting::Server), None);
    }

    #[test]
    fn every_mode_is_found_by_its_own_name_and_no_other() {
        for mode in Mode::ALL {
            assert_eq!(Mode::named(mode.name()), Some(mode));
        }
        let mut names: Vec<_> = Mode::ALL.iter().map(|m| m.name()).collect();
        names.dedup();
        assert_eq!(names.len(), Mode::ALL.len());
        assert_eq!(Mode::named("Inline"), None);
    }

    #[test]
    fn the_trait_table_holds_together() {
        let baseline: Vec<_> = Mode::ALL
            .into_iter()
            .filter(|m| !m.traits().engine_thread)
            .collect();
        assert_eq!(baseline, [Mode::Inline], "one host-alone mode");
        for mode in Mode::ALL {
            let t = mode.traits();
            let engine_only = [
                t.counts_engine_wakeups,
                t.engine_busy_from_kernel,
                t.engine_spins,
                t.answers_in_rounds,
                t.answers_wake_engine,
                t.places_connections,
                t.engine_faults,
            ];
            assert!(t.engine_thread || !engine_only.contains(&true), "{mode:?}");
            // A kernel thread's sleeps are not ours to count, and the answers that wake
            // an engine are the rounds the host hands it.
            assert!(
                !(t.engine_busy_from_kernel && t.counts_engine_wakeups),
                "{mode:?}"
            );
            assert!(!t.answers_wake_engine || t.answers_in_rounds, "{mode:?}");
            // A mode that splits connections is not one the study's model describes.
            assert!(!(t.places_connections && t.studied), "{mode:?}");
        }
        assert!(Mode::Inline.traits().studied && Mode::Inline.traits().app_cache);
    }
}
