//! Command-line flags, and the plan and options they make.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::plan::{self, Object, Plan, UNLIMITED};
use crate::{Method, Options, Target, Verify};
use clap::{Parser, ValueEnum};

/// HTTP/1.x load generator: open loop without coordinated omission, or closed loop.
///
/// Open loop (--rate): requests start at Poisson (or --constant) times and latency counts
/// from each request's intended start. Default one connection per request (HTTP/1.0);
/// with --keep-alive K, requests go round robin over --connections persistent streams.
/// Closed loop (--clients or --connections): each client sends its next request --think-ms
/// after its previous response; by default on one persistent connection (like wrk).
#[derive(Parser, Debug)]
#[command(name = "offload-load", version)]
pub struct Args {
    /// http://HOST[:PORT][/PATH]; loopback only unless --allow-remote.
    pub url: String,
    /// Open loop: requests per second.
    #[arg(long, conflicts_with = "clients")]
    pub rate: Option<f64>,
    /// Open loop: constant spacing 1/rate instead of Poisson.
    #[arg(long, requires = "rate")]
    pub constant: bool,
    /// Closed loop: number of clients.
    #[arg(long)]
    pub clients: Option<u32>,
    /// Closed loop: clients, one connection each (wrk's -c). Open loop with
    /// --keep-alive: parallel connection streams [default: 8].
    #[arg(long)]
    pub connections: Option<u32>,
    /// Closed loop: think time before each request, ms.
    #[arg(long, default_value_t = 0.0)]
    pub think_ms: f64,
    /// Open loop: sending window. Closed loop: run time. [default: 10s; closed loop with
    /// --requests: 600s, a safety bound]
    #[arg(long)]
    pub duration: Option<String>,
    /// Total requests (bound).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Requests per connection [default: closed loop unlimited, open loop 1].
    #[arg(long, conflicts_with = "http10")]
    pub keep_alive: Option<u64>,
    /// One request per connection, sent as HTTP/1.0.
    #[arg(long)]
    pub http10: bool,
    /// Event-loop threads [default: one per core].
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    #[arg(long, value_enum, default_value_t = MethodArg::Get)]
    pub method: MethodArg,
    /// Per-request timeout (connect + response).
    #[arg(long, default_value = "5s")]
    pub timeout: String,
    /// Expected body size in bytes: responses of another length are errors.
    #[arg(long)]
    pub size: Option<u64>,
    /// Poll without sleeping for up to this long before blocking in epoll_wait; 0: off.
    /// A loop that rarely sleeps spares the server the cost of waking it, which raises
    /// a saturated loopback server's throughput ~10%; the price is CPU: a few µs per
    /// idle period, a whole core per thread at saturation.
    #[arg(long, default_value = "5us")]
    pub busy_poll: String,
    /// Report an answer's socket readable only once this many of its bytes are there
    /// (SO_RCVLOWAT), at most --size; needs --size. One wake-up and read per small
    /// answer instead of often two; time to first byte then reads as the time the
    /// first BYTES were there, and a shorter (wrong) answer waits up to 20 ms.
    #[arg(long, default_value_t = 0, requires = "size")]
    pub rcvlowat: u32,
    /// Drop response bodies in the kernel without copying them (recv with MSG_TRUNC):
    /// the generator's per-byte receive cost goes, the length check (--size) stays;
    /// the content is never read.
    #[arg(long)]
    pub discard: bool,
    /// Seed of the Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Allow a non-loopback target.
    #[arg(long)]
    pub allow_remote: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No live progress on stderr.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum MethodArg {
    Get,
    Head,
}

/// What the flags amount to.
pub struct Setup {
    pub url: String,
    pub target: Target,
    pub plan: Plan,
    pub options: Options,
    /// A line describing the run, for the summary.
    pub mode: String,
}

impl Setup {
    pub fn from_args(a: &Args) -> Result<Setup, String> {
        let (addr, host, path) = parse_url(&a.url)?;
        let target = Target::new(addr, &host, a.allow_remote)?;
        let timeout_s = parse_seconds(&a.timeout, "--timeout")?;
        let duration_s = a
            .duration
            .as_deref()
            .map(|d| parse_seconds(d, "--duration"))
            .transpose()?;
        let object = Object {
            path,
            size: a.size.unwrap_or(0),
            sha256: None,
            class: 0,
        };
        let busy_poll_s = match a.busy_poll.trim() {
            "0" | "off" => 0.0,
            d => parse_seconds(d, "--busy-poll")?,
        };
        let mut options = Options {
            threads: a.threads,
            busy_poll_s,
            rcvlowat: a.rcvlowat,
            discard: a.discard,
            timeout_s,
            method: match a.method {
                MethodArg::Get => Method::Get,
                MethodArg::Head => Method::Head,
            },
            verify: if a.size.is_some() {
                Verify::Length
            } else {
                Verify::None
            },
            ..Options::default()
        };
        let per_conn = match (a.http10, a.keep_alive) {
            (true, _) => Some(1),
            (false, Some(0)) => return Err("--keep-alive 0: give 1 or more".into()),
            (false, k) => k,
        };
        let max = a.requests.unwrap_or(u64::MAX);
        let (plan, mode) = if let Some(rate) = a.rate {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(format!("--rate {rate}: give a positive rate in requests/s"));
            }
            let window = match (duration_s, a.requests) {
                (Some(d), _) => d,
                (None, Some(_)) => f64::INFINITY,
                (None, None) => 10.0,
            };
            let times = if a.constant {
                plan::constant_times(rate, window, max)
            } else {
                plan::poisson_times(rate, window, max, a.seed)
            };
            let per_conn = per_conn.unwrap_or(1);
            let streams = if per_conn == 1 {
                1
            } else {
                a.connections.unwrap_or(8)
            };
            options.max_duration_s = times.last().copied().unwrap_or(0.0) + timeout_s + 1.0;
            let kind = if a.constant { "constant" } else { "Poisson" };
            let mode = format!(
                "open loop, {kind} {rate} req/s, {}",
                connections_text(per_conn, streams)
            );
            (
                plan::open_loop(vec![object], &times, streams, per_conn),
                mode,
            )
        } else {
            let clients = a.clients.or(a.connections).ok_or(
                "give --rate R (open loop) or --clients N / --connections N (closed loop)",
            )?;
            if clients == 0 {
                return Err("--clients 0: give 1 or more".into());
            }
            if !(a.think_ms.is_finite() && a.think_ms >= 0.0) {
                return Err(format!("--think-ms {}: give 0 or more", a.think_ms));
            }
            let per_conn = per_conn.unwrap_or(UNLIMITED);
            let think_s = a.think_ms / 1e3;
            options.max_duration_s =
                duration_s.unwrap_or(if a.requests.is_some() { 600.0 } else { 10.0 });
            let plan = match a.requests {
                Some(n) => closed_exact(object, clients, n, think_s, per_conn),
                None => {
                    // Bounded by time alone: one cycle per client, repeated.
                    options.repeat = true;
                    let cycle = if per_conn == UNLIMITED { 1 } else { per_conn };
                    plan::closed_loop(vec![object], clients, cycle, think_s, per_conn, true)
                }
            };
            let mode = format!(
                "closed loop, {clients} clients, think {} ms, {}",
                a.think_ms,
                connections_text(per_conn, clients)
            );
            (plan, mode)
        };
        options.check()?;
        plan.check()?;
        Ok(Setup {
            url: a.url.clone(),
            target,
            plan,
            options,
            mode,
        })
    }
}

