//! `offloadlab._core`: thin PyO3 bindings. Logic lives in the other crates; the Python
//! side (`offloadlab.sim`, `offloadlab.testbed`) checks user input and shapes results.

use pyo3::prelude::*;

mod closed;
mod flows;
mod handoff;
mod load;
mod server;
mod settings;
mod sim;

/// A document for Python as JSON text. Their keys are all strings, so it cannot fail.
fn json_text(doc: &impl serde::Serialize) -> String {
    serde_json::to_string(doc).expect("a document has string keys")
}

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
