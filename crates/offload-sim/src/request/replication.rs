//! One simulated trajectory of the request-level network: the event loop.

use std::collections::VecDeque;
use std::mem;

use hdrhistogram::Histogram;
use rand::Rng;
use rand_distr::Exp1;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::window::{Context, Window};
use super::{Network, Station};
use crate::calendar::Calendar;
use crate::stats::{histogram, record};

#[derive(Clone, Copy, Debug)]
enum Event {
    Arrival,
    Departure(Station),
}

/// A request at a queue.
#[derive(Clone, Copy, Debug)]
struct Job {
    id: u64,
    class: u32,
    sent: bool,
    /// Answered by the engine's cache (it never visits the host).
    hit: bool,
    /// When it arrived to the system, and to this queue.
    born: f64,
    entered: f64,
    /// Service time at this queue; for an offloaded request at the host, `engine` is
    /// its service time at the engine.
    service: f64,
    engine: f64,
}

/// Sojourn time of each of the first requests, by arrival order, for warm-up detection:
/// at the host alone and through host + engine. NaN until the request has left.
#[derive(Clone, Debug)]
pub struct Pilot {
    pub noe: Vec<f64>,
    pub system: Vec<f64>,
}

impl Pilot {
    pub fn new(requests: usize) -> Pilot {
        Pilot {
            noe: vec![f64::NAN; requests],
            system: vec![f64::NAN; requests],
        }
    }
}

/// The state of one simulation run. Drive it with [`Replication::run_arrivals`] and
/// collect statistics with [`Replication::take_window`].
pub struct Replication<'a> {
    net: &'a Network,
    rng: Xoshiro256PlusPlus,
    calendar: Calendar<Event>,
    queues: [VecDeque<Job>; 3],
    stable: [bool; 3],
    /// Cumulative class shares, for picking a class with one uniform draw.
    cumulative: Vec<f64>,
    now: f64,
    arrivals: u64,
    events: u64,
    window: Window,
    window_start: f64,
    /// When each queue's area was last brought up to date.
    since: [f64; 3],
    /// End-to-end sojourn histograms, seconds x 1e9: host alone, host + engine.
    pub hist_noe: Histogram<u64>,
    pub hist_system: Histogram<u64>,
    pilot: Option<Pilot>,
}

impl<'a> Replication<'a> {
    /// A run of `net` from an empty system at time 0, drawing from `rng`. With `pilot`,
    /// it also records the sojourn of the first `pilot.noe.len()` requests.
    pub fn new(net: &'a Network, rng: Xoshiro256PlusPlus, pilot: Option<Pilot>) -> Self {
        let mut acc = 0.0;
        let cumulative = net.classes.iter().map(|c| {
            acc += c.share;
            acc
        });
        let mut rep = Replication {
            net,
            rng,
            calendar: Calendar::new(),
            queues: Default::default(),
            stable: net.stable(),
            cumulative: cumulative.collect(),
            now: 0.0,
            arrivals: 0,
            events: 0,
            window: Window::new(net.classes.len()),
            window_start: 0.0,
            since: [0.0; 3],
            hist_noe: histogram(),
            hist_system: histogram(),
            pilot,
        };
        rep.schedule_arrival();
        rep
    }

    /// What [`Window::metrics`] needs besides the sums.
    pub fn context(&self) -> Context {
        Context {
            delay_max: self.net.delay_max,
            stable: self.stable,
            offered: self.net.offered_load(),
            offload: self.net.classes.iter().map(|c| c.offload).collect(),
        }
    }

    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    pub fn now(&self) -> f64 {
        self.now
    }

    /// Process events until `count` requests have arrived in total (the window
    /// boundaries of the caller are at arrival instants). Calls `tick` every 2^16
    /// arrivals with their number; stops early if `tick` returns false.
    pub fn run_arrivals(&mut self, count: u64, tick: &mut dyn FnMut(u64) -> bool) -> bool {
        while self.arrivals < count {
            let (time, event) = self.calendar.pop().expect("an arrival is always pending");
            self.now = time;
            self.events += 1;
            match event {
                Event::Arrival => {
                    self.arrive();
                    if self.arrivals & 0xFFFF == 0 && !tick(self.arrivals) {
                        return false;
                    }
                }
                Event::Departure(station) => self.depart(station),
            }
        }
        true
    }

    /// The statistics since the last call (or the start), closed at the current time;
    /// the next window starts now.
    pub fn take_window(&mut self) -> Window {
        for station in [Station::Noe, Station::Cpu, Station::Oe] {
            self.advance_area(station);
        }
        self.window.duration = self.now - self.window_start;
        self.window_start = self.now;
        mem::replace(&mut self.window, Window::new(self.net.classes.len()))
    }

    pub fn reset_histograms(&mut self) {
        self.hist_noe.reset();
        self.hist_system.reset();
    }

    pub fn take_pilot(&mut self) -> Option<Pilot> {
        self.pilot.take()
    }

