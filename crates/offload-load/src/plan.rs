//! What a run sends: the objects, and one row per request.
//!
//! This is the request stream of `docs/workload.md` ("Request streams") as plain data,
//! with objects referred to by index. Its send rule: a request goes out on its
//! connection only after the response to that connection's previous request has been
//! read (no pipelining). In open loop it also waits until its `at_s`; in closed loop its
//! client first waits `at_s` (the think time) after its own previous response. The first
//! request of a `conn` opens a new connection; after a request with `keep_alive == false`
//! the connection is closed, and that request says `Connection: close`, or, when it is
//! its connection's only request, is sent as HTTP/1.0 (see `Options::http10_for_single`).

use std::collections::HashMap;

use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A file the server holds: what a request for it should get back.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    /// Absolute path of the request target, e.g. `/c0/f12.bin`.
    pub path: String,
    /// Body size in bytes.
    pub size: u64,
    /// SHA-256 of the body, checked when `Verify::Checksum` asks for it.
    pub sha256: Option<[u8; 32]>,
    /// Size class (seed 000's 0..=4), the key of the per-class report.
    pub class: u8,
}

/// One planned request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Planned {
    /// Open loop: intended send time, seconds from the start. Closed loop: think time
    /// before the request, seconds.
    pub at_s: f64,
    /// Index into `Plan::objects`.
    pub object: u32,
    /// Connection id: requests sharing it go in order on one connection.
    pub conn: u64,
    /// False on a connection's last request: close it afterwards.
    pub keep_alive: bool,
    /// Closed loop: the client that sends it (open loop: ignored).
    pub client: u32,
}

/// Objects and requests, and which loop runs them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub objects: Vec<Object>,
    pub requests: Vec<Planned>,
    /// Closed loop (think times, one request at a time per client) or open loop.
    pub closed: bool,
}

