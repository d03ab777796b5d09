//! TCP at segment granularity: the server's sender and the client's receiver of one
//! connection, and a lazily rescheduled retransmission timer.
//!
//! Sequence numbers count segments over the connection's life: response r occupies the
//! segments after response r-1's. The server's sender state is one value whoever owns
//! the connection (host or NIC): a handoff moves the owner, not the state, which is what
//! the paper's state transfer achieves (reference 004 §2.4).

/// A retransmission timer whose deadline moves often (every ACK) but whose calendar
/// event is scheduled only when none is pending: on expiry of the event, a later
/// deadline reschedules instead of firing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timer {
    pub deadline: f64,
    pub pending: bool,
    /// Consecutive expiries without progress: the timeout doubles each time.
    pub backoff: u32,
}

/// What a timer event should do.
pub(crate) enum Fire {
    Nothing,
    Reschedule(f64),
    Expire,
}

impl Timer {
    pub const OFF: Timer = Timer {
        deadline: f64::INFINITY,
        pending: false,
        backoff: 0,
    };

    /// Arm for `now + base * 2^backoff` (capped at 64 s). Returns the time to schedule
    /// an event at, if none is pending.
    pub fn arm(&mut self, now: f64, base: f64) -> Option<f64> {
        self.deadline = now + (base * f64::from(1u32 << self.backoff.min(16))).min(64.0);
        if self.pending {
            None
        } else {
            self.pending = true;
            Some(self.deadline)
        }
    }

    pub fn disarm(&mut self) {
        self.deadline = f64::INFINITY;
        self.backoff = 0;
    }

    /// The timer's calendar event came due at `now`.
    pub fn fire(&mut self, now: f64) -> Fire {
        self.pending = false;
        if self.deadline.is_infinite() {
            Fire::Nothing
        } else if self.deadline > now {
            self.pending = true;
            Fire::Reschedule(self.deadline)
        } else {
            self.backoff += 1;
            Fire::Expire
        }
    }
}

/// The server side's sender.
#[derive(Clone, Debug)]
pub(crate) struct Sender {
    /// Oldest unacknowledged segment.
    pub una: u32,
    /// Next segment to send.
    pub nxt: u32,
    /// End of the data enqueued so far.
    pub end: u32,
    pub cwnd: f64,
    pub ssthresh: f64,
    pub timer: Timer,
}

impl Sender {
    pub fn new(initial_cwnd: u32) -> Self {
        Sender {
            una: 0,
            nxt: 0,
            end: 0,
            cwnd: f64::from(initial_cwnd),
            ssthresh: f64::INFINITY,
            timer: Timer::OFF,
        }
    }

    /// A cumulative ACK up to `ack`. Returns whether it acknowledged new data.
    pub fn on_ack(&mut self, ack: u32) -> bool {
        if ack <= self.una {
            return false;
        }
        let acked = f64::from(ack - self.una);
        self.una = ack;
        // After a go-back-N restart the receiver may already hold what we resend.
        self.nxt = self.nxt.max(ack);
        if self.cwnd < self.ssthresh {
            self.cwnd += acked; // slow start
        } else {
            self.cwnd += acked / self.cwnd; // congestion avoidance
        }
        self.timer.backoff = 0;
        true
    }

    /// Segments that may go now: enqueued, unsent and inside min(cwnd, window).
    pub fn sendable(&self, window: u32) -> u32 {
        let limit = self.una + (self.cwnd as u32).min(window).max(1);
        self.end.min(limit).saturating_sub(self.nxt)
    }

    /// A retransmission timeout: halve the threshold, restart from the oldest
    /// unacknowledged segment with a window of one (go-back-N).
    pub fn on_timeout(&mut self) {
        let flight = f64::from(self.nxt - self.una);
        self.ssthresh = (flight / 2.0).max(2.0);
        self.cwnd = 1.0;
        self.nxt = self.una;
    }
}

/// Where the client's side of the connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClientState {
    SynSent,
    /// Requests may be outstanding; the next goes when the previous response is in.
    Open,
    FinSent,
    /// The client sent its last ACK and moved on; it still answers a repeated FIN.
    Done,
}

