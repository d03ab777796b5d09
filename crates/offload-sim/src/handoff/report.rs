//! What a handoff run measured (reference 004 §4's metrics), and the counters behind it.

use hdrhistogram::Histogram;

use crate::stats::{histogram, record};

/// One point of the time series (reference 004 Figure 6).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub t_s: f64,
    /// Connections on the NIC.
    pub cnum: u32,
    pub soft_limit: u32,
    /// NIC packets waiting in RxNIC.
    pub qlen: u32,
    /// Requests completed per second over the interval.
    pub requests_per_s: f64,
    pub host_busy: f64,
    pub nic_busy: f64,
}

/// The measured window's results, and whole-run counters for the invariants.
#[derive(Clone, Debug)]
pub struct Report {
    /// Length of the measured window, s (after the warm-up packets).
    pub measured_s: f64,
    /// The run stopped at `max_time_s` before measuring all its packets.
    pub truncated: bool,
    pub requests_per_s: f64,
    /// Server packets per second, both directions.
    pub packets_per_s: f64,
    /// Connections established per second.
    pub connections_per_s: f64,
    /// HTTP response bodies received by clients, bits per second.
    pub http_bps: f64,
    pub host_idle: f64,
    /// Host cycles in the network stack (packets, connections, bypass, handoff), share of all.
    pub host_stack: f64,
    pub nic_idle: f64,
    /// Connections handed off, share of those established.
    pub offloaded_share: f64,
    /// Packets of connections on the NIC, share of all server packets.
    pub nic_packet_share: f64,
    /// Packets dropped: received ones when the receive buffer was full, and the host's
    /// when its transmit ring was full.
    pub drops: u64,
    /// Retransmission timeouts, server and clients.
    pub timeouts: u64,
    /// Host packets' time on the NIC, s: received (RxHost to host) and sent (TxHost to wire).
    pub host_rx_delay_median_s: f64,
    pub host_rx_delay_mean_s: f64,
    pub host_tx_delay_median_s: f64,
    pub host_tx_delay_mean_s: f64,
    /// Request sent (first time) to last byte received, s.
    pub response_mean_s: f64,
    pub response_p99_s: f64,
    /// Little's law on RxNIC over the window: mean length, arrival rate, mean wait.
    pub rx_nic_mean_len: f64,
    pub rx_nic_arrivals_per_s: f64,
    pub rx_nic_mean_wait_s: f64,
    /// Whole run: packets that reached the server, were dropped, were taken off a receive
    /// queue, are still queued.
    pub packets_in: u64,
    pub packets_dropped: u64,
    pub packets_received: u64,
    pub packets_queued: u64,
    /// Whole run: connections opened by clients, closed by the server, and how many of
    /// them the NIC accepted, refused and closed.
    pub connections_opened: u64,
    pub connections_closed: u64,
    pub handoffs_accepted: u64,
    pub handoffs_refused: u64,
    pub nic_closed: u64,
    /// Connections on the NIC at the end.
    pub cnum: u32,
    pub series: Vec<Sample>,
}

/// Windowed tallies (reset at the end of the warm-up) and whole-run counters.
pub(crate) struct Meter {
    pub start: f64,
    pub requests: u64,
    pub packets: u64,
    pub nic_packets: u64,
    pub established: u64,
    pub offloaded: u64,
    pub body_bytes: u64,
    pub host_busy_s: f64,
    pub host_stack_s: f64,
    pub nic_busy_s: f64,
    pub drops: u64,
    pub timeouts: u64,
    pub host_rx_delay: Histogram<u64>,
    pub host_tx_delay: Histogram<u64>,
    pub host_rx_delay_sum: f64,
    pub host_tx_delay_sum: f64,
    pub response: Histogram<u64>,
    pub response_sum: f64,
    pub rx_nic_area: f64,
    pub rx_nic_arrivals: u64,
    pub rx_nic_departures: u64,
    pub rx_nic_wait_sum: f64,
    // Whole run.
    pub packets_in: u64,
    pub packets_dropped: u64,
    pub packets_received: u64,
    pub connections_opened: u64,
    pub connections_closed: u64,
    pub handoffs_accepted: u64,
    pub handoffs_refused: u64,
    pub nic_closed: u64,
}

