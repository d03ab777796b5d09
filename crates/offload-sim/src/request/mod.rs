//! The request-level model: seed 000's host and offload engine as an open network of
//! FCFS single-server queues, simulated next to the host alone.
//!
//! Requests arrive as one Poisson stream of rate `rate`; each is of class c with
//! probability `share[c]` (so each class is Poisson with rate `rate * share[c]`) and is
//! offloaded with probability `offload[c]`. Two systems see the same arrivals and the
//! same draws of X_a and X_p (common random numbers, so their difference is sharp):
//!
//! - host alone ("noe"): one queue, service X_a + X_p;
//! - host + engine: the host queue ("cpu") serves X_a + X_p for requests kept on the
//!   host and X_a + X_o for offloaded ones, which then queue at the engine ("oe") for
//!   X_c + X_q. With an object cache on the engine (seed 001), a share `hit` of the
//!   offloaded requests skips the host and is served by the engine alone for X_h.
//!
//! A queue whose offered load (rate times mean service) is 1 or more has no steady
//! state; it is not simulated and its delays are reported as infinite.

mod replication;
mod window;

pub use replication::{Pilot, Replication};
pub use window::{Context, Window, METRICS, SIM_ONLY};

use crate::dist::Dist;

/// One traffic class: its share of the arrivals, the fraction sent to the engine, and
/// the five service times of seed 000.
#[derive(Clone, Debug)]
pub struct Class {
    pub share: f64,
    pub offload: f64,
    /// X_a, application work on the host.
    pub app: Dist,
    /// X_p, protocol work on the host when not offloaded.
    pub host_proto: Dist,
    /// X_o, host cost of driving the engine when offloaded.
    pub host_overhead: Dist,
    /// X_c, engine cost of the host's commands.
    pub engine_overhead: Dist,
    /// X_q, protocol work on the engine.
    pub engine_proto: Dist,
    /// Share of the offloaded requests the engine's cache answers alone.
    pub hit: f64,
    /// X_h, the engine's cost of a hit.
    pub engine_hit: Dist,
}

/// The network to simulate.
#[derive(Clone, Debug)]
pub struct Network {
    /// Total arrival rate, requests/s.
    pub rate: f64,
    pub classes: Vec<Class>,
    /// Report T as seed 000's max(T_cpu, T_oe) for offloaded requests (else the sum).
    pub delay_max: bool,
}

/// The three queues, in the order used by per-station arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Station {
    Noe = 0,
    Cpu = 1,
    Oe = 2,
}

impl Network {
    /// Check the parameters; the message names the field at fault.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rate > 0.0 && self.rate.is_finite()) {
            return Err(format!(
                "rate must be finite and > 0 requests/s, got {}",
                self.rate
            ));
        }
        if self.classes.is_empty() {
            return Err("at least one class is needed".into());
        }
        for (i, c) in self.classes.iter().enumerate() {
            if !(c.share > 0.0 && c.share.is_finite()) {
                return Err(format!("class {i}: share must be > 0, got {}", c.share));
            }
            if !(0.0..=1.0).contains(&c.offload) {
                return Err(format!(
                    "class {i}: offload must lie in [0, 1], got {}",
                    c.offload
                ));
            }
            if !(0.0..=1.0).contains(&c.hit) {
                return Err(format!("class {i}: hit must lie in [0, 1], got {}", c.hit));
            }
        }
        let total: f64 = self.classes.iter().map(|c| c.share).sum();
        if (total - 1.0).abs() > 1e-9 {
            return Err(format!("class shares must add up to 1, got {total}"));
        }
        Ok(())
    }

    /// Offered load (rate x mean service) of each class at each station.
    pub fn offered_load(&self) -> Vec<[f64; 3]> {
        self.classes
            .iter()
            .map(|c| {
                let lam = self.rate * c.share;
                let (a, p) = (c.app.mean(), c.host_proto.mean());
                let o = c.host_overhead.mean();
                let e = c.engine_overhead.mean() + c.engine_proto.mean();
                let (f, h) = (c.offload, c.hit);
                [
                    lam * (a + p),
                    lam * ((1.0 - f) * (a + p) + f * (1.0 - h) * (a + o)),
                    lam * f * ((1.0 - h) * e + h * c.engine_hit.mean()),
                ]
            })
            .collect()
    }

    /// Which stations have a steady state (total offered load below 1, with the same
    /// rounding margin as `offloadlab.results.SATURATED_AT`). The engine is only fed by
    /// the host, so it counts as unstable when the host is.
    pub fn stable(&self) -> [bool; 3] {
        const SATURATED_AT: f64 = 1.0 - 1e-12;
        let load = self.offered_load();
        let total = |s: usize| load.iter().map(|l| l[s]).sum::<f64>();
        let cpu = total(1) < SATURATED_AT;
        [total(0) < SATURATED_AT, cpu, cpu && total(2) < SATURATED_AT]
    }
}
