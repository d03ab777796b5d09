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
use crate::dist::Dist;
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
    /// Found no other request at this queue on arrival, so woke it up.
    woke: bool,
    /// When it arrived to the system, and to this queue.
    born: f64,
    entered: f64,
    /// Service time at this queue, wake-up included; for an offloaded request at the
    /// host, `engine` is its service time at the engine.
    service: f64,
    engine: f64,
    /// The wake-up's CPU at a queue that polls (`QueueCosts::polls`): busy time beside the
    /// service, which delays nobody.
    wake: f64,
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

/// One station: its requests (FCFS) and the background work that preempts them. In
/// one cache line, as every event at the station reads it.
#[repr(align(64))]
struct Server {
    jobs: VecDeque<Job>,
    /// When its areas were last brought up to date.
    since: f64,
    /// When its next background job arrives (infinity: never). Background jobs are not
    /// events: the station takes note of them when a request arrives to find it empty,
    /// and when one is due to leave. In between, either it has had no request throughout
    /// or it has had one throughout.
    next_background: f64,
    /// When the background work noted so far will be done. It preempts the requests, so
    /// none is served before then.
    background_until: f64,
    /// When its last request left (its idle period began), for the wake-up's cooling.
    idle_since: f64,
    /// Until when a wake-up with no request of its own keeps it awake
    /// (`QueueCosts::answers_wake`): a request that comes meanwhile does not wake it.
    awake_until: f64,
    /// A polling station's account (`QueueCosts::polls`): when Welch's queue of the same
    /// requests and background, its wake-ups served before them, would next have no
    /// request. A request that comes earlier wakes nothing.
    account_until: f64,
}

/// A station's gated round (used when it serves in rounds): how many of the round's
/// requests are still to be served, and those served, which leave when it ends.
#[derive(Default)]
struct Round {
    left: usize,
    served: Vec<Job>,
}

