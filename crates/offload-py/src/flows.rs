//! FastFlow's bindings: the detector over a sequence of flow ids or a pcap file, the
//! Space-Saving baseline, and the KDE (for checking against scipy).

use std::path::Path;
use std::time::Instant;

use offload_flows::detector::{Detector, Params, Summary};
use offload_flows::estimate::Kde;
use offload_flows::{read_pcap, SpaceSaving};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::settings::{assign, Field};
use crate::sim::value_error;

/// Points at which the flow-size density is returned.
const KDE_POINTS: usize = 200;

/// The detector's parameters by name, from one list: Python's view of them, their floats
/// (the handoff model's `flows.*` settings), and setting one from a float.
macro_rules! detector_params {
    ($($name:ident),* $(,)?) => {
        /// The detector's parameters by name, with their defaults.
        #[pyfunction]
        fn flows_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
            let p = Params::default();
            let d = PyDict::new(py);
            $( d.set_item(stringify!($name), p.$name)?; )*
            Ok(d)
        }

        /// Each parameter of `p` by name, as a float.
        pub(crate) fn floats(p: &Params) -> Vec<(&'static str, f64)> {
            vec![$( (stringify!($name), Field::to_f64(p.$name)) ),*]
        }

        /// Set the parameter `name` from `v` (errors say `key`); None if there is no such
        /// parameter.
        pub(crate) fn set(
            p: &mut Params,
            name: &str,
            key: &str,
            v: f64,
        ) -> Option<Result<(), String>> {
            match name {
                $( stringify!($name) => Some(assign(&mut p.$name, key, v)), )*
                _ => None,
            }
        }
    };
}

detector_params!(
    fcu_flows,
    epoch_packets,
    sample_every,
    margin_bits,
    decay,
    tau,
    min_llf,
    confidence,
);

fn params(settings: &[(String, f64)]) -> Result<Params, String> {
    let mut p = Params::default();
    for (key, v) in settings {
        set(&mut p, key, key, *v)
            .unwrap_or_else(|| Err(format!("unknown detector parameter {key:?}")))?;
    }
    p.validate()?;
    Ok(p)
}

/// Run the detector over `keys` in order; returns the summary and `seconds`, the time
/// the detection loop took.
fn detect<K: Copy + Eq + std::hash::Hash>(
    keys: impl Iterator<Item = K>,
    p: Params,
) -> Result<(Summary<K>, f64), String> {
    let mut d = Detector::new(p)?;
    let start = Instant::now();
    keys.for_each(|k| d.observe(k));
    let s = d.finish();
    Ok((s, start.elapsed().as_secs_f64()))
}

fn to_dict<'py, K, T: IntoPyObject<'py>>(
    py: Python<'py>,
    s: &Summary<K>,
    seconds: f64,
    key: impl Fn(&K) -> T,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(
        "flows",
        s.llf.iter().map(|l| key(&l.key)).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "packets",
        s.llf.iter().map(|l| l.packets).collect::<Vec<_>>(),
    )?;
    d.set_item("total_packets", s.packets)?;
    d.set_item("epochs", s.epochs)?;
    d.set_item("llf_packet_share", s.llf_packet_share)?;
    d.set_item("entropy_bits", s.entropy_bits)?;
    d.set_item("flows_seen", s.flows)?;
    d.set_item("slf_flows", s.slf_flows)?;
    d.set_item("llf_samples", s.llf_samples)?;
    d.set_item("llf_sampled_flows", s.llf_sampled_flows)?;
    d.set_item("llf_flows_mle", s.llf_flows_mle)?;
    d.set_item("flows_estimate", s.flows_estimate)?;
    d.set_item("kde_bandwidth", s.size_kde.as_ref().map(|k| k.bandwidth))?;
    let (grid, density) = s.size_kde.as_ref().map_or((vec![], vec![]), |k| {
        let (lo, hi) = k.support();
        let x: Vec<f64> = (0..KDE_POINTS)
            .map(|i| lo + (hi - lo) * i as f64 / (KDE_POINTS - 1) as f64)
            .collect();
        let y = x.iter().map(|v| k.density(*v)).collect();
        (x, y)
    });
    d.set_item("kde_log10_packets", grid)?;
    d.set_item("kde_density", density)?;
    d.set_item("peak_bytes", s.peak_bytes)?;
    d.set_item("peak_tracked", s.peak_tracked)?;
    d.set_item("seconds", seconds)?;
    Ok(d)
}

