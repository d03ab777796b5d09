"""FastFlow (seed 002, Part A): the detector against planted heavy hitters, its KDE
against scipy, pcap and stream inputs, the LLF handoff selection, and the CLI."""

from __future__ import annotations

import json
import socket
import struct

import dpkt
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from offloadlab import handoff_policy
from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.handoff import run as h
from offloadlab.handoff import workloads as wl
from offloadlab.workload import flows
from offloadlab.workload.stream import Stream

runner = CliRunner()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_planted_heavy_hitters_are_found_exactly(seed):
    keys, heavy = flows.synthetic(seed=seed)
    r = flows.detect(keys)
    assert flows.precision_recall(r.flows, heavy) == (1.0, 1.0)
    # Every other flow was counted exactly, none lost: listed + short = distinct flows.
    assert r.slf_flows + len(r.flows) == len(np.unique(keys))
    assert r.total_packets == len(keys)
    # Heavy packets are half the trace; listed ones are estimated from 1-in-10 samples.
    assert r.llf_packet_share == pytest.approx(0.5, abs=0.01)


def test_a_flow_far_above_the_threshold_is_never_missed():
    """A flow with 20 times the share of an effective flow (2^-H) is listed, in any
    epoch it falls in, whatever the background."""
    for seed in range(5):
        keys, _ = flows.synthetic(heavy=1, heavy_share=0.01, short_flows=5000, seed=seed)
        r = flows.detect(keys)
        assert 20 * 2.0 ** -r.entropy_bits < 0.01
        assert 0 in r.flows, f"seed {seed}"


def test_precision_and_recall_on_a_hard_trace():
    """100 heavy hitters with 30 % of the packets among 20,000 short flows of up to 1000
    packets; the smallest heavy flows are no bigger than the largest short ones. The
    margin ε trades precision for recall: at the default (3 bits) both are high; at
    1 bit every heavy flow is found, with more false positives."""
    keys, heavy = flows.synthetic(heavy=100, heavy_share=0.3, short_flows=20_000,
                                  max_short=1000, seed=7)
    p3, r3 = flows.precision_recall(flows.detect(keys).flows, heavy)
    assert p3 > 0.95 and r3 > 0.95
    p1, r1 = flows.precision_recall(flows.detect(keys, margin_bits=1).flows, heavy)
    assert r1 == 1.0 and p1 < p3 - 0.2


def test_offline_estimates_count_unseen_flows_and_sample_long_ones():
    keys, heavy = flows.synthetic(seed=4)
    r = flows.detect(keys, sample_every=10, epoch_packets=4096)
    assert r.llf_sampled_flows == len(heavy)
    assert r.llf_flows_mle == len(heavy)  # many samples per flow: nothing unseen
    assert r.flows_estimate == r.slf_flows + len(heavy)
    # Listed after the first epochs, the heavy flows are then only sampled, 1 in 10.
    heavy_packets = np.isin(keys, list(heavy)).sum()
    assert 0.8 * heavy_packets < 10 * r.llf_samples < heavy_packets
    assert r.kde_bandwidth > 0 and r.kde_density.max() > 0
    # The density is of log10 packets per flow; its grid spans the data ± 3 bandwidths,
    # which hold all but at most 0.27 % of the mass.
    assert 0.997 < np.trapezoid(r.kde_density, r.kde_log10_packets) < 1.0 + 1e-9


def test_kde_matches_scipy_with_silvermans_bandwidth():
    rng = np.random.default_rng(3)
    x = np.log10(rng.pareto(1.5, 500) + 1)
    xs = np.linspace(-0.5, 3, 50)
    h_ours, ours = flows.kde(x, xs)
    assert h_ours == pytest.approx(1.06 * x.std(ddof=0) * len(x) ** -0.2, rel=1e-12)
    # scipy scales its factor by the ddof=1 deviation; give it our bandwidth exactly.
    exact = stats.gaussian_kde(x, bw_method=h_ours / x.std(ddof=1))(xs)
    np.testing.assert_allclose(ours, exact, rtol=1e-9)
    # scipy's own Silverman factor, (3n/4)^(-1/5) on ddof=1, is within 0.2 % of 1.06 n^(-1/5).
    silverman = stats.gaussian_kde(x, bw_method="silverman")
    assert np.sqrt(silverman.covariance[0, 0]) == pytest.approx(h_ours, rel=2e-3)


