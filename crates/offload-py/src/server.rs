//! The testbed server's bindings: `serve` runs a server with the GIL released until its
//! `ServerControl` is stopped and returns the final stats document; the control also
//! tells the port once the server listens.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use offload_server::cache::{CacheConfig, Policy};
use offload_server::db::{Db, DbConfig};
use offload_server::{Config, EngineWait, Fault, Limits, Mode, SlowdownMode};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::handoff::WatermarkArgs;
use crate::sim::{value_error, PyDist};

/// A running server's port (0 until it listens) and its stop switch.
#[pyclass(frozen, module = "offloadlab._core")]
struct ServerControl(Arc<offload_server::Control>);

#[pymethods]
impl ServerControl {
    #[new]
    fn new() -> Self {
        ServerControl(Arc::new(offload_server::Control::new()))
    }

    #[getter]
    fn port(&self) -> u16 {
        self.0.port()
    }

    #[getter]
    fn stopped(&self) -> bool {
        self.0.is_stopped()
    }

    /// Ask the server to stop: it closes, writes its final stats and `serve` returns.
    fn stop(&self) {
        self.0.stop();
    }

    /// Same as `stop` (the name `offloadlab.background.watched` calls).
    fn cancel(&self) {
        self.0.stop();
    }

    /// The running server's stats document now, as JSON text (None before it starts).
    fn snapshot(&self, py: Python<'_>) -> Option<String> {
        py.detach(|| self.0.document().map(|doc| crate::json_text(&doc)))
    }

    /// Placement's offload fraction of each size class, from the next new connection on.
    fn set_fractions(&self, fractions: Vec<f64>) -> PyResult<()> {
        if fractions.len() > offload_server::placement::MAX_CLASSES
            || fractions.iter().any(|f| !(0.0..=1.0).contains(f))
        {
            return Err(value_error(format!(
                "fractions {fractions:?}: give at most {} values in [0, 1]",
                offload_server::placement::MAX_CLASSES
            )));
        }
        self.0.knobs.set_fractions(&fractions);
        Ok(())
    }

    /// The engine's slowdown factor from its next turn on.
    fn set_slowdown(&self, factor: f64) -> PyResult<()> {
        if !(factor.is_finite() && factor >= 0.0) {
            return Err(value_error(format!("slowdown {factor}: use a factor >= 0")));
        }
        self.0.knobs.set_slowdown(factor);
        Ok(())
    }
}

fn parse_mode(name: &str) -> PyResult<Mode> {
    Mode::named(name).ok_or_else(|| {
        value_error(format!(
            "mode {name:?}: use one of {}",
            mode_names().join(", ")
        ))
    })
}

fn mode_names() -> Vec<&'static str> {
    Mode::ALL.iter().map(|m| m.name()).collect()
}

fn slowdown_mode_names() -> Vec<&'static str> {
    SlowdownMode::ALL.iter().map(|m| m.name()).collect()
}

fn parse_engine_wait(name: &str) -> PyResult<EngineWait> {
    match name {
        "poll" => Ok(EngineWait::Poll),
        "adaptive" => Ok(EngineWait::Adaptive),
        "sleep" => Ok(EngineWait::Sleep),
        _ => Err(value_error(format!(
            "engine_wait {name:?}: use poll, adaptive or sleep"
        ))),
    }
}

fn parse_fault(spec: Option<(String, u64)>) -> PyResult<Option<Fault>> {
    match spec {
        None => Ok(None),
        Some((kind, after)) => match kind.as_str() {
            "stall" => Ok(Some(Fault::Stall { after })),
            "panic" => Ok(Some(Fault::Panic { after })),
            _ => Err(value_error(format!("fault {kind:?}: use stall or panic"))),
        },
    }
}

fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| value_error(format!("{what}={s}: use seconds >= 0")))
}

