//! A closed multi-class queueing network, simulated to cross-check mean value analysis
//! (`offloadlab.model.mva`) and to measure the error of its multi-server approximation.
//!
//! The model (C classes, K stations):
//! - Class c has `population[c]` customers. Each thinks for an exponential time of mean
//!   `think[c]` (not at all when it is 0), then sends a request. The request visits every
//!   station k with `demands[c][k]` > 0 once, in station order, and needs an exponential
//!   amount of work of mean `demands[c][k]` at each. When it leaves the last one, the
//!   customer thinks again.
//! - A queueing station with m = `servers[k]` servers is processor sharing: each of the n
//!   jobs present is served at rate min(1, m/n). A delay station (`delay[k]`) serves every
//!   job at rate 1, whatever n.
//!
//! PS and delay stations give a product form (BCMP), so the means do not depend on the
//! service distributions or the order of the visits, and exact MVA is exact here when
//! every queueing station has one server. With m > 1 MVA uses Seidmann's approximation;
//! the simulation gives the true value.
//!
//! A station is simulated with a virtual clock: the service each present job has
//! received since the station last emptied. It grows at the per-job rate, so a job that
//! enters when it reads V with work w leaves when it reads V + w; only the smallest such
//! tag needs an event. When the number present changes the rate does too, and the
//! station's departure is scheduled again under a new generation number; events of an
//! older generation are stale and skipped.
//!
//! Measured after a warm-up ([`Warmup`]: a number of completions, or MSER-5 on the
//! response times of a pilot), over `requests` completions of all classes cut into
//! batches: per class the throughput and the mean response time (request sent to
//! request done, thinking excluded) with 95% batch-means half-widths; per class and
//! station the mean residence per request and the time-averaged number present; per
//! station the utilisation, the time-average of min(n, m)/m (of a delay station: of n,
//! as `mva.Solution` reports it).

use std::mem;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_distr::Exp1;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::calendar::Calendar;
use crate::experiment::{check_batches, first_pilot, Warmup, PILOT_MAX};
use crate::stats::{half_width_95, mser5, Tally};

/// The network. Times in seconds.
#[derive(Clone, Debug)]
pub struct Network {
    /// `demands[c][k]`: work per request of class c at station k.
    pub demands: Vec<Vec<f64>>,
    pub population: Vec<u32>,
    pub think: Vec<f64>,
    pub delay: Vec<bool>,
    /// Servers of each queueing station; ignored at delay stations.
    pub servers: Vec<u32>,
}

