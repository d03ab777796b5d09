//! The load generator against the in-test server: counts, connections, verification
//! and error classification. Every run is small and bounded.

mod common;

use std::time::{Duration, Instant};

use common::{object, refused_addr, Behavior, Server};
use offload_load::plan::{closed_loop, constant_times, open_loop, Plan, UNLIMITED};
use offload_load::{run, Control, ErrorKind, Method, Options, Report, Target, Verify};

fn options() -> Options {
    Options {
        threads: 2,
        timeout_s: 2.0,
        max_duration_s: 10.0,
        ..Options::default()
    }
}

/// The default options, with each body's SHA-256 checked as well as its length.
fn checked() -> Options {
    Options {
        verify: Verify::Checksum,
        ..options()
    }
}

fn go(server: &Server, plan: &Plan, options: &Options) -> Report {
    run(&server.target(), plan, options, &Control::new()).unwrap()
}

/// A fast open-loop plan: `n` requests at 2000/s, one connection each.
fn http10_plan(n: u64, size: u64) -> Plan {
    open_loop(vec![object(size)], &constant_times(2000.0, 1.0, n), 1, 1)
}

fn only_error(r: &Report, kind: ErrorKind, n: u64) {
    assert_eq!(r.error_count(kind), n, "{kind:?}: {:?}", r.errors);
    assert_eq!(r.failed, n, "{:?}", r.errors);
}

#[test]
fn closed_loop_exact_counts_and_keep_alive_reuse() {
    let server = Server::start(Behavior::Normal);
    // 3 clients x 23 requests, 5 per connection: ceil(23 / 5) = 5 connections each.
    let plan = closed_loop(vec![object(1000), object(5000)], 3, 23, 0.0, 5, false);
    let r = go(&server, &plan, &checked());
    assert_eq!((r.planned, r.sent, r.completed, r.failed), (69, 69, 69, 0));
    assert_eq!(server.requests(), 69);
    assert_eq!(server.accepted(), 15);
    assert_eq!(r.connections, 15);
    assert_eq!(r.body_bytes, 35 * 1000 + 34 * 5000);
    assert_eq!(r.status, vec![(200, 69)]);
    assert_eq!(r.overall.total.len(), 69);
    assert_eq!(r.classes.len(), 2);
    assert_eq!(r.classes[0].completed + r.classes[1].completed, 69);
    assert_eq!(r.overall.connect.len(), 15);
    assert!(r.connect_mean_s > 0.0 && r.connect_mean_s < 0.1);
}

#[test]
fn one_persistent_connection_per_client() {
    let server = Server::start(Behavior::Normal);
    let plan = closed_loop(vec![object(100)], 4, 50, 0.0, UNLIMITED, false);
    let r = go(&server, &plan, &options());
    assert_eq!((r.completed, server.accepted()), (200, 4));
}

