"""Seed 004's workloads as connection lists: reproducible per seed, consistent CSR
arrays, the trace grouping against a plain re-implementation of the 15 s rule, the
Figure 4 shape (A19) for W and I, SPECweb99's class mix, keep-alive rule and dynamic
share within their standard errors, packet counts by hand, and the input checks."""

import math

import numpy as np
import pytest
from scipy import stats

from offloadlab.errors import InputError
from offloadlab.handoff.workloads import (
    WORKLOADS,
    Connections,
    build,
    lifetime_curve,
    skew,
    trace_connections,
)
from offloadlab.workload.traces import SynthSpec, synthetic
from offloadlab.workload.traces.synth import BLOCK


@pytest.fixture(scope="module")
def default():
    """Each workload at the defaults (20,000 connections, seed 0)."""
    return {code: build(code) for code in WORKLOADS}


def toy(**change) -> Connections:
    fields = {"name": "toy", "description": "hand-made", "offsets": [0, 2, 4, 6],
              "sizes": [0, 1210, 1211, 2920, 100, 0], "dynamic": [False] * 6, "clients": 1}
    return Connections(**{**fields, **change})


# ------------------------------------------------------------------ shape and seeds


@pytest.mark.parametrize("code", list(WORKLOADS))
def test_build_is_reproducible_and_consistent(code):
    a, b = build(code, connections=3000, seed=5), build(code, connections=3000, seed=5)
    c = build(code, connections=3000, seed=6)
    for field in ("offsets", "sizes", "dynamic"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.sizes[:1000], c.sizes[:1000])
    assert a.name == code and a.description == WORKLOADS[code]
    assert a.n_connections == 3000 and len(a.offsets) == 3001 and a.offsets[0] == 0
    assert a.offsets[-1] == a.n_requests == len(a.sizes) == len(a.dynamic)
    per = a.requests_per_connection
    assert per.min() >= 1 and per.sum() == a.n_requests
    assert a.sizes.dtype == np.int64 and a.offsets.dtype == np.int64 and a.sizes.min() >= 0
    assert a.dynamic.dtype == bool and (a.dynamic.any() == (code == "D"))
    assert (a.clients, a.client_kbps) == {"W": (2048, None), "I": (2048, None),
                                          "S": (4096, 400.0), "D": (2048, 400.0)}[code]


def test_workloads_draw_from_their_own_streams():
    # Same seed, different code: S and D share their rules but not their draws.
    s, d = build("S", connections=2000), build("D", connections=2000)
    assert not np.array_equal(s.requests_per_connection, d.requests_per_connection)
    assert list(WORKLOADS) == ["W", "I", "S", "D"]
    assert "synthetic" in WORKLOADS["W"] and "substitute" in WORKLOADS["I"]


def test_arrays_are_copied_and_read_only():
    sizes = np.array([0, 1210, 1211, 2920, 100, 0])
    conns = toy(sizes=sizes)
    sizes[0] = 99
    assert conns.sizes[0] == 0
    with pytest.raises(ValueError):
        conns.sizes[0] = 5


# ------------------------------------------------------------------ the trace grouping


def reference_connections(spec: SynthSpec, n: int, seed: int, window_s: float = 15.0):
    """The 15 s rule written out request by request, on the same synthetic trace."""
    table = synthetic(BLOCK, seed, spec)  # trace_connections draws whole blocks
    table = table[(table.method == "GET") & (table.status == 200)]
    last: dict[int, tuple[float, int]] = {}
    conns: list[list[tuple[float, int]]] = []
    for t, client, size in zip(table.time_s, table.client, table.size_bytes, strict=True):
        if len(conns) >= n and t > conns[n - 1][0][0] + window_s:
            break
        seen = last.get(client)
        if seen is not None and t - seen[0] <= window_s:
            cid = seen[1]
        else:
            cid = len(conns)
            conns.append([])
        conns[cid].append((t, size))
        last[client] = (t, cid)
    end_s = conns[n - 1][0][0] + window_s
    kept = [[size for t, size in conns[i] if t <= end_s] for i in range(n)]
    offsets = np.concatenate(([0], np.cumsum([len(k) for k in kept])))
    return offsets, np.array([s for k in kept for s in k], dtype=np.int64)