/// Detect long-lived flows in a sequence of flow ids (one per packet).
#[pyfunction]
fn flows_detect<'py>(
    py: Python<'py>,
    keys: Vec<u64>,
    settings: Vec<(String, f64)>,
) -> PyResult<Bound<'py, PyDict>> {
    let p = params(&settings).map_err(value_error)?;
    let (s, seconds) = py
        .detach(|| detect(keys.into_iter(), p))
        .map_err(value_error)?;
    to_dict(py, &s, seconds, |k| *k)
}

/// Detect long-lived five-tuple flows in a pcap file; flows are named as text and the
/// dict adds `skipped`, the frames not read as packets, and `truncated`, the packets
/// whose TCP or UDP header the snap length cut.
#[pyfunction]
fn flows_detect_pcap<'py>(
    py: Python<'py>,
    path: String,
    settings: Vec<(String, f64)>,
) -> PyResult<Bound<'py, PyDict>> {
    let p = params(&settings).map_err(value_error)?;
    let (s, seconds, cap) = py
        .detach(|| {
            let cap = read_pcap(Path::new(&path))?;
            let (s, seconds) = detect(cap.packets.iter().map(|p| p.flow), p)?;
            Ok::<_, String>((s, seconds, cap))
        })
        .map_err(value_error)?;
    let d = to_dict(py, &s, seconds, |k| k.to_string())?;
    d.set_item("skipped", cap.skipped)?;
    d.set_item("truncated", cap.truncated)?;
    Ok(d)
}

/// Space-Saving with `k` counters over `keys`: the flows whose guaranteed count exceeds
/// `threshold`, their counts, the memory and the loop's `seconds`.
#[pyfunction]
fn flows_space_saving<'py>(
    py: Python<'py>,
    keys: Vec<u64>,
    k: usize,
    threshold: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let (top, bytes, seconds) = py
        .detach(|| {
            let mut s = SpaceSaving::new(k)?;
            let start = Instant::now();
            keys.iter().for_each(|key| s.observe(*key));
            let top = s.above(threshold);
            Ok::<_, String>((top, s.bytes(), start.elapsed().as_secs_f64()))
        })
        .map_err(value_error)?;
    let d = PyDict::new(py);
    d.set_item("flows", top.iter().map(|c| c.key).collect::<Vec<_>>())?;
    d.set_item("packets", top.iter().map(|c| c.count).collect::<Vec<_>>())?;
    d.set_item("bytes", bytes)?;
    d.set_item("seconds", seconds)?;
    Ok(d)
}

/// The Gaussian KDE of `points` with Silverman's bandwidth, evaluated at `xs`:
/// (bandwidth, densities).
#[pyfunction]
fn flows_kde(points: Vec<f64>, xs: Vec<f64>) -> PyResult<(f64, Vec<f64>)> {
    let kde = Kde::silverman(points).map_err(value_error)?;
    Ok((kde.bandwidth, xs.iter().map(|x| kde.density(*x)).collect()))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(flows_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(flows_detect, m)?)?;
    m.add_function(wrap_pyfunction!(flows_detect_pcap, m)?)?;
    m.add_function(wrap_pyfunction!(flows_space_saving, m)?)?;
    m.add_function(wrap_pyfunction!(flows_kde, m)?)?;
    Ok(())
}
