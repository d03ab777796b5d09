//! The engine under overload: at 150% of its saturation load for 15 s the server keeps
//! answering. The server's own count of answers grows in every second of the run (seed
//! 000's emulator hung near saturation), and with OFFLOAD_OVERLOAD_GOODPUT=1
//! (`bench/overload.sh`) its goodput stays within 10% of the peak.
//!
//! On a shared 2-core machine both rates also move with whatever else runs on the
//! engine's core, between two runs a minute apart. So each rate is divided by the share
//! of its span the engine thread ran while it was runnable (schedstat: on a CPU, or
//! waiting on the run queue). Time the machine took from it is excused; time it slept
//! with work pending, or spun without answering, is not. On a dedicated core the share
//! is 1 and this is the plain ratio, which is printed beside it. The count comes from the stats file, written every 100 ms by the
//! server's control thread, so a client that falls behind cannot fake a stall. A
//! second the machine starved the engine of CPU (it waited on the run queue for more
//! than half of it, by schedstat) is reported, not counted as a stall of the server.
//!
//! The engine is made the bottleneck with `engine_message_cost`, so that its saturation
//! rate is low enough for the load generator to offer 150% of it from the same machine.
//! A fixed cost per message (each request out, each answer back) keeps its capacity
//! steady: a slowdown in proportion to the engine's CPU time instead multiplies that
//! time's run-to-run variation (10–20% in a debug build), which is as large as the
//! margin this test checks. Work the engine wastes on a message still costs it.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use offload_load::plan::{closed_loop, open_loop, poisson_times};
use offload_load::{Control as LoadControl, Object, Options, Plan, Target};
use offload_server::{Config, Mode};

/// Length of the overload run. A hang shows as a second without answers, and 15 such
/// samples give it room to show; the minute this once ran cost the suite 45 s more.
/// At 150% the 511-deep accept backlog fills after about 8 s, so the run also spends
/// seconds with SYNs dropped.
const OVERLOAD_S: f64 = 15.0;
/// Length of the saturation run that finds the peak, when the goodput is held to it: a
/// rate over fewer seconds moves by about the 10% the check allows.
const PEAK_S: f64 = 8.0;
/// Without the goodput check the peak only sets the offered load and the stall
/// threshold (a quarter of it), which two steady seconds give well enough.
const SHORT_PEAK_S: f64 = 3.0;

fn objects() -> Vec<Object> {
    vec![Object {
        path: "/f.bin".into(),
        size: 2048,
        sha256: None,
        class: 1,
    }]
}

#[test]
fn the_engine_keeps_answering_at_150_percent_of_saturation() {
    let goodput_check = std::env::var_os("OFFLOAD_OVERLOAD_GOODPUT").is_some();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.bin"), vec![7u8; 2048]).unwrap();
    let mut config = Config::new("127.0.0.1:0".parse().unwrap(), dir.path().into());
    config.mode = Mode::Engine;
    config.engine_message_cost = Duration::from_millis(4);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        (config.host_core, config.engine_core) = (Some(0), Some(1));
    }
    let stats_file = dir.path().join("stats.json");
    config.stats_path = Some(stats_file.clone());
    // Sampled once a second, a file also rewritten once a second aliases: jitter can put
    // two samples between the same two writes, a second of 0 answers and then a double.
    // Rewritten every 100 ms, each sample is at most 0.1 s stale.
    config.stats_interval = Duration::from_millis(100);
    let (control, server) = common::start(config);
    let target = Target::new(
        SocketAddr::from(([127, 0, 0, 1], control.port())),
        "",
        false,
    )
    .unwrap();

    // Saturation: a closed loop of 64 clients with no think time keeps the engine's
    // accept batches full. Its peak is the steady rate of one run, not the best of
    // several short ones: a maximum of noisy samples overstates the peak.
    let engine = engine_tid(&stats_file);
    let closed = closed_loop(objects(), 64, 1, 0.0, 1, true);
    let peak_s = if goodput_check { PEAK_S } else { SHORT_PEAK_S };
    let (peak, _, _) = steady(&target, &closed, peak_s, engine);

    let watch = std::thread::spawn(move || answers_each_second(&stats_file, engine, OVERLOAD_S));
    let times = poisson_times(1.5 * peak.rate, OVERLOAD_S, u64::MAX, 7);
    let open = open_loop(objects(), &times, 4096, 1);
    let (goodput, per_second, report) = steady(&target, &open, OVERLOAD_S, engine);
    let served = watch.join().unwrap();
    control.stop();
    let stats = serde_json::to_value(server.join().unwrap().unwrap()).unwrap();
    let slowest = served.iter().map(|s| s.answers).min().unwrap() as f64;
    let starved: Vec<&Second> = served
        .iter()
        .filter(|s| (s.answers as f64) < 0.25 * peak.rate && s.engine_waited_s > 0.5)
        .collect();
    let summary = format!(
        "peak {:.0}/s (engine ran {:.0}% of its runnable time, {:.2} ms a request), offered \
         {:.0}/s, goodput {:.0}/s (ran {:.0}%, {:.2} ms a request), ratio {:.3} (plain {:.3}; \
         target >= 0.9), slowest second {slowest}, \
         errors {:?}, lag mean {:.3} s, server statuses {} connections {}, engine {}",
        peak.rate,
        100.0 * peak.ran_share,
        1e3 * peak.cpu_per_answer_s,
        report.offered_rate,
        goodput.rate,
        100.0 * goodput.ran_share,
        1e3 * goodput.cpu_per_answer_s,
        goodput.excused() / peak.excused(),
        goodput.rate / peak.rate,
        report.errors,
        report.lag.mean_s,
        stats["statuses"],
        stats["connections"],
        stats["engine"]
    );
    let answers: Vec<u64> = served.iter().map(|s| s.answers).collect();
    eprintln!(
        "{summary}\nserver, per second: {answers:?}\nclient, per second: {per_second:?}\n\
         seconds the machine starved the engine of CPU: {starved:?}"
    );
    if goodput_check {
        assert!(goodput.excused() >= 0.9 * peak.excused(), "{summary}");
    }
    for s in &served {
        assert!(
            s.answers as f64 >= 0.25 * peak.rate || s.engine_waited_s > 0.5,
            "a stall with the engine on a CPU ({s:?}): {summary}"
        );
    }
    assert_eq!(stats["engine"]["failed"], false, "{summary}");
}

