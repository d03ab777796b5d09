//! The load generator's bindings: `load` runs a plan against a target with the GIL
//! released; `LoadControl` shows live progress and cancels.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use offload_load::report::{self, Quantiles};
use offload_load::{Method, Object, Options, Plan, Planned, Target, Verify};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::sim::value_error;

/// Progress of a running load (requests sent, done, failed; body bytes; the p99 of the
/// latest window in µs) and a way to cancel it.
#[pyclass(frozen, module = "offloadlab._core")]
struct LoadControl(Arc<offload_load::Control>);

#[pymethods]
impl LoadControl {
    #[new]
    fn new() -> Self {
        LoadControl(Arc::new(offload_load::Control::new()))
    }

    #[getter]
    fn sent(&self) -> u64 {
        self.0.sent.load(Ordering::Relaxed)
    }

    #[getter]
    fn done(&self) -> u64 {
        self.0.done.load(Ordering::Relaxed)
    }

    #[getter]
    fn errors(&self) -> u64 {
        self.0.errors.load(Ordering::Relaxed)
    }

    #[getter]
    fn bytes(&self) -> u64 {
        self.0.bytes.load(Ordering::Relaxed)
    }

    #[getter]
    fn p99_us(&self) -> u64 {
        self.0.p99_us.load(Ordering::Relaxed)
    }

    fn cancel(&self) {
        self.0.cancel();
    }
}

/// One object: (path, size in bytes, SHA-256 as 64 hex digits or "", size class).
type ObjectTuple = (String, u64, String, u8);

fn sha256(hex: &str) -> PyResult<Option<[u8; 32]>> {
    if hex.is_empty() {
        return Ok(None);
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
        })
        .collect();
    match bytes.map(<[u8; 32]>::try_from) {
        Some(Ok(digest)) => Ok(Some(digest)),
        _ => Err(value_error(format!(
            "checksum {hex:?} is not 64 hexadecimal digits"
        ))),
    }
}

/// Run a plan: the requests as parallel lists (intended time or think time, object
/// index, connection id, keep-alive flag, client). With `repeat` (closed loop), clients
/// start their requests over until `max_duration_s`; with `start_unix_s`, the run
/// starts at that wall-clock time. Returns a dict: "report" (the report's JSON text),
/// with `records` "records" (a dict of lists), and with `parts` "parts" (the JSON text
/// of `Report::parts`, what `merge_histograms` adds up across hosts).
#[pyfunction]
#[pyo3(signature = (addr, host, allow_remote, objects, at_s, object, conn, keep_alive, client,
                    closed, threads, timeout_s, max_duration_s, method, verify, records,
                    busy_poll_s, repeat=false, cores=Vec::new(), nice=0, rcvlowat=0,
                    discard=false, start_unix_s=None, parts=false, control=None))]
