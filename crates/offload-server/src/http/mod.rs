//! HTTP/1.x for the testbed: request parsing with its limits ([`request`]), response heads
//! and canned error responses ([`response`]), and status codes ([`status`]).
//!
//! Everything here runs once per request on the event loops, so the functions write into
//! buffers the caller owns and keeps, and allocate nothing in the steady state.

pub mod request;
pub mod response;
pub mod status;

pub use request::{parse, Dynamic, Head, Method, Parsed, MAX_HEADERS};
pub use response::Date;
pub use status::Status;
