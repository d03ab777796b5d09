//! A simulation experiment on the request-level network: warm-up deletion, batch means
//! or independent replications, confidence intervals, an optional precision target.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use hdrhistogram::Histogram;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::request::{Context, Network, Pilot, Replication, Window, METRICS};
use crate::stats::{half_width_95, lag1_autocorrelation, mser5};

/// How many of the first requests to discard.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Warmup {
    Count(u64),
    /// MSER-5 on a pilot prefix of the same trajectory (see [`crate::stats::mser5`]).
    Mser5,
}

/// Stop once the 95% half-width of `metric` (a column of [`METRICS`], all-classes row)
/// is at most `relative` times its estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Precision {
    pub relative: f64,
    pub metric: usize,
}

#[derive(Clone, Debug)]
pub struct Plan {
    /// Measured requests per replication (the most, with a precision target).
    pub requests: u64,
    pub seed: u64,
    pub replications: u32,
    pub warmup: Warmup,
    /// Number of batches for batch means (one replication).
    pub batches: u32,
    pub precision: Option<Precision>,
    /// Replications run on up to this many threads.
    pub threads: usize,
}

impl Plan {
    pub fn validate(&self) -> Result<(), String> {
        if self.replications == 0 {
            return Err("replications must be at least 1".into());
        }
        check_batches(self.requests, self.batches)?;
        if let Some(p) = self.precision {
            if self.replications > 1 {
                return Err(
                    "a precision target works with batch means: use one replication".into(),
                );
            }
            if !(p.relative > 0.0 && p.relative < 1.0) {
                return Err(format!("precision must lie in (0, 1), got {}", p.relative));
            }
            if p.metric >= METRICS.len() {
                return Err(format!("precision metric index {} out of range", p.metric));
            }
        }
        Ok(())
    }
}

/// Shared with the caller while a run goes on: progress (requests simulated, over all
/// replications and pilots) and a cancel flag.
#[derive(Debug, Default)]
pub struct Control {
    pub done: AtomicU64,
    pub cancel: AtomicBool,
}

#[derive(Debug, PartialEq)]
pub struct Cancelled;

/// The result of an experiment. Metrics are rows (all classes, then each class) of
/// [`METRICS`] columns, in seconds, fractions and counts.
#[derive(Debug)]
pub struct Outcome {
    pub metrics: Vec<Vec<f64>>,
    /// 95% confidence half-widths (NaN where not estimable).
    pub half_width: Vec<Vec<f64>>,
    /// Each replication's own metrics.
    pub replications: Vec<Vec<Vec<f64>>>,
    /// Per replication: requests discarded as warm-up, and measured.
    pub warmup: Vec<u64>,
    pub measured: Vec<u64>,
    /// Batch means: how many batches and their size (requests) at the end.
    pub batches: usize,
    pub batch_size: u64,
    /// Whether the precision target was met (None without a target).
    pub precision_met: Option<bool>,
    pub events: u64,
    pub wall_s: f64,
    /// Sojourn-time histograms in nanoseconds: host alone, host + engine end to end.
    pub hist_noe: Histogram<u64>,
    pub hist_system: Histogram<u64>,
    pub notes: Vec<String>,
}

/// Run the experiment `plan` on `net`. Deterministic: the same inputs give the same
/// outcome bit for bit, whatever the number of threads.
pub fn simulate(net: &Network, plan: &Plan, control: &Control) -> Result<Outcome, Cancelled> {
    let started = Instant::now();
    let reps = plan.replications as usize;
    let results: Mutex<Vec<Option<Result<Single, Cancelled>>>> =
        Mutex::new((0..reps).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..plan.threads.clamp(1, reps) {
            scope.spawn(|| loop {
                let r = next.fetch_add(1, Ordering::Relaxed);
                if r >= reps {
                    break;
                }
                let single = replicate(net, plan, r, control);
                let failed = single.is_err();
                results.lock().expect("no panics while holding the lock")[r] = Some(single);
                if failed {
                    break;
                }
            });
        }
    });
    let singles: Vec<Single> = results
        .into_inner()
        .expect("threads are done")
        .into_iter()
        .map(|s| s.unwrap_or(Err(Cancelled)))
        .collect::<Result<_, _>>()?;
    Ok(combine(singles, started.elapsed().as_secs_f64()))
}

/// One replication's outcome.
struct Single {
    metrics: Vec<Vec<f64>>,
    half_width: Vec<Vec<f64>>,
    warmup: u64,
    measured: u64,
    batches: usize,
    batch_size: u64,
    precision_met: Option<bool>,
    events: u64,
    hist_noe: Histogram<u64>,
    hist_system: Histogram<u64>,
    notes: Vec<String>,
}