def test_trace_connections_follow_the_window_rule():
    spec = SynthSpec(n_objects=300, n_clients=40, client_alpha=1.0, rate=15.0)
    offsets, sizes = trace_connections(spec, 400, seed=3)
    ref_offsets, ref_sizes = reference_connections(spec, 400, seed=3)
    np.testing.assert_array_equal(offsets, ref_offsets)
    np.testing.assert_array_equal(sizes, ref_sizes)
    assert np.diff(offsets).max() > 10  # the busiest clients do keep connections open


# ------------------------------------------------------------------ Figure 4 (A19)


@pytest.mark.parametrize("code", ["W", "I"])
def test_traces_have_the_figure_4_shape(default, code):
    s = skew(default[code])
    assert s["bottom50_packet_share"] < 0.12
    assert s["top10_packet_share"] > 0.40
    described = default[code].describe()
    assert described["bottom50_packet_share"] == s["bottom50_packet_share"]
    assert described["connections"] == 20_000
    assert described["median_requests_per_connection"] >= 2  # sessions, not single hits


@pytest.mark.parametrize("code", list(WORKLOADS))
def test_lifetime_curve_agrees_with_skew(default, code):
    conns = default[code]
    curve = lifetime_curve(conns)
    n = conns.n_connections
    assert len(curve) == n and list(curve.columns) == ["rank_share", "packet_share",
                                                       "byte_share"]
    for col in curve.columns:
        assert (np.diff(curve[col].to_numpy()) >= 0).all()
        assert curve[col].iloc[-1] == 1.0
    # ranked by packets: the curve lies on or below the diagonal
    assert (curve.packet_share <= curve.rank_share + 1e-12).all()
    s = skew(conns)
    assert curve.rank_share.iloc[n // 2 - 1] == 0.5
    assert curve.packet_share.iloc[n // 2 - 1] == pytest.approx(s["bottom50_packet_share"])
    assert curve.rank_share.iloc[n - n // 10 - 1] == 0.9
    assert 1 - curve.packet_share.iloc[n - n // 10 - 1] == pytest.approx(
        s["top10_packet_share"])
    total = conns.packets().sum()
    assert s["bottom50_packet_share"] == pytest.approx(
        np.sort(conns.packets())[: n // 2].sum() / total)


# ------------------------------------------------------------------ SPECweb99


def specweb99_expected_mean() -> float:
    """SPECweb99's mean response from its rule: class c file j (1..9) is
    j * 1024 * 10^c / 10 bytes, classes 35/50/14/1 %, Zipf(1) over the file ranks."""
    ranks = np.array([9, 6, 4, 2, 1, 3, 5, 7, 8])
    file_p = (1 / ranks) / np.sum(1 / np.arange(1, 10))
    mix = [0.35, 0.50, 0.14, 0.01]
    return sum(mix[c] * file_p[j - 1] * (j * 1024 * 10**c // 10)
               for c in range(4) for j in range(1, 10))


@pytest.mark.parametrize("code", ["S", "D"])
def test_specweb99_sizes_follow_the_class_rule(default, code):
    sizes = default[code].sizes
    n = len(sizes)
    allowed = {j * 1024 * 10**c // 10 for c in range(4) for j in range(1, 10)}
    assert set(np.unique(sizes).tolist()) <= allowed
    cls = np.searchsorted([1000, 10_000, 100_000], sizes, side="right")
    for c, p in enumerate([0.35, 0.50, 0.14, 0.01]):
        assert abs(np.mean(cls == c) - p) < 4 * math.sqrt(p * (1 - p) / n)
    ranks = np.array([9, 6, 4, 2, 1, 3, 5, 7, 8])
    file_p = (1 / ranks) / np.sum(1 / np.arange(1, 10))
    class1 = sizes[cls == 1]  # file j of class 1 is j KiB
    observed = np.array([np.sum(class1 == j * 1024) for j in range(1, 10)])
    assert stats.chisquare(observed, file_p * len(class1)).pvalue > 1e-3
    mean = specweb99_expected_mean()
    assert 14_000 < mean < 15_000  # "about 14 KB" (reference 004 §5)
    assert abs(sizes.mean() - mean) < 4 * sizes.std() / math.sqrt(n)


@pytest.mark.parametrize("code", ["S", "D"])
def test_specweb99_keep_alive_rule(default, code):
    per = default[code].requests_per_connection
    assert set(np.unique(per).tolist()) <= {1, *range(5, 16)}
    long = per[per > 1]
    counts = np.bincount(long, minlength=16)[5:]
    assert stats.chisquare(counts).pvalue > 1e-3  # uniform on 5..15
    # share of requests on keep-alive connections: a ratio over connections; its
    # standard error by the delta method
    a, b = np.where(per > 1, per, 0), per
    share = a.sum() / b.sum()
    se = np.std(a - share * b, ddof=1) / math.sqrt(len(per)) / b.mean()
    assert abs(share - 0.7) < 4 * se


def test_specweb99_dynamic_share(default):
    d = default["D"].dynamic
    n = len(d)
    assert abs(d.mean() - 0.3) < 4 * math.sqrt(0.3 * 0.7 / n)
    assert not default["S"].dynamic.any()
    assert default["D"].describe()["dynamic_share"] == pytest.approx(d.mean())


# ------------------------------------------------------------------ packets by hand


def test_packets_by_hand():
    conns = toy()
    # ceil((size + 250) / 1460): 0 -> 1, 1210 -> 1, 1211 -> 2, 2920 -> 3, 100 -> 1, 0 -> 1
    np.testing.assert_array_equal(conns.packets(), [1 + 1 + 2, 2 + 3 + 2, 1 + 1 + 2])
    # no header, 1000-byte segments: 0 -> 0, 1210 -> 2, 1211 -> 2, 2920 -> 3, 100 -> 1
    np.testing.assert_array_equal(conns.packets(mss=1000, header_bytes=0),
                                  [0 + 2 + 2, 2 + 3 + 2, 1 + 0 + 2])
    np.testing.assert_array_equal(conns.response_bytes(), [1210, 4131, 100])
    # ranked by packets (4, 4, 7), ties by bytes: connection 2, 0, 1
    curve = lifetime_curve(conns)
    np.testing.assert_allclose(curve.rank_share, [1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(curve.packet_share, [4 / 15, 8 / 15, 1])
    np.testing.assert_allclose(curve.byte_share, [100 / 5441, 1310 / 5441, 1])
    assert skew(conns) == {"bottom50_packet_share": 4 / 15, "top10_packet_share": 0.0}
    d = conns.describe()
    assert (d["connections"], d["requests"]) == (3, 6)
    assert d["mean_requests_per_connection"] == d["median_requests_per_connection"] == 2
    assert d["mean_response_bytes"] == pytest.approx(5441 / 6)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(("change", "field"), [
    ({"offsets": [1, 2, 4, 6]}, "offsets"),
    ({"offsets": [0, 4, 2, 6]}, "offsets"),
    ({"offsets": [0, 2, 2, 6]}, "offsets"),
    ({"offsets": [0, 2, 4, 5]}, "offsets"),
    ({"offsets": [0.0, 2.5, 4.0, 6.0]}, "offsets"),
    ({"offsets": [0]}, "offsets"),
    ({"sizes": [0, 1, -1, 3, 4, 5]}, "sizes"),
    ({"sizes": [[0, 1, 2], [3, 4, 5]]}, "sizes"),
    ({"dynamic": [False] * 5}, "dynamic"),
    ({"dynamic": [0, 1, 0, 0, 0, 0]}, "dynamic"),
    ({"clients": 0}, "clients"),
    ({"clients": 2.5}, "clients"),
    ({"client_kbps": -400.0}, "client_kbps"),
    ({"client_kbps": math.inf}, "client_kbps"),
    ({"name": ""}, "name"),
])
def test_connections_refuse_bad_fields(change, field):
    with pytest.raises(InputError, match=rf"Connections\.{field}\b"):
        toy(**change)


def test_build_and_packets_refuse_bad_arguments():
    for bad in ("X", "", None, 3):
        with pytest.raises(InputError, match="W, I, S, D"):
            build(bad)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(InputError, match="connections"):
            build("S", connections=bad)
    with pytest.raises(InputError, match="seed"):
        build("S", seed=-1)
    with pytest.raises(InputError, match="mss"):
        toy().packets(mss=0)
    with pytest.raises(InputError, match="header_bytes"):
        toy().packets(header_bytes=-1)
    assert build("s", connections=10).name == "S"  # codes are not case-sensitive
