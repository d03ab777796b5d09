//! The event loops: one per thread, each running its share of the lanes.
//!
//! A thread's loop, each turn: stop at `max_duration_s`, on cancellation, or when its
//! lanes are done; every 10 ms ("tick") publish counters, expire timed-out requests and
//! check cancellation; start lanes and requests whose time has come; then sleep in
//! `epoll_wait` until the next readiness event or deadline (a timerfd makes deadlines
//! precise to tens of µs) and serve the events.
//!
//! When a response completes, the lane's next request starts right away if it is due
//! (closed loop with no think time: the next request is written in the same turn, with
//! no event-loop round trip), or is put on the wake-up heap.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::{Events, Poll, Token};

use crate::conn::{Io, Ready, Slot, Step};
use crate::error::{ErrorKind, UNFINISHED};
use crate::http::RequestBytes;
use crate::lanes::{prepare, Prepared};
use crate::options::{Control, Method, Options};
use crate::plan::Plan;
use crate::report::{merge, Report, Row, RunFacts, Tally};
use crate::target::Target;
use crate::timer::{Clock, Timer};

/// Housekeeping period: counters, timeouts, cancellation.
const TICK_NS: u64 = 10_000_000;
/// Window of the live p99.
const WINDOW_NS: u64 = 1_000_000_000;
/// Receive buffer per thread: bodies stream through it.
const SCRATCH: usize = 64 * 1024;
const TIMER: Token = Token(usize::MAX - 1);

