//! What one observation window (a batch, or a whole replication) accumulates, and the
//! result-schema metrics computed from it.
//!
//! Everything is a sum or a count, so windows merge exactly by adding: batch means can
//! double their batch size by merging neighbours, and the run total is the sum of its
//! batches. Memory does not grow with the number of requests.

use crate::stats::Tally;

use super::Station;

/// The metrics of the result schema, in the order of every metrics row.
pub const METRICS: [&str; 13] = [
    "U_noe", "W_noe", "T_noe", "U_cpu", "W_cpu", "T_cpu", "U_oe", "W_oe", "T_oe", "T", "T_sum",
    "N_q", "N_oe",
];

/// Columns the simulator adds after [`METRICS`]: the mean number of requests at the
/// host alone and at the host with the engine (waiting or in service), and the share of
/// each station's requests that found no other request there (its wake-ups per request).
pub const SIM_ONLY: [&str; 5] = ["N_noe", "N_cpu", "wakeups_noe", "wakeups_cpu", "wakeups_oe"];

/// Waits, sojourns and busy time of one class at one queue ("leg").
#[derive(Clone, Copy, Debug, Default)]
pub struct Leg {
    pub wait: Tally,
    pub sojourn: Tally,
    /// Service time of the departures, wake-ups included (busy time spent on this
    /// class here).
    pub busy: f64,
    /// Departures that found no other request at the queue, so woke it up (and, at an
    /// engine the requests wake as they arrive, those arrivals; `busy` has their CPU).
    pub wakeups: u64,
}

impl Leg {
    /// A request leaves after waiting `wait` and being served for `service`; `wake` is
    /// the CPU of a polling queue's wake-up it caused, busy time outside its sojourn.
    #[inline]
    pub fn depart(&mut self, wait: f64, service: f64, wake: f64, woke: bool) {
        self.wait.add(wait);
        self.sojourn.add(wait + service);
        self.busy += service + wake;
        self.wakeups += u64::from(woke);
    }

    fn merge(&mut self, other: &Leg) {
        self.wait.merge(&other.wait);
        self.sojourn.merge(&other.sojourn);
        self.busy += other.busy;
        self.wakeups += other.wakeups;
    }

    /// Wake-ups per departure; a saturated queue never empties, so none.
    fn wakeup_share(&self, ok: bool) -> f64 {
        if ok {
            self.wakeups as f64 / self.sojourn.n as f64
        } else {
            0.0
        }
    }
}

/// One class's legs: host alone, host for requests kept there, host for offloaded
/// requests, engine for them, engine for the cache's hits (which skip the host); and
/// the end-to-end sojourn of offloaded requests that missed.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassTally {
    pub noe: Leg,
    pub host_kept: Leg,
    pub host_sent: Leg,
    pub oe: Leg,
    pub hit: Leg,
    pub end_to_end_sent: Tally,
}

impl ClassTally {
    fn merge(&mut self, other: &ClassTally) {
        self.noe.merge(&other.noe);
        self.host_kept.merge(&other.host_kept);
        self.host_sent.merge(&other.host_sent);
        self.oe.merge(&other.oe);
        self.hit.merge(&other.hit);
        self.end_to_end_sent.merge(&other.end_to_end_sent);
    }

    /// All departures from the host with the engine.
    fn host(&self) -> Leg {
        let mut host = self.host_kept;
        host.merge(&self.host_sent);
        host
    }

    /// All departures from the engine, misses and hits.
    fn engine(&self) -> Leg {
        let mut engine = self.oe;
        engine.merge(&self.hit);
        engine
    }
}

/// Sums over one window of simulated time.
#[derive(Clone, Debug)]
pub struct Window {
    pub duration: f64,
    /// Time integrals of the number of requests at each queue ([`Station`] order):
    /// waiting (a request preempted by background work waits), and waiting or in
    /// service.
    pub area_queue: [f64; 3],
    pub area_total: [f64; 3],
    pub classes: Vec<ClassTally>,
}

/// What the metrics need to know about the network besides the sums.
#[derive(Clone, Debug)]
pub struct Context {
    pub delay_max: bool,
    pub stable: [bool; 3],
    /// Offered load per class and station (used for saturated stations).
    pub offered: Vec<[f64; 3]>,
    pub offload: Vec<f64>,
    /// Each class's d0: for a request served on the host, and for an offloaded one.
    pub d0: Vec<[f64; 2]>,
}

