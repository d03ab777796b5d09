//! Timing properties of the open loop: no coordinated omission, and an accurate send
//! schedule. These tests measure time, so they run one at a time.

mod common;

use std::sync::Mutex;

use common::{object, Behavior, Server};
use offload_load::plan::{constant_times, open_loop, UNLIMITED};
use offload_load::report::quantile_s;
use offload_load::{run, Control, Options, Report};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn options() -> Options {
    Options {
        threads: 1,
        timeout_s: 2.0,
        max_duration_s: 5.0,
        records: true,
        ..Options::default()
    }
}

/// Fraction of completed requests whose total time exceeds `s`.
fn share_over(r: &Report, s: f64) -> f64 {
    let h = &r.overall.total;
    h.count_between((s * 1e9) as u64, h.max()) as f64 / h.len() as f64
}

/// 500 req/s for 1 s against a server that holds every response due between 0.3 s
/// and 0.5 s until 0.5 s. Requests keep going out on schedule during the stall, and
/// their latency counts from their intended send time, so the stall is in the tail:
/// ~100 requests (20%) waited between 0 and 200 ms.
fn assert_stall_is_seen(streams: u32, per_conn: u64) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start(Behavior::Stall {
        from_s: 0.3,
        until_s: 0.5,
    });
    let plan = open_loop(
        vec![object(200)],
        &constant_times(500.0, 1.0, 500),
        streams,
        per_conn,
    );
    let r = run(&server.target(), &plan, &options(), &Control::new()).unwrap();
    assert_eq!((r.completed, r.failed), (500, 0), "{:?}", r.errors);
    let p99 = quantile_s(&r.overall.total, 0.99);
    eprintln!(
        "streams {streams}: p50 {:.1} ms, p99 {:.1} ms, over 100 ms {:.1}%, lag p99 {:.1} ms",
        quantile_s(&r.overall.total, 0.5) * 1e3,
        p99 * 1e3,
        share_over(&r, 0.100) * 100.0,
        r.lag.p99_s * 1e3
    );
    assert!(p99 >= 0.150, "p99 {p99}");
    assert!(share_over(&r, 0.100) > 0.05, "{}", share_over(&r, 0.100));
    // Open loop: the offered schedule held during the stall.
    assert!(
        (r.achieved_rate / 500.0 - 1.0).abs() < 0.05,
        "{}",
        r.achieved_rate
    );
}

#[test]
fn stalled_server_shows_in_the_tail_http10() {
    assert_stall_is_seen(1, 1);
}

/// Ten keep-alive connections: a request due while its connection waits for a stalled
/// response waits too, and that wait is part of its latency.
#[test]
fn stalled_server_shows_in_the_tail_keep_alive() {
    assert_stall_is_seen(10, UNLIMITED);
}

/// 1,000 req/s on 10 keep-alive connections against a fast server: requests start on
/// time (mean lag under 1 ms) and the achieved rate is the offered one within 2%.
#[test]
fn open_loop_sends_on_schedule() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start(Behavior::Normal);
    let plan = open_loop(
        vec![object(100)],
        &constant_times(1000.0, 1.0, 1000),
        10,
        UNLIMITED,
    );
    let r = run(&server.target(), &plan, &options(), &Control::new()).unwrap();
    assert_eq!(r.completed, 1000);
    assert!(r.lag.mean_s < 0.001, "mean lag {} s", r.lag.mean_s);
    assert!(
        (r.achieved_rate / r.offered_rate - 1.0).abs() < 0.02,
        "{} vs {}",
        r.achieved_rate,
        r.offered_rate
    );
    eprintln!(
        "lag mean {:.1} us, p99 {:.1} us, max {:.1} us",
        r.lag.mean_s * 1e6,
        r.lag.p99_s * 1e6,
        r.lag.max_s * 1e6
    );
}