/// Runs `plan` against `target`. Returns when every request has ended, at
/// `options.max_duration_s`, or soon after `control.cancel` is set; `Err` only for
/// invalid input or when the event loop cannot be set up.
pub fn run(
    target: &Target,
    plan: &Plan,
    options: &Options,
    control: &Control,
) -> Result<Report, String> {
    options.check()?;
    plan.check()?;
    if options.repeat && !plan.closed {
        return Err("options.repeat: only a closed-loop plan can be repeated".into());
    }
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let prepared = prepare(plan, threads, options.http10_for_single);
    let requests = RequestBytes::new(&plan.objects, options.method, target.host());
    // Latencies cannot exceed the run; the margin keeps the top bucket exact.
    let high_ns = ((options.max_duration_s + options.timeout_s + 1.0) * 1e9).min(1e15) as u64;
    if let Some(at) = options.start_unix_s {
        wait_until(at, control);
    }
    let started_unix_s = unix_now();
    let start = Instant::now();
    let shared = Shared {
        plan,
        prepared: &prepared,
        requests: &requests,
        options,
        control,
        target,
        clock: Clock::new(start),
        end_ns: (options.max_duration_s * 1e9) as u64,
        timeout_ns: (options.timeout_s * 1e9).max(1.0) as u64,
        busy_poll_ns: (options.busy_poll_s * 1e9) as u64,
        high_ns,
    };
    let results: Vec<io::Result<Tally>> = std::thread::scope(|s| {
        let handles: Vec<_> = prepared
            .per_thread
            .iter()
            .enumerate()
            .map(|(i, lanes)| {
                let shared = &shared;
                let core =
                    (!options.cores.is_empty()).then(|| options.cores[i % options.cores.len()]);
                let nice = options.nice;
                s.spawn(move || {
                    if let Some(core) = core {
                        pin(core)?;
                    }
                    if nice != 0 {
                        renice(nice)?;
                    }
                    Worker::new(shared, lanes)?.run()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("load thread panicked"))
            .collect()
    });
    let duration_s = start.elapsed().as_secs_f64();
    let tallies = results
        .into_iter()
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| format!("load generator: event loop failed: {e}"))?;
    let facts = RunFacts {
        planned: plan.requests.len() as u64,
        offered_rate: prepared.offered_rate,
        class_ids: prepared.class_ids.clone(),
        high_ns,
        started_unix_s,
        ended_unix_s: unix_now(),
        duration_s,
        threads: prepared.per_thread.len(),
    };
    Ok(merge(tallies, facts))
}

/// Sleeps until wall-clock time `at` (Unix seconds), or until cancelled: in slices of at
/// most 10 ms, as the loops check for cancellation, and to the instant at the end.
fn wait_until(at: f64, control: &Control) {
    loop {
        let left = at - unix_now();
        if left.is_nan() || left <= 0.0 || control.is_cancelled() {
            return;
        }
        std::thread::sleep(Duration::from_secs_f64(left.min(0.010)));
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(f64::NAN, |d| d.as_secs_f64())
}

/// What all threads read.
struct Shared<'a> {
    plan: &'a Plan,
    prepared: &'a Prepared,
    requests: &'a RequestBytes,
    options: &'a Options,
    control: &'a Control,
    target: &'a Target,
    clock: Clock,
    end_ns: u64,
    timeout_ns: u64,
    busy_poll_ns: u64,
    high_ns: u64,
}

/// Counts not yet added to `Control`.
#[derive(Default)]
struct Unpublished {
    sent: u64,
    done: u64,
    errors: u64,
    bytes: u64,
}

struct Worker<'a> {
    sh: &'a Shared<'a>,
    /// This thread's lanes (open loop: by first intended start).
    lanes: &'a [u32],
    poll: Poll,
    timer: Timer,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Requests waiting for their start time: (time, slot, generation).
    wakes: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// Open loop: the next lane to start.
    next_lane: usize,
    lanes_left: usize,
    /// Slots whose request failed as it started: their lanes go on next turn (so a
    /// refused port in a zero-think loop cannot spin without checking the clock).
    deferred: Vec<u32>,
    /// Slots with more to read after their turn.
    again: Vec<u32>,
    scratch: Vec<u8>,
    tally: Tally,
    unpublished: Unpublished,
    next_tick: u64,
    window_end: u64,
}

impl<'a> Worker<'a> {
    fn new(sh: &'a Shared<'a>, lanes: &'a [u32]) -> io::Result<Worker<'a>> {
        let poll = Poll::new()?;
        let timer = Timer::new(poll.registry(), TIMER)?;
        let class_slots = sh.prepared.class_ids.len();
        Ok(Worker {
            sh,
            lanes,
            poll,
            timer,
            slots: Vec::new(),
            free: Vec::new(),
            wakes: BinaryHeap::new(),
            next_lane: 0,
            lanes_left: lanes.len(),
            deferred: Vec::new(),
            again: Vec::new(),
            scratch: vec![0; SCRATCH],
            tally: Tally::new(class_slots, sh.high_ns, sh.options.records),
            unpublished: Unpublished::default(),
            next_tick: 0,
            window_end: WINDOW_NS,
        })
    }

    fn run(mut self) -> io::Result<Tally> {
        let mut events = Events::with_capacity(1024);
        // Since when polls found nothing (busy polling).
        let mut idle_since: Option<u64> = None;
        let sh = self.sh;
        if sh.plan.closed {
            let now = sh.clock.now();
            for &lane in self.lanes {
                self.activate(lane, now);
            }
        }
        loop {
            let now = sh.clock.now();
            if now >= sh.end_ns || self.lanes_left == 0 {
                break;
            }
            if now >= self.next_tick {
                self.tick(now);
                if sh.control.is_cancelled() {
                    break;
                }
            }
            self.start_due(now);
            if self.lanes_left == 0 {
                break;
            }
            let now = sh.clock.now();
            let deadline = self.deadline();
            // Busy polling: zero-timeout polls until they have found nothing for
            // `busy_poll_ns`.
            let spinning =
                sh.busy_poll_ns > 0 && idle_since.map_or(true, |t| now - t < sh.busy_poll_ns);
            let timeout = if !self.deferred.is_empty()
                || !self.again.is_empty()
                || deadline <= now
                || spinning
            {
                Duration::ZERO
            } else {
                self.timer.arm(deadline, now)?;
                // The timerfd wakes the loop on time; this is only a fallback.
                Duration::from_nanos(deadline - now) + Duration::from_millis(1)
            };
            match self.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if events.is_empty() {
                idle_since.get_or_insert(now);
            } else {
                idle_since = None;
            }
            for ev in events.iter() {
                if ev.token() == TIMER {
                    self.timer.fired();
                    continue;
                }
                let ready = Ready {
                    readable: ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                    writable: ev.is_writable() || ev.is_write_closed() || ev.is_error(),
                    closed: ev.is_read_closed() || ev.is_error(),
                };
                self.serve(ev.token().0 as u32, ready);
            }
        }
        self.shutdown(sh.clock.now());
        Ok(self.tally)
    }

    /// The earliest thing the loop must wake for.
    fn deadline(&self) -> u64 {
        let mut d = self.next_tick.min(self.sh.end_ns);
        if let Some(Reverse((t, _, _))) = self.wakes.peek() {
            d = d.min(*t);
        }
        if !self.sh.plan.closed && self.next_lane < self.lanes.len() {
            d = d.min(self.sh.prepared.first_at(self.lanes[self.next_lane]));
        }
        d
    }

    /// Starts what is due: new lanes (open loop), requests whose time came, lanes
    /// deferred after a failed start, and reads left over from the last turn.
    fn start_due(&mut self, now: u64) {
        let sh = self.sh;
        if !sh.plan.closed {
            while let Some(&lane) = self.lanes.get(self.next_lane) {
                if sh.prepared.first_at(lane) > now {
                    break;
                }
                self.next_lane += 1;
                self.activate(lane, now);
            }
        }
        while let Some(&Reverse((t, i, gen))) = self.wakes.peek() {
            if t > now {
                break;
            }
            self.wakes.pop();
            let slot = &mut self.slots[i as usize];
            if slot.gen == gen {
                if let Some(r) = slot.waiting.take() {
                    self.start(i, r, t, now);
                }
            }
        }
        for i in std::mem::take(&mut self.deferred) {
            self.advance(i, now);
        }
        for i in std::mem::take(&mut self.again) {
            self.serve(
                i,
                Ready {
                    readable: true,
                    writable: false,
                    closed: false,
                },
            );
        }
    }

    /// Readiness on slot `i`'s socket.
    #[inline]
    fn serve(&mut self, i: u32, ready: Ready) {
        let Some(slot) = self.slots.get_mut(i as usize) else {
            return;
        };
        if !slot.active {
            return;
        }
        let now = self.sh.clock.now();
        let mut io = io_of(self.sh, self.poll.registry(), &mut self.scratch);
        let step = slot.ready(&mut io, ready, now);
        match step {
            Step::Pending => {}
            Step::Again => self.again.push(i),
            Step::Done(result) => {
                self.finish(i, result, now);
                self.advance(i, now);
            }
        }
    }

    /// Gives lane `lane` a slot and starts it.
    fn activate(&mut self, lane: u32, now: u64) {
        let i = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::new());
            (self.slots.len() - 1) as u32
        });
        let slot = &mut self.slots[i as usize];
        slot.lane = lane;
        slot.pos = self.sh.prepared.lanes[lane as usize].start;
        slot.active = true;
        self.advance(i, now);
    }

    /// Slot `i`'s previous request ended (or its lane just began): start the lane's
    /// next request now if it is due, else schedule it.
    fn advance(&mut self, i: u32, now: u64) {
        let sh = self.sh;
        let slot = &mut self.slots[i as usize];
        let lane = sh.prepared.lanes[slot.lane as usize];
        if slot.pos == lane.end {
            if !sh.options.repeat {
                slot.close();
                slot.active = false;
                self.free.push(i);
                self.lanes_left -= 1;
                return;
            }
            slot.pos = lane.start;
        }
        let r = sh.prepared.order[slot.pos as usize];
        slot.pos += 1;
        let at = sh.prepared.reqs[r as usize].at_ns;
        let intended = if sh.plan.closed { now + at } else { at };
        if intended <= now {
            self.start(i, r, intended, now);
        } else {
            slot.gen = slot.gen.wrapping_add(1);
            slot.waiting = Some(r);
            self.wakes.push(Reverse((intended, i, slot.gen)));
        }
    }

    /// Starts request `r` on slot `i`.
    fn start(&mut self, i: u32, r: u32, intended: u64, now: u64) {
        self.tally.started(now, now.saturating_sub(intended));
        self.unpublished.sent += 1;
        let mut io = io_of(self.sh, self.poll.registry(), &mut self.scratch);
        let step = self.slots[i as usize].start(&mut io, Token(i as usize), r, intended, now);
        match step {
            Step::Pending | Step::Again => {}
            Step::Done(result) => {
                self.finish(i, result, now);
                self.deferred.push(i);
            }
        }
    }

    /// Records the end of slot `i`'s request (`code`: 0, an error, or unfinished).
    fn record(&mut self, i: u32, code: u8, now: u64) {
        let sh = self.sh;
        let slot = &self.slots[i as usize];
        let req = sh.prepared.reqs[slot.req as usize];
        let class_slot = usize::from(sh.prepared.class_slot[req.object as usize]);
        if let Some(ns) = slot.connect_ns {
            self.tally.connected(class_slot, ns);
        }
        let since = |t: u64| t.saturating_sub(slot.intended);
        self.tally.finished(&Row {
            request: slot.req,
            object: req.object,
            conn: req.conn,
            class_slot,
            intended_ns: slot.intended,
            sent_ns: slot.started,
            connect_ns: slot.connect_ns,
            ttfb_ns: slot.first_byte.map(since),
            total_ns: (code == 0).then(|| since(now)),
            bytes: slot.bytes,
            status: slot.status,
            code,
        });
        if code != UNFINISHED {
            let u = &mut self.unpublished;
            u.done += 1;
            u.errors += u64::from(code != 0);
        }
        self.unpublished.bytes += slot.bytes;
    }

    fn finish(&mut self, i: u32, result: Result<(), ErrorKind>, now: u64) {
        self.record(i, result.map_or_else(|k| k.code(), |()| 0), now);
        let in_sync = result.map_or_else(|k| k.keeps_connection(), |()| true);
        self.slots[i as usize].end(in_sync);
    }

    /// Housekeeping: publish counters, expire requests past their timeout, drop the
    /// read marks of answers a tick late, roll the live-p99 window.
    fn tick(&mut self, now: u64) {
        let sh = self.sh;
        self.publish();
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            if !slot.active {
                continue;
            }
            let failed = if slot.busy() && now.saturating_sub(slot.started) >= sh.timeout_ns {
                Some(match slot.phase {
                    crate::conn::Phase::Connecting => ErrorKind::ConnectTimeout,
                    _ => ErrorKind::ResponseTimeout,
                })
            } else {
                match slot.mark_overdue(now, TICK_NS) {
                    Ok(true) => {
                        self.again.push(i as u32);
                        None
                    }
                    Ok(false) => None,
                    Err(kind) => Some(kind),
                }
            };
            if let Some(kind) = failed {
                self.finish(i as u32, Err(kind), now);
                self.advance(i as u32, now);
            }
        }
        if now >= self.window_end {
            let w = &mut self.tally.window;
            if !w.is_empty() {
                let p99_us = w.value_at_quantile(0.99) / 1000;
                sh.control.p99_us.store(p99_us, Ordering::Relaxed);
            }
            w.reset();
            self.window_end = now + WINDOW_NS;
        }
        self.next_tick = now + TICK_NS;
    }

    fn publish(&mut self) {
        let c = self.sh.control;
        let u = std::mem::take(&mut self.unpublished);
        c.sent.fetch_add(u.sent, Ordering::Relaxed);
        c.done.fetch_add(u.done, Ordering::Relaxed);
        c.errors.fetch_add(u.errors, Ordering::Relaxed);
        c.bytes.fetch_add(u.bytes, Ordering::Relaxed);
    }

    /// The run is over: requests in flight are unfinished; every socket is closed.
    fn shutdown(&mut self, now: u64) {
        for i in 0..self.slots.len() {
            if self.slots[i].active && self.slots[i].busy() {
                self.record(i as u32, UNFINISHED, now);
            }
            self.slots[i].end(false);
        }
        self.publish();
    }
}