/// `serve`'s configuration, grouped as `ServerOptions.core_args()` builds it (a dict of
/// dicts): what every mode needs first, then one group per part of the server.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ServeArgs {
    host: String,
    port: u16,
    root: PathBuf,
    mode: String,
    host_core: Option<usize>,
    sendfile_above: u64,
    work: Option<PyDist>,
    seed: u64,
    max_age: u32,
    limits: LimitArgs,
    stats: StatsArgs,
    engine: EngineArgs,
    handoff: Option<HandoffArgs>,
    placement: Option<PlacementArgs>,
    cache: Option<CacheArgs>,
    db: Option<String>,
    memory: MemoryArgs,
}

/// The limits on what a client may send and how long it may take.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct LimitArgs {
    max_header_bytes: usize,
    max_uri_bytes: usize,
    max_headers: usize,
    max_conns: usize,
    header_timeout_s: f64,
    idle_timeout_s: f64,
    max_work_s: f64,
}

/// Where and how often the stats document is written.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct StatsArgs {
    path: Option<PathBuf>,
    interval_s: f64,
    endpoint: bool,
}

/// The offload engine (engine, handoff) or the SQPOLL thread (uring).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct EngineArgs {
    core: Option<usize>,
    wait: String,
    slowdown: f64,
    message_cost_s: f64,
    slowdown_mode: String,
    fault: Option<(String, u64)>,
}

/// Handoff mode's policy: the engine's Hard_limit, host first, load control's
/// watermarks (None: no load control), the n of T(n) selection (None: FCFS).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct HandoffArgs {
    hard_limit: u32,
    host_first: bool,
    watermarks: Option<WatermarkArgs>,
    threshold: Option<u32>,
}

/// Placement's size classes (the largest object of each class but the last) and first
/// offload fractions, one per class.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct PlacementArgs {
    edges: Vec<u64>,
    fractions: Vec<f64>,
}

/// The application's object cache: its byte budget, eviction policy and largest object.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct CacheArgs {
    capacity_bytes: u64,
    policy: String,
    max_object_bytes: u64,
}

/// The memory tier: files held in memory, the rest read from disk when `uncached`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct MemoryArgs {
    files: Vec<String>,
    uncached: bool,
}