#[allow(clippy::too_many_arguments)]
fn load<'py>(
    py: Python<'py>,
    addr: &str,
    host: &str,
    allow_remote: bool,
    objects: Vec<ObjectTuple>,
    at_s: Vec<f64>,
    object: Vec<u32>,
    conn: Vec<u64>,
    keep_alive: Vec<bool>,
    client: Vec<u32>,
    closed: bool,
    threads: usize,
    timeout_s: f64,
    max_duration_s: f64,
    method: &str,
    verify: &str,
    records: bool,
    busy_poll_s: f64,
    repeat: bool,
    cores: Vec<usize>,
    nice: i32,
    rcvlowat: u32,
    discard: bool,
    start_unix_s: Option<f64>,
    parts: bool,
    control: Option<&LoadControl>,
) -> PyResult<Bound<'py, PyDict>> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|_| value_error(format!("{addr:?} is not IP:PORT")))?;
    let target = Target::new(addr, host, allow_remote).map_err(value_error)?;
    let n = at_s.len();
    if [object.len(), conn.len(), keep_alive.len(), client.len()]
        .iter()
        .any(|&m| m != n)
    {
        return Err(value_error("the request columns differ in length".into()));
    }
    let objects = objects
        .into_iter()
        .map(|(path, size, hex, class)| {
            Ok(Object {
                path,
                size,
                sha256: sha256(&hex)?,
                class,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let requests = (0..n)
        .map(|i| Planned {
            at_s: at_s[i],
            object: object[i],
            conn: conn[i],
            keep_alive: keep_alive[i],
            client: client[i],
        })
        .collect();
    let plan = Plan {
        objects,
        requests,
        closed,
    };
    plan.check().map_err(value_error)?;
    let options = Options {
        threads,
        timeout_s,
        max_duration_s,
        method: match method {
            "HEAD" | "head" => Method::Head,
            _ => Method::Get,
        },
        verify: match verify {
            "none" => Verify::None,
            "length" => Verify::Length,
            _ => Verify::Checksum,
        },
        records,
        busy_poll_s,
        repeat,
        cores,
        nice,
        rcvlowat,
        discard,
        start_unix_s,
        ..Options::default()
    };
    options.check().map_err(value_error)?;
    // Many connections need many descriptors: lift the soft limit as the binary does.
    offload_load::raise_fd_limit();
    let control = control.map_or_else(|| Arc::new(offload_load::Control::new()), |c| c.0.clone());
    let report = py.detach(|| offload_load::run(&target, &plan, &options, &control));
    let report = match report {
        Ok(r) => r,
        Err(_) if control.is_cancelled() => {
            return Err(PyKeyboardInterrupt::new_err("load cancelled"))
        }
        Err(e) => return Err(value_error(e)),
    };
    let out = PyDict::new(py);
    out.set_item("report", crate::json_text(&report.document()))?;
    if parts {
        out.set_item("parts", crate::json_text(&report.parts()))?;
    }
    if let Some(r) = &report.records {
        let rec = PyDict::new(py);
        rec.set_item("request", &r.request)?;
        rec.set_item("intended_s", &r.intended_s)?;
        rec.set_item("sent_s", &r.sent_s)?;
        rec.set_item("connect_s", &r.connect_s)?;
        rec.set_item("ttfb_s", &r.ttfb_s)?;
        rec.set_item("total_s", &r.total_s)?;
        rec.set_item("bytes", &r.bytes)?;
        rec.set_item("status", &r.status)?;
        // As numbers: a Vec<u8> would reach Python as one bytes object.
        let error: Vec<u32> = r.error.iter().map(|&e| u32::from(e)).collect();
        rec.set_item("error", error)?;
        rec.set_item("object", &r.object)?;
        rec.set_item("conn", &r.conn)?;
        out.set_item("records", rec)?;
    }
    Ok(out)
}

/// A sum of histograms and what the report says of it.
#[derive(serde::Serialize)]
struct Merged {
    /// The sum, encoded as its parts were.
    histogram: String,
    #[serde(flatten)]
    quantiles: Quantiles,
    /// Each bucket that holds values: its highest value (ns) and its count.
    buckets: Vec<(u64, u64)>,
}

/// The sum of histograms in the encoding of `load`'s parts, bucket by bucket, as the JSON
/// text of `Merged`: the sum encoded, its quantiles as a report gives them, its buckets.
#[pyfunction]
fn merge_histograms(encoded: Vec<String>) -> PyResult<String> {
    let sum = report::merge_encoded(encoded.as_slice()).map_err(value_error)?;
    Ok(crate::json_text(&Merged {
        histogram: report::encode(&sum),
        quantiles: Quantiles::of(&sum),
        buckets: report::buckets(&sum),
    }))
}

/// Add the load generator's names to the module.
/// The `offload-load` command on `argv` (program name first), with the GIL released;
/// Ctrl-C stops the run early and its report is still printed. Returns the exit code.
#[pyfunction]
fn load_cli(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| offload_load::cli::main(argv, || Python::attach(|py| py.check_signals().is_err())))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(load_cli, m)?)?;
    m.add_class::<LoadControl>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(merge_histograms, m)?)?;
    let kinds: Vec<(u8, &str)> = offload_load::ErrorKind::ALL
        .iter()
        .map(|k| (k.code(), k.name()))
        .collect();
    m.add("LOAD_ERRORS", kinds)?;
    Ok(())
}
