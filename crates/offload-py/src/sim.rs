//! The simulator's bindings: distributions, progress/cancel control, `simulate`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use offload_sim::dist::Dist;
use offload_sim::experiment::{self, Plan, Precision, Warmup};
use offload_sim::request::{Class, Network, QueueCosts, METRICS, SIM_ONLY};
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

pub(crate) fn value_error(message: String) -> PyErr {
    PyValueError::new_err(message)
}

/// A service-time distribution for the simulator and the testbed server's application
/// work (built by `offloadlab.sim.to_core` from an `offloadlab.dist` value).
#[pyclass(name = "Dist", frozen, from_py_object, module = "offloadlab._core")]
#[derive(Clone)]
pub(crate) struct PyDist(pub(crate) Dist);

#[pymethods]
impl PyDist {
    #[staticmethod]
    fn exp(mean: f64) -> PyResult<Self> {
        Dist::exp(mean).map(PyDist).map_err(value_error)
    }

    #[staticmethod]
    fn det(value: f64) -> PyResult<Self> {
        Dist::det(value).map(PyDist).map_err(value_error)
    }

    #[staticmethod]
    fn lognormal(nu: f64, sigma: f64) -> PyResult<Self> {
        Dist::lognormal(nu, sigma).map(PyDist).map_err(value_error)
    }

    #[staticmethod]
    fn pareto(alpha: f64, k: f64) -> PyResult<Self> {
        Dist::pareto(alpha, k).map(PyDist).map_err(value_error)
    }

    #[staticmethod]
    fn bpareto(alpha: f64, lo: f64, hi: f64) -> PyResult<Self> {
        Dist::bpareto(alpha, lo, hi)
            .map(PyDist)
            .map_err(value_error)
    }

    #[staticmethod]
    fn empirical(values: Vec<f64>) -> PyResult<Self> {
        Dist::empirical(values).map(PyDist).map_err(value_error)
    }

    #[staticmethod]
    fn mixture(weights: Vec<f64>, parts: Vec<PyDist>) -> PyResult<Self> {
        Dist::mixture(weights, parts.into_iter().map(|d| d.0).collect())
            .map(PyDist)
            .map_err(value_error)
    }

    /// `n` draws with the simulator's generator seeded with `seed`.
    fn sample(&self, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n).map(|_| self.0.sample(&mut rng)).collect()
    }

    #[getter]
    fn mean(&self) -> f64 {
        self.0.mean()
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.0)
    }
}

/// Progress of a running simulation and a way to cancel it, shared across threads.
#[pyclass(frozen, module = "offloadlab._core")]
struct Control(Arc<experiment::Control>);

#[pymethods]
impl Control {
    #[new]
    fn new() -> Self {
        Control(Arc::default())
    }

    /// Requests simulated so far (all replications, warm-up pilots included).
    #[getter]
    fn done(&self) -> u64 {
        self.0.done.load(Ordering::Relaxed)
    }

    fn cancel(&self) {
        self.0.cancel.store(true, Ordering::Relaxed);
    }
}

/// One class: (share, offload fraction, app, host_proto, host_overhead,
/// engine_overhead, engine_proto, hit ratio, engine_hit).
type ClassTuple = (
    f64,
    f64,
    PyDist,
    PyDist,
    PyDist,
    PyDist,
    PyDist,
    f64,
    PyDist,
);

/// One station: (wakeup, background, cooling seconds, steady background share of the
/// core, served in gated rounds, woken by the requests' arrivals too, polls).
type QueueTuple = (PyDist, PyDist, f64, f64, bool, bool, bool);

/// Simulate the request-level network once (one rate point). Returns a dict of plain
/// Python values; see `offloadlab.sim` for their meaning. `warmup=None` means MSER-5.
/// `queues` gives each station (noe, cpu, oe) as a [`QueueTuple`] and `d0` each class as
/// (d0 on the host, d0 offloaded), in seconds; None: no such costs.
#[pyfunction]
#[pyo3(signature = (rate, classes, delay_max, requests, seed, replications, warmup, batches,
                    precision, precision_metric, threads, queues=None, d0=None,
                    control=None))]