impl Plan {
    /// Checks what the event loop trusts: paths that fit in a request line, object indices
    /// in range, finite non-negative times, and (closed loop) each connection used by
    /// one client only.
    pub fn check(&self) -> Result<(), String> {
        if self.requests.len() >= u32::MAX as usize || self.objects.len() >= u32::MAX as usize {
            return Err("plan: at most 2^32 - 2 requests and objects; split the run".into());
        }
        for (i, o) in self.objects.iter().enumerate() {
            let bad = o.path.chars().find(|c| !c.is_ascii_graphic());
            if !o.path.starts_with('/') || bad.is_some() {
                return Err(format!(
                    "plan: objects[{i}].path = {:?}: a request path starts with '/' and has \
                     no spaces, control or non-ASCII characters (percent-encode them)",
                    o.path
                ));
            }
        }
        let mut owner: HashMap<u64, u32> = HashMap::new();
        for (i, r) in self.requests.iter().enumerate() {
            if r.object as usize >= self.objects.len() {
                return Err(format!(
                    "plan: requests[{i}].object = {}: the plan has {} objects",
                    r.object,
                    self.objects.len()
                ));
            }
            if !(r.at_s.is_finite() && r.at_s >= 0.0) {
                let what = if self.closed {
                    "think time"
                } else {
                    "send time"
                };
                return Err(format!(
                    "plan: requests[{i}].at_s = {}: a {what} is a finite number of seconds >= 0",
                    r.at_s
                ));
            }
            if self.closed {
                let first = *owner.entry(r.conn).or_insert(r.client);
                if first != r.client {
                    return Err(format!(
                        "plan: requests[{i}]: connection {} belongs to client {first}, not \
                         client {}; give each client its own connection ids",
                        r.conn, r.client
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Requests per connection that means "never close" in the generators below.
pub const UNLIMITED: u64 = u64::MAX;

/// Connection id and keep-alive flag of the `j`-th request (0-based) of a sequence of
/// `len` requests cut into connections of `per_conn`; `base` is the sequence's first
/// connection id and `stride` the gap between its successive ids.
fn connection(j: u64, len: u64, per_conn: u64, base: u64, stride: u64) -> (u64, bool) {
    let per_conn = per_conn.max(1);
    let conn = base + stride * (j / per_conn);
    let last_of_conn = j % per_conn == per_conn - 1 || j + 1 == len;
    (conn, !last_of_conn)
}

/// Send times of a constant-rate open loop: k / rate for k = 0, 1, ... while below
/// `duration_s`, at most `max` of them. Computed as k / rate, so no error accumulates.
pub fn constant_times(rate: f64, duration_s: f64, max: u64) -> Vec<f64> {
    let n = ((duration_s * rate).ceil().max(0.0) as u64).min(max);
    (0..n)
        .map(|k| k as f64 / rate)
        .filter(|&t| t < duration_s)
        .collect()
}

/// Send times of a Poisson open loop: independent exponential gaps of mean 1 / rate,
/// starting from 0, while below `duration_s`, at most `max` of them.
pub fn poisson_times(rate: f64, duration_s: f64, max: u64, seed: u64) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let gap = Exp::new(rate).expect("rate > 0");
    let mut t = 0.0;
    let mut times = Vec::new();
    while t < duration_s && (times.len() as u64) < max {
        times.push(t);
        t += gap.sample(&mut rng);
    }
    times
}

/// An open-loop plan over `objects` (requested in turn) with the given send times.
/// Requests are dealt round robin to `streams` sequences; each sequence opens a new
/// connection every `per_conn` requests (1: one connection per request, HTTP/1.0
/// style). With keep-alive a request whose connection is still busy waits, and its
/// latency includes the wait.
pub fn open_loop(objects: Vec<Object>, times: &[f64], streams: u32, per_conn: u64) -> Plan {
    let n = times.len() as u64;
    let streams = u64::from(streams.max(1));
    let requests = times
        .iter()
        .enumerate()
        .map(|(i, &at_s)| {
            let (i, s) = (i as u64, i as u64 % streams);
            let len = (n - s).div_ceil(streams);
            let (conn, keep_alive) = connection(i / streams, len, per_conn, s, streams);
            Planned {
                at_s,
                object: (i % objects.len() as u64) as u32,
                conn,
                keep_alive,
                client: s as u32,
            }
        })
        .collect();
    Plan {
        objects,
        requests,
        closed: false,
    }
}

/// A closed-loop plan: `clients` clients with `per_client` requests each, a fixed
/// think time before each, connections of `per_conn` requests. Rows are interleaved
/// (every client's first request, then every client's second, ...), as in the stream
/// format. With `cycle` the plan is meant for `Options::repeat`: a client's last
/// connection is left open unless it is full, so the next cycle goes on using it.
pub fn closed_loop(
    objects: Vec<Object>,
    clients: u32,
    per_client: u64,
    think_s: f64,
    per_conn: u64,
    cycle: bool,
) -> Plan {
    let clients_n = u64::from(clients);
    let mut requests = Vec::with_capacity((clients_n * per_client) as usize);
    for j in 0..per_client {
        for c in 0..clients {
            let len = if cycle { UNLIMITED } else { per_client };
            let (conn, keep_alive) = connection(j, len, per_conn, u64::from(c), clients_n);
            requests.push(Planned {
                at_s: think_s,
                object: ((j * clients_n + u64::from(c)) % objects.len() as u64) as u32,
                conn,
                keep_alive,
                client: c,
            });
        }
    }
    Plan {
        objects,
        requests,
        closed: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(path: &str) -> Vec<Object> {
        vec![Object {
            path: path.into(),
            size: 10,
            sha256: None,
            class: 0,
        }]
    }

    #[test]
    fn constant_times_are_exact() {
        let t = constant_times(1000.0, 1.0, u64::MAX);
        assert_eq!(t.len(), 1000);
        assert_eq!(t[999], 0.999);
        assert_eq!(constant_times(1000.0, 1.0, 10).len(), 10);
    }

    /// Kolmogorov-Smirnov distance of the gaps from the exponential: below the 1%
    /// critical value 1.63 / sqrt(n) (fixed seed, so not flaky).
    #[test]
    fn poisson_gaps_are_exponential() {
        let rate = 500.0;
        let t = poisson_times(rate, 20.0, u64::MAX, 7);
        let mut gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.sort_by(f64::total_cmp);
        let n = gaps.len() as f64;
        let d = gaps
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let f = 1.0 - (-rate * g).exp();
                (f - i as f64 / n).abs().max((f - (i + 1) as f64 / n).abs())
            })
            .fold(0.0, f64::max);
        assert!(d < 1.63 / n.sqrt(), "D = {d}, n = {n}");
        // The count is Poisson(10_000): within 4 standard deviations.
        assert!((n + 1.0 - 10_000.0).abs() < 400.0, "{n}");
    }

    #[test]
    fn open_loop_connections() {
        let times = constant_times(100.0, 1.0, 10);
        let p = open_loop(one("/"), &times, 1, 1);
        assert!(p.requests.iter().all(|r| !r.keep_alive));
        assert_eq!(p.requests[9].conn, 9);
        // Two streams, three requests per connection: stream 0 gets rows 0,2,4,6,8.
        let p = open_loop(one("/"), &times, 2, 3);
        let conns: Vec<u64> = p.requests.iter().map(|r| r.conn).collect();
        assert_eq!(conns, [0, 1, 0, 1, 0, 1, 2, 3, 2, 3]);
        let keep: Vec<bool> = p.requests.iter().map(|r| r.keep_alive).collect();
        let expect = [
            true, true, true, true, false, false, true, true, false, false,
        ];
        assert_eq!(keep, expect);
        p.check().unwrap();
    }

    #[test]
    fn closed_loop_rows_interleave() {
        let p = closed_loop(one("/"), 2, 3, 0.0, UNLIMITED, false);
        let rows: Vec<(u32, u64, bool)> = p
            .requests
            .iter()
            .map(|r| (r.client, r.conn, r.keep_alive))
            .collect();
        let expect = [
            (0, 0, true),
            (1, 1, true),
            (0, 0, true),
            (1, 1, true),
            (0, 0, false),
            (1, 1, false),
        ];
        assert_eq!(rows, expect);
        let p = closed_loop(one("/"), 2, 1, 0.0, UNLIMITED, true);
        assert!(p.requests.iter().all(|r| r.keep_alive));
        p.check().unwrap();
    }

    #[test]
    fn check_names_the_field() {
        let mut p = open_loop(one("/a"), &[0.0], 1, 1);
        p.requests[0].object = 3;
        assert!(p.check().unwrap_err().contains("requests[0].object = 3"));
        p.requests[0].object = 0;
        p.requests[0].at_s = f64::NAN;
        assert!(p.check().unwrap_err().contains("requests[0].at_s"));
        let p = open_loop(one("a b"), &[0.0], 1, 1);
        assert!(p.check().unwrap_err().contains("objects[0].path"));
        let mut p = closed_loop(one("/"), 2, 1, 0.0, 1, false);
        p.requests[1].conn = 0;
        assert!(p.check().unwrap_err().contains("belongs to client 0"));
    }
}
