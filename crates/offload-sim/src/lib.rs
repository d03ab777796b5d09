//! OffloadLab's discrete-event simulator of a host CPU and an offload engine.
//!
//! The event kernel and the request-level and packet-level models arrive with the
//! simulator issue; for now the crate only anchors the workspace and the Python
//! extension, so that both are built and versioned together from the start.

/// Version of the simulator crate, shared with the Python package through `offloadlab._core`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