def _frame(src: str, dst: str, sport: int, dport: int, tcp: bool = True) -> bytes:
    l4 = (dpkt.tcp.TCP(sport=sport, dport=dport) if tcp
          else dpkt.udp.UDP(sport=sport, dport=dport))
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst),
                    p=dpkt.ip.IP_PROTO_TCP if tcp else dpkt.ip.IP_PROTO_UDP, data=l4)
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def _v6_frame(sport: int) -> bytes:
    ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, "2001:db8::1"),
                      dst=socket.inet_pton(socket.AF_INET6, "2001:db8::2"), nxt=17, hlim=64,
                      data=dpkt.udp.UDP(sport=sport, dport=53))
    ip.plen = len(ip.data)
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP6, data=ip))


def test_pcap_round_trip(tmp_path):
    """A pcap written with dpkt: one big TCP flow among many two-packet UDP flows, one
    IPv6 flow and an ARP frame (skipped)."""
    path = tmp_path / "t.pcap"
    frames = []
    for i in range(3000):
        frames.append(_frame("10.0.0.1", "10.0.0.2", 40000, 80))
        if i % 2 == 0:
            port = 1024 + i // 2
            frames += [_frame("10.0.1.1", "10.0.0.2", port, 53, tcp=False)] * 2
    frames.append(_v6_frame(5353))
    frames.append(bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_ARP,
                                               data=dpkt.arp.ARP())))
    with path.open("wb") as fh:
        w = dpkt.pcap.Writer(fh)
        for i, f in enumerate(frames):
            w.writepkt(f, ts=1.0 + i * 1e-4)
    r = flows.detect_pcap(path)
    assert r.total_packets == len(frames) - 1 and r.skipped == 1
    assert r.flows == ["10.0.0.1:40000 > 10.0.0.2:80 tcp"]
    assert r.slf_flows == 1500 + 1  # the UDP flows and the IPv6 one, each counted
    assert r.packets[0] == pytest.approx(3000, rel=0.02)


def test_pcapng_and_garbage_are_refused_with_the_fix(tmp_path):
    ng = tmp_path / "t.pcapng"
    ng.write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(60))
    with pytest.raises(InputError, match="editcap"):
        flows.detect_file(ng)
    with pytest.raises(InputError, match="no such file"):
        flows.detect_file(tmp_path / "missing.pcap")


def test_a_stream_maps_connections_to_flows(tmp_path):
    # Connection 0: 50 requests of 14.6 KB (11 packets each); connections 1..2000: one
    # 100-byte request each (2 packets).
    conn = np.concatenate([np.zeros(50, np.int64), np.arange(1, 2001)])
    order = np.argsort(np.concatenate([np.linspace(0, 1, 50), np.linspace(0, 1, 2000)]),
                       kind="stable")
    conn = conn[order]
    size = np.where(conn == 0, 14_600, 100)
    keep = pd.Series(conn).duplicated(keep="last").to_numpy()  # all but each conn's last
    frame = pd.DataFrame({"time_s": np.linspace(0, 1, len(conn)), "object": "a.html",
                          "size_bytes": size, "conn_id": conn, "keep_alive": keep,
                          "client": conn})
    path = tmp_path / "s.parquet"
    Stream(frame).write(path)
    r = flows.detect_file(path)
    assert r.total_packets == 50 * 11 + 2000 * 2
    assert r.flows == [0]


def test_llf_selection_parses_and_is_refused_on_the_testbed():
    s = h.parse_setup("W-4096-P-L-LLF-400")
    assert s.long_lived and s.threshold is None and s.label == "W-4096-P-L-LLF-400"
    with pytest.raises(InputError, match="simulator"):
        handoff_policy.parse("P-L-LLF")