/// The client side's receiver.
#[derive(Clone, Debug)]
pub(crate) struct Receiver {
    pub state: ClientState,
    /// Next segment expected.
    pub nxt: u32,
    /// End of the response being received.
    pub end: u32,
    /// Segments received since the last ACK went out.
    pub unacked: u32,
    /// Requests sent so far.
    pub sent: u32,
    /// When the current request was first sent.
    pub asked_at: f64,
    pub timer: Timer,
}

/// What the receiver does with a data segment.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Receipt {
    /// In order; no ACK due yet.
    Quiet,
    /// An ACK is due (the count reached, or the segment was a duplicate or early).
    Ack,
    /// The response is complete (its ACK rides on what the client sends next).
    Complete,
}

impl Receiver {
    pub fn new() -> Self {
        Receiver {
            state: ClientState::SynSent,
            nxt: 0,
            end: 0,
            unacked: 0,
            sent: 0,
            asked_at: 0.0,
            timer: Timer::OFF,
        }
    }

    pub fn on_data(&mut self, seq: u32, ack_every: u32) -> Receipt {
        if seq != self.nxt {
            // A duplicate after go-back-N, or (never in order here) a gap: re-ACK.
            self.unacked = 0;
            return Receipt::Ack;
        }
        self.nxt += 1;
        self.unacked += 1;
        if self.nxt == self.end {
            self.unacked = 0;
            Receipt::Complete
        } else if self.unacked >= ack_every {
            self.unacked = 0;
            Receipt::Ack
        } else {
            Receipt::Quiet
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_reschedules_to_a_moved_deadline_and_fires_once_due() {
        let mut t = Timer::OFF;
        // Binary fractions, so the deadlines compare exactly.
        assert_eq!(t.arm(0.0, 0.5), Some(0.5));
        assert_eq!(t.arm(0.25, 0.5), None); // one event pending at 0.5
        assert!(matches!(t.fire(0.5), Fire::Reschedule(d) if d == 0.75));
        assert!(matches!(t.fire(0.75), Fire::Expire));
        assert_eq!(t.backoff, 1);
        assert_eq!(t.arm(0.75, 0.5), Some(0.75 + 1.0)); // backed off
        t.disarm();
        assert!(matches!(t.fire(1.75), Fire::Nothing));
        assert_eq!(t.backoff, 0);
    }

    #[test]
    fn sender_slow_start_then_timeout_goes_back_to_the_oldest_segment() {
        let mut s = Sender::new(2);
        s.end = 20;
        assert_eq!(s.sendable(44), 2);
        s.nxt = 2;
        assert!(s.on_ack(2));
        assert_eq!(s.cwnd, 4.0);
        assert_eq!(s.sendable(44), 4);
        s.nxt = 6;
        assert!(!s.on_ack(2)); // duplicate
        s.on_timeout();
        assert_eq!((s.nxt, s.cwnd, s.ssthresh), (2, 1.0, 2.0));
        assert_eq!(s.sendable(44), 1);
        // The receiver had it all: the ACK jumps past what we resent.
        assert!(s.on_ack(6));
        assert_eq!(s.nxt, 6);
        assert_eq!(s.cwnd, 5.0); // still below ssthresh when the ACK came: slow start
        assert_eq!(s.sendable(2), 2u32.min(s.end - s.nxt)); // the window caps it
    }

    #[test]
    fn receiver_acks_every_second_segment_and_completes_on_the_last() {
        let mut r = Receiver::new();
        r.end = 5;
        let got: Vec<Receipt> = (0..5).map(|s| r.on_data(s, 2)).collect();
        assert_eq!(
            got,
            [
                Receipt::Quiet,
                Receipt::Ack,
                Receipt::Quiet,
                Receipt::Ack,
                Receipt::Complete
            ]
        );
        assert_eq!(r.on_data(3, 2), Receipt::Ack); // duplicate
        assert_eq!(r.nxt, 5);
    }
}