/// Replication `r` draws from the r-th jump of the seed's stream: streams 2^128 draws
/// apart, so replications never overlap.
fn stream(seed: u64, r: usize) -> Xoshiro256PlusPlus {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..r {
        rng.jump();
    }
    rng
}

fn replicate(net: &Network, plan: &Plan, r: usize, control: &Control) -> Result<Single, Cancelled> {
    let rng = stream(plan.seed, r);
    let mut notes = Vec::new();
    let mut pilot_events = 0;
    let warmup = match plan.warmup {
        Warmup::Count(n) => n,
        Warmup::Mser5 => mser_warmup(
            net,
            &rng,
            plan.requests,
            control,
            &mut notes,
            &mut pilot_events,
        )?,
    };
    let mut rep = Replication::new(net, rng, None);
    let ctx = rep.context();
    advance(&mut rep, warmup, control)?;
    rep.take_window();
    rep.reset_histograms();

    // Independent replications: one window each. Batch means: windows of m requests;
    // with a precision target, neighbours merge whenever there are 2B of them, so the
    // batch count stays in [B, 2B] while the batch size doubles.
    let b = if plan.replications > 1 {
        1
    } else {
        plan.batches as usize
    };
    let mut m = match plan.precision {
        Some(_) => (plan.requests / b as u64).min(1000),
        None => plan.requests / b as u64,
    };
    let mut windows: Vec<Window> = Vec::with_capacity(2 * b);
    let mut measured = 0;
    let mut precision_met = plan.precision.map(|_| false);
    while measured + m <= plan.requests {
        advance(&mut rep, warmup + measured + m, control)?;
        measured += m;
        windows.push(rep.take_window());
        if plan.precision.is_none() && windows.len() == b {
            break;
        }
        if windows.len() == 2 * b {
            windows = windows
                .chunks(2)
                .map(|pair| {
                    let mut w = pair[0].clone();
                    w.merge(&pair[1]);
                    w
                })
                .collect();
            m *= 2;
        }
        // Look only when the batch count is back to B (after each doubling of the batch
        // size): few looks, so stopping at a lucky look barely narrows the interval.
        if let Some(p) = plan.precision {
            if windows.len() == b && precise_enough(&windows, &ctx, p) {
                precision_met = Some(true);
                break;
            }
        }
    }
    let mut total = Window::new(net.classes.len());
    windows.iter().for_each(|w| total.merge(w));
    let per_window: Vec<Vec<Vec<f64>>> = windows.iter().map(|w| w.metrics(&ctx)).collect();
    Ok(Single {
        metrics: total.metrics(&ctx),
        half_width: half_widths(&per_window),
        warmup,
        measured,
        batches: windows.len(),
        batch_size: m,
        precision_met,
        events: pilot_events + rep.events(),
        hist_noe: rep.hist_noe,
        hist_system: rep.hist_system,
        notes,
    })
}

/// Run `rep` to `count` arrivals, reporting progress and honouring cancellation.
fn advance(rep: &mut Replication, count: u64, control: &Control) -> Result<(), Cancelled> {
    let mut reported = rep.arrivals();
    let mut tick = |arrivals: u64| {
        control
            .done
            .fetch_add(arrivals - reported, Ordering::Relaxed);
        reported = arrivals;
        !control.cancel.load(Ordering::Relaxed)
    };
    let finished = rep.run_arrivals(count, &mut tick);
    let end = rep.arrivals();
    tick(end);
    if finished && !control.cancel.load(Ordering::Relaxed) {
        Ok(())
    } else {
        Err(Cancelled)
    }
}

/// Whether the batch means give the precision asked for, and look independent (lag-1
/// autocorrelation below 0.3; otherwise the batches grow further).
fn precise_enough(windows: &[Window], ctx: &Context, p: Precision) -> bool {
    let series: Vec<f64> = windows
        .iter()
        .map(|w| w.metrics(ctx)[0][p.metric])
        .collect();
    let mut total = Window::new(windows[0].classes.len());
    windows.iter().for_each(|w| total.merge(w));
    let estimate = total.metrics(ctx)[0][p.metric];
    let hw = half_width_95(&series);
    hw.is_finite() && hw <= p.relative * estimate.abs() && lag1_autocorrelation(&series) < 0.3
}