/// The slot's view of the run.
fn io_of<'a>(sh: &'a Shared<'a>, registry: &'a mio::Registry, scratch: &'a mut [u8]) -> Io<'a> {
    Io {
        registry,
        addr: sh.target.addr(),
        requests: sh.requests,
        reqs: &sh.prepared.reqs,
        objects: &sh.plan.objects,
        verify: sh.options.verify,
        head_request: sh.options.method == Method::Head,
        discard: sh.options.discard,
        rcvlowat: sh.options.rcvlowat,
        scratch,
        clock: sh.clock,
    }
}

/// Sets the calling thread's niceness (on Linux a thread has its own).
fn renice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid and setpriority have no memory preconditions.
    let done = unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice)
    };
    if done != 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::other(format!(
            "cannot set the load thread's nice to {nice}: {err} (a negative one needs root \
             or CAP_SYS_NICE; give 0)"
        )));
    }
    Ok(())
}

/// Pins the calling thread to `core`.
fn pin(core: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within it for
    // core < CPU_SETSIZE, checked first.
    unsafe {
        if core >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::other(format!("core {core} does not exist")));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            let err = io::Error::last_os_error();
            return Err(io::Error::other(format!(
                "cannot pin to core {core}: {err}"
            )));
        }
    }
    Ok(())
}
