"""The multi-tier model (seed 003) against hand-computed demands, its own parts (Che's
cache, MVA) and the closed-network simulator; placements, the memory file system and
the protocol cost model (Table 5, the per-packet estimate)."""

from dataclasses import replace

import numpy as np
import pytest

from offloadlab.errors import InputError
from offloadlab.model import cache, tiers
from offloadlab.model import protocol_costs as pc
from offloadlab.sim import closed
from offloadlab.workload.popularity import zipf_probabilities

KiB = 1024


def plain(**changes) -> tiers.DataCentre:
    """One node per tier, one CPU, no per-packet or per-byte costs, no caches."""
    sizes = np.array([4 * KiB, 64 * KiB, 256 * KiB], float)
    site = tiers.Site("s", sizes, [0.5, 0.3, 0.2], clients=1)
    dc = tiers.DataCentre(
        sites=(site,), proxy=tiers.Tier(1, 1, 2.0, 50e-6, 10e-6),
        web=tiers.Tier(1, 1, 1.0, 100e-6), db=tiers.Tier(1, 1),
        disks=tiers.Disks(1, 50e6, 5e-3),
        network=tiers.Network(bandwidth_Bps=100e6, latency_s=20e-6, packet_s=0.0,
                              client_nodes=1, client_bandwidth_Bps=50e6))
    return replace(dc, **changes)


def demand(solved: tiers.Solved, station: str) -> float:
    return float(solved.net.demands[0, solved.net.stations.index(station)])


def test_every_station_demand_is_the_hand_computed_one():
    dc = plain()
    s, p = dc.sites[0].sizes, dc.sites[0].popularity
    mean = float(p @ s)
    solved = tiers.solve(dc)
    # No cache anywhere: every request goes to the web server and to the disk.
    assert demand(solved, "proxy cpu") == pytest.approx(50e-6 / 2.0 + 10e-6)
    assert demand(solved, "web cpu") == pytest.approx(100e-6)
    assert demand(solved, "client link") == pytest.approx(mean / 50e6)
    assert demand(solved, "proxy link") == pytest.approx(2 * mean / 100e6)  # in and out
    assert demand(solved, "web link") == pytest.approx(mean / 100e6)
    assert demand(solved, "web disk 1") == pytest.approx(float(p @ (5e-3 + s / 50e6)))
    assert demand(solved, "latency") == pytest.approx(4 * 20e-6)
    # One client never queues: its response time is the sum of its demands.
    assert solved.response[0] == pytest.approx(solved.net.demands.sum())
    assert solved.proxy_hit[0] == 0 and solved.page_hit[0] == 0


def test_caches_follow_che_and_hits_skip_the_later_tiers():
    sizes = np.full(2000, 8 * KiB)
    p = zipf_probabilities(2000, 0.9)
    site = tiers.Site("s", sizes, p, clients=1)
    dc = plain(sites=(site,), proxy_cache_bytes=200 * 8 * KiB, page_cache_bytes=400 * 8 * KiB)
    solved = tiers.solve(dc)
    proxy = cache.lru(p, sizes, dc.proxy_cache_bytes)
    assert solved.proxy_hit[0] == pytest.approx(proxy.requests)
    # The page cache sees the proxies' misses.
    missed = p * (1 - proxy.per_object)
    page = cache.lru(missed, sizes, dc.page_cache_bytes)
    assert solved.page_hit[0] == pytest.approx(float(missed @ page.per_object / missed.sum()))
    assert demand(solved, "web cpu") == pytest.approx(100e-6 * (1 - proxy.requests))
    # Dynamic pages bypass the proxies' cache and query the database.
    dynamic = tiers.solve(replace(dc, sites=(replace(site, dynamic=0.5),), query_s=1e-3))
    assert dynamic.proxy_hit[0] == pytest.approx(proxy.requests * 0.5)
    assert demand(dynamic, "db cpu") == pytest.approx(0.5 * 1e-3)


def test_a_short_run_adds_each_files_first_miss():
    sizes = np.full(100, KiB)
    site = tiers.Site("s", sizes, np.ones(100), clients=1)
    warm = tiers.solve(plain(sites=(site,), proxy_cache_bytes=1e9))
    assert warm.proxy_hit[0] == pytest.approx(1.0)
    # 1,000 requests over 100 equally popular files: 10 each, the first of them a miss
    # (fewer when a file is never asked for): 1 - (1 - (1 - p)^R) / (R p).
    short = tiers.solve(plain(sites=(site,), proxy_cache_bytes=1e9, run_requests=1000))
    assert short.proxy_hit[0] == pytest.approx(1 - (1 - 0.99 ** 1000) / 10, rel=1e-9)