fn half_widths(per_window: &[Vec<Vec<f64>>]) -> Vec<Vec<f64>> {
    let (rows, cols) = (per_window[0].len(), per_window[0][0].len());
    (0..rows)
        .map(|i| {
            (0..cols)
                .map(|j| half_width_95(&per_window.iter().map(|w| w[i][j]).collect::<Vec<_>>()))
                .collect()
        })
        .collect()
}

/// Warm-up length by MSER-5 on the sojourn times of a pilot prefix of the run (the same
/// random stream, so the same trajectory): the larger of the cuts for the host alone
/// and for host + engine. The pilot doubles while MSER-5 has not settled, up to 500,000
/// requests whatever the budget (a fraction of a second; a short budget must not hide
/// a long transient).
/// Batch means need two batches or more, each with at least one request.
pub(crate) fn check_batches(requests: u64, batches: u32) -> Result<(), String> {
    if batches < 2 {
        return Err("batches must be at least 2".into());
    }
    if requests < u64::from(batches) {
        return Err(format!(
            "requests must be at least the batch count ({batches})"
        ));
    }
    Ok(())
}

/// The longest MSER-5 pilot, and the first: a tenth of the run, within limits. A pilot
/// that has not settled doubles, up to the longest.
pub(crate) const PILOT_MAX: u64 = 500_000;

pub(crate) fn first_pilot(requests: u64) -> u64 {
    (requests / 10).clamp(5_000, PILOT_MAX)
}

fn mser_warmup(
    net: &Network,
    rng: &Xoshiro256PlusPlus,
    requests: u64,
    control: &Control,
    notes: &mut Vec<String>,
    events: &mut u64,
) -> Result<u64, Cancelled> {
    let mut length = first_pilot(requests);
    loop {
        let mut rep = Replication::new(net, rng.clone(), Some(Pilot::new(length as usize)));
        advance(&mut rep, length, control)?;
        *events += rep.events();
        let pilot = rep.take_pilot().expect("pilot was given");
        let stable = net.stable();
        let (mut delete, mut settled) = (0, true);
        for (_, series) in [(stable[0], pilot.noe), (stable[1], pilot.system)]
            .iter()
            .filter(|s| s.0)
        {
            // Requests still in the system at the end have no sojourn yet.
            let done = series
                .iter()
                .position(|x| x.is_nan())
                .unwrap_or(series.len());
            if let Some(cut) = mser5(&series[..done]) {
                delete = delete.max(cut.delete);
                settled &= cut.settled;
            }
        }
        if settled || length == PILOT_MAX {
            if !settled {
                notes.push(format!(
                    "MSER-5 did not settle on the first {length} requests (heavy-tailed \
                     delays, or a queue near saturation); {delete} were discarded as warm-up, \
                     its best cut in the first half. Check with more requests or set the \
                     warm-up yourself."
                ));
            }
            return Ok(delete as u64);
        }
        length = (2 * length).min(PILOT_MAX);
    }
}

fn combine(singles: Vec<Single>, wall_s: f64) -> Outcome {
    let first = &singles[0];
    let mut hist_noe = first.hist_noe.clone();
    let mut hist_system = first.hist_system.clone();
    for s in &singles[1..] {
        hist_noe.add(&s.hist_noe).expect("same histogram bounds");
        hist_system
            .add(&s.hist_system)
            .expect("same histogram bounds");
    }
    let replications: Vec<Vec<Vec<f64>>> = singles.iter().map(|s| s.metrics.clone()).collect();
    let (metrics, half_width) = if singles.len() == 1 {
        (first.metrics.clone(), first.half_width.clone())
    } else {
        (mean_over(&replications), half_widths(&replications))
    };
    let mut notes: Vec<String> = singles.iter().flat_map(|s| s.notes.clone()).collect();
    notes.dedup();
    Outcome {
        metrics,
        half_width,
        warmup: singles.iter().map(|s| s.warmup).collect(),
        measured: singles.iter().map(|s| s.measured).collect(),
        batches: first.batches,
        batch_size: first.batch_size,
        precision_met: first.precision_met,
        events: singles.iter().map(|s| s.events).sum(),
        wall_s,
        hist_noe,
        hist_system,
        notes,
        replications,
    }
}

fn mean_over(values: &[Vec<Vec<f64>>]) -> Vec<Vec<f64>> {
    let n = values.len() as f64;
    let mut mean = values[0].clone();
    for v in &values[1..] {
        for (row, other) in mean.iter_mut().zip(v) {
            row.iter_mut().zip(other).for_each(|(a, b)| *a += b);
        }
    }
    mean.iter_mut().flatten().for_each(|x| *x /= n);
    mean
}