/// `streams`: the parallel sequences of connections (clients in closed loop).
fn connections_text(per_conn: u64, streams: u32) -> String {
    match per_conn {
        1 => "HTTP/1.0, one connection per request".into(),
        UNLIMITED => format!("keep-alive, {streams} persistent connections"),
        k => format!("keep-alive, {k} requests per connection, {streams} at a time"),
    }
}

/// A closed loop of exactly `n` requests over `clients` (the first `n % clients`
/// clients get one more).
fn closed_exact(object: Object, clients: u32, n: u64, think_s: f64, per_conn: u64) -> Plan {
    let per_client = n.div_ceil(u64::from(clients));
    let mut p = plan::closed_loop(vec![object], clients, per_client, think_s, per_conn, false);
    p.requests.truncate(n as usize);
    // Each client's last remaining request closes its connection.
    let mut closed = vec![false; clients as usize];
    for r in p.requests.iter_mut().rev() {
        if !std::mem::replace(&mut closed[r.client as usize], true) {
            r.keep_alive = false;
        }
    }
    p
}

/// `http://host[:port][/path]` → (address, Host header, path).
pub fn parse_url(url: &str) -> Result<(SocketAddr, String, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("URL {url:?}: give http://HOST[:PORT][/PATH] (https is not supported)")
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() {
        return Err(format!("URL {url:?}: no host"));
    }
    // [v6]:port, host:port, or host alone.
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && (!h.contains(':') || h.ends_with(']')) => {
            let port = p
                .parse::<u16>()
                .map_err(|_| format!("URL {url:?}: port {p:?} is not a number"))?;
            (h, port)
        }
        _ => (authority, 80),
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addr = (bare, port)
        .to_socket_addrs()
        .map_err(|e| format!("URL {url:?}: cannot resolve {bare:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("URL {url:?}: {bare:?} has no address"))?;
    Ok((addr, authority.to_string(), path))
}

/// `"250us"`, `"5ms"`, `"2.5s"`, `"1m"`, `"1h"` or a plain number of seconds.
pub fn parse_seconds(text: &str, flag: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    let value = num.parse::<f64>().map(|v| v * scale).unwrap_or(f64::NAN);
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!(
            "{flag} {text:?}: give a positive time such as 500ms, 10s or 2m"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let (a, h, p) = parse_url("http://127.0.0.1:8080/x/y").unwrap();
        assert_eq!(
            (a.to_string(), h.as_str(), p.as_str()),
            ("127.0.0.1:8080".into(), "127.0.0.1:8080", "/x/y")
        );
        let (a, _, p) = parse_url("http://[::1]:81").unwrap();
        assert_eq!((a.to_string(), p.as_str()), ("[::1]:81".into(), "/"));
        assert_eq!(parse_url("http://127.0.0.1").unwrap().0.port(), 80);
        assert!(parse_url("https://127.0.0.1/").is_err());
        assert!(parse_url("http://127.0.0.1:x/").is_err());
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("10s", "-").unwrap(), 10.0);
        assert_eq!(parse_seconds("250ms", "-").unwrap(), 0.25);
        assert_eq!(parse_seconds("2", "-").unwrap(), 2.0);
        assert_eq!(parse_seconds("1m", "-").unwrap(), 60.0);
        assert!(parse_seconds("ten", "-").is_err());
        assert!(parse_seconds("0s", "-").is_err());
    }

    #[test]
    fn exact_closed_plans() {
        let o = Object {
            path: "/".into(),
            size: 0,
            sha256: None,
            class: 0,
        };
        let p = closed_exact(o, 3, 7, 0.0, UNLIMITED);
        assert_eq!(p.requests.len(), 7);
        let last: Vec<bool> = p.requests.iter().map(|r| r.keep_alive).collect();
        // Client 0 has rows 0, 3, 6; clients 1 and 2 end at rows 4 and 5.
        assert_eq!(last, [true, true, true, true, false, false, false]);
    }
}
