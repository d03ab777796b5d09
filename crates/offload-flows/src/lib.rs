//! FastFlow (seed 002, Part A): a streaming detector of long-lived flows (LLFs) that
//! counts every packet of short-lived flows exactly and only samples the long-lived ones,
//! plus the offline estimates made from what it collected.
//!
//! - [`flow`]: the five-tuple flow identifier and the pcap reader (the FIU);
//! - [`fcu`]: a flow collection unit, exact counts of the flows not on the LLF list;
//! - [`fmu`]: the flow management unit, which merges the FCUs' uploads and the sampled
//!   LLF packets and builds the LLF list with the entropy ("typical sequence") rule;
//! - [`detector`]: two FCUs in active/standby alternation, the FMU and the sampling clock;
//! - [`estimate`]: the FMU's initialization length, the coupon-collector estimate of
//!   unseen LLFs and a Gaussian kernel density estimate with Silverman's bandwidth;
//! - [`sketch`]: Space-Saving, the heavy-hitter baseline the benchmark compares against.
//!
//! Equations follow the corrected forms of `shared/reference/002-app-server-framework.md`
//! (§2.6–2.8); `docs/flows.md` lists them with the choices made where the thesis is silent.

pub mod detector;
pub mod estimate;
pub mod fcu;
pub mod flow;
pub mod fmu;
pub mod sketch;

pub use detector::{Detector, Params, Summary};
pub use flow::{read_pcap, FlowId};
pub use sketch::SpaceSaving;

/// Bytes a hash map entry takes: the key and value plus one control byte (what
/// `std::collections::HashMap` spends per bucket).
pub(crate) fn entry_bytes<K, V>() -> usize {
    std::mem::size_of::<(K, V)>() + 1
}