impl Meter {
    pub fn new() -> Self {
        Meter {
            start: 0.0,
            requests: 0,
            packets: 0,
            nic_packets: 0,
            established: 0,
            offloaded: 0,
            body_bytes: 0,
            host_busy_s: 0.0,
            host_stack_s: 0.0,
            nic_busy_s: 0.0,
            drops: 0,
            timeouts: 0,
            host_rx_delay: histogram(),
            host_tx_delay: histogram(),
            host_rx_delay_sum: 0.0,
            host_tx_delay_sum: 0.0,
            response: histogram(),
            response_sum: 0.0,
            rx_nic_area: 0.0,
            rx_nic_arrivals: 0,
            rx_nic_departures: 0,
            rx_nic_wait_sum: 0.0,
            packets_in: 0,
            packets_dropped: 0,
            packets_received: 0,
            connections_opened: 0,
            connections_closed: 0,
            handoffs_accepted: 0,
            handoffs_refused: 0,
            nic_closed: 0,
        }
    }

    /// Start the measured window at `now`: windowed tallies restart, run counters stay.
    pub fn restart(&mut self, now: f64) {
        let run = Meter {
            start: now,
            packets_in: self.packets_in,
            packets_dropped: self.packets_dropped,
            packets_received: self.packets_received,
            connections_opened: self.connections_opened,
            connections_closed: self.connections_closed,
            handoffs_accepted: self.handoffs_accepted,
            handoffs_refused: self.handoffs_refused,
            nic_closed: self.nic_closed,
            ..Meter::new()
        };
        *self = run;
    }

    pub fn host_delay(&mut self, sent: bool, seconds: f64) {
        if sent {
            record(&mut self.host_tx_delay, seconds);
            self.host_tx_delay_sum += seconds;
        } else {
            record(&mut self.host_rx_delay, seconds);
            self.host_rx_delay_sum += seconds;
        }
    }

    pub fn response(&mut self, seconds: f64, body_bytes: u64) {
        record(&mut self.response, seconds);
        self.response_sum += seconds;
        self.requests += 1;
        self.body_bytes += body_bytes;
    }

    /// The report at `now`, with what only the simulation knows passed in.
    pub fn report(
        &self,
        now: f64,
        truncated: bool,
        packets_queued: u64,
        cnum: u32,
        series: Vec<Sample>,
    ) -> Report {
        let span = (now - self.start).max(f64::MIN_POSITIVE);
        let share = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                part as f64 / whole as f64
            }
        };
        let median = |h: &Histogram<u64>| {
            if h.is_empty() {
                f64::NAN
            } else {
                h.value_at_quantile(0.5) as f64 * 1e-9
            }
        };
        let mean = |sum: f64, n: u64| if n == 0 { f64::NAN } else { sum / n as f64 };
        Report {
            measured_s: span,
            truncated,
            requests_per_s: self.requests as f64 / span,
            packets_per_s: self.packets as f64 / span,
            connections_per_s: self.established as f64 / span,
            http_bps: self.body_bytes as f64 * 8.0 / span,
            host_idle: (1.0 - self.host_busy_s / span).max(0.0),
            host_stack: self.host_stack_s / span,
            nic_idle: (1.0 - self.nic_busy_s / span).max(0.0),
            offloaded_share: share(self.offloaded, self.established),
            nic_packet_share: share(self.nic_packets, self.packets),
            drops: self.drops,
            timeouts: self.timeouts,
            host_rx_delay_median_s: median(&self.host_rx_delay),
            host_rx_delay_mean_s: mean(self.host_rx_delay_sum, self.host_rx_delay.len()),
            host_tx_delay_median_s: median(&self.host_tx_delay),
            host_tx_delay_mean_s: mean(self.host_tx_delay_sum, self.host_tx_delay.len()),
            response_mean_s: mean(self.response_sum, self.response.len()),
            response_p99_s: if self.response.is_empty() {
                f64::NAN
            } else {
                self.response.value_at_quantile(0.99) as f64 * 1e-9
            },
            rx_nic_mean_len: self.rx_nic_area / span,
            rx_nic_arrivals_per_s: self.rx_nic_arrivals as f64 / span,
            rx_nic_mean_wait_s: mean(self.rx_nic_wait_sum, self.rx_nic_departures),
            packets_in: self.packets_in,
            packets_dropped: self.packets_dropped,
            packets_received: self.packets_received,
            packets_queued,
            connections_opened: self.connections_opened,
            connections_closed: self.connections_closed,
            handoffs_accepted: self.handoffs_accepted,
            handoffs_refused: self.handoffs_refused,
            nic_closed: self.nic_closed,
            cnum,
            series,
        }
    }
}
