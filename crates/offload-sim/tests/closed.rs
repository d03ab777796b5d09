//! The closed-network simulator against the machine-repair model in closed form: N
//! customers thinking Z (exponential) in front of one PS station with m servers and
//! exponential demand D, the finite-source M/M/m (M/M/1 when m = 1).

use offload_sim::closed::{simulate, Network, Outcome, Plan};
use offload_sim::experiment::Warmup;

/// Throughput: P(k present) is proportional to n!/(n-k)! (D/Z)^k / (k! for k <= m,
/// m! m^(k-m) above), and X = E[min(k, m)] / D.
fn machine_repair_throughput(n: u32, m: u32, d: f64, z: f64) -> f64 {
    let mut weight = 1.0;
    let (mut total, mut busy) = (1.0, 0.0);
    for k in 1..=n {
        // w(k) / w(k-1) = (n - k + 1) (D/Z) / min(k, m)
        weight *= f64::from(n - k + 1) * (d / z) / f64::from(k.min(m));
        total += weight;
        busy += weight * f64::from(k.min(m));
    }
    busy / total / d
}

fn run(n: u32, m: u32, d: f64, z: f64, seed: u64) -> Outcome {
    let net = Network {
        demands: vec![vec![d]],
        population: vec![n],
        think: vec![z],
        delay: vec![false],
        servers: vec![m],
    };
    let plan = Plan {
        requests: 200_000,
        seed,
        warmup: Warmup::Mser5,
        batches: 20,
    };
    simulate(&net, &plan).expect("valid network and plan")
}

/// Throughput and response time (Little on the loop: R = N/X - Z) within three 95%
/// half-widths of the closed form.
fn assert_matches(n: u32, m: u32, d: f64, z: f64, seed: u64) {
    let out = run(n, m, d, z, seed);
    let x = machine_repair_throughput(n, m, d, z);
    let r = f64::from(n) / x - z;
    let (xs, rs) = (out.throughput[0], out.response[0]);
    assert!(
        (xs - x).abs() <= 3.0 * out.throughput_hw[0],
        "N={n} m={m}: X {xs} ± {} vs {x}",
        out.throughput_hw[0]
    );
    assert!(
        (rs - r).abs() <= 3.0 * out.response_hw[0],
        "N={n} m={m}: R {rs} ± {} vs {r}",
        out.response_hw[0]
    );
    // Utilisation: busy servers over m, E[min(k, m)]/m = X D/m.
    assert!((out.utilisation[0] / (x * d / f64::from(m)) - 1.0).abs() < 0.02);
}

#[test]
fn closed_network_is_the_finite_source_mm1() {
    for (n, seed) in [(2, 1), (5, 2), (20, 3)] {
        assert_matches(n, 1, 0.01, 0.05, seed);
    }
}

#[test]
fn closed_network_with_m_servers_is_the_machine_repair_model() {
    // The knee is N = m (1 + Z/D) = 8 for m = 4, Z = D.
    for (n, seed) in [(4, 4), (8, 5), (16, 6)] {
        assert_matches(n, 4, 0.01, 0.01, seed);
    }
}
