//! The `offload-load` binary: a short open-loop and closed-loop run, JSON out, and
//! exit code 2 for bad input.

mod common;

use std::process::Command;

use common::{Behavior, Server};

fn offload_load(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_offload-load"))
        .args(args)
        .output()
        .unwrap()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn open_and_closed_loop_runs() {
    let server = Server::start(Behavior::Normal);
    let url = format!("http://{}/700", server.addr);
    let out = offload_load(&[
        &url,
        "--rate",
        "500",
        "--constant",
        "--requests",
        "20",
        "--size",
        "700",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(
        (v["completed"].as_u64(), v["failed"].as_u64()),
        (Some(20), Some(0))
    );
    assert_eq!(v["connections"].as_u64(), Some(20));
    let per_min = 20.0 * 60.0 / v["duration_s"].as_f64().unwrap();
    assert!((v["connections_per_min"].as_f64().unwrap() - per_min).abs() < 1e-6 * per_min);
    assert!((v["offered_rate"].as_f64().unwrap() - 500.0).abs() < 1e-6);
    assert_eq!(server.accepted(), 20);

    let out = offload_load(&[
        &url,
        "--connections",
        "3",
        "--requests",
        "30",
        "--size",
        "700",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["completed"].as_u64(), Some(30));
    assert_eq!(v["connections"].as_u64(), Some(3));

    // With a read mark the answers are all there and correct.
    let out = offload_load(&[
        &url,
        "--connections",
        "2",
        "--requests",
        "20",
        "--size",
        "700",
        "--rcvlowat",
        "512",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(
        (v["completed"].as_u64(), v["failed"].as_u64()),
        (Some(20), Some(0))
    );

    // Time-bounded saturation (wrk-like), and the text summary.
    let out = offload_load(&[
        &url,
        "--clients",
        "2",
        "--duration",
        "200ms",
        "--threads",
        "1",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("closed loop, 2 clients")
            && text.contains("p99.9")
            && text.contains("connections (")
            && text.contains("/min), mean"),
        "{text}"
    );

    // A wrong expected size counts as errors, not as a failed run.
    let v = json(&offload_load(&[
        &url,
        "--clients",
        "1",
        "--requests",
        "3",
        "--size",
        "9",
        "--json",
    ]));
    assert_eq!(v["errors"]["wrong_length"].as_u64(), Some(3));
}

#[test]
fn bad_input_exits_2() {
    for args in [
        vec!["http://127.0.0.1:1/"],                 // neither loop
        vec!["http://127.0.0.1:1/", "--rate", "-5"], // bad rate
        vec!["http://192.0.2.1:80/", "--rate", "5"], // remote
        vec!["https://127.0.0.1/", "--rate", "5"],   // no TLS
        vec!["http://127.0.0.1:1/", "--clients", "1", "--duration", "x"],
        vec!["http://127.0.0.1:1/", "--clients", "1", "--rcvlowat", "512"], // no --size
        vec![
            "http://127.0.0.1:1/",
            "--clients",
            "1",
            "--size",
            "9",
            "--rcvlowat",
            "-1",
        ],
    ] {
        let out = offload_load(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
