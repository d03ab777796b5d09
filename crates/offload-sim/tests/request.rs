//! The request-level network against closed forms, and the experiment's guarantees.

use offload_sim::dist::Dist;
use offload_sim::experiment::{simulate, Control, Outcome, Plan, Precision, Warmup};
use offload_sim::request::{Class, Network, METRICS};

fn col(name: &str) -> usize {
    METRICS.iter().position(|m| *m == name).unwrap()
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
        }],
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