#[allow(clippy::too_many_arguments)]
fn simulate<'py>(
    py: Python<'py>,
    rate: f64,
    classes: Vec<ClassTuple>,
    delay_max: bool,
    requests: u64,
    seed: u64,
    replications: u32,
    warmup: Option<u64>,
    batches: u32,
    precision: Option<f64>,
    precision_metric: usize,
    threads: usize,
    queues: Option<[QueueTuple; 3]>,
    d0: Option<Vec<(f64, f64)>>,
    control: Option<&Control>,
) -> PyResult<Bound<'py, PyDict>> {
    let d0 = d0.unwrap_or_else(|| vec![(0.0, 0.0); classes.len()]);
    if d0.len() != classes.len() {
        return Err(value_error(format!(
            "d0 needs one (host, sent) pair per class: {} for {} classes",
            d0.len(),
            classes.len()
        )));
    }
    let net = Network {
        rate,
        delay_max,
        queues: queues.map_or_else(Default::default, |q| {
            q.map(
                |(wakeup, background, cooling, share, rounds, answers_wake, polls)| QueueCosts {
                    wakeup: wakeup.0,
                    background: background.0,
                    cooling,
                    share,
                    rounds,
                    answers_wake,
                    polls,
                },
            )
        }),
        classes: classes
            .into_iter()
            .zip(d0)
            .map(
                |((share, offload, a, p, o, c, q, hit, x), (d0_host, d0_sent))| Class {
                    share,
                    offload,
                    app: a.0,
                    host_proto: p.0,
                    host_overhead: o.0,
                    engine_overhead: c.0,
                    engine_proto: q.0,
                    hit,
                    engine_hit: x.0,
                    d0_host,
                    d0_sent,
                },
            )
            .collect(),
    };
    let plan = Plan {
        requests,
        seed,
        replications,
        warmup: warmup.map_or(Warmup::Mser5, Warmup::Count),
        batches,
        precision: precision.map(|relative| Precision {
            relative,
            metric: precision_metric,
        }),
        threads,
    };
    net.validate().map_err(value_error)?;
    plan.validate().map_err(value_error)?;
    let control = control.map_or_else(Arc::default, |c| c.0.clone());
    let outcome = py
        .detach(|| experiment::simulate(&net, &plan, &control))
        .map_err(|_| PyKeyboardInterrupt::new_err("simulation cancelled"))?;

    let out = PyDict::new(py);
    out.set_item("metrics", &outcome.metrics)?;
    out.set_item("half_width", &outcome.half_width)?;
    out.set_item("replications", &outcome.replications)?;
    out.set_item("warmup", &outcome.warmup)?;
    out.set_item("measured", &outcome.measured)?;
    out.set_item("batches", outcome.batches)?;
    out.set_item("batch_size", outcome.batch_size)?;
    out.set_item("precision_met", outcome.precision_met)?;
    out.set_item("events", outcome.events)?;
    out.set_item("wall_s", outcome.wall_s)?;
    out.set_item("notes", &outcome.notes)?;
    let quantiles = [0.5, 0.9, 0.99, 0.999, 1.0];
    for (key, hist) in [
        ("sojourn_noe", &outcome.hist_noe),
        ("sojourn_system", &outcome.hist_system),
    ] {
        let values: Vec<f64> = quantiles
            .iter()
            .map(|&q| {
                if hist.is_empty() {
                    f64::NAN
                } else {
                    hist.value_at_quantile(q) as f64 * 1e-9
                }
            })
            .collect();
        out.set_item(key, values)?;
    }
    out.set_item("quantiles", quantiles)?;
    Ok(out)
}

/// Add the simulator's names to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("METRICS", METRICS.to_vec())?;
    m.add("SIM_ONLY", SIM_ONLY.to_vec())?;
    m.add_class::<PyDist>()?;
    m.add_class::<Control>()?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    Ok(())
}