def test_multi_site_hit_ratios_weigh_each_site_by_its_throughput():
    a = tiers.Site("a", np.full(50, 64 * KiB), np.ones(50), clients=30)
    b = tiers.Site("b", np.full(500, 64 * KiB), np.ones(500), clients=30, think_s=0.5)
    solved = tiers.solve(plain(sites=(a, b), proxy_cache_bytes=100 * 64 * KiB))
    x = solved.throughput
    p = np.concatenate([np.full(50, x[0] / 50), np.full(500, x[1] / 500)])
    che = cache.lru(p, np.full(550, 64 * KiB), 100 * 64 * KiB).per_object
    assert solved.proxy_hit == pytest.approx([che[:50].mean(), che[50:].mean()], rel=1e-4)


def test_mva_of_the_tiers_agrees_with_the_simulated_network():
    site = tiers.Site("s", np.full(300, 32 * KiB), zipf_probabilities(300, 0.8), clients=12,
                      think_s=2e-3, dynamic=0.2)
    dc = plain(sites=(site,), proxy_cache_bytes=50 * 32 * KiB, page_cache_bytes=100 * 32 * KiB,
               query_s=400e-6, query_disk_s=1e-3)
    solved = tiers.solve(dc)
    sim = closed.simulate(solved.net, requests=200_000, seed=3)
    for ours, theirs, hw in ((solved.throughput, sim.throughput, sim.throughput_hw),
                             (solved.response, sim.response, sim.response_hw)):
        assert abs(ours[0] - theirs[0]) <= max(3 * hw[0], 0.02 * theirs[0])


def test_tier_nodes_split_the_demand_and_cpus_serve_in_parallel():
    one = tiers.solve(plain())
    many = tiers.solve(plain(web=tiers.Tier(3, 4, 1.0, 100e-6)))
    assert [n for n in many.net.stations if n.startswith("web") and "cpu" in n] == [
        "web 1 cpu", "web 2 cpu", "web 3 cpu"]
    assert demand(many, "web 1 cpu") == pytest.approx(demand(one, "web cpu") / 3)
    assert many.net.servers[many.net.stations.index("web 2 cpu")] == 4


@pytest.mark.parametrize("how", ["popularity", "size"])
def test_round_robin_placements_deal_the_sorted_files_in_turn(how):
    rng = np.random.default_rng(1)
    sizes, popularity = rng.integers(1, 10**6, 301).astype(float), rng.random(301)
    disk = tiers.Disks(3, placement=how).assign(sizes, popularity)
    key = popularity if how == "popularity" else sizes
    assert (disk[np.argsort(key, kind="stable")] == np.arange(301) % 3).all()
    assert np.bincount(disk).tolist() == [101, 100, 100]


def test_random_placement_is_seeded_and_even_single_and_striped_use_one_station():
    sizes, popularity = np.ones(30_000), np.ones(30_000)
    disk = tiers.Disks(3, placement="random", seed=4).assign(sizes, popularity)
    assert (disk == tiers.Disks(3, placement="random", seed=4).assign(sizes, popularity)).all()
    assert np.bincount(disk) / 30_000 == pytest.approx([1 / 3] * 3, abs=0.01)
    for how in ("single", "striped"):
        d = tiers.Disks(3, 40e6, 5e-3, placement=how)
        assert d.stations == 1 and not d.assign(sizes, popularity).any()
    # A striped read transfers from every disk at once; its seek is not shortened.
    assert tiers.Disks(3, 40e6, 5e-3, "striped").read_s(np.array([120e6])) == pytest.approx(
        [5e-3 + 1.0])