impl Window {
    pub fn new(classes: usize) -> Window {
        Window {
            duration: 0.0,
            area_queue: [0.0; 3],
            area_total: [0.0; 3],
            classes: vec![ClassTally::default(); classes],
        }
    }

    pub fn merge(&mut self, other: &Window) {
        self.duration += other.duration;
        for s in 0..3 {
            self.area_queue[s] += other.area_queue[s];
            self.area_total[s] += other.area_total[s];
        }
        for (a, b) in self.classes.iter_mut().zip(&other.classes) {
            a.merge(b);
        }
    }

    /// Metrics rows: row 0 for all classes, then one per class; the columns are
    /// [`METRICS`] then [`SIM_ONLY`].
    ///
    /// Delays are means over the departures in the window. Per-class counts (N_*) come
    /// from Little's law (class throughput x mean time); the all-classes ones are time
    /// averages. T mixes a class's paths by their observed shares: kept requests take
    /// their host sojourn; offloaded ones max(host, engine) sojourn means with
    /// `delay_max` (seed 000), else their end-to-end sojourn; hits their engine sojourn.
    /// The engine's U, W and T cover misses and hits alike. The end-to-end delays (T_noe,
    /// T, T_sum) add the class's d0 to the sojourns; the stations' W and T do not. A
    /// saturated station reports its offered load as U and infinite delays; a mean over
    /// no departures is NaN.
    pub fn metrics(&self, ctx: &Context) -> Vec<Vec<f64>> {
        let per_class: Vec<Vec<f64>> = self
            .classes
            .iter()
            .enumerate()
            .map(|(c, t)| self.class_row(c, t, ctx))
            .collect();
        let mut rows = vec![self.all_row(&per_class, ctx)];
        rows.extend(per_class);
        rows
    }

    fn class_row(&self, c: usize, t: &ClassTally, ctx: &Context) -> Vec<f64> {
        let [noe_ok, cpu_ok, oe_ok] = ctx.stable;
        let offered = ctx.offered[c];
        let util = |ok: bool, busy: f64, s: Station| {
            if ok {
                busy / self.duration
            } else {
                offered[s as usize]
            }
        };
        let mean = |ok: bool, tally: Tally| if ok { tally.mean() } else { f64::INFINITY };
        let [d0_host, d0_sent] = ctx.d0[c];
        let (host, engine) = (t.host(), t.engine());
        let uses_engine = ctx.offload[c] > 0.0;
        let engine_ok = oe_ok || !uses_engine;

        let (w_oe, t_oe) = (
            mean(engine_ok, engine.wait),
            mean(engine_ok, engine.sojourn),
        );
        let kept = mean(cpu_ok, t.host_kept.sojourn) + d0_host;
        let sent_sum = mean(cpu_ok && engine_ok, t.end_to_end_sent) + d0_sent;
        let sent_max =
            mean(cpu_ok, t.host_sent.sojourn).max(mean(engine_ok, t.oe.sojourn)) + d0_sent;
        let hit = mean(engine_ok, t.hit.sojourn) + d0_sent;
        let counts = [
            t.host_kept.sojourn.n,
            t.host_sent.sojourn.n,
            t.hit.sojourn.n,
        ];
        let sent = if ctx.delay_max { sent_max } else { sent_sum };
        let little = |ok: bool, sojourn: Tally| {
            if ok {
                sojourn.sum / self.duration
            } else {
                f64::INFINITY
            }
        };
        // Little's law per class; a saturated engine holds an unbounded number.
        let count = |n: u64, time: f64| {
            if engine_ok {
                weighted(n as f64 / self.duration, time)
            } else {
                f64::INFINITY
            }
        };
        vec![
            util(noe_ok, t.noe.busy, Station::Noe),
            mean(noe_ok, t.noe.wait),
            mean(noe_ok, t.noe.sojourn) + d0_host,
            util(cpu_ok, host.busy, Station::Cpu),
            mean(cpu_ok, host.wait),
            mean(cpu_ok, host.sojourn),
            util(oe_ok, engine.busy, Station::Oe),
            w_oe,
            t_oe,
            paths(counts, [kept, sent, hit]),
            paths(counts, [kept, sent_sum, hit]),
            count(engine.wait.n, w_oe),
            count(engine.sojourn.n, t_oe),
            little(noe_ok, t.noe.sojourn),
            little(cpu_ok, host.sojourn),
            t.noe.wakeup_share(noe_ok),
            host.wakeup_share(cpu_ok),
            engine.wakeup_share(engine_ok),
        ]
    }

