//! The request-level network against closed forms, and the experiment's guarantees.

use offload_sim::dist::Dist;
use offload_sim::experiment::{simulate, Control, Outcome, Plan, Precision, Warmup};
use offload_sim::request::{Class, Network, Station, METRICS, SIM_ONLY};

/// The column of a metric, or of a simulator-only column after them.
fn col(name: &str) -> usize {
    METRICS
        .iter()
        .chain(&SIM_ONLY)
        .position(|m| *m == name)
        .unwrap()
}

/// One class: host service exp(host) when kept; offloaded: host exp(host), engine exp(engine).
fn tandem(rate: f64, host: f64, engine: f64, offload: f64) -> Network {
    Network {
        rate,
        delay_max: false,
        classes: vec![Class {
            share: 1.0,
            offload,
            app: Dist::det(0.0).unwrap(),
            host_proto: Dist::exp(host).unwrap(),
            host_overhead: Dist::exp(host).unwrap(),
            engine_overhead: Dist::det(0.0).unwrap(),
            engine_proto: Dist::exp(engine).unwrap(),
            hit: 0.0,
            engine_hit: Dist::det(0.0).unwrap(),
            d0_host: 0.0,
            d0_sent: 0.0,
        }],
        queues: Default::default(),
    }
}

fn plan(requests: u64, seed: u64) -> Plan {
    Plan {
        requests,
        seed,
        replications: 1,
        warmup: Warmup::Mser5,
        batches: 20,
        precision: None,
        threads: 1,
    }
}

fn run(net: &Network, plan: &Plan) -> Outcome {
    simulate(net, plan, &Control::default()).expect("not cancelled")
}

/// |estimate - truth| within the 95% half-width, plus a sliver for rounding.
fn assert_covers(out: &Outcome, metric: &str, truth: f64) {
    let (est, hw) = (out.metrics[0][col(metric)], out.half_width[0][col(metric)]);
    assert!(
        (est - truth).abs() <= hw,
        "{metric}: {est} ± {hw} misses {truth}"
    );
}

#[test]
fn mm1_host_alone_matches_closed_form() {
    // rho = 0.6: W = rho/(mu - lam), T = 1/(mu - lam), U = rho.
    let out = run(&tandem(600.0, 1e-3, 1e-3, 0.0), &plan(400_000, 11));
    assert_covers(&out, "T_noe", 1.0 / 400.0);
    assert_covers(&out, "W_noe", 0.6 / 400.0);
    assert_covers(&out, "U_noe", 0.6);
    // Time-averaged number at the host alone: rho / (1 - rho).
    let n = out.metrics[0][METRICS.len()];
    assert!(
        (n - 1.5).abs() < 3.0 * out.half_width[0][METRICS.len()],
        "N_noe {n}"
    );
}

#[test]
fn jackson_tandem_sojourn_is_the_sum_of_two_mm1() {
    // Host rho 0.5, engine rho 0.7: T_sum = 1/(mu1 - lam) + 1/(mu2 - lam).
    let out = run(&tandem(500.0, 1e-3, 1.4e-3, 1.0), &plan(400_000, 12));
    let (t1, t2) = (1.0 / (1000.0 - 500.0), 1.0 / (1.0 / 1.4e-3 - 500.0));
    assert_covers(&out, "T_cpu", t1);
    assert_covers(&out, "T_oe", t2);
    assert_covers(&out, "T_sum", t1 + t2);
    // Little's law on the engine: time-averaged count = rate x mean sojourn.
    let n_oe = out.metrics[0][col("N_oe")];
    assert!((n_oe - 500.0 * out.metrics[0][col("T_oe")]).abs() < 0.01 * n_oe);
}

