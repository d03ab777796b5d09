//! Seed 004's three handoff policies, behind one trait that the packet-level simulation
//! and the testbed's engine both drive:
//!
//! - **priority** ([`Priority`]): in which order the offload engine serves its work. Under
//!   `HostFirst` the work of host-owned connections (packets it only bridges, connections
//!   to pass on) goes before the TCP work of the connections it owns;
//! - **load control** ([`LoadControl`]): the engine's `Soft_limit` on the connections it
//!   accepts, moved by a watermark state machine on `Qlen`, its backlog of own-connection
//!   work (reference 004 §3.2, Figure 3);
//! - **selection** ([`Selection`]): when the host asks the engine to take a connection: at
//!   establishment (FCFS), at the n-th send-buffer enqueue (`T(n)`), or once the host's
//!   long-lived flow detector lists it (`LLF`, seed 002's FastFlow run on the host's view
//!   of the packets). One attempt per connection; a refused connection stays with the
//!   host for life.

/// The order in which the engine serves its queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// Oldest work first, whoever owns the connection.
    Fcfs,
    /// Host-owned connections' work first, then the engine's own.
    HostFirst,
}

/// When the host attempts a handoff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// At establishment: every connection is offered, in arrival order.
    Fcfs,
    /// At the n-th enqueue into the send buffer (n >= 1): only connections that live
    /// that long are offered.
    Threshold(u32),
    /// When the host's FastFlow detector lists the connection as long-lived.
    LongLived,
}

/// A point in a connection's life where the host may offer it to the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The three-way handshake completed.
    Established,
    /// The connection's k-th enqueue into its send buffer (k counts from 1).
    Enqueue(u32),
    /// The host's long-lived flow detector listed the connection.
    LongLived,
}

/// Watermark load control: parameters (reference 004 §3.2; §7.5 lists which the paper
/// leaves open, and the defaults below say what we chose).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Watermarks {
    /// `Qlen > hiwat`: the engine is falling behind (the paper's 1024).
    pub hiwat: u32,
    /// `Qlen < lowat`: the engine has room (not given; `hiwat / 4`).
    pub lowat: u32,
    /// Connections taken off the limit per decrease (not given; 32).
    pub step_down: u32,
    /// Connections added per increase (not given; 32).
    pub step_up: u32,
}

impl Default for Watermarks {
    fn default() -> Self {
        Watermarks {
            hiwat: 1024,
            lowat: 256,
            step_down: 32,
            step_up: 32,
        }
    }
}

impl Watermarks {
    pub fn validate(&self) -> Result<(), String> {
        if self.lowat >= self.hiwat {
            return Err(format!(
                "load control: lowat ({}) must be below hiwat ({})",
                self.lowat, self.hiwat
            ));
        }
        if self.step_down == 0 || self.step_up == 0 {
            return Err("load control: step_down and step_up must be at least 1".into());
        }
        Ok(())
    }
}

/// The load-control state (Figure 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Qlen is between the watermarks, or the last change has taken effect.
    Monitor,
    /// The limit was cut; wait for terminations to bring `Cnum` under it.
    Decrease,
    /// The limit was raised; wait for the host to fill it, unless overload comes first.
    Increase,
}

/// The watermark state machine on `Soft_limit`.
#[derive(Clone, Debug)]
pub struct LoadControl {
    marks: Watermarks,
    hard_limit: u32,
    soft_limit: u32,
    state: State,
}

