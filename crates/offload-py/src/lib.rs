//! `offloadlab._core`: thin PyO3 bindings. Logic lives in the other crates.

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", offload_sim::VERSION)?;
    Ok(())
}