#[test]
fn cache_hits_skip_the_host_and_share_the_engine_with_the_misses() {
    // Every request offloaded; 60 % hit the engine's cache (exp 0.5 ms there, no host).
    // Host: M/M/1 at rate 0.4 lam, mean 1 ms. Engine: M/G/1 whose service is exp 1.4 ms
    // for a miss, exp 0.5 ms for a hit: E[S] = 0.86 ms, E[S^2] = 2 (0.4 1.4^2 + 0.6 0.5^2).
    let (lam, h) = (800.0, 0.6);
    let mut net = tandem(lam, 1e-3, 1.4e-3, 1.0);
    net.classes[0].hit = h;
    net.classes[0].engine_hit = Dist::exp(0.5e-3).unwrap();
    let out = run(&net, &plan(400_000, 13));
    let t_cpu = 1.0 / (1000.0 - (1.0 - h) * lam);
    let (s1, s2) = (0.86e-3, 2.0 * (0.4 * 1.96e-6 + 0.6 * 0.25e-6));
    let u_oe = lam * s1;
    let w_oe = lam * s2 / (2.0 * (1.0 - u_oe));
    assert_covers(&out, "U_cpu", (1.0 - h) * lam * 1e-3);
    assert_covers(&out, "U_oe", u_oe);
    assert_covers(&out, "W_oe", w_oe);
    assert_covers(&out, "T_cpu", t_cpu);
    assert_covers(&out, "T_oe", w_oe + s1);
    let t_sum = (1.0 - h) * (t_cpu + w_oe + 1.4e-3) + h * (w_oe + 0.5e-3);
    assert_covers(&out, "T_sum", t_sum);
}

#[test]
fn same_seed_same_bits_any_thread_count_different_seed_differs() {
    let net = tandem(500.0, 1e-3, 1.4e-3, 0.5);
    let mut p = plan(50_000, 3);
    p.replications = 4;
    let a = run(&net, &p);
    p.threads = 3;
    let b = run(&net, &p);
    assert_eq!(
        format!("{:?}", a.replications),
        format!("{:?}", b.replications)
    );
    assert_eq!(a.warmup, b.warmup);
    p.seed = 4;
    let c = run(&net, &p);
    assert_ne!(a.metrics[0][col("T")], c.metrics[0][col("T")]);
}

#[test]
fn precision_target_stops_early_and_meets_the_target() {
    let mut p = plan(5_000_000, 5);
    p.precision = Some(Precision {
        relative: 0.02,
        metric: col("T_noe"),
    });
    let out = run(&tandem(500.0, 1e-3, 1e-3, 0.0), &p);
    assert_eq!(out.precision_met, Some(true));
    assert!(out.measured[0] < 5_000_000);
    let (est, hw) = (
        out.metrics[0][col("T_noe")],
        out.half_width[0][col("T_noe")],
    );
    assert!(hw <= 0.02 * est);
    assert_eq!(out.batches, 20); // it stops only at a look, when the count is back to B
}

#[test]
fn saturated_host_alone_is_not_simulated_and_reports_infinity() {
    // Host alone at rho 1.2; with the engine the host has exp(0.2 ms) per request.
    let mut net = tandem(1200.0, 1e-3, 0.5e-3, 1.0);
    net.classes[0].host_overhead = Dist::exp(0.2e-3).unwrap();
    let out = run(&net, &plan(100_000, 1));
    assert!(out.metrics[0][col("T_noe")].is_infinite());
    assert!((out.metrics[0][col("U_noe")] - 1.2).abs() < 1e-12);
    assert!(out.metrics[0][col("T_sum")].is_finite());
    assert!(out.notes.is_empty(), "{:?}", out.notes);
}

#[test]
fn cancel_stops_a_run() {
    let control = Control::default();
    control
        .cancel
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let net = tandem(500.0, 1e-3, 1e-3, 0.5);
    assert!(simulate(&net, &plan(10_000_000, 1), &control).is_err());
}

#[test]
fn without_queue_costs_or_d0_the_results_are_those_of_before_bit_for_bit() {
    // Recorded before wake-ups, background and d0 existed: zero costs make no draws
    // and change no sum, so every existing seed gives the same numbers.
    let mut net = tandem(500.0, 1e-3, 1.4e-3, 0.5);
    net.delay_max = true;
    net.classes[0].hit = 0.3;
    net.classes[0].engine_hit = Dist::exp(0.5e-3).unwrap();
    let out = run(&net, &plan(50_000, 9));
    let before = [
        0.4933800586145661,
        0.0009524181423526895,
        0.0019469559295494977,
        0.4193541423203937,
        0.0007149585778646483,
        0.001710462275427191,
        0.27837617770824385,
        0.0004943883831074555,
        0.001618941410776163,
        0.001662401455614238,
        0.0022598770389261587,
        0.12222384539442005,
        0.4005912352964539,
        0.9658997391400542,
        0.7203615929455343,
    ];
    assert_eq!(out.metrics[0][..before.len()], before);
    assert_eq!((out.events, out.warmup[0]), (218_033, 125));
    assert_eq!(out.hist_noe.value_at_quantile(0.99), 9_101_311);
    assert_eq!(out.hist_system.value_at_quantile(0.99), 10_043_391);
}

