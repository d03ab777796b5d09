//! The handoff model end to end: invariants (packets and connections conserved,
//! Little's law on RxNIC) and the policies' effects on a small web workload.

use offload_sim::handoff::{run, Config, Paper, Priority, Report, Selection, Watermarks, Workload};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A web-like workload: geometric requests per connection (mean `per_conn`) and
/// lognormal body sizes (median ~3 KB, heavy right tail).
fn workload(connections: usize, per_conn: f64, seed: u64) -> Workload {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let size = LogNormal::new(8.0, 1.3).unwrap();
    let mut offsets = vec![0];
    let mut sizes = Vec::new();
    for _ in 0..connections {
        let mut n = 1;
        while rng.random::<f64>() > 1.0 / per_conn {
            n += 1;
        }
        for _ in 0..n {
            sizes.push((size.sample(&mut rng) as u64).min(2_000_000));
        }
        offsets.push(sizes.len());
    }
    let dynamic = vec![false; sizes.len()];
    Workload::new(offsets, sizes, dynamic, None).unwrap()
}

fn config(clients: u32, packets: u64) -> Config {
    let mut cfg = Config::default();
    cfg.run.clients = clients;
    cfg.run.warmup_packets = packets / 2;
    cfg.run.packets = packets;
    cfg
}

fn paper(limit: u32, priority: Priority, control: bool) -> Paper {
    Paper::new(
        limit,
        priority,
        control.then(Watermarks::default),
        Selection::Fcfs,
    )
    .unwrap()
}

fn base() -> (Workload, Config) {
    (workload(6_000, 8.0, 1), config(2048, 300_000))
}

fn run_one(policy: Paper) -> Report {
    let (w, cfg) = base();
    run(&cfg, &w, policy).unwrap()
}

#[test]
fn packets_and_connections_are_conserved() {
    for policy in [
        paper(1024, Priority::Fcfs, false),
        paper(4096, Priority::HostFirst, false),
        paper(4096, Priority::HostFirst, true),
    ] {
        let r = run_one(policy);
        assert!(!r.truncated);
        assert_eq!(
            r.packets_in,
            r.packets_dropped + r.packets_received + r.packets_queued
        );
        assert!(r.connections_closed <= r.connections_opened);
        // At most one open connection per client, plus those closing.
        assert!(r.connections_opened - r.connections_closed <= 2 * 2048);
        assert_eq!(r.handoffs_accepted - r.nic_closed, u64::from(r.cnum));
        assert!(r.cnum <= 4096);
    }
}

#[test]
fn littles_law_holds_on_the_nic_receive_queue() {
    // Host-first with no limit overloads the NIC: a long RxNIC queue.
    let r = run_one(paper(4096, Priority::HostFirst, false));
    let little = r.rx_nic_arrivals_per_s * r.rx_nic_mean_wait_s;
    assert!(
        r.rx_nic_mean_len > 10.0,
        "queue too short to test: {}",
        r.rx_nic_mean_len
    );
    // Edge effects: packets queued at the window's ends; a few percent.
    let rel = (little - r.rx_nic_mean_len).abs() / r.rx_nic_mean_len;
    assert!(
        rel < 0.05,
        "L = {} but lambda W = {little}",
        r.rx_nic_mean_len
    );
}

#[test]
fn no_handoff_keeps_everything_on_the_host() {
    let r = run_one(paper(0, Priority::Fcfs, false));
    assert_eq!((r.handoffs_accepted, r.cnum), (0, 0));
    assert_eq!((r.offloaded_share, r.nic_packet_share), (0.0, 0.0));
    assert_eq!(r.host_idle, 0.0, "the host is the bottleneck");
    assert!(r.nic_idle > 0.3);
    // Little's law over the closed loop: clients = X (R + the rest of their cycle).
    assert!(r.requests_per_s * r.response_mean_s < 2048.0);
}

#[test]
fn same_seed_same_run() {
    let a = run_one(paper(1024, Priority::HostFirst, true));
    let b = run_one(paper(1024, Priority::HostFirst, true));
    assert_eq!(a.requests_per_s, b.requests_per_s);
    assert_eq!(a.series, b.series);
}