#[test]
fn http10_is_one_connection_per_request() {
    let server = Server::start(Behavior::Normal);
    let r = go(&server, &http10_plan(40, 2000), &options());
    assert_eq!((r.sent, r.completed), (40, 40));
    assert_eq!(server.accepted(), 40);
    assert_eq!(
        server
            .counts
            .http10
            .load(std::sync::atomic::Ordering::SeqCst),
        40
    );
    // Asked not to use HTTP/1.0, the same plan says Connection: close instead.
    let server = Server::start(Behavior::Normal);
    let o = Options {
        http10_for_single: false,
        ..options()
    };
    let r = go(&server, &http10_plan(10, 10), &o);
    assert_eq!((r.completed, server.accepted()), (10, 10));
    assert_eq!(
        server
            .counts
            .http10
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

#[test]
fn server_closing_each_connection_means_reconnecting() {
    let server = Server::start(Behavior::CloseEach);
    let plan = closed_loop(vec![object(300)], 2, 10, 0.0, UNLIMITED, false);
    let r = go(&server, &plan, &options());
    assert_eq!((r.completed, r.failed), (20, 0));
    assert_eq!((server.accepted(), r.connections), (20, 20));
}

#[test]
fn checksum_catches_wrong_content_that_length_misses() {
    let server = Server::start(Behavior::WrongContent);
    let plan = http10_plan(10, 3000);
    let r = go(&server, &plan, &checked());
    only_error(&r, ErrorKind::BadContent, 10);
    let r = go(
        &server,
        &plan,
        &Options {
            verify: Verify::Length,
            ..options()
        },
    );
    assert_eq!(r.completed, 10);
    let r = go(
        &server,
        &plan,
        &Options {
            verify: Verify::None,
            ..options()
        },
    );
    assert_eq!(r.completed, 10);
}

#[test]
fn wrong_length_and_short_body() {
    let server = Server::start(Behavior::WrongLength);
    only_error(
        &go(&server, &http10_plan(10, 3000), &options()),
        ErrorKind::WrongLength,
        10,
    );
    let server = Server::start(Behavior::ShortBody);
    let r = go(&server, &http10_plan(10, 3000), &options());
    only_error(&r, ErrorKind::ShortBody, 10);
    assert_eq!(r.body_bytes, 10 * 1500);
}

#[test]
fn bad_status() {
    let server = Server::start(Behavior::Status(404));
    let plan = closed_loop(vec![object(10)], 1, 5, 0.0, UNLIMITED, false);
    let r = go(&server, &plan, &options());
    only_error(&r, ErrorKind::BadStatus, 5);
    assert_eq!(r.status, vec![(404, 5)]);
    assert_eq!(server.accepted(), 1); // a well-framed error keeps the connection
}

#[test]
fn chunked_responses_are_decoded_and_checked() {
    let server = Server::start(Behavior::Chunked);
    let plan = closed_loop(vec![object(1234), object(100)], 2, 6, 0.0, 3, false);
    let r = go(&server, &plan, &checked());
    assert_eq!((r.completed, r.failed), (12, 0), "{:?}", r.errors);
    assert_eq!(server.accepted(), 4);
}

#[test]
fn head_requests_check_content_length() {
    let server = Server::start(Behavior::Normal);
    let plan = closed_loop(vec![object(5000)], 1, 4, 0.0, UNLIMITED, false);
    // Checksum verification asked for: a HEAD response has no body to hash, so only its
    // Content-Length is checked.
    let r = go(
        &server,
        &plan,
        &Options {
            method: Method::Head,
            ..checked()
        },
    );
    assert_eq!((r.completed, r.body_bytes, server.accepted()), (4, 0, 1));
    let server = Server::start(Behavior::WrongLength);
    let r = go(
        &server,
        &plan,
        &Options {
            method: Method::Head,
            ..options()
        },
    );
    only_error(&r, ErrorKind::WrongLength, 4);
}

#[test]
fn refused_port() {
    let target = Target::new(refused_addr(), "", false).unwrap();
    let r = run(&target, &http10_plan(5, 10), &options(), &Control::new()).unwrap();
    only_error(&r, ErrorKind::ConnectRefused, 5);
    assert_eq!(r.connections, 0);
    // A closed loop with no think time against a refused port ends too.
    let plan = closed_loop(vec![object(10)], 2, 100, 0.0, UNLIMITED, false);
    let r = run(&target, &plan, &options(), &Control::new()).unwrap();
    only_error(&r, ErrorKind::ConnectRefused, 200);
}

#[test]
fn silent_server_gives_response_timeouts() {
    let server = Server::start(Behavior::Silent);
    let o = Options {
        timeout_s: 0.2,
        ..options()
    };
    let t = Instant::now();
    let r = go(&server, &http10_plan(4, 10), &o);
    only_error(&r, ErrorKind::ResponseTimeout, 4);
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn run_stops_at_max_duration() {
    let server = Server::start(Behavior::Silent);
    let o = Options {
        timeout_s: 30.0,
        max_duration_s: 0.3,
        ..options()
    };
    let plan = closed_loop(vec![object(10)], 3, 10, 0.0, UNLIMITED, false);
    let t = Instant::now();
    let r = go(&server, &plan, &o);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_millis(600),
        "{took:?}"
    );
    assert_eq!((r.sent, r.unfinished, r.failed, r.completed), (3, 3, 0, 0));
    assert!((r.duration_s - 0.3).abs() < 0.1, "{}", r.duration_s);
}

#[test]
fn cancel_stops_a_run_promptly() {
    let server = Server::start(Behavior::Silent);
    let o = Options {
        timeout_s: 30.0,
        max_duration_s: 30.0,
        ..options()
    };
    let plan = closed_loop(vec![object(10)], 2, 10, 0.0, UNLIMITED, false);
    let control = Control::new();
    let t = Instant::now();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            control.cancel();
        });
        run(&server.target(), &plan, &o, &control).unwrap()
    });
    assert!(
        t.elapsed() < Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(r.unfinished, 2);
}

