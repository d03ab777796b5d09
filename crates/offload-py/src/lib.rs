//! `offloadlab._core`: thin PyO3 bindings. Logic lives in the other crates; the Python
//! side (`offloadlab.sim`, `offloadlab.testbed`) checks user input and shapes results.

use pyo3::prelude::*;

mod closed;
mod flows;
mod handoff;
mod load;
mod server;
mod sim;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", offload_sim::VERSION)?;
    sim::register(m)?;
    handoff::register(m)?;
    closed::register(m)?;
    flows::register(m)?;
    load::register(m)?;
    server::register(m)?;
    Ok(())
}