def test_the_memory_file_system_takes_files_by_size_or_by_popularity():
    site = tiers.Site("s", np.array([10, 500, 20, 2000], float) * KiB, [0.1, 0.4, 0.3, 0.2],
                      clients=1)
    by_size = tiers.with_memory_fs(site, below_bytes=100 * KiB)
    assert by_size.in_memory.tolist() == [True, False, True, False]
    # Most popular first while the budget lasts: 500 KiB, then 20 KiB (2000 KiB is next
    # by popularity and does not fit, so the scan stops).
    by_budget = tiers.with_memory_fs(site, budget_bytes=600 * KiB)
    assert by_budget.in_memory.tolist() == [False, True, True, False]
    with pytest.raises(InputError, match="threshold or a memory budget"):
        tiers.with_memory_fs(site)
    # Files in memory never reach the disk, and take memory from the page cache.
    solved = tiers.solve(plain(sites=(by_size,), page_cache_bytes=40 * KiB))
    p, s = site.popularity, site.sizes
    on_disk = ~by_size.in_memory
    assert demand(solved, "web disk 1") == pytest.approx(
        float((p * (5e-3 + s / 50e6))[on_disk].sum()))
    with pytest.raises(InputError, match="memory file system holds"):
        tiers.solve(plain(sites=(by_size,), page_cache_bytes=10 * KiB))


def test_table_5_gives_the_papers_savings():
    dc, micro = pc.TABLE5["datacenter"], pc.TABLE5["micro"]
    us_per_kib = 1e6 * KiB
    # Receiver: checksum + copy, against the copy after the NIC checksummed.
    assert dc.receive(False) * us_per_kib == pytest.approx(8.42 + 5.17)
    assert 1 - dc.receive(True) / dc.receive(False) == pytest.approx(0.382, abs=0.001)
    assert 1 - micro.receive(True) / micro.receive(False) == pytest.approx(0.190, abs=0.001)
    # Sender: the fused checksum and copy against the copy alone.
    assert (dc.send(False) - dc.send(True)) * us_per_kib == pytest.approx(0.04)
    assert (micro.send(False) - micro.send(True)) * us_per_kib == pytest.approx(1.74)
    with pytest.raises(InputError, match="datacenter"):
        pc.byte_costs("fast")


def test_packets_and_segmentation_offload():
    assert pc.packets(0, 1448) == 1 and pc.packets(1448, 1448) == 1
    assert pc.packets(1449, 1448) == 2
    assert pc.packets(np.array([100 * KiB]), 1448, segmentation_offload=True).tolist() == [2]


def test_per_packet_offload_pays_only_above_the_hardware_break_even():
    r = 700 / 132
    firmware = pc.PacketOffload(1.0, 0.0, r)
    assert firmware.path(1.0) == pytest.approx(r)          # all firmware: 5.3x slower
    assert firmware.break_even_hardware == pytest.approx(1 - 132 / 700)
    h = firmware.break_even_hardware
    assert pc.PacketOffload(1.0, h, r).path(1.0) == pytest.approx(1.0)
    assert pc.PacketOffload(0.5, 1.0, r).path(2.0) == pytest.approx(1.0)  # half in hardware
    with pytest.raises(InputError, match="hardware"):
        pc.PacketOffload(1.0, 1.5, r)


def test_the_engine_takes_the_offloaded_packet_work_from_the_host():
    net = tiers.Network(bandwidth_Bps=100e6, packet_s=10e-6, client_nodes=1,
                        client_bandwidth_Bps=50e6, engine=pc.PacketOffload(0.6, 0.5, 4.0))
    base = tiers.solve(plain(network=replace(net, engine=None)))
    off = tiers.solve(plain(network=net))
    packets = (demand(base, "web cpu") - 100e-6) * 1.0   # speed 1: packet time per request
    assert demand(off, "web cpu") == pytest.approx(100e-6 + 0.4 * packets)
    assert demand(off, "web nic") == pytest.approx(packets * 0.6 * 0.5 * 4.0)


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda: tiers.Site("s", [1.0, 2.0], [1.0], clients=1), "one size and one popularity"),
    (lambda: tiers.Site("s", [1.0], [1.0], clients=1, dynamic=2), "dynamic"),
    (lambda: tiers.Disks(placement="mirrored"), "placement"),
    (lambda: tiers.Tier(cpus=0), "cpus"),
    (lambda: plain(page_hit=1.5), "page_hit"),
    (lambda: plain(sites=()), "at least one site"),
])
def test_bad_parts_are_refused_naming_what_is_wrong(make, fragment):
    with pytest.raises(InputError, match=fragment):
        make()


def test_a_population_too_large_to_walk_is_solved_approximately():
    site = replace(plain().sites[0], clients=500)
    solved = tiers.solve(plain(sites=(site, replace(site, name="t"))))
    assert solved.solution.iterations > 0   # Schweitzer, not exact
    small = replace(site, clients=30)
    exact = tiers.solve(plain(sites=(small, replace(small, name="t"))))
    assert exact.solution.iterations == 0