impl LoadControl {
    pub fn new(marks: Watermarks, hard_limit: u32) -> Self {
        LoadControl {
            marks,
            hard_limit,
            soft_limit: hard_limit,
            state: State::Monitor,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn soft_limit(&self) -> u32 {
        self.soft_limit
    }

    /// Run the machine on an event (a packet arrived, a handoff was accepted, a
    /// connection ended) with the current backlog `qlen` and engine connections `cnum`.
    /// Returns the new `Soft_limit` when it changed, for the engine to advertise.
    pub fn observe(&mut self, qlen: u32, cnum: u32) -> Option<u32> {
        let overloaded = qlen > self.marks.hiwat;
        match self.state {
            State::Monitor if overloaded => Some(self.decrease(cnum)),
            State::Monitor if qlen < self.marks.lowat && self.soft_limit < self.hard_limit => {
                Some(self.increase())
            }
            State::Monitor => None,
            // "Cnum has fallen to the limit": with `<`, a limit cut to 0 could never be left.
            State::Decrease => {
                if cnum <= self.soft_limit {
                    self.state = State::Monitor;
                }
                None
            }
            // Overload is checked before "the host filled the new room", for safety.
            State::Increase if overloaded => Some(self.decrease(cnum)),
            State::Increase => {
                if cnum >= self.soft_limit {
                    self.state = State::Monitor;
                }
                None
            }
        }
    }

    /// Cut below the current `Cnum` at once, so the machine does not step down one
    /// packet at a time from a limit far above the connections actually held.
    fn decrease(&mut self, cnum: u32) -> u32 {
        self.soft_limit = self
            .soft_limit
            .min(cnum)
            .saturating_sub(self.marks.step_down);
        self.state = State::Decrease;
        self.soft_limit
    }

    fn increase(&mut self) -> u32 {
        self.soft_limit = (self.soft_limit + self.marks.step_up).min(self.hard_limit);
        self.state = State::Increase;
        self.soft_limit
    }
}

/// What a handoff policy decides. The simulator's NIC and the testbed's engine call the
/// engine-side methods; the host side calls [`Policy::select`].
pub trait Policy {
    /// The engine's service order.
    fn priority(&self) -> Priority;

    /// Host side: offer the connection to the engine at this trigger? Called at every
    /// trigger until the connection has been offered once.
    fn select(&self, trigger: Trigger) -> bool;

    /// Engine side: accept a connection, holding `cnum` already?
    fn admit(&self, cnum: u32) -> bool;

    /// Engine side: an event with backlog `qlen` and `cnum` connections held. Returns
    /// the new soft limit when it changed.
    fn observe(&mut self, qlen: u32, cnum: u32) -> Option<u32>;

    /// The current limit on the engine's connections.
    fn soft_limit(&self) -> u32;
}

/// Seed 004's policies with their switches: the paper's `NICconns-P|N-L|N-FCFS|Tn`.
#[derive(Clone, Debug)]
pub struct Paper {
    pub priority: Priority,
    pub selection: Selection,
    pub hard_limit: u32,
    /// `None`: the engine takes connections up to `hard_limit` (the paper's "N").
    pub control: Option<LoadControl>,
}

impl Paper {
    pub fn new(
        hard_limit: u32,
        priority: Priority,
        control: Option<Watermarks>,
        selection: Selection,
    ) -> Result<Self, String> {
        if let Some(marks) = &control {
            marks.validate()?;
        }
        if selection == Selection::Threshold(0) {
            return Err("selection: the threshold T(n) needs n >= 1".into());
        }
        Ok(Paper {
            priority,
            selection,
            hard_limit,
            control: control.map(|m| LoadControl::new(m, hard_limit)),
        })
    }
}

impl Policy for Paper {
    fn priority(&self) -> Priority {
        self.priority
    }

    fn select(&self, trigger: Trigger) -> bool {
        match (self.selection, trigger) {
            (Selection::Fcfs, Trigger::Established) => true,
            (Selection::Threshold(n), Trigger::Enqueue(k)) => k == n,
            (Selection::LongLived, Trigger::LongLived) => true,
            _ => false,
        }
    }

    fn admit(&self, cnum: u32) -> bool {
        cnum < self.soft_limit()
    }

    fn observe(&mut self, qlen: u32, cnum: u32) -> Option<u32> {
        self.control.as_mut().and_then(|c| c.observe(qlen, cnum))
    }

    fn soft_limit(&self) -> u32 {
        self.control
            .as_ref()
            .map_or(self.hard_limit, LoadControl::soft_limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARKS: Watermarks = Watermarks {
        hiwat: 100,
        lowat: 20,
        step_down: 8,
        step_up: 4,
    };

    fn machine() -> LoadControl {
        LoadControl::new(MARKS, 64)
    }

    #[test]
    fn starts_monitoring_at_the_hard_limit_and_stays_between_the_watermarks() {
        let mut lc = machine();
        assert_eq!((lc.state(), lc.soft_limit()), (State::Monitor, 64));
        for qlen in [20, 50, 100] {
            assert_eq!(lc.observe(qlen, 30), None);
            assert_eq!(lc.state(), State::Monitor);
        }
        // Underload at the hard limit has nowhere to go.
        assert_eq!(lc.observe(0, 30), None);
        assert_eq!(lc.state(), State::Monitor);
    }

    #[test]
    fn monitor_to_decrease_cuts_below_the_connections_held() {
        let mut lc = machine();
        assert_eq!(lc.observe(101, 40), Some(32)); // min(64, 40) - 8
        assert_eq!(lc.state(), State::Decrease);
    }

    #[test]
    fn decrease_waits_for_terminations_then_monitors() {
        let mut lc = machine();
        lc.observe(101, 40);
        // Still overloaded, still above the limit: no new cut while waiting.
        assert_eq!(lc.observe(500, 35), None);
        assert_eq!(lc.observe(500, 33), None);
        assert_eq!(lc.state(), State::Decrease);
        assert_eq!(lc.observe(500, 32), None);
        assert_eq!(lc.state(), State::Monitor);
        // Back in Monitor, persistent overload cuts again.
        assert_eq!(lc.observe(500, 32), Some(24));
    }

    #[test]
    fn monitor_to_increase_then_filled_returns_to_monitor() {
        let mut lc = machine();
        lc.observe(101, 40);
        lc.observe(50, 10);
        assert_eq!(lc.state(), State::Monitor);
        assert_eq!(lc.observe(5, 10), Some(36));
        assert_eq!(lc.state(), State::Increase);
        assert_eq!(lc.observe(5, 35), None);
        assert_eq!(lc.state(), State::Increase);
        assert_eq!(lc.observe(5, 36), None);
        assert_eq!(lc.state(), State::Monitor);
    }

    #[test]
    fn increase_checks_overload_before_filled() {
        let mut lc = machine();
        lc.observe(101, 40);
        lc.observe(50, 10);
        lc.observe(5, 10); // Increase with limit 36
                           // Overloaded and filled at once: overload wins.
        assert_eq!(lc.observe(101, 36), Some(28));
        assert_eq!(lc.state(), State::Decrease);
    }

    #[test]
    fn limits_stay_within_zero_and_the_hard_limit() {
        let mut lc = machine();
        for _ in 0..100 {
            lc.observe(1000, 0);
            lc.observe(1000, 0);
        }
        assert_eq!(lc.soft_limit(), 0);
        for _ in 0..100 {
            lc.observe(0, 64);
        }
        assert_eq!(lc.soft_limit(), 64);
    }

    #[test]
    fn selection_fires_exactly_once_per_connection_life() {
        let fcfs = Paper::new(8, Priority::Fcfs, None, Selection::Fcfs).unwrap();
        let t4 = Paper::new(8, Priority::Fcfs, None, Selection::Threshold(4)).unwrap();
        let llf = Paper::new(8, Priority::Fcfs, None, Selection::LongLived).unwrap();
        let life: Vec<Trigger> = std::iter::once(Trigger::Established)
            .chain((1..=30).map(Trigger::Enqueue))
            .chain(std::iter::once(Trigger::LongLived))
            .collect();
        let fired = |p: &Paper| {
            life.iter()
                .filter(|t| p.select(**t))
                .copied()
                .collect::<Vec<_>>()
        };
        assert_eq!(fired(&fcfs), [Trigger::Established]);
        assert_eq!(fired(&t4), [Trigger::Enqueue(4)]);
        assert_eq!(fired(&llf), [Trigger::LongLived]);
        // A connection shorter than the threshold is never offered.
        assert!(!life[..4].iter().any(|t| t4.select(*t)));
    }

    #[test]
    fn admission_follows_the_soft_limit_or_the_hard_limit() {
        let mut p = Paper::new(64, Priority::HostFirst, Some(MARKS), Selection::Fcfs).unwrap();
        assert!(p.admit(63) && !p.admit(64));
        assert_eq!(p.observe(101, 40), Some(32));
        assert!(p.admit(31) && !p.admit(32));
        let n = Paper::new(64, Priority::HostFirst, None, Selection::Fcfs).unwrap();
        assert!(n.admit(63) && !n.admit(64));
        assert_eq!(n.soft_limit(), 64);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let bad = Watermarks {
            lowat: 200,
            ..MARKS
        };
        assert!(Paper::new(1, Priority::Fcfs, Some(bad), Selection::Fcfs)
            .unwrap_err()
            .contains("lowat"));
        assert!(Paper::new(1, Priority::Fcfs, None, Selection::Threshold(0))
            .unwrap_err()
            .contains("T(n)"));
    }
}