/// One second of the overload run, as the server and the scheduler saw it.
#[derive(Debug)]
struct Second {
    answers: u64,
    /// Seconds the engine thread spent runnable but waiting for a CPU (schedstat).
    engine_waited_s: f64,
}

/// The engine thread's id, from the thread list of the server's first stats file.
fn engine_tid(stats_file: &std::path::Path) -> u64 {
    let started = Instant::now();
    loop {
        let doc = std::fs::read(stats_file).ok();
        let doc: Option<serde_json::Value> = doc.and_then(|d| serde_json::from_slice(&d).ok());
        let threads = doc.as_ref().and_then(|d| d["threads"].as_array());
        let engine = threads.and_then(|ts| ts.iter().find(|t| t["role"] == "engine"));
        if let Some(tid) = engine.and_then(|t| t["tid"].as_u64()) {
            return tid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no engine in {doc:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A thread's seconds on a CPU and seconds runnable but waiting for one (schedstat).
fn sched(tid: u64) -> (f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
    let mut ns = text
        .split_whitespace()
        .map(|f| f.parse::<f64>().unwrap() * 1e-9);
    (ns.next().unwrap(), ns.next().unwrap())
}

/// Each second of the next `secs`: the requests the server answered (from its stats
/// file) and how long its engine thread waited for a CPU. A second with few answers is
/// a server stall only if the engine had the CPU: a hung engine sleeps, a livelocked one
/// runs, but one the machine starves of CPU waits on the run queue.
fn answers_each_second(stats_file: &std::path::Path, engine: u64, secs: f64) -> Vec<Second> {
    let requests = || -> u64 {
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(stats_file).unwrap()).unwrap();
        doc["requests"].as_u64().unwrap()
    };
    let (mut answered, mut waited) = (requests(), sched(engine).1);
    let start = Instant::now();
    (1..secs as u32)
        .map(|i| {
            std::thread::sleep(
                (start + Duration::from_secs(i.into())).saturating_duration_since(Instant::now()),
            );
            let (now, w) = (requests(), sched(engine).1);
            Second {
                answers: now - std::mem::replace(&mut answered, now),
                engine_waited_s: w - std::mem::replace(&mut waited, w),
            }
        })
        .collect()
}

/// A run's steady rate of answers, and the share of the same span's runnable time the
/// engine thread spent on a CPU.
#[derive(Debug)]
struct Rate {
    rate: f64,
    ran_share: f64,
    /// The engine's CPU seconds per answer counted: its cost, burns included.
    cpu_per_answer_s: f64,
}

impl Rate {
    /// The rate the engine would have had if the machine had not taken its CPU.
    fn excused(&self) -> f64 {
        self.rate / self.ran_share
    }
}

/// Runs `plan` for `secs` with patient clients: the steady rate of answers (those
/// completed in the whole seconds after the first, which only fills the pipeline; the
/// clients still waiting at the end are not counted), the answers in each second, and
/// the report.
fn steady(
    target: &Target,
    plan: &Plan,
    secs: f64,
    engine: u64,
) -> (Rate, Vec<u64>, offload_load::Report) {
    // The engine's schedstat over the same whole seconds as the answers counted.
    let clock = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        let (ran, waited) = sched(engine);
        std::thread::sleep(Duration::from_secs_f64(secs - 1.0));
        let (ran_now, waited_now) = sched(engine);
        (ran_now - ran, waited_now - waited)
    });
    let options = Options {
        records: true,
        repeat: plan.closed,
        // Patient clients: a SYN the full backlog dropped is retried after 1, 3, 7, 15 s,
        // and a client that gives up while the server serves it wastes the engine's work.
        timeout_s: 30.0,
        max_duration_s: secs,
        threads: 1,
        ..Options::default()
    };
    let report = offload_load::run(target, plan, &options, &LoadControl::new()).unwrap();
    let records = report.records.as_ref().unwrap();
    let mut per_second = vec![0u64; secs as usize];
    for i in 0..records.len() {
        let done = records.intended_s[i] + records.total_s[i];
        if records.error[i] == 0 && done < secs {
            per_second[done as usize] += 1;
        }
    }
    let answers = per_second[1..].iter().sum::<u64>() as f64;
    let (ran, waited) = clock.join().unwrap();
    let rate = Rate {
        rate: answers / (per_second.len() - 1) as f64,
        ran_share: ran / (ran + waited),
        cpu_per_answer_s: ran / answers,
    };
    (rate, per_second, report)
}