#[test]
fn repeat_runs_until_the_bound() {
    let server = Server::start(Behavior::Normal);
    let plan = closed_loop(vec![object(100)], 2, 1, 0.0, UNLIMITED, true);
    let o = Options {
        repeat: true,
        max_duration_s: 0.2,
        ..options()
    };
    let control = Control::new();
    let r = run(&server.target(), &plan, &o, &control).unwrap();
    assert!(r.completed > 20, "{}", r.completed);
    assert_eq!(server.accepted(), 2);
    assert!(r.unfinished <= 2);
    assert_eq!(r.sent, r.completed + r.failed + r.unfinished);
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(control.sent.load(Relaxed), r.sent);
    assert_eq!(control.done.load(Relaxed), r.completed + r.failed);
    // Repeat is for closed loops only.
    let open = http10_plan(3, 10);
    assert!(run(&server.target(), &open, &o, &Control::new()).is_err());
}

#[test]
fn think_time_paces_a_closed_loop() {
    let server = Server::start(Behavior::Normal);
    // 2 clients x 5 requests with 20 ms think: about 100 ms in all.
    let plan = closed_loop(vec![object(10)], 2, 5, 0.02, UNLIMITED, false);
    let r = go(
        &server,
        &plan,
        &Options {
            records: true,
            ..options()
        },
    );
    assert_eq!(r.completed, 10);
    assert!(
        r.duration_s >= 0.1 && r.duration_s < 0.5,
        "{}",
        r.duration_s
    );
    let rec = r.records.unwrap();
    let client0: Vec<f64> = (0..10)
        .filter(|&i| rec.request[i] % 2 == 0)
        .map(|i| rec.sent_s[i])
        .collect();
    for w in client0.windows(2) {
        assert!(w[1] - w[0] >= 0.02, "{client0:?}");
    }
}