#[test]
fn the_policies_order_as_in_the_paper() {
    let baseline = run_one(paper(0, Priority::Fcfs, false));
    let fcfs = run_one(paper(1024, Priority::Fcfs, false));
    let host_first = run_one(paper(1024, Priority::HostFirst, false));
    let overload = run_one(paper(4096, Priority::HostFirst, false));
    let controlled = run_one(paper(4096, Priority::HostFirst, true));
    for (name, r) in [
        ("baseline", &baseline),
        ("1024-N-N", &fcfs),
        ("1024-P-N", &host_first),
        ("4096-P-N", &overload),
        ("4096-P-L", &controlled),
    ] {
        show(name, r);
    }
    // Host-first keeps host packets' NIC transit at microseconds; FCFS does not.
    assert!(host_first.host_rx_delay_median_s < 50e-6);
    assert!(fcfs.host_rx_delay_median_s > 10.0 * host_first.host_rx_delay_median_s);
    assert!(host_first.requests_per_s > fcfs.requests_per_s);
    assert!(host_first.requests_per_s > baseline.requests_per_s);
    // Offloading every connection saturates the NIC and idles the host.
    assert!(overload.requests_per_s < baseline.requests_per_s);
    assert!(overload.host_idle > 0.3 && overload.nic_idle < 0.05);
    // Load control finds a limit: better than both, and it held fewer connections.
    assert!(controlled.requests_per_s > overload.requests_per_s);
    assert!(controlled.requests_per_s > baseline.requests_per_s);
    assert!(controlled.offloaded_share < 0.9);
    let cut = controlled
        .series
        .iter()
        .map(|s| s.soft_limit)
        .min()
        .unwrap();
    assert!(
        cut < 2048,
        "the soft limit never fell below the client count"
    );
}

#[test]
fn a_faster_nic_takes_more_connections_and_serves_more() {
    let (w, mut cfg) = base();
    let slow = run(&cfg, &w, paper(4096, Priority::HostFirst, true)).unwrap();
    cfg.hardware.nic_ips = 800e6;
    let fast = run(&cfg, &w, paper(4096, Priority::HostFirst, true)).unwrap();
    assert!(fast.offloaded_share > slow.offloaded_share);
    assert!(fast.requests_per_s > slow.requests_per_s);
}

#[test]
fn a_full_transmit_ring_starves_the_hosts_connections_under_fcfs() {
    // Naive handoff (Table 1's 1024-N-N): the busy NIC drains the host's transmit ring
    // slowly; with a small ring the host drops its own packets, its connections stall on
    // timeouts, new connections land on the NIC and the host goes idle.
    let (w, mut cfg) = base();
    cfg.run.warmup_packets = 100_000;
    cfg.run.packets = 150_000;
    cfg.hardware.tx_capacity = 1 << 20;
    let roomy = run(&cfg, &w, paper(1024, Priority::Fcfs, false)).unwrap();
    cfg.hardware.tx_capacity = 64;
    let small = run(&cfg, &w, paper(1024, Priority::Fcfs, false)).unwrap();
    show("roomy ring", &roomy);
    show("small ring", &small);
    assert_eq!(roomy.drops, 0);
    assert!(small.drops > 0 && small.timeouts > roomy.timeouts);
    assert!(small.host_idle > roomy.host_idle + 0.1);
    assert!(small.offloaded_share > roomy.offloaded_share);
    assert!(small.requests_per_s < roomy.requests_per_s);
}

#[test]
fn the_nics_packets_cost_more_once_its_connections_overflow_its_memory() {
    let nic = offload_sim::handoff::NicCosts {
        miss: 100.0,
        cache_conns: 1000.0,
        ..Default::default()
    };
    assert_eq!(nic.packet_instructions(0), nic.packet);
    assert_eq!(nic.packet_instructions(1000), nic.packet);
    assert_eq!(nic.packet_instructions(2000), nic.packet + 50.0);
}

#[test]
fn bad_configurations_are_refused_with_the_field_named() {
    let (w, mut cfg) = base();
    cfg.hardware.nic_ips = 0.0;
    let err = run(&cfg, &w, paper(0, Priority::Fcfs, false)).unwrap_err();
    assert!(err.contains("hardware.nic_ips"), "{err}");
    let err = Workload::new(vec![0, 2], vec![1], vec![false], None).unwrap_err();
    assert!(err.contains("offsets"), "{err}");
}

fn show(name: &str, r: &Report) {
    eprintln!(
        "{name:>14}: {:5.1} pkt/req {:8.0} req/s  host idle {:4.2}  nic idle {:4.2}  off {:4.2}  nicpkt {:4.2}  drops {:6}  to {:5}  rx-delay med {:8.1}us  resp {:6.1}ms  cnum {} trunc {}",
        r.packets_per_s / r.requests_per_s, r.requests_per_s, r.host_idle, r.nic_idle, r.offloaded_share, r.nic_packet_share, r.drops, r.timeouts,
        r.host_rx_delay_median_s * 1e6, r.response_mean_s * 1e3, r.cnum, r.truncated
    );
}
