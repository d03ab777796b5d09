//! OffloadLab's discrete-event simulator of a host CPU and an offload engine.
//!
//! - [`calendar`]: the event kernel's time-ordered event queue;
//! - [`dist`]: service-time distributions with the semantics of `offloadlab.dist`;
//! - [`stats`]: output analysis (confidence intervals, MSER-5 warm-up detection);
//! - [`request`]: seed 000's request-level host + engine network, next to the host alone;
//! - [`handoff`]: seed 004's packet-level host + offload NIC with connection handoff and
//!   its policies;
//! - [`experiment`]: warm-up, batch means or replications, precision targets;
//! - [`closed`]: a closed multi-class network of PS and delay stations, to check MVA.

pub mod calendar;
pub mod closed;
pub mod dist;
pub mod experiment;
pub mod handoff;
pub mod request;
pub mod stats;

/// Version of the simulator crate, shared with the Python package through `offloadlab._core`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