#[test]
fn wakeups_match_welch_exceptional_first_service() {
    // M/G/1 at the host alone whose request finding it empty also pays a wake-up D:
    // S exp(1 ms), D exp(0.4 ms), lam = 500/s, rho = 0.5 (Welch 1964).
    let (lam, s1, s2, d1, d2) = (500.0, 1e-3, 2e-6, 0.4e-3, 2.0 * 0.16e-6);
    let mut net = tandem(lam, s1, s1, 0.0);
    net.queues[Station::Noe as usize].wakeup = Dist::exp(d1).unwrap();
    let out = run(&net, &plan(400_000, 21));
    let rho = lam * s1;
    let p0 = (1.0 - rho) / (1.0 + lam * d1);
    let w = lam * s2 / (2.0 * (1.0 - rho)) + lam * (d2 + 2.0 * d1 * s1) / (2.0 * (1.0 + lam * d1));
    assert_covers(&out, "wakeups_noe", p0); // 0.4167
    assert_covers(&out, "W_noe", w); // 1.2333 ms
    assert_covers(&out, "T_noe", w + s1 + p0 * d1); // 2.4 ms
    assert_covers(&out, "U_noe", rho + lam * p0 * d1); // 0.5833

    // The host with the engine has no wake-up cost: a plain M/M/1, empty 1 - rho of
    // the time.
    assert_covers(&out, "T_cpu", 1.0 / (1.0 / s1 - lam));
    assert_covers(&out, "wakeups_cpu", 1.0 - rho);
}

#[test]
fn background_matches_preemptive_resume_priority() {
    // Requests exp(1 ms) at 400/s under background jobs exp(0.5 ms) at 400/s with
    // preemptive-resume priority, at the host alone and at the engine. The engine's
    // input is the departures of the M/M/1 host, Poisson too (Burke).
    let (lam, s1, s2, b1, b2) = (400.0, 1e-3, 2e-6, 0.5e-3, 0.5e-6);
    let mut net = tandem(lam, s1, s1, 1.0);
    for station in [Station::Noe, Station::Oe] {
        net.queues[station as usize].background = Dist::exp(b1).unwrap();
    }
    let out = run(&net, &plan(400_000, 24));
    let (rho, sigma) = (lam * s1, lam * b1);
    let t =
        s1 / (1.0 - sigma) + (lam * b2 + lam * s2) / (2.0 * (1.0 - sigma) * (1.0 - sigma - rho));
    for station in ["noe", "oe"] {
        assert_covers(&out, &format!("T_{station}"), t); // 2.8125 ms
        assert_covers(&out, &format!("W_{station}"), t - s1);
        assert_covers(&out, &format!("U_{station}"), rho); // own work only
    }
    assert_covers(&out, "T_cpu", 1.0 / (1.0 / s1 - lam));
    // A request preempted at the head waits: the time-averaged count waiting at the
    // engine is Little's lam W_oe.
    let n_q = out.metrics[0][col("N_q")];
    assert!(
        (n_q - lam * out.metrics[0][col("W_oe")]).abs() < 0.01 * n_q,
        "N_q {n_q}"
    );
}

#[test]
fn a_steady_share_slows_every_piece_of_work_at_the_station() {
    // The host alone keeps 1 - c = 0.8 of its core: requests exp(1 ms) at 500/s are an
    // M/M/1 queue served at 800/s. The engine also has background jobs exp(0.25 ms) at
    // the total rate, which run at 0.8 too: the priority queue with service and
    // background both stretched by 1 / 0.8.
    let (lam, s1, c) = (500.0, 1e-3, 0.2);
    let mut net = tandem(lam, s1, s1, 1.0);
    net.queues[Station::Noe as usize].share = c;
    net.queues[Station::Oe as usize].share = c;
    net.queues[Station::Oe as usize].background = Dist::exp(0.25e-3).unwrap();
    assert_eq!(net.background_load(), [c, 0.0, lam * 0.25e-3 + c]);
    let out = run(&net, &plan(400_000, 26));
    assert_covers(&out, "T_noe", 1.0 / ((1.0 - c) / s1 - lam)); // 3.333 ms
    assert_covers(&out, "U_noe", lam * s1); // the requests' CPU, not their wall time
    let (s, b) = (s1 / (1.0 - c), 0.25e-3 / (1.0 - c)); // stretched means
    let (rho, sigma) = (lam * s, lam * b);
    let t = s / (1.0 - sigma)
        + (lam * 2.0 * b * b + lam * 2.0 * s * s) / (2.0 * (1.0 - sigma) * (1.0 - sigma - rho));
    assert_covers(&out, "T_oe", t); // 8.0 ms
    assert_covers(&out, "T_cpu", 1.0 / (1.0 / s1 - lam));
}