    fn schedule_arrival(&mut self) {
        let gap: f64 = self.rng.sample::<f64, _>(Exp1) / self.net.rate;
        self.calendar.schedule(self.now + gap, Event::Arrival);
    }

    fn arrive(&mut self) {
        let net = self.net;
        let id = self.arrivals;
        self.arrivals += 1;
        // Every draw is made whatever the path, so scenarios that differ only in their
        // offload fractions see the same requests (common random numbers).
        let u: f64 = self.rng.random();
        let class = self
            .cumulative
            .partition_point(|&c| c <= u)
            .min(net.classes.len() - 1);
        let spec = &net.classes[class];
        let sent = self.rng.random::<f64>() < spec.offload;
        // A class without a cache makes no cache draws, so its stream is seed 000's.
        let cached = spec.hit > 0.0;
        let hit = cached && self.rng.random::<f64>() < spec.hit && sent;
        let rng = &mut self.rng;
        let app = spec.app.sample(rng);
        let proto = spec.host_proto.sample(rng);
        let overhead = spec.host_overhead.sample(rng);
        let engine = spec.engine_overhead.sample(rng) + spec.engine_proto.sample(rng);
        let answer = if cached {
            spec.engine_hit.sample(rng)
        } else {
            0.0
        };

        let job = Job {
            id,
            class: class as u32,
            sent: false,
            hit: false,
            born: self.now,
            entered: self.now,
            service: app + proto,
            engine: 0.0,
        };
        if self.stable[Station::Noe as usize] {
            self.enter(Station::Noe, job);
        }
        if hit {
            // The cache answers it on the engine, which is simulated only when stable.
            if self.stable[Station::Oe as usize] {
                let at_engine = Job {
                    sent,
                    hit,
                    service: answer,
                    ..job
                };
                self.enter(Station::Oe, at_engine);
            }
        } else if self.stable[Station::Cpu as usize] {
            let host = if sent { app + overhead } else { app + proto };
            self.enter(
                Station::Cpu,
                Job {
                    sent,
                    service: host,
                    engine,
                    ..job
                },
            );
        }
        self.schedule_arrival();
    }

    fn enter(&mut self, station: Station, job: Job) {
        self.advance_area(station);
        let queue = &mut self.queues[station as usize];
        queue.push_back(job);
        if queue.len() == 1 {
            self.calendar
                .schedule(self.now + job.service, Event::Departure(station));
        }
    }

    fn depart(&mut self, station: Station) {
        self.advance_area(station);
        let queue = &mut self.queues[station as usize];
        let mut job = queue.pop_front().expect("a departure has a job in service");
        if let Some(next) = queue.front() {
            self.calendar
                .schedule(self.now + next.service, Event::Departure(station));
        }
        let now = self.now;
        let wait = (now - job.entered - job.service).max(0.0);
        let tally = &mut self.window.classes[job.class as usize];
        match station {
            Station::Noe => {
                tally.noe.depart(wait, job.service);
                record(&mut self.hist_noe, now - job.born);
                self.pilot_record(job.id, Station::Noe, now - job.born);
            }
            Station::Cpu if job.sent => {
                tally.host_sent.depart(wait, job.service);
                if self.stable[Station::Oe as usize] {
                    job.entered = now;
                    job.service = job.engine;
                    self.enter(Station::Oe, job);
                } else {
                    // The engine is saturated and not simulated: warm-up detection
                    // follows the host part of the request.
                    self.pilot_record(job.id, Station::Cpu, now - job.born);
                }
            }
            Station::Cpu => {
                tally.host_kept.depart(wait, job.service);
                record(&mut self.hist_system, now - job.born);
                self.pilot_record(job.id, Station::Cpu, now - job.born);
            }
            Station::Oe if job.hit => {
                tally.hit.depart(wait, job.service);
                record(&mut self.hist_system, now - job.born);
                self.pilot_record(job.id, Station::Oe, now - job.born);
            }
            Station::Oe => {
                tally.oe.depart(wait, job.service);
                tally.end_to_end_sent.add(now - job.born);
                record(&mut self.hist_system, now - job.born);
                self.pilot_record(job.id, Station::Oe, now - job.born);
            }
        }
    }

    /// Add the time since the queue last changed times its counts to its areas.
    fn advance_area(&mut self, station: Station) {
        let s = station as usize;
        let n = self.queues[s].len() as f64;
        let dt = self.now - self.since[s];
        self.window.area_total[s] += n * dt;
        self.window.area_queue[s] += (n - 1.0).max(0.0) * dt;
        self.since[s] = self.now;
    }

    fn pilot_record(&mut self, id: u64, station: Station, sojourn: f64) {
        if let Some(pilot) = &mut self.pilot {
            let series = if station == Station::Noe {
                &mut pilot.noe
            } else {
                &mut pilot.system
            };
            if let Some(slot) = series.get_mut(id as usize) {
                *slot = sojourn;
            }
        }
    }
}
