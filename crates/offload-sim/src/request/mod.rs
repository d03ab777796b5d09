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
//! Each station may also pay costs beyond its requests' service ([`QueueCosts`]): a
//! wake-up added to the service of a request that finds no other request there, and
//! background work on its core that preempts the requests. A station may also serve in
//! gated rounds whose requests leave together, and the engine may be woken by the
//! requests as they arrive as well as by the host's answers. A request's end-to-end delay also
//! includes a fixed delay outside host and engine (d0).
//!
//! A queue whose offered load (rate times mean service, plus its background load) is 1
//! or more has no steady state; it is not simulated and its delays are reported as
//! infinite.

mod replication;
mod window;

pub use replication::{Pilot, Replication};
pub use window::{Context, Window, METRICS, SIM_ONLY};

use crate::dist::Dist;

/// One traffic class: its share of the arrivals, the fraction sent to the engine, the
/// five service times of seed 000, and its delays outside host and engine.
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
    /// d0, seconds of delay outside host and engine, added to the end-to-end delay of a
    /// request served on the host (and of every request at the host alone) ...
    pub d0_host: f64,
    /// ... and of an offloaded one (cache hits included).
    pub d0_sent: f64,
}

/// What a station pays beyond its requests' own service times.
#[derive(Clone, Debug)]
pub struct QueueCosts {
    /// Added to the service of a request that finds no other request at the station:
    /// the cost of waking it up (an exceptional first service, Welch 1964).
    pub wakeup: Dist,
    /// Service of the station's background jobs: other work on its core, arriving as a
    /// Poisson stream at the network's total rate (one job per request, independent of
    /// the requests' paths) and served with preemptive-resume priority over them.
    pub background: Dist,
    /// Seconds over which an idle station cools down: after an idle period I, a wake-up
    /// costs its draw times 1 - exp(-I / cooling) (0: the full draw, whatever I).
    pub cooling: f64,
    /// Share of the core other work holds at every rate (a steady tenant): the station
    /// runs at 1 - share of its speed, so every piece of work at it (requests, wake-ups,
    /// background jobs) takes 1 / (1 - share) times its CPU time.
    pub share: f64,
    /// Serve in gated rounds: a round takes every request waiting when it begins, and
    /// its requests leave together once the last of them is served (as a thread that
    /// drains its input ring, handles each item, then publishes what it produced in one
    /// batch). The service order stays FCFS; only the leaving waits for the round.
    pub rounds: bool,
    /// The requests also wake the station as they arrive, before the host: an offloaded
    /// request that finds it with no request and not awake pays a wake-up there, with
    /// nothing of its own to serve. The engine of engine mode reads each request from
    /// the network, then is handed the host's answers (its jobs here), and sleeps
    /// between the two whenever it has nothing to do.
    pub answers_wake: bool,
    /// The station's thread polls for work and never sleeps (io_uring's SQPOLL thread): a
    /// request that finds it idle is taken at once. Its core's account is still Welch's
    /// queue, busy through a wake-up's draw before the request that caused it: the draw
    /// counts in the busy time, and only a request that finds that account idle wakes it.
    /// Excludes `answers_wake` (nothing wakes a thread that never sleeps).
    pub polls: bool,
}

impl QueueCosts {
    /// The share of a wake-up's full cost paid after `idle` seconds without requests.
    #[inline]
    pub fn warmth(&self, idle: f64) -> f64 {
        if self.cooling > 0.0 {
            -(-idle / self.cooling).exp_m1()
        } else {
            1.0
        }
    }

    /// Wall time `work` seconds of CPU take at the station.
    #[inline]
    pub fn wall(&self, work: f64) -> f64 {
        work / (1.0 - self.share)
    }
}

impl Default for QueueCosts {
    /// No wake-up cost, no background work, each request leaving when served.
    fn default() -> Self {
        QueueCosts {
            wakeup: Dist::Det { value: 0.0 },
            background: Dist::Det { value: 0.0 },
            cooling: 0.0,
            share: 0.0,
            rounds: false,
            answers_wake: false,
            polls: false,
        }
    }
}

/// The network to simulate.
#[derive(Clone, Debug)]
pub struct Network {
    /// Total arrival rate, requests/s.
    pub rate: f64,
    pub classes: Vec<Class>,
    /// Report T as seed 000's max(T_cpu, T_oe) for offloaded requests (else the sum).
    pub delay_max: bool,
    /// Each station's costs beyond its requests' service, indexed by [`Station`].
    pub queues: [QueueCosts; 3],
}

/// The three queues, in the order used by per-station arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Station {
    Noe = 0,
    Cpu = 1,
    Oe = 2,
}

impl Station {
    pub const ALL: [Station; 3] = [Station::Noe, Station::Cpu, Station::Oe];
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
            for (name, d0) in [("d0_host", c.d0_host), ("d0_sent", c.d0_sent)] {
                if !(d0 >= 0.0 && d0.is_finite()) {
                    return Err(format!(
                        "class {i}: {name} must be finite and >= 0 s, got {d0}"
                    ));
                }
            }
        }
        for (station, q) in Station::ALL.iter().zip(&self.queues) {
            if !(q.cooling >= 0.0 && q.cooling.is_finite()) {
                return Err(format!(
                    "{station:?}: cooling must be finite and >= 0 s, got {}",
                    q.cooling
                ));
            }
            if !(0.0..1.0).contains(&q.share) {
                return Err(format!(
                    "{station:?}: share must lie in [0, 1), got {}",
                    q.share
                ));
            }
        }
        let total: f64 = self.classes.iter().map(|c| c.share).sum();
        if (total - 1.0).abs() > 1e-9 {
            return Err(format!("class shares must add up to 1, got {total}"));
        }
        Ok(())
    }

    /// Offered load (rate x mean service) of each class at each station: the requests'
    /// own work, without wake-ups or background.
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

    /// Background load at each station: rate x mean background job, plus the steady share.
    pub fn background_load(&self) -> [f64; 3] {
        self.queues
            .each_ref()
            .map(|q| self.rate * q.background.mean() + q.share)
    }

    /// Which stations have a steady state (offered load of the requests and of the
    /// background below 1, with the same rounding margin as
    /// `offloadlab.results.SATURATED_AT`). Wake-ups do not count: they vanish as a queue
    /// fills. The engine is only fed by the host, so it counts as unstable when the host
    /// is.
    pub fn stable(&self) -> [bool; 3] {
        const SATURATED_AT: f64 = 1.0 - 1e-12;
        let load = self.offered_load();
        let background = self.background_load();
        let total = |s: usize| load.iter().map(|l| l[s]).sum::<f64>() + background[s];
        let cpu = total(1) < SATURATED_AT;
        [total(0) < SATURATED_AT, cpu, cpu && total(2) < SATURATED_AT]
    }
}
