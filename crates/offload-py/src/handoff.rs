//! The handoff model's bindings: its configuration as flat `section.name` keys (the
//! defaults live in Rust only), and `handoff_run`.

use offload_sim::handoff::{run, Config, Paper, Priority, Report, Selection, Watermarks, Workload};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::settings::{assign, Field};
use crate::sim::value_error;

/// Both directions of the key <-> field mapping from one list of fields (the `flows.*`
/// section from the detector's own list).
macro_rules! fields {
    ($($sec:ident . $name:ident),* $(,)?) => {
        fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
            let c = Config::default();
            let d = PyDict::new(py);
            $( d.set_item(concat!(stringify!($sec), ".", stringify!($name)),
                          Field::to_f64(c.$sec.$name))?; )*
            for (name, v) in crate::flows::floats(&c.flows) {
                d.set_item(format!("flows.{name}"), v)?;
            }
            Ok(d)
        }

        fn set(c: &mut Config, key: &str, v: f64) -> Result<(), String> {
            $( if key == concat!(stringify!($sec), ".", stringify!($name)) {
                return assign(&mut c.$sec.$name, key, v);
            } )*
            if let Some(done) = key
                .strip_prefix("flows.")
                .and_then(|name| crate::flows::set(&mut c.flows, name, key, v))
            {
                return done;
            }
            Err(format!("unknown handoff setting {key:?}"))
        }
    };
}

fields!(
    hardware.host_hz,
    hardware.nic_ips,
    hardware.link_bps,
    hardware.link_delay_s,
    hardware.rx_capacity,
    hardware.tx_capacity,
    hardware.mss,
    hardware.header_bytes,
    hardware.request_bytes,
    host.packet,
    host.connection,
    host.request,
    host.dynamic,
    host.copy_per_byte,
    host.bypass,
    host.handoff,
    host.miss,
    host.miss_lines,
    host.state_bytes,
    host.cache_bytes,
    nic.host_packet,
    nic.packet,
    nic.command,
    nic.handoff,
    nic.miss,
    nic.cache_conns,
    tcp.initial_cwnd,
    tcp.window,
    tcp.rto_s,
    tcp.syn_rto_s,
    tcp.ack_every,
    tcp.enqueue_bytes,
    run.clients,
    run.warmup_packets,
    run.packets,
    run.max_time_s,
    run.sample_s,
    run.seed,
);

/// The default configuration as `{"section.name": value}`.
#[pyfunction]
fn handoff_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    defaults(py)
}

/// Run the handoff model once. `settings` overrides defaults by `section.name`;
/// `watermarks` holds load control's hiwat, lowat, step_down and step_up by name (None:
/// no load control), `threshold` the n of T(n) selection (None: FCFS); `long_lived`
/// selects the connections the host's FastFlow detector lists instead (the `flows.*`
/// settings), whatever `threshold` says.
#[pyfunction]
#[pyo3(signature = (settings, hard_limit, host_first, watermarks, threshold, offsets, sizes,
                    dynamic, client_bps, long_lived=false))]
#[allow(clippy::too_many_arguments)]
fn handoff_run<'py>(
    py: Python<'py>,
    settings: Vec<(String, f64)>,
    hard_limit: u32,
    host_first: bool,
    watermarks: Option<WatermarkArgs>,
    threshold: Option<u32>,
    offsets: Vec<usize>,
    sizes: Vec<u64>,
    dynamic: Vec<bool>,
    client_bps: Option<f64>,
    long_lived: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let mut cfg = Config::default();
    for (key, v) in &settings {
        set(&mut cfg, key, *v).map_err(value_error)?;
    }
    let mut policy = policy(hard_limit, host_first, watermarks, threshold)?;
    if long_lived {
        policy.selection = Selection::LongLived;
    }
    let work = Workload::new(offsets, sizes, dynamic, client_bps).map_err(value_error)?;
    let report = py
        .detach(|| run(&cfg, &work, policy))
        .map_err(value_error)?;
    to_dict(py, &report)
}

/// Load control's watermarks by name, in work items per engine turn (shared with the
/// testbed).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct WatermarkArgs {
    hiwat: u32,
    lowat: u32,
    step_down: u32,
    step_up: u32,
}

/// Seed 004's policy from its switches as Python passes them (shared with the testbed).
pub(crate) fn policy(
    hard_limit: u32,
    host_first: bool,
    watermarks: Option<WatermarkArgs>,
    threshold: Option<u32>,
) -> PyResult<Paper> {
    let marks = watermarks.map(|w| Watermarks {
        hiwat: w.hiwat,
        lowat: w.lowat,
        step_down: w.step_down,
        step_up: w.step_up,
    });
    let priority = if host_first {
        Priority::HostFirst
    } else {
        Priority::Fcfs
    };
    let selection = threshold.map_or(Selection::Fcfs, Selection::Threshold);
    Paper::new(hard_limit, priority, marks, selection).map_err(value_error)
}

fn to_dict<'py>(py: Python<'py>, r: &Report) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let scalars: [(&str, f64); 23] = [
        ("measured_s", r.measured_s),
        ("requests_per_s", r.requests_per_s),
        ("packets_per_s", r.packets_per_s),
        ("connections_per_s", r.connections_per_s),
        ("http_bps", r.http_bps),
        ("host_idle", r.host_idle),
        ("host_stack", r.host_stack),
        ("nic_idle", r.nic_idle),
        ("offloaded_share", r.offloaded_share),
        ("nic_packet_share", r.nic_packet_share),
        ("host_rx_delay_median_s", r.host_rx_delay_median_s),
        ("host_rx_delay_mean_s", r.host_rx_delay_mean_s),
        ("host_tx_delay_median_s", r.host_tx_delay_median_s),
        ("host_tx_delay_mean_s", r.host_tx_delay_mean_s),
        ("response_mean_s", r.response_mean_s),
        ("response_p99_s", r.response_p99_s),
        ("rx_nic_mean_len", r.rx_nic_mean_len),
        ("rx_nic_arrivals_per_s", r.rx_nic_arrivals_per_s),
        ("rx_nic_mean_wait_s", r.rx_nic_mean_wait_s),
        ("drops", r.drops as f64),
        ("timeouts", r.timeouts as f64),
        ("handoffs_accepted", r.handoffs_accepted as f64),
        ("handoffs_refused", r.handoffs_refused as f64),
    ];
    for (k, v) in scalars {
        d.set_item(k, v)?;
    }
    d.set_item("truncated", r.truncated)?;
    d.set_item("cnum", r.cnum)?;
    let s = PyDict::new(py);
    s.set_item("t_s", r.series.iter().map(|x| x.t_s).collect::<Vec<_>>())?;
    s.set_item("cnum", r.series.iter().map(|x| x.cnum).collect::<Vec<_>>())?;
    s.set_item(
        "soft_limit",
        r.series.iter().map(|x| x.soft_limit).collect::<Vec<_>>(),
    )?;
    s.set_item("qlen", r.series.iter().map(|x| x.qlen).collect::<Vec<_>>())?;
    s.set_item(
        "requests_per_s",
        r.series
            .iter()
            .map(|x| x.requests_per_s)
            .collect::<Vec<_>>(),
    )?;
    s.set_item(
        "host_busy",
        r.series.iter().map(|x| x.host_busy).collect::<Vec<_>>(),
    )?;
    s.set_item(
        "nic_busy",
        r.series.iter().map(|x| x.nic_busy).collect::<Vec<_>>(),
    )?;
    d.set_item("series", s)?;
    Ok(d)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(handoff_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(handoff_run, m)?)?;
    Ok(())
}