#[test]
fn records_hold_one_row_per_request() {
    let server = Server::start(Behavior::Normal);
    let plan = open_loop(
        vec![object(10), object(2000)],
        &constant_times(1000.0, 1.0, 30),
        3,
        4,
    );
    let r = go(
        &server,
        &plan,
        &Options {
            records: true,
            ..options()
        },
    );
    let rec = r.records.as_ref().unwrap();
    assert_eq!(rec.len(), 30);
    let mut seen: Vec<u32> = rec.request.clone();
    seen.sort();
    assert_eq!(seen, (0..30).collect::<Vec<u32>>());
    for i in 0..rec.len() {
        let p = plan.requests[rec.request[i] as usize];
        assert_eq!(
            (rec.object[i], rec.conn[i], rec.error[i], rec.status[i]),
            (p.object, p.conn, 0, 200)
        );
        assert!((rec.intended_s[i] - p.at_s).abs() < 1e-9);
        assert!(rec.sent_s[i] >= rec.intended_s[i]);
        assert!(rec.ttfb_s[i] <= rec.total_s[i]);
        assert_eq!(rec.bytes[i], plan.objects[p.object as usize].size);
        // Each stream's first request on a connection opened it.
        let opened = plan.requests[..rec.request[i] as usize]
            .iter()
            .all(|q| q.conn != p.conn);
        assert_eq!(rec.connect_s[i].is_nan(), !opened, "row {i}");
    }
    assert!(rec.intended_s.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn remote_targets_need_allow_remote() {
    let addr = "192.0.2.1:80".parse().unwrap();
    let err = Target::new(addr, "", false).unwrap_err();
    assert!(err.contains("allow_remote"));
}

/// The default options with a read mark of `bytes` and one record per request.
fn marked(bytes: u32) -> Options {
    Options {
        rcvlowat: bytes,
        records: true,
        ..checked()
    }
}

#[test]
fn read_mark_holds_the_wake_until_the_body_comes() {
    // The head comes 8 ms before the body. Without a mark the first byte read is the
    // head's; with one (1024 of a 2048-byte body) the loop is first woken by the body.
    // (An answer still without a byte after 10 ms loses its mark at a tick.)
    let server = Server::start(Behavior::Split {
        first: 0,
        gap_ms: 8,
    });
    let plan = closed_loop(vec![object(2048)], 1, 3, 0.0, UNLIMITED, false);
    let ttfb = |options: &Options| {
        let r = go(&server, &plan, options);
        assert_eq!((r.completed, r.failed), (3, 0), "{:?}", r.errors);
        let mut t = r.records.unwrap().ttfb_s;
        t.sort_by(f64::total_cmp);
        t
    };
    let plain = ttfb(&Options {
        records: true,
        ..checked()
    });
    assert!(plain[1] < 0.004, "first byte without a mark: {plain:?}");
    let mark = ttfb(&marked(1024));
    assert!(mark[0] >= 0.008, "first byte with a mark: {mark:?}");
}

#[test]
fn read_mark_is_dropped_when_the_rest_of_an_answer_is_short_of_it() {
    // 2000 of 3000 bytes, then after 300 ms the last 1000: fewer than the mark of 1024,
    // so the mark must go after the first read or the answer would time out (the tick
    // only rescues answers without a first byte).
    let server = Server::start(Behavior::Split {
        first: 2000,
        gap_ms: 300,
    });
    let plan = closed_loop(vec![object(3000)], 1, 2, 0.0, UNLIMITED, false);
    let r = go(&server, &plan, &marked(1024));
    assert_eq!((r.completed, r.failed), (2, 0), "{:?}", r.errors);
    assert_eq!(r.body_bytes, 6000);
}

#[test]
fn answer_shorter_than_the_read_mark_is_picked_up_by_the_tick() {
    // A 9-byte error page never reaches a mark of 4096: the kernel does not wake the
    // loop, and the 10 ms tick drops the mark and reads it, well before the 2 s timeout.
    // The lane's last request asks to close, and the server's FIN wakes the loop at
    // once, mark or not.
    let server = Server::start(Behavior::ErrorPage(503));
    let plan = closed_loop(vec![object(4096)], 1, 3, 0.0, UNLIMITED, false);
    let r = go(&server, &plan, &marked(4096));
    only_error(&r, ErrorKind::BadStatus, 3);
    assert_eq!(r.status, vec![(503, 3)]);
    assert_eq!(server.accepted(), 1);
    let rec = r.records.unwrap();
    let mut ttfb: Vec<(u32, f64)> = rec.request.iter().copied().zip(rec.ttfb_s).collect();
    ttfb.sort_by_key(|&(request, _)| request);
    for &(_, t) in &ttfb[..2] {
        assert!(
            (0.01..0.5).contains(&t),
            "kept connection: first byte at {t} s"
        );
    }
    assert!(
        ttfb[2].1 < 0.5,
        "closing answer: first byte at {} s",
        ttfb[2].1
    );
}

#[test]
fn read_mark_leaves_every_kind_of_answer_correct() {
    // Bodies below, at and above the mark, larger than the 64 KiB read buffer, chunked,
    // one connection per request, and HEAD (no mark).
    let sizes = [10, 1024, 5000, 200_000];
    let objects = || sizes.iter().map(|&s| object(s)).collect::<Vec<_>>();
    let server = Server::start(Behavior::Normal);
    let r = go(
        &server,
        &closed_loop(objects(), 2, 12, 0.0, 4, false),
        &marked(4096),
    );
    assert_eq!((r.completed, r.failed), (24, 0), "{:?}", r.errors);
    let r = go(&server, &http10_plan(8, 5000), &marked(4096));
    assert_eq!((r.completed, r.failed), (8, 0), "{:?}", r.errors);
    let head = Options {
        method: Method::Head,
        ..marked(4096)
    };
    let r = go(&server, &closed_loop(objects(), 1, 4, 0.0, 4, false), &head);
    assert_eq!((r.completed, r.failed), (4, 0), "{:?}", r.errors);
    let chunked = Server::start(Behavior::Chunked);
    let r = go(
        &chunked,
        &closed_loop(objects(), 1, 8, 0.0, 4, false),
        &marked(4096),
    );
    assert_eq!((r.completed, r.failed), (8, 0), "{:?}", r.errors);
}

/// Length-checked, with each body of known length dropped unread in the kernel.
fn discarding() -> Options {
    Options {
        verify: Verify::Length,
        discard: true,
        ..options()
    }
}

#[test]
fn discarded_bodies_are_counted_and_held_to_their_size() {
    // Bodies below and above the 64 KiB read buffer and past one discarding read (1 MiB),
    // kept-alive connections (nothing of a later answer may be dropped) and one each.
    let sizes = [10, 5000, 200_000, 3_000_000];
    let objects = || sizes.iter().map(|&s| object(s)).collect::<Vec<_>>();
    let server = Server::start(Behavior::Normal);
    let r = go(
        &server,
        &closed_loop(objects(), 2, 12, 0.0, 4, false),
        &discarding(),
    );
    assert_eq!((r.completed, r.failed), (24, 0), "{:?}", r.errors);
    assert_eq!(r.body_bytes, 6 * sizes.iter().sum::<u64>());
    let r = go(&server, &http10_plan(8, 5000), &discarding());
    assert_eq!((r.completed, r.failed, r.body_bytes), (8, 0, 40_000));
    // A body split across writes, and chunked ones, which are read as before.
    let split = Server::start(Behavior::Split {
        first: 2000,
        gap_ms: 20,
    });
    let r = go(
        &split,
        &closed_loop(vec![object(3000)], 1, 3, 0.0, UNLIMITED, false),
        &discarding(),
    );
    assert_eq!((r.completed, r.failed, r.body_bytes), (3, 0, 9000));
    let chunked = Server::start(Behavior::Chunked);
    let r = go(
        &chunked,
        &closed_loop(objects(), 1, 8, 0.0, 4, false),
        &discarding(),
    );
    assert_eq!((r.completed, r.failed), (8, 0), "{:?}", r.errors);
}

#[test]
fn discarding_still_catches_wrong_lengths_but_not_wrong_content() {
    only_error(
        &go(
            &Server::start(Behavior::WrongLength),
            &http10_plan(10, 3000),
            &discarding(),
        ),
        ErrorKind::WrongLength,
        10,
    );
    let r = go(
        &Server::start(Behavior::ShortBody),
        &http10_plan(10, 3000),
        &discarding(),
    );
    only_error(&r, ErrorKind::ShortBody, 10);
    assert_eq!(r.body_bytes, 10 * 1500);
    // The content is never seen: a changed byte passes, as with any length check.
    let r = go(
        &Server::start(Behavior::WrongContent),
        &http10_plan(10, 3000),
        &discarding(),
    );
    assert_eq!((r.completed, r.failed), (10, 0));
    // ... so a checksum cannot be asked for.
    let both = Options {
        verify: Verify::Checksum,
        ..discarding()
    };
    assert!(both.check().unwrap_err().contains("discard"));
}
