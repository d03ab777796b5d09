//! The closed-network simulator's binding, `closed_simulate` (used by
//! `offloadlab.sim.closed`, which checks the input first).

use offload_sim::closed::{simulate, Network, Plan};
use offload_sim::experiment::Warmup;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::sim::value_error;

/// Batch means behind the half-widths.
const BATCHES: u32 = 20;

/// Simulate a closed network (see `offload_sim::closed`) for `requests` completions
/// after an MSER-5 warm-up. Returns a dict of lists.
#[pyfunction]
#[pyo3(signature = (demands, population, think, delay, servers, requests, seed))]
#[allow(clippy::too_many_arguments)]
fn closed_simulate<'py>(
    py: Python<'py>,
    demands: Vec<Vec<f64>>,
    population: Vec<u32>,
    think: Vec<f64>,
    delay: Vec<bool>,
    servers: Vec<u32>,
    requests: u64,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let net = Network {
        demands,
        population,
        think,
        delay,
        servers,
    };
    let plan = Plan {
        requests,
        seed,
        warmup: Warmup::Mser5,
        batches: BATCHES,
    };
    let out = py.detach(|| simulate(&net, &plan)).map_err(value_error)?;
    let d = PyDict::new(py);
    d.set_item("throughput", &out.throughput)?;
    d.set_item("throughput_hw", &out.throughput_hw)?;
    d.set_item("response", &out.response)?;
    d.set_item("response_hw", &out.response_hw)?;
    d.set_item("residence", &out.residence)?;
    d.set_item("queue", &out.queue)?;
    d.set_item("utilisation", &out.utilisation)?;
    d.set_item("warmup", out.warmup)?;
    d.set_item("requests", out.requests)?;
    d.set_item("events", out.events)?;
    d.set_item("wall_s", out.wall_s)?;
    Ok(d)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(closed_simulate, m)?)?;
    Ok(())
}