/// Serve until `control.stop()`; returns the final stats document as JSON text.
/// The caller has checked the arguments (loopback, cores, limits); a run that fails
/// (a busy port, a core that cannot be used) raises RuntimeError with the reason.
#[pyfunction]
fn serve(py: Python<'_>, args: ServeArgs, control: &ServerControl) -> PyResult<String> {
    let ServeArgs {
        host,
        port,
        root,
        mode,
        host_core,
        sendfile_above,
        work,
        seed,
        max_age,
        limits,
        stats,
        engine,
        handoff,
        placement,
        cache,
        db,
        memory,
    } = args;
    let ip: IpAddr = host
        .parse()
        .map_err(|_| value_error(format!("host {host:?} is not an IP address")))?;
    let mut config = Config::new(SocketAddr::new(ip, port), root);
    config.mode = parse_mode(&mode)?;
    config.host_core = host_core;
    config.engine_core = engine.core;
    config.sendfile_above = sendfile_above;
    config.work = work.map(|d| d.0);
    config.seed = seed;
    config.engine_wait = parse_engine_wait(&engine.wait)?;
    config.engine_slowdown = engine.slowdown;
    config.engine_message_cost = seconds("engine.message_cost_s", engine.message_cost_s)?;
    config.engine_slowdown_mode = SlowdownMode::named(&engine.slowdown_mode).ok_or_else(|| {
        value_error(format!(
            "engine.slowdown_mode {:?}: use one of {}",
            engine.slowdown_mode,
            slowdown_mode_names().join(", ")
        ))
    })?;
    config.limits = Limits {
        max_header_bytes: limits.max_header_bytes,
        max_uri_bytes: limits.max_uri_bytes,
        max_headers: limits.max_headers,
        max_conns: limits.max_conns,
        header_timeout: seconds("limits.header_timeout_s", limits.header_timeout_s)?,
        idle_timeout: seconds("limits.idle_timeout_s", limits.idle_timeout_s)?,
        max_work: seconds("limits.max_work_s", limits.max_work_s)?,
    };
    config.stats_path = stats.path;
    config.stats_interval = seconds("stats.interval_s", stats.interval_s)?;
    config.stats_endpoint = stats.endpoint;
    config.fault = parse_fault(engine.fault)?;
    if let Some(h) = handoff {
        config.handoff =
            crate::handoff::policy(h.hard_limit, h.host_first, h.watermarks, h.threshold)?;
    }
    if let Some(PlacementArgs { edges, fractions }) = placement {
        let placement = offload_server::placement::Placement { edges, fractions };
        let ordered = placement.edges.windows(2).all(|w| w[0] < w[1]);
        if placement.classes() > offload_server::placement::MAX_CLASSES
            || placement.fractions.len() != placement.classes()
            || !ordered
        {
            return Err(value_error(format!(
                "placement {placement:?}: give increasing edges (at most {} classes) and one \
                 fraction per class",
                offload_server::placement::MAX_CLASSES
            )));
        }
        config.placement = Some(placement);
    }
    config.max_age = max_age;
    if let Some(cache) = cache {
        config.cache = Some(CacheConfig {
            capacity: cache.capacity_bytes,
            policy: Policy::parse(&cache.policy).map_err(value_error)?,
            max_object: cache.max_object_bytes,
        });
    }
    config.db = db.as_deref().map(DbConfig::parse);
    config.memory = memory.files;
    config.uncached = memory.uncached;
    // Every connection is a descriptor: lift the soft limit as the load generator does.
    offload_load::raise_fd_limit();
    let control = control.0.clone();
    let served = py.detach(|| offload_server::serve(config, control));
    served
        .map(|doc| crate::json_text(&doc))
        .map_err(PyRuntimeError::new_err)
}

/// Write the database tier's table afresh with `rows` items (`sqlite:PATH`, a path, or a
/// PostgreSQL URL); raises RuntimeError with the reason when it cannot.
#[pyfunction]
fn db_fill(py: Python<'_>, db: &str, rows: u64) -> PyResult<()> {
    let config = DbConfig::parse(db);
    py.detach(|| Db::fill(&config, rows))
        .map_err(PyRuntimeError::new_err)
}

/// Each mode's traits (`Mode::traits`) by mode name, as a dict of trait name to bool.
fn mode_traits(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let table = pyo3::types::PyDict::new(py);
    for mode in Mode::ALL {
        let traits = serde_json::to_value(mode.traits()).expect("a struct of bools");
        let traits: std::collections::BTreeMap<String, bool> =
            serde_json::from_value(traits).expect("a struct of bools");
        table.set_item(mode.name(), traits)?;
    }
    Ok(table)
}

/// Add the server's names to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ServerControl>()?;
    m.add_function(wrap_pyfunction!(serve, m)?)?;
    m.add_function(wrap_pyfunction!(db_fill, m)?)?;
    m.add("DB_TABLE", offload_server::db::TABLE)?;
    m.add("SERVER_VERSION", offload_server::VERSION)?;
    m.add("PLACEMENT_CLASSES", offload_server::placement::MAX_CLASSES)?;
    m.add("MODES", mode_names())?;
    m.add("MODE_TRAITS", mode_traits(m.py())?)?;
    m.add("SLOWDOWN_MODES", slowdown_mode_names())?;
    m.add("MAX_HEADERS", offload_server::http::MAX_HEADERS)?;
    let w = offload_server::TESTBED_WATERMARKS;
    m.add(
        "TESTBED_WATERMARKS",
        (w.hiwat, w.lowat, w.step_down, w.step_up),
    )?;
    Ok(())
}