impl Network {
    /// Check the parameters; the message names the argument at fault.
    pub fn validate(&self) -> Result<(), String> {
        let classes = self.demands.len();
        let stations = self.delay.len();
        if classes == 0 || stations == 0 {
            return Err("demands: give at least one class and one station".into());
        }
        if self.demands.iter().any(|row| row.len() != stations) {
            return Err(format!(
                "demands: give one demand per station ({stations}, as in delay) in every class"
            ));
        }
        if self
            .demands
            .iter()
            .flatten()
            .any(|d| !(d.is_finite() && *d >= 0.0))
        {
            return Err("demands: every demand must be a finite number of seconds >= 0".into());
        }
        if self.population.len() != classes {
            return Err(format!("population: give one count per class ({classes})"));
        }
        if self.population.iter().all(|&n| n == 0) {
            return Err("population: at least one customer is needed".into());
        }
        if self.think.len() != classes || self.think.iter().any(|z| !(z.is_finite() && *z >= 0.0)) {
            return Err(format!("think: give one time >= 0 per class ({classes})"));
        }
        if self.servers.len() != stations || self.servers.contains(&0) {
            return Err(format!(
                "servers: give one whole number >= 1 per station ({stations})"
            ));
        }
        for c in 0..classes {
            if self.population[c] > 0
                && self.think[c] == 0.0
                && self.demands[c].iter().sum::<f64>() == 0.0
            {
                return Err(format!(
                    "class {c}: no demand and no think time, so its throughput is unbounded; \
                     give it one"
                ));
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct Plan {
    /// Completions measured after the warm-up, all classes together.
    pub requests: u64,
    pub seed: u64,
    pub warmup: Warmup,
    /// Number of batch means for the confidence intervals.
    pub batches: u32,
}

impl Plan {
    pub fn validate(&self) -> Result<(), String> {
        check_batches(self.requests, self.batches)
    }
}

/// The estimates, in the shapes of `mva.Solution`: per class, per class and station
/// (`[c][k]`), per station. A class without customers has NaN response times.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub throughput: Vec<f64>,
    pub throughput_hw: Vec<f64>,
    pub response: Vec<f64>,
    pub response_hw: Vec<f64>,
    /// Mean time per request at each station (one visit); 0 where the class does not go.
    pub residence: Vec<Vec<f64>>,
    pub queue: Vec<Vec<f64>>,
    pub utilisation: Vec<f64>,
    /// Completions discarded, and measured.
    pub warmup: u64,
    pub requests: u64,
    /// Events handled (think ends and departures, the warm-up pilot included; stale
    /// departures not).
    pub events: u64,
    pub wall_s: f64,
}

/// Simulate `net` as `plan` says. Deterministic: the same inputs give the same outcome
/// bit for bit (but `wall_s`).
pub fn simulate(net: &Network, plan: &Plan) -> Result<Outcome, String> {
    net.validate()?;
    plan.validate()?;
    let started = Instant::now();
    let rng = Xoshiro256PlusPlus::seed_from_u64(plan.seed);
    let (warmup, pilot_events) = match plan.warmup {
        Warmup::Count(n) => (n, 0),
        Warmup::Mser5 => mser_warmup(net, &rng, plan.requests),
    };
    let mut run = Run::new(net, rng, None);
    run.run_to(warmup);
    run.take_window();
    let b = u64::from(plan.batches);
    // Batch i ends at the (i/b)-th fraction of the measured completions.
    let windows: Vec<Window> = (1..=b)
        .map(|i| {
            run.run_to(warmup + i * plan.requests / b);
            run.take_window()
        })
        .collect();
    let mut total = Window::new(net);
    windows.iter().for_each(|w| total.merge(w));
    let hw = |metric: fn(&Window) -> Vec<f64>| -> Vec<f64> {
        let per_batch: Vec<Vec<f64>> = windows.iter().map(metric).collect();
        (0..net.demands.len())
            .map(|c| half_width_95(&per_batch.iter().map(|m| m[c]).collect::<Vec<_>>()))
            .collect()
    };
    Ok(Outcome {
        throughput: total.throughput(),
        throughput_hw: hw(Window::throughput),
        response: total.response(),
        response_hw: hw(Window::response),
        residence: total.residence(net),
        queue: total.queue(),
        utilisation: total.busy.iter().map(|b| b / total.duration).collect(),
        warmup,
        requests: plan.requests,
        events: pilot_events + run.events,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

/// Warm-up by MSER-5 on the response times, in completion order, of a pilot: the first
/// completions of the same trajectory (the same stream). The pilot doubles while MSER-5
/// has not settled, up to 500,000 completions, and then takes its best cut in the first
/// half. Returns the cut and the pilots' events.
fn mser_warmup(net: &Network, rng: &Xoshiro256PlusPlus, requests: u64) -> (u64, u64) {
    let mut length = first_pilot(requests);
    let mut events = 0;
    loop {
        let mut pilot = Run::new(net, rng.clone(), Some(Vec::with_capacity(length as usize)));
        pilot.run_to(length);
        events += pilot.events;
        let trace = pilot.trace.take().expect("the pilot keeps a trace");
        let cut = mser5(&trace).expect("a pilot has at least 5,000 completions");
        if cut.settled || length == PILOT_MAX {
            return (cut.delete as u64, events);
        }
        length = (2 * length).min(PILOT_MAX);
    }
}

#[derive(Clone, Copy, Debug)]
enum Event {
    /// Customer i ends its think time and sends a request.
    Think(u32),
    /// The next departure from a station, valid while its generation is current.
    Departure { station: u32, generation: u64 },
}

#[derive(Clone, Copy, Debug)]
struct Customer {
    class: usize,
    /// Position of its current station in its class's route.
    hop: usize,
    sent: f64,
    entered: f64,
}

#[derive(Clone, Copy, Debug)]
struct Job {
    customer: u32,
    /// Virtual clock reading at which it is done.
    done_at: f64,
}

#[derive(Debug)]
struct Station {
    /// m; infinite for a delay station, whose jobs are then always served at rate 1.
    servers: f64,
    jobs: Vec<Job>,
    /// Service received by each present job since the station was last empty.
    clock: f64,
    /// When the clock and the window's areas were last brought up to date.
    since: f64,
    generation: u64,
    /// Jobs present per class.
    present: Vec<u32>,
}

impl Station {
    fn rate(&self) -> f64 {
        (self.servers / self.jobs.len() as f64).min(1.0)
    }

    /// Busy fraction of the servers (of a delay station: the number present).
    fn busy(&self) -> f64 {
        let n = self.jobs.len() as f64;
        if self.servers.is_infinite() {
            n
        } else {
            n.min(self.servers) / self.servers
        }
    }

    /// The present job that finishes first.
    fn first(&self) -> Option<usize> {
        (0..self.jobs.len()).min_by(|&a, &b| self.jobs[a].done_at.total_cmp(&self.jobs[b].done_at))
    }
}

/// Statistics over a span of the run: sums, so that spans merge by adding.
#[derive(Clone, Debug)]
struct Window {
    duration: f64,
    /// Per class: completed requests and their response times.
    response: Vec<Tally>,
    /// `[c][k]`: departures and their residence times.
    residence: Vec<Vec<Tally>>,
    /// `[c][k]`: time integral of the number present.
    present: Vec<Vec<f64>>,
    /// Per station: time integral of [`Station::busy`].
    busy: Vec<f64>,
}

impl Window {
    fn new(net: &Network) -> Window {
        let (classes, stations) = (net.demands.len(), net.delay.len());
        Window {
            duration: 0.0,
            response: vec![Tally::default(); classes],
            residence: vec![vec![Tally::default(); stations]; classes],
            present: vec![vec![0.0; stations]; classes],
            busy: vec![0.0; stations],
        }
    }

    fn merge(&mut self, other: &Window) {
        self.duration += other.duration;
        for (a, b) in self.response.iter_mut().zip(&other.response) {
            a.merge(b);
        }
        for (a, b) in self
            .residence
            .iter_mut()
            .flatten()
            .zip(other.residence.iter().flatten())
        {
            a.merge(b);
        }
        for (a, b) in self
            .present
            .iter_mut()
            .flatten()
            .zip(other.present.iter().flatten())
        {
            *a += b;
        }
        for (a, b) in self.busy.iter_mut().zip(&other.busy) {
            *a += b;
        }
    }

    fn throughput(&self) -> Vec<f64> {
        self.response
            .iter()
            .map(|t| t.n as f64 / self.duration)
            .collect()
    }

    fn response(&self) -> Vec<f64> {
        self.response.iter().map(Tally::mean).collect()
    }

    fn residence(&self, net: &Network) -> Vec<Vec<f64>> {
        self.residence
            .iter()
            .zip(&net.demands)
            .map(|(row, d)| {
                row.iter()
                    .zip(d)
                    .map(|(t, &d)| if d > 0.0 { t.mean() } else { 0.0 })
                    .collect()
            })
            .collect()
    }

    fn queue(&self) -> Vec<Vec<f64>> {
        self.present
            .iter()
            .map(|row| row.iter().map(|a| a / self.duration).collect())
            .collect()
    }
}

/// One trajectory of the network, from every customer starting to think at time 0.
struct Run<'a> {
    net: &'a Network,
    /// Per class: the stations its requests visit, in order.
    routes: Vec<Vec<usize>>,
    rng: Xoshiro256PlusPlus,
    calendar: Calendar<Event>,
    stations: Vec<Station>,
    customers: Vec<Customer>,
    now: f64,
    completions: u64,
    events: u64,
    window: Window,
    window_start: f64,
    /// A pilot's response times, in completion order.
    trace: Option<Vec<f64>>,
}

impl<'a> Run<'a> {
    fn new(net: &'a Network, rng: Xoshiro256PlusPlus, trace: Option<Vec<f64>>) -> Self {
        let classes = net.demands.len();
        let stations = (0..net.delay.len())
            .map(|k| Station {
                servers: if net.delay[k] {
                    f64::INFINITY
                } else {
                    f64::from(net.servers[k])
                },
                jobs: Vec::new(),
                clock: 0.0,
                since: 0.0,
                generation: 0,
                present: vec![0; classes],
            })
            .collect();
        let customers = (0..classes)
            .flat_map(|c| (0..net.population[c]).map(move |_| c))
            .map(|class| Customer {
                class,
                hop: 0,
                sent: 0.0,
                entered: 0.0,
            })
            .collect();
        let mut run = Run {
            net,
            routes: net
                .demands
                .iter()
                .map(|d| (0..d.len()).filter(|&k| d[k] > 0.0).collect())
                .collect(),
            rng,
            calendar: Calendar::new(),
            stations,
            customers,
            now: 0.0,
            completions: 0,
            events: 0,
            window: Window::new(net),
            window_start: 0.0,
            trace,
        };
        for i in 0..run.customers.len() {
            run.start_thinking(i);
        }
        run
    }

    /// Handle events until `completions` requests are done in all.
    fn run_to(&mut self, completions: u64) {
        while self.completions < completions {
            let (time, event) = self.calendar.pop().expect("a customer is always pending");
            self.now = time;
            match event {
                Event::Think(i) => self.send(i as usize),
                Event::Departure {
                    station,
                    generation,
                } => {
                    if generation != self.stations[station as usize].generation {
                        continue;
                    }
                    self.depart(station as usize);
                }
            }
            self.events += 1;
        }
    }

    /// The statistics since the last call, closed now; the next window starts now.
    fn take_window(&mut self) -> Window {
        for k in 0..self.stations.len() {
            self.advance(k);
        }
        self.window.duration = self.now - self.window_start;
        self.window_start = self.now;
        mem::replace(&mut self.window, Window::new(self.net))
    }

    fn start_thinking(&mut self, i: usize) {
        let z = self.net.think[self.customers[i].class];
        let gap = z * self.rng.sample::<f64, _>(Exp1);
        self.calendar
            .schedule(self.now + gap, Event::Think(i as u32));
    }

    fn send(&mut self, i: usize) {
        let customer = &mut self.customers[i];
        customer.sent = self.now;
        customer.hop = 0;
        if self.routes[customer.class].is_empty() {
            self.complete(i);
        } else {
            self.enter(i);
        }
    }

    /// Customer i's request joins the station at its current hop.
    fn enter(&mut self, i: usize) {
        let Customer { class, hop, .. } = self.customers[i];
        let k = self.routes[class][hop];
        let work = self.net.demands[class][k] * self.rng.sample::<f64, _>(Exp1);
        self.advance(k);
        let station = &mut self.stations[k];
        station.jobs.push(Job {
            customer: i as u32,
            done_at: station.clock + work,
        });
        station.present[class] += 1;
        self.customers[i].entered = self.now;
        self.reschedule(k);
    }

    fn depart(&mut self, k: usize) {
        self.advance(k);
        let station = &mut self.stations[k];
        let first = station.first().expect("a departure has a job");
        let i = station.jobs.swap_remove(first).customer as usize;
        let Customer {
            class,
            hop,
            entered,
            ..
        } = self.customers[i];
        station.present[class] -= 1;
        self.window.residence[class][k].add(self.now - entered);
        self.reschedule(k);
        if hop + 1 < self.routes[class].len() {
            self.customers[i].hop += 1;
            self.enter(i);
        } else {
            self.complete(i);
        }
    }

    fn complete(&mut self, i: usize) {
        let Customer { class, sent, .. } = self.customers[i];
        let response = self.now - sent;
        self.window.response[class].add(response);
        if let Some(trace) = &mut self.trace {
            trace.push(response);
        }
        self.completions += 1;
        self.start_thinking(i);
    }

    /// Bring station k's clock and the window's areas up to now, before n changes.
    fn advance(&mut self, k: usize) {
        let station = &mut self.stations[k];
        let dt = self.now - station.since;
        if !station.jobs.is_empty() {
            station.clock += dt * station.rate();
            for (area, &n) in self.window.present.iter_mut().zip(&station.present) {
                area[k] += f64::from(n) * dt;
            }
            self.window.busy[k] += station.busy() * dt;
        }
        station.since = self.now;
    }

    /// Schedule station k's next departure for its new number of jobs; any event
    /// scheduled before is stale from now on.
    fn reschedule(&mut self, k: usize) {
        let station = &mut self.stations[k];
        station.generation += 1;
        let Some(first) = station.first() else {
            // Restarting the clock keeps the tags' differences precise over long runs.
            station.clock = 0.0;
            return;
        };
        let left = (station.jobs[first].done_at - station.clock).max(0.0);
        self.calendar.schedule(
            self.now + left / station.rate(),
            Event::Departure {
                station: k as u32,
                generation: station.generation,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_station(n: u32, d: f64, z: f64, servers: u32, delay: bool) -> Network {
        Network {
            demands: vec![vec![d]],
            population: vec![n],
            think: vec![z],
            delay: vec![delay],
            servers: vec![servers],
        }
    }

    fn plan(requests: u64, seed: u64) -> Plan {
        Plan {
            requests,
            seed,
            warmup: Warmup::Mser5,
            batches: 20,
        }
    }

    fn run(net: &Network, plan: &Plan) -> Outcome {
        simulate(net, plan).expect("valid network and plan")
    }

    fn two_classes() -> Network {
        Network {
            demands: vec![vec![0.020, 0.010, 0.005], vec![0.004, 0.030, 0.012]],
            population: vec![3, 2],
            think: vec![0.1, 0.05],
            delay: vec![false, false, true],
            servers: vec![1, 2, 1],
        }
    }

    #[test]
    fn one_customer_sees_no_queue() {
        // Alone, a request is served at rate 1 everywhere: R = D, X = 1 / (Z + D).
        let out = run(&one_station(1, 0.01, 0.03, 1, false), &plan(50_000, 3));
        assert!((out.response[0] - 0.01).abs() <= 3.0 * out.response_hw[0]);
        assert!((out.throughput[0] - 25.0).abs() <= 3.0 * out.throughput_hw[0]);
    }

    #[test]
    fn a_delay_station_never_queues() {
        // N customers with no think at a delay station: each cycles every D seconds.
        let out = run(&one_station(10, 0.01, 0.0, 1, true), &plan(100_000, 5));
        assert!((out.response[0] / 0.01 - 1.0).abs() < 0.02);
        assert!((out.throughput[0] / 1000.0 - 1.0).abs() < 0.02);
        // A delay station reports its mean number present: all 10 customers.
        assert!((out.utilisation[0] - 10.0).abs() < 1e-9);
        assert!((out.queue[0][0] - 10.0).abs() < 1e-9);
    }

    #[test]
    fn operational_laws_hold_per_class_and_station() {
        let net = two_classes();
        let out = run(&net, &plan(200_000, 7));
        for c in 0..2 {
            let x = out.throughput[c];
            // Little's law on the whole loop: N = X (Z + R).
            let n = x * (net.think[c] + out.response[c]);
            assert!(
                (n / f64::from(net.population[c]) - 1.0).abs() < 0.02,
                "class {c}: {n}"
            );
            for k in 0..3 {
                // Little's law at a station, from independent estimators.
                let little = x * out.residence[c][k];
                assert!((out.queue[c][k] - little).abs() < 0.02 * out.queue[c][k] + 1e-3);
            }
            // Residences add up to the response time (each station visited once).
            let sum: f64 = out.residence[c].iter().sum();
            assert!((sum / out.response[c] - 1.0).abs() < 0.01);
        }
        // Utilisation law: U_k = sum_c X_c D_ck / m_k (delay: the mean number present).
        for k in 0..3 {
            let m = if net.delay[k] {
                1.0
            } else {
                f64::from(net.servers[k])
            };
            let law: f64 = (0..2)
                .map(|c| out.throughput[c] * net.demands[c][k])
                .sum::<f64>()
                / m;
            assert!((out.utilisation[k] / law - 1.0).abs() < 0.02, "station {k}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_outcome() {
        let net = two_classes();
        let (a, b) = (run(&net, &plan(20_000, 9)), run(&net, &plan(20_000, 9)));
        assert_eq!(a.throughput, b.throughput);
        assert_eq!(a.residence, b.residence);
        assert_eq!(a.events, b.events);
        assert_ne!(a.response, run(&net, &plan(20_000, 10)).response);
    }

    #[test]
    fn a_class_without_requests_is_reported_as_idle() {
        let mut net = two_classes();
        net.population[1] = 0;
        let out = run(&net, &plan(10_000, 1));
        assert_eq!(out.throughput[1], 0.0);
        assert!(out.response[1].is_nan());
        assert_eq!(out.queue[1], vec![0.0; 3]);
    }

    #[test]
    fn bad_input_is_refused_naming_the_argument() {
        let good = two_classes();
        type Spoil = fn(&mut Network);
        let cases: [(Spoil, &str); 6] = [
            (|n| n.demands[0][1] = -1.0, "demands"),
            (
                |n| {
                    n.demands[1].pop();
                },
                "demands",
            ),
            (|n| n.population = vec![0, 0], "population"),
            (|n| n.think[0] = f64::NAN, "think"),
            (|n| n.servers[1] = 0, "servers"),
            (
                |n| {
                    n.think[0] = 0.0;
                    n.demands[0] = vec![0.0; 3];
                },
                "class 0",
            ),
        ];
        for (spoil, argument) in cases {
            let mut net = good.clone();
            spoil(&mut net);
            let err = simulate(&net, &plan(1_000, 1)).unwrap_err();
            assert!(err.starts_with(argument), "{err}");
        }
        let err = simulate(&good, &plan(10, 1)).unwrap_err();
        assert!(err.contains("requests"), "{err}");
    }
}