    fn all_row(&self, per_class: &[Vec<f64>], ctx: &Context) -> Vec<f64> {
        let [noe_ok, cpu_ok, oe_ok] = ctx.stable;
        // `pick` gets a class's tallies and its d0s.
        let pooled = |ok: bool, pick: fn(&ClassTally, [f64; 2]) -> [Tally; 2]| {
            if !ok {
                return f64::INFINITY;
            }
            let mut total = Tally::default();
            for (t, &d0) in self.classes.iter().zip(&ctx.d0) {
                pick(t, d0).iter().for_each(|x| total.merge(x));
            }
            total.mean()
        };
        let sum_col = |col: usize| per_class.iter().map(|r| r[col]).sum::<f64>();
        // A class's T weighs by the requests it had in the window: its host departures
        // and its hits.
        let departures: Vec<f64> = self
            .classes
            .iter()
            .map(|t| (t.host_kept.sojourn.n + t.host_sent.sojourn.n + t.hit.sojourn.n) as f64)
            .collect();
        let total_departures: f64 = departures.iter().sum();
        let mean_col = |col: usize| {
            per_class
                .iter()
                .zip(&departures)
                .map(|(r, n)| weighted(n / total_departures, r[col]))
                .sum()
        };
        let area = |ok: bool, a: f64| if ok { a / self.duration } else { f64::INFINITY };
        let mut all = ClassTally::default();
        self.classes.iter().for_each(|t| all.merge(t));
        vec![
            sum_col(0),
            pooled(noe_ok, |t, _| [t.noe.wait, Tally::default()]),
            pooled(noe_ok, |t, d0| {
                [t.noe.sojourn.shifted(d0[0]), Tally::default()]
            }),
            sum_col(3),
            pooled(cpu_ok, |t, _| [t.host_kept.wait, t.host_sent.wait]),
            pooled(cpu_ok, |t, _| [t.host_kept.sojourn, t.host_sent.sojourn]),
            sum_col(6),
            pooled(oe_ok, |t, _| [t.oe.wait, t.hit.wait]),
            pooled(oe_ok, |t, _| [t.oe.sojourn, t.hit.sojourn]),
            if cpu_ok { mean_col(9) } else { f64::INFINITY },
            if cpu_ok { mean_col(10) } else { f64::INFINITY },
            area(oe_ok, self.area_queue[Station::Oe as usize]),
            area(oe_ok, self.area_total[Station::Oe as usize]),
            area(noe_ok, self.area_total[Station::Noe as usize]),
            area(cpu_ok, self.area_total[Station::Cpu as usize]),
            all.noe.wakeup_share(noe_ok),
            all.host().wakeup_share(cpu_ok),
            all.engine().wakeup_share(oe_ok),
        ]
    }
}

/// The mean over a class's paths (kept, offloaded and missed, hit) weighted by their
/// departures; with none at all, the kept path's value.
fn paths(counts: [u64; 3], values: [f64; 3]) -> f64 {
    let total = counts.iter().sum::<u64>() as f64;
    let (sent, hit) = if total > 0.0 {
        (counts[1] as f64 / total, counts[2] as f64 / total)
    } else {
        (0.0, 0.0)
    };
    // The kept share by difference, so that without hits this is (1 - f) kept + f sent;
    // zero when none were kept, not a rounding residue that would weigh a NaN mean.
    let kept = if counts[0] == 0 {
        0.0
    } else {
        1.0 - sent - hit
    };
    weighted(kept, values[0]) + weighted(sent, values[1]) + weighted(hit, values[2])
}

/// w x, where a zero weight contributes 0 even if x is NaN or infinite (a path no
/// request took must not spoil the result).
fn weighted(w: f64, x: f64) -> f64 {
    if w > 0.0 {
        w * x
    } else {
        0.0
    }
}