#[test]
fn a_share_that_leaves_too_little_saturates_the_station() {
    let mut net = tandem(500.0, 1e-3, 1e-3, 0.0);
    net.queues[Station::Noe as usize].share = 0.5;
    assert_eq!(net.stable(), [false, true, true]);
    net.queues[Station::Noe as usize].share = 1.0;
    let err = net.validate().unwrap_err();
    assert!(err.contains("Noe: share must lie in [0, 1)"), "{err}");
}

#[test]
fn background_load_counts_toward_stability() {
    // Own load 0.6 plus background 0.5 at the host alone: saturated, U is the own load.
    let mut net = tandem(600.0, 1e-3, 1e-3, 0.0);
    net.queues[Station::Noe as usize].background = Dist::exp(0.5e-3 / 0.6).unwrap();
    assert_eq!(net.stable(), [false, true, true]);
    let out = run(&net, &plan(20_000, 1));
    assert!(out.metrics[0][col("T_noe")].is_infinite());
    assert!((out.metrics[0][col("U_noe")] - 0.6).abs() < 1e-12);
    assert!(out.metrics[0][col("T_cpu")].is_finite());
}

#[test]
fn d0_shifts_the_end_to_end_delays_and_their_quantiles_by_d0() {
    // Everything offloaded, half of it answered by the cache: every end-to-end delay with
    // the engine adds d0_sent, every one at the host alone d0_host.
    let mut net = tandem(500.0, 1e-3, 1.4e-3, 1.0);
    net.classes[0].hit = 0.5;
    net.classes[0].engine_hit = Dist::exp(0.5e-3).unwrap();
    let mut p = plan(100_000, 5);
    p.warmup = Warmup::Count(1_000);
    let base = run(&net, &p);
    let (d0_host, d0_sent) = (2e-3, 5e-3);
    net.classes[0].d0_host = d0_host;
    net.classes[0].d0_sent = d0_sent;
    let out = run(&net, &p);
    for row in 0..2 {
        let (a, b) = (&base.metrics[row], &out.metrics[row]);
        for (metric, d0) in [("T_noe", d0_host), ("T", d0_sent), ("T_sum", d0_sent)] {
            let shift = b[col(metric)] - a[col(metric)];
            assert!((shift - d0).abs() < 1e-15, "{metric}: shifted by {shift}");
        }
        for metric in [
            "W_noe", "T_cpu", "W_cpu", "T_oe", "W_oe", "N_q", "N_oe", "N_noe",
        ] {
            assert_eq!(a[col(metric)], b[col(metric)], "{metric}");
        }
    }
    // The histograms keep 3 significant digits.
    for q in [0.5, 0.9, 0.99] {
        for (before, after, d0) in [
            (&base.hist_noe, &out.hist_noe, d0_host),
            (&base.hist_system, &out.hist_system, d0_sent),
        ] {
            let (x, y) = (before.value_at_quantile(q), after.value_at_quantile(q));
            let shift = (y as f64 - x as f64) * 1e-9;
            assert!(
                (shift - d0).abs() <= 1e-3 * y as f64 * 1e-9,
                "p{q}: {shift}"
            );
        }
    }
}

#[test]
fn bad_d0_is_refused_naming_the_field() {
    let mut net = tandem(500.0, 1e-3, 1e-3, 0.5);
    net.classes[0].d0_sent = -1e-3;
    assert!(net.validate().unwrap_err().contains("d0_sent"));
    net.classes[0].d0_sent = 0.0;
    net.classes[0].d0_host = f64::INFINITY;
    assert!(net.validate().unwrap_err().contains("d0_host"));
    net.classes[0].d0_host = 0.0;
    assert!(net.validate().is_ok());
}
