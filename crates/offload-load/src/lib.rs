//! OffloadLab's HTTP/1.x load generator.
//!
//! A run sends a [`Plan`] (objects, and one row per request saying when, on which
//! connection and for which client) to a [`Target`] and returns a [`Report`]: HDR
//! histograms of connect time, time to first byte and total time per size class and
//! overall, counts, errors by kind, the achieved send schedule, and optionally one
//! record per request.
//!
//! Two loops, as in `docs/workload.md` ("Request streams"):
//!
//! - **open loop** (`Plan::closed == false`): each request has an intended send time.
//!   Latency is measured from that time, not from the moment the request could actually
//!   go out, so a stalled server shows up as latency and not as a lower offered load
//!   (no coordinated omission). Requests sharing a connection go one after another on it.
//! - **closed loop**: each client waits its think time after its previous response, then
//!   sends its next request; latency runs from the end of the think time.
//!
//! The generator ([`run`]) is one thread per core, each with its own `mio` event loop,
//! non-blocking sockets and a timer for send times; requests are formatted once per
//! object, responses parsed with `httparse`, bodies streamed (counted, and hashed with
//! SHA-256 when asked). Modules, one concept each:
//!
//! - [`target`]: where requests go, and the loopback-only rule;
//! - [`plan`]: objects, planned requests, the plan's checks and simple generators;
//! - [`options`]: run options and the [`Control`] shared with a watching thread;
//! - [`error`]: the kinds of failure a request can end with;
//! - [`report`]: histograms, counters and per-request records;
//! - `http`, `body`: request bytes, response heads, body framing (chunked included);
//! - `lanes`: a plan cut into per-thread sequences of requests;
//! - `conn`: one connection's state machine; `timer`: a timerfd; `event_loop`: the loop;
//! - [`raise_fd_limit`]: room for many connections;
//! - [`cli`]: the `offload-load` command itself, for the binary and the Python script.

mod body;
pub mod cli;
mod conn;
pub mod error;
mod event_loop;
mod fdlimit;
mod http;
mod lanes;
pub mod options;
pub mod plan;
pub mod report;
pub mod target;
mod timer;

pub use error::ErrorKind;
pub use event_loop::run;
pub use fdlimit::raise_fd_limit;
pub use options::{Control, Method, Options, Verify};
pub use plan::{Object, Plan, Planned};
pub use report::{Latency, Records, Report};
pub use target::Target;

/// Version of the load generator crate.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