/// The state of one simulation run. Drive it with [`Replication::run_arrivals`] and
/// collect statistics with [`Replication::take_window`].
pub struct Replication<'a> {
    net: &'a Network,
    rng: Xoshiro256PlusPlus,
    calendar: Calendar<Event>,
    stations: [Server; 3],
    rounds: [Round; 3],
    /// Each station's streams of wake-up costs and of background jobs; None without them.
    wakeup: [Option<Xoshiro256PlusPlus>; 3],
    background: [Option<Xoshiro256PlusPlus>; 3],
    stable: [bool; 3],
    /// Cumulative class shares, for picking a class with one uniform draw.
    cumulative: Vec<f64>,
    now: f64,
    arrivals: u64,
    events: u64,
    window: Window,
    window_start: f64,
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
        let stable = net.stable();
        // Station s's wake-ups (k = 0) and background (k = 1) draw from a stream of their
        // own, so that the requests' draws stay the same with or without them: the
        // (2s + k + 1)-th long jump, 2^192 draws apart (replications are 2^128 apart).
        let stream = |s: usize, k: usize, cost: &Dist| {
            (stable[s] && !cost.is_zero()).then(|| {
                let mut side = rng.clone();
                (0..=2 * s + k).for_each(|_| side.long_jump());
                side
            })
        };
        let wakeup = std::array::from_fn(|s| stream(s, 0, &net.queues[s].wakeup));
        let mut background: [_; 3] =
            std::array::from_fn(|s| stream(s, 1, &net.queues[s].background));
        let stations = std::array::from_fn(|s| Server {
            jobs: VecDeque::new(),
            since: 0.0,
            next_background: background[s]
                .as_mut()
                .map_or(f64::INFINITY, |rng| gap(rng, net.rate)),
            background_until: 0.0,
            idle_since: 0.0,
            awake_until: 0.0,
            account_until: 0.0,
        });
        let mut rep = Replication {
            net,
            rng,
            calendar: Calendar::new(),
            stations,
            rounds: Default::default(),
            wakeup,
            background,
            stable,
            cumulative: cumulative.collect(),
            now: 0.0,
            arrivals: 0,
            events: 0,
            window: Window::new(net.classes.len()),
            window_start: 0.0,
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
            d0: self
                .net
                .classes
                .iter()
                .map(|c| [c.d0_host, c.d0_sent])
                .collect(),
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
        for station in Station::ALL {
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
        let gap = gap(&mut self.rng, self.net.rate);
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
            woke: false,
            born: self.now,
            entered: self.now,
            service: app + proto,
            engine: 0.0,
            wake: 0.0,
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
            if sent && net.queues[Station::Oe as usize].answers_wake {
                self.wake_on_arrival(class);
            }
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

    fn enter(&mut self, station: Station, mut job: Job) {
        self.advance_area(station);
        let s = station as usize;
        let empty = self.stations[s].jobs.is_empty();
        if empty {
            // A request that finds the station empty starts a round of its own.
            self.rounds[s].left = 1;
            // Background work that came while the station was empty delayed no request
            // (but may still be running).
            self.background_work(s);
        }
        let costs = &self.net.queues[s];
        let server = &self.stations[s];
        // The account of a polling station holds at least the station's own work, so it
        // is busy whenever the station is.
        let (awake, idle_since) = if costs.polls {
            (server.account_until > self.now, server.account_until)
        } else {
            (server.awake_until > self.now, server.idle_since)
        };
        job.woke = empty && !awake;
        job.wake = 0.0;
        if job.woke {
            if let Some(rng) = &mut self.wakeup[s] {
                let work = costs.wakeup.sample(rng) * costs.warmth(self.now - idle_since);
                if costs.polls {
                    job.wake = work;
                } else {
                    job.service += work;
                }
            }
        }
        if costs.polls {
            let server = &mut self.stations[s];
            let start = if job.woke {
                server.background_until.max(self.now)
            } else {
                server.account_until
            };
            server.account_until = start + costs.wall(job.service + job.wake);
        }
        if empty {
            let server = &mut self.stations[s];
            let mut start = self.now;
            if server.background_until > start {
                // Background work already there is served first; the request waits.
                self.window.area_queue[s] += server.background_until - start;
                start = server.background_until;
            }
            let wall = self.net.queues[s].wall(job.service);
            self.calendar
                .schedule(start + wall, Event::Departure(station));
        }
        self.stations[s].jobs.push_back(job);
    }

    /// An offloaded request of `class` read from the network wakes an engine with no
    /// request and not already awake: the wake-up's CPU is work at the engine with no
    /// request to serve, which a request coming meanwhile waits for (as for background
    /// work), counted with the class's engine work and wake-ups.
    fn wake_on_arrival(&mut self, class: usize) {
        let s = Station::Oe as usize;
        if !self.stations[s].jobs.is_empty() || self.stations[s].awake_until > self.now {
            return;
        }
        let Some(rng) = &mut self.wakeup[s] else {
            return;
        };
        let costs = &self.net.queues[s];
        let work = costs.wakeup.sample(rng) * costs.warmth(self.now - self.stations[s].idle_since);
        self.background_work(s);
        let server = &mut self.stations[s];
        let end = server.background_until.max(self.now) + costs.wall(work);
        (
            server.background_until,
            server.awake_until,
            server.idle_since,
        ) = (end, end, end);
        let leg = &mut self.window.classes[class].oe;
        leg.busy += work;
        leg.wakeups += 1;
    }

    fn depart(&mut self, station: Station) {
        let s = station as usize;
        let preempted = self.background_work(s);
        if preempted > 0.0 {
            // Background work came while the request was at the head and runs first: the
            // request waits for it, then resumes.
            self.window.area_queue[s] += preempted;
            self.calendar
                .schedule(self.now + preempted, Event::Departure(station));
            return;
        }
        self.advance_area(station);
        let server = &mut self.stations[s];
        let job = server
            .jobs
            .pop_front()
            .expect("a departure has a job in service");
        if let Some(next) = server.jobs.front() {
            // A request leaves only once the background is done: the next starts now.
            let wall = self.net.queues[s].wall(next.service);
            self.calendar
                .schedule(self.now + wall, Event::Departure(station));
        } else {
            server.idle_since = self.now;
        }
        if !self.net.queues[s].rounds {
            return self.leave(station, job);
        }
        let round = &mut self.rounds[s];
        round.served.push(job);
        round.left -= 1;
        if round.left > 0 {
            return;
        }
        // The round is over: its requests leave, and the next takes every one waiting.
        round.left = self.stations[s].jobs.len();
        let mut served = mem::take(&mut self.rounds[s].served);
        for job in served.drain(..) {
            self.leave(station, job);
        }
        self.rounds[s].served = served; // keeps its capacity
    }

    /// A served request leaves `station` now: to the engine, or out of the system.
    fn leave(&mut self, station: Station, mut job: Job) {
        let net = self.net;
        let class = &net.classes[job.class as usize];
        let now = self.now;
        let wait = (now - job.entered - job.service).max(0.0);
        let tally = &mut self.window.classes[job.class as usize];
        match station {
            Station::Noe => {
                tally.noe.depart(wait, job.service, job.wake, job.woke);
                self.done(job.id, station, now - job.born + class.d0_host);
            }
            Station::Cpu if job.sent => {
                tally
                    .host_sent
                    .depart(wait, job.service, job.wake, job.woke);
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
                tally
                    .host_kept
                    .depart(wait, job.service, job.wake, job.woke);
                self.done(job.id, station, now - job.born + class.d0_host);
            }
            Station::Oe if job.hit => {
                tally.hit.depart(wait, job.service, job.wake, job.woke);
                self.done(job.id, station, now - job.born + class.d0_sent);
            }
            Station::Oe => {
                tally.oe.depart(wait, job.service, job.wake, job.woke);
                tally.end_to_end_sent.add(now - job.born);
                self.done(job.id, station, now - job.born + class.d0_sent);
            }
        }
    }

    /// Take note of the background jobs that arrived at station `s` since it last did;
    /// the wall time their work takes. Inline is the check, out of line (rarely run) the draws.
    #[inline]
    fn background_work(&mut self, s: usize) -> f64 {
        if self.stations[s].next_background > self.now {
            0.0
        } else {
            self.background_arrivals(s)
        }
    }

    #[cold]
    #[inline(never)]
    fn background_arrivals(&mut self, s: usize) -> f64 {
        let server = &mut self.stations[s];
        let rng = self.background[s]
            .as_mut()
            .expect("background arrivals have a stream");
        let mut total = 0.0;
        while server.next_background <= self.now {
            let work = self.net.queues[s].wall(self.net.queues[s].background.sample(rng));
            server.background_until = server.background_until.max(server.next_background) + work;
            // It preempts the account's requests too (a no-op unless the station polls).
            if server.next_background < server.account_until {
                server.account_until += work;
            }
            total += work;
            server.next_background += gap(rng, self.net.rate);
        }
        total
    }

    /// Add the time since the queue last changed times its counts to its areas. (The
    /// time the head waits for background work is added when that work is noted.)
    fn advance_area(&mut self, station: Station) {
        let s = station as usize;
        let server = &mut self.stations[s];
        // Requests served but held for their round's end are still at the station.
        let n = (server.jobs.len() + self.rounds[s].served.len()) as f64;
        let dt = self.now - server.since;
        self.window.area_total[s] += n * dt;
        self.window.area_queue[s] += (n - 1.0).max(0.0) * dt;
        server.since = self.now;
    }

    /// A request is done: its end-to-end delay, at the host alone (`Noe`) or through
    /// host + engine.
    fn done(&mut self, id: u64, station: Station, delay: f64) {
        let hist = if station == Station::Noe {
            &mut self.hist_noe
        } else {
            &mut self.hist_system
        };
        record(hist, delay);
        self.pilot_record(id, station, delay);
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

/// A gap between the arrivals of a Poisson stream of rate `rate`.
fn gap(rng: &mut Xoshiro256PlusPlus, rate: f64) -> f64 {
    rng.sample::<f64, _>(Exp1) / rate
}