def test_experiment_files_set_the_hosts_detector(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text('runs = ["W-4096-P-N-LLF-400"]\n[flows]\ndecay = 0.8\nmargin_bits = 2\n')
    setups, settings, _ = h.load_config(path)
    assert setups[0].long_lived
    assert settings.values == {"flows.decay": 0.8, "flows.margin_bits": 2}
    path.write_text('runs = ["W-4096-P-N-LLF-400"]\n[flows]\nepsilon = 2\n')
    with pytest.raises(InputError, match=r"'flows\.epsilon'"):
        h.load_config(path)


def test_llf_handoff_moves_long_connections_fcfs_and_tn_do_not():
    """On the same seed: FCFS offloads every connection and overloads the NIC; LLF
    offloads a minority of longer-than-average connections (more of the packets than
    of the connections) and serves more requests; T20 offloads fewer still. The oracle
    (the top 10 % of connections by packets) carries more packets than LLF moves."""
    settings = h.Settings(values={"run.warmup_packets": 100_000, "run.packets": 200_000},
                          connections=10_000)
    setups = [h.parse_setup(f"W-4096-P-N-{sel}-400") for sel in ("FCFS", "T20", "LLF")]
    df, _ = h.run_all(setups, settings)
    by = df[df.hard_limit > 0].set_index("selection")
    fcfs, t20, llf = (by.loc[s] for s in ("FCFS", "T20", "LLF"))
    assert fcfs.offloaded_share > 0.95
    assert fcfs.nic_packet_share < fcfs.offloaded_share
    assert 0.1 < llf.offloaded_share < 0.5
    assert llf.nic_packet_share > 1.25 * llf.offloaded_share
    assert llf.requests_per_s > 1.1 * fcfs.requests_per_s
    assert t20.offloaded_share < llf.offloaded_share
    oracle = wl.skew(h.connections("W", 10_000, 0))["top10_packet_share"]
    assert llf.nic_packet_share < oracle


def _cli(*args):
    return runner.invoke(app, ["workload", "flows", *map(str, args)])


def test_cli_reads_a_snap_length_capture_and_counts_the_cut_headers(tmp_path):
    """tcpdump -s 40: each frame keeps 40 of its bytes, the IPv4 header and the first 6
    of TCP's 20 (the ports); orig_len keeps the length on the wire."""
    path = tmp_path / "s40.pcap"
    frames = [_frame("10.0.0.1", "10.0.0.2", 40000 + i % 2, 80) + b"x" * 1000
              for i in range(50)]
    with path.open("wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 40, 1))
        for i, f in enumerate(frames):
            fh.write(struct.pack("<IIII", i, 0, 40, len(f)) + f[:40])
    res = _cli(path, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (doc["packets"], doc["flows_seen"]) == (50, 2)
    assert (doc["truncated_packets"], doc["skipped_frames"]) == (50, 0)
    res = _cli(path)
    assert "50 packets had their TCP/UDP header cut by the snap length" in res.output


def test_cli_lists_flows_and_prints_json(tmp_path):
    path = tmp_path / "t.pcap"
    with path.open("wb") as fh:
        w = dpkt.pcap.Writer(fh)
        for i in range(2000):
            w.writepkt(_frame("10.0.0.1", "10.0.0.2", 40000, 80), ts=i * 1e-3)
            w.writepkt(_frame("10.0.2.1", "10.0.0.2", 1024 + i, 80), ts=i * 1e-3)
    res = _cli(path)
    assert res.exit_code == 0, res.output
    assert "10.0.0.1:40000 > 10.0.0.2:80 tcp" in res.output and "coupon" in res.output
    res = _cli(path, "--json")
    doc = json.loads(res.output)
    assert [f["flow"] for f in doc["long_lived"]] == ["10.0.0.1:40000 > 10.0.0.2:80 tcp"]
    assert doc["offline"]["slf_flows"] == 2000


@pytest.mark.parametrize("args, words", [
    (["missing.pcap"], "no such file"),
    (["t.pcap", "--decay", "2"], "--decay must be in (0, 1]"),
    (["t.pcap", "--sample-every", "0"], "--sample-every"),
    (["t.pcap", "--top", "-1"], "--top"),
    (["junk.txt"], "junk.txt"),
])
def test_cli_bad_input_exits_2_naming_the_field(tmp_path, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    with (tmp_path / "t.pcap").open("wb") as fh:
        dpkt.pcap.Writer(fh).writepkt(_frame("10.0.0.1", "10.0.0.2", 1, 2), ts=0)
    (tmp_path / "junk.txt").write_text("this is not a trace\n")
    res = _cli(*args)
    assert res.exit_code == 2, res.output
    assert words in " ".join(res.output.split())
