"""Workload analysis: shares are exact on hand-made tables, arrival checks tell Poisson
from constant, streaming does not depend on chunking, outputs (JSON, tables, figures) are
written, bad input is refused."""

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from workload_samples import HYBRID, hybrid_sample, within, zipf_p

from offloadlab.dist import Lognormal
from offloadlab.errors import InputError
from offloadlab.report import workload as report
from offloadlab.workload import analyze as A
from offloadlab.workload import stats
from offloadlab.workload.classes import size_class

# ---- popularity ---------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "expected"), [
    (1000, {"1": 0.095, "10": 0.306, "100": 0.611, "10%": 0.611}),
    (10_000, {"1": 0.064, "10": 0.205, "100": 0.41, "10%": 0.671})])
def test_top_shares_match_reference_003(n, expected):
    """Reference 003 §2.2: request shares of the top-k files under Zipf alpha = 0.9."""
    top = stats.popularity(zipf_p(n, 0.9), sampled=False).top
    for k, share in expected.items():
        assert top[k] == pytest.approx(share, abs=0.0006), k


# ---- classes and connections (hand-made tables) -------------------------------------------

def test_class_shares_exact_on_a_hand_made_table():
    # object, size: class 0 at its upper bound, class 1 both ends, class 2, class 4
    sizes = {"a": 1024, "b": 1025, "c": 10240, "d": 10241, "e": 2 * 2**20}
    requests = ["a"] * 4 + ["b"] * 2 + ["c"] + ["d"] * 2 + ["e"]
    df = pd.DataFrame({"object": requests, "size_bytes": [sizes[o] for o in requests]})
    a = A.analyze_requests(df)
    total = 4 * 1024 + 2 * 1025 + 10240 + 2 * 10241 + 2 * 2**20
    got = {c.klass: (c.objects, c.requests, c.bytes) for c in a.classes}
    assert got[0] == (1, 0.4, 4 * 1024 / total)
    assert got[1] == (2, 0.3, (2 * 1025 + 10240) / total)
    assert got[2] == (1, 0.2, 2 * 10241 / total)
    assert got[3] == (0, 0.0, 0.0)
    assert got[4] == (1, 0.1, 2 * 2**20 / total)
    assert -1 not in got


def test_unknown_sizes_count_in_requests_not_bytes():
    df = pd.DataFrame({"object": ["a", "a", "b", "c", "c"],
                       "size_bytes": [100, -1, -1, 2000, 2000]})
    a = A.analyze_requests(df)
    got = {c.klass: (c.objects, c.requests, c.bytes) for c in a.classes}
    assert got[-1] == (1, 0.2, 0.0)                   # b: size never known
    assert got[0] == (1, 0.4, 100 / 4100)             # a: its size from the known request
    assert got[1] == (1, 0.4, 4000 / 4100)
    assert a.summary["unknown_size"] == 2 and any("unknown size" in n for n in a.notes)


def test_top_ten_percent_of_connections_exact():
    # 10 connections: connection 0 carries 11 of 20 requests and 9000 of 9999 bytes,
    # connections 1..9 one request of 111 bytes each.
    df = pd.DataFrame({"object": "x", "conn_id": [0] * 11 + list(range(1, 10)),
                       "size_bytes": [818] * 10 + [820] + [111] * 9})
    c = A.analyze_requests(df).connections
    assert c.connections == 10
    assert c.top_requests == pytest.approx(11 / 20, abs=1e-12)
    assert c.top_bytes == pytest.approx(9000 / 9999, abs=1e-12)
    lorenz = {p: (r, b) for p, r, b in c.lorenz}
    assert lorenz[0.5] == pytest.approx((5 / 20, 5 * 111 / 9999))
    assert c.requests_per_conn == 2.0


def test_top_share_interpolates_and_connections_need_ids():
    # 15 connections: top 10 % = 1.5 connections -> the largest plus half the next.
    v = np.r_[np.full(13, 1.0), 5.0, 10.0]
    assert stats.top_share(v, 0.1) == pytest.approx((10 + 0.5 * 5) / 28)
    df = pd.DataFrame({"object": ["a", "b"], "size_bytes": [10, 20], "conn_id": [-1, -1]})
    assert A.analyze_requests(df).connections is None


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=40).filter(lambda v: sum(v) > 0),
       st.floats(0.01, 0.99))
def test_lorenz_invariants(values, q):
    """L is nondecreasing from 0 to 1 and below the diagonal; the top q hold at least q."""
    grid = np.linspace(0, 1, 21)
    L = stats.lorenz(values, grid)
    assert L[0] == pytest.approx(0, abs=1e-12) and L[-1] == pytest.approx(1)
    assert np.all(np.diff(L) >= -1e-12) and np.all(L - grid <= 1e-12)
    assert q - 1e-9 <= stats.top_share(values, q) <= 1 + 1e-12
    assert 0 <= stats.gini(values) + 1e-12 <= 1


# ---- arrivals ---------------------------------------------------------------------------

def request_table(times, seed=0):
    rng = np.random.default_rng(seed)
    n = len(times)
    obj = rng.integers(0, 50, n)
    return pd.DataFrame({"time_s": times, "object": obj, "size_bytes": 100 + 37 * obj})


def dispersion_se(arrivals):
    """Var/mean of m Poisson counts has a standard error of about sqrt(2 / (m - 1))."""
    return math.sqrt(2 / (arrivals.counts.size - 2))


def test_poisson_arrivals_pass_and_constant_rate_fails():
    gaps = np.random.default_rng(4).exponential(1 / 200, 20_000)
    poisson = A.analyze_requests(request_table(np.r_[0, np.cumsum(gaps)])).arrivals
    assert poisson.ks_p > 0.05 and poisson.lilliefors_p > 0.05
    assert poisson.rate == pytest.approx(200, rel=4 / math.sqrt(20_000))
    assert within(poisson.cv, 1, 1 / math.sqrt(20_000))     # se of the CV: ~ 1/sqrt(n)
    assert within(poisson.dispersion, 1, dispersion_se(poisson)) and poisson.dispersion_p > 0.05

    constant = A.analyze_requests(request_table(np.arange(20_000) / 200)).arrivals
    assert constant.ks_D > 0.5 and constant.ks_p < 1e-9 and constant.lilliefors_p < 0.01
    assert constant.cv == pytest.approx(0, abs=1e-9) and constant.dispersion < 0.05
    assert constant.dispersion_p < 1e-9
    assert constant.rate == pytest.approx(200)


def test_rounded_timestamps_are_flagged():
    t = np.floor(np.cumsum(np.random.default_rng(5).exponential(1 / 50, 5000)))
    a = A.analyze_requests(request_table(t))
    assert a.arrivals.ties > 0.9 and a.arrivals.resolution_s == 1.0
    assert a.arrivals.bin_s == 1.0          # 0.1 s bins would be empty 9 times out of 10
    assert within(a.arrivals.dispersion, 1, dispersion_se(a.arrivals))   # Poisson per second
    assert a.arrivals.dispersion_p > 0.01
    assert any("reject on ties" in n and "whole seconds" in n for n in a.notes)


def test_connection_arrivals_are_checked_on_connection_openings():
    # Poisson connection openings, each with 1-9 requests sent at its opening time
    rng = np.random.default_rng(6)
    opens = np.cumsum(rng.exponential(1 / 100, 3000))
    per_conn = rng.integers(1, 10, opens.size)
    df = request_table(np.repeat(opens - opens[0], per_conn))
    df["conn_id"] = np.repeat(np.arange(opens.size), per_conn)
    df.loc[df.index[-1], "conn_id"] = -1            # a request without a connection opens one
    by_request = A.analyze_requests(df).arrivals
    assert by_request.of == "requests" and by_request.ks_p < 1e-9
    assert any("arrivals='connections'" in n for n in A.analyze_requests(df).notes)
    by_conn = A.analyze_requests(df, arrivals="connections").arrivals
    assert by_conn.of == "connections" and by_conn.count == opens.size + 1
    assert by_conn.ks_p > 0.05 and by_conn.lilliefors_p > 0.05
    parts = A.analyze_requests([df.iloc[:777], df.iloc[777:]], arrivals="connections")
    assert parts.arrivals.count == by_conn.count
    assert parts.arrivals.mean_gap_s == pytest.approx(by_conn.mean_gap_s)
    with pytest.raises(InputError, match="arrivals='sessions'"):
        A.analyze_requests(df, arrivals="sessions")


def test_out_of_order_times_are_sorted_before_the_gaps_are_taken():
    # a log written at completion: request 3 started before request 2 and the first
    a = A.analyze_requests(request_table([0.0, 1.0, 3.0, -0.5, 4.0, 6.0])).arrivals
    assert (a.out_of_order, a.late, a.early) == (1, 0, 1)
    assert a.gaps == 5 and a.mean_gap_s == pytest.approx(6.5 / 5)
    assert a.counts.sum() == 6


def test_a_log_shuffled_within_each_minute_has_the_gaps_of_the_sorted_log():
    # several workers' logs merged: in order from minute to minute, not within one
    rng = np.random.default_rng(5)
    t = np.cumsum(rng.exponential(1 / 30, 20_000))
    shuffled = np.concatenate([rng.permutation(t[(t // 60) == m])
                               for m in np.unique(t // 60)])
    truth = A.analyze_requests(request_table(t)).arrivals
    got = A.analyze_requests(request_table(shuffled)).arrivals
    assert got.out_of_order > 10_000 and got.late == 0 and truth.out_of_order == 0
    assert got.rate == pytest.approx((t.size - 1) / (t[-1] - t[0]))
    table = request_table(shuffled)
    chunked = A.analyze_requests([table.iloc[i:i + 777] for i in range(0, t.size, 777)])
    for name in ("gaps", "mean_gap_s", "cv", "ks_D", "lilliefors_p", "dispersion"):
        assert getattr(got, name) == pytest.approx(getattr(truth, name)), name
        assert getattr(chunked.arrivals, name) == pytest.approx(getattr(got, name)), name


def test_times_listed_far_after_a_later_one_are_left_out_of_the_gaps():
    t = [0.0, 1.0, 2.0, 1000.0, 1001.0, 3.0, 1002.0]      # 3.0 is late by 998 s
    a = A.analyze_requests(request_table(t)).arrivals
    assert (a.out_of_order, a.late, a.gaps) == (1, 1, 5)
    assert a.mean_gap_s == pytest.approx(1002 / 5)
    assert any("more than 300 s" in n for n in A.analyze_requests(request_table(t)).notes)


def test_rate_over_time_bins_merge_on_long_traces():
    t = np.r_[np.linspace(0, 10, 1000, endpoint=False), 5000.0]
    a = A.analyze_requests(request_table(t)).arrivals
    assert a.bin_s == 10.0 and a.counts.sum() == 1001 and a.counts[0] == 1000
    assert a.counts.size <= stats.MAX_BINS


# ---- streaming, outputs, manifests ------------------------------------------------------

def trace(n=20_000, seed=7):
    rng = np.random.default_rng(seed)
    n_obj = 800
    size = np.round(Lognormal(8.5, 1.7).sample(rng, n_obj)).astype(np.int64)
    obj = rng.choice(n_obj, n, p=zipf_p(n_obj, 0.8))
    size_bytes = size[obj]
    size_bytes[rng.random(n) < 0.02] = -1
    conn = np.repeat(np.arange(n), rng.geometric(0.25, n))[:n]
    conn[rng.random(n) < 0.1] = -1
    return pd.DataFrame({
        "time_s": np.r_[0, np.cumsum(rng.exponential(0.01, n - 1))],
        "client": rng.integers(0, 30, n), "object": [f"/obj/{o}" for o in obj],
        "size_bytes": size_bytes, "status": np.int16(200), "method": "GET",
        "conn_id": conn})


def assert_same(a, b, path="$"):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), path
    else:
        assert a == b, path


def test_chunked_analysis_equals_one_chunk():
    df = trace()
    cuts = [0, 1, 3000, 3001, 9000, 15_500, len(df)]
    chunks = [df.iloc[a:b] for a, b in itertools.pairwise(cuts)]
    # a reservoir smaller than the gaps exercises the sampling path too
    whole = A.analyze_requests(df, reservoir=5000, seed=3)
    parts = A.analyze_requests(iter(chunks), reservoir=5000, seed=3)
    assert whole.arrivals.sampled == 5000 < whole.arrivals.gaps
    assert_same(whole.to_json(), parts.to_json())
    assert whole.summary["requests"] == len(df)
    assert whole.connections.connections == df.conn_id[df.conn_id >= 0].nunique()


def test_json_and_figures_are_written(tmp_path):
    a = A.analyze_requests(trace(5000))
    text = json.dumps(a.to_json(), allow_nan=False)
    back = json.loads(text)
    assert back["sizes"]["chosen"] == a.sizes.chosen
    assert back["popularity"]["zipf"]["alpha"] == pytest.approx(a.popularity.zipf.alpha)
    assert back["connections"]["top_fraction"] == 0.1
    for name, analysis in (("trace.png", a), ("manifest.png", A.analyze_manifest(manifest()))):
        report.plot_analysis(analysis, tmp_path / name)
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.png", "trace.png"]
    titles = [str(t.title) for t in report.analysis_tables(a)]
    assert len(titles) == 5 and "connections" in titles[3] and "arrivals" in titles[4]


def test_outputs_work_without_fits_connections_or_times(tmp_path):
    df = pd.DataFrame({"object": ["a", "b", "b", "c"], "size_bytes": [512, 512, 512, 0]})
    a = A.analyze_requests(df)
    assert a.sizes.chosen is None and a.sizes.zeros == 1 and a.sizes.n == 2
    assert a.connections is None and a.arrivals is None
    json.dumps(a.to_json(), allow_nan=False)
    assert len(report.analysis_tables(a)) == 3
    report.plot_analysis(a, tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def manifest(n=1000, alpha=0.9):
    rng = np.random.default_rng(11)
    sizes = np.round(hybrid_sample(rng, n, **HYBRID)).astype(np.int64)
    return pd.DataFrame({"path": [f"f{i}.bin" for i in range(n)], "size_bytes": sizes,
                         "class": 0, "rank": np.arange(1, n + 1),
                         "probability": zipf_p(n, alpha), "checksum": "x"})


def test_manifest_analysis_uses_probabilities():
    m = manifest()
    a = A.analyze_manifest(m)
    assert a.popularity.zipf.alpha == pytest.approx(0.9, abs=1e-9)
    assert a.arrivals is None and a.connections is None
    assert sum(c.requests for c in a.classes) == pytest.approx(1)
    by_class = {c.klass: c for c in a.classes}
    cls = size_class(m.size_bytes.to_numpy())
    for k in range(5):
        want = m.probability[cls == k].sum()
        assert by_class[k].requests == pytest.approx(want)
        assert by_class[k].objects == np.count_nonzero(cls == k)
    assert a.summary["mean_request_bytes"] == pytest.approx((m.probability * m.size_bytes).sum())
    json.dumps(a.to_json(), allow_nan=False)
    no_p = A.analyze_manifest(m.drop(columns="probability"))
    assert no_p.popularity is None and any("probability" in n for n in no_p.notes)


# ---- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize(("chunks", "message"), [
    ([pd.DataFrame({"object": ["a"], "bytes": [10]})], "no 'size_bytes' column"),
    ([pd.DataFrame({"size_bytes": [10]})], "no 'object' column"),
    ([pd.DataFrame({"object": ["a", "b"], "size_bytes": [-1, -1]})], "all 2 requests have an "
     "unknown size"),
    ([], "no requests"),
    ([pd.DataFrame({"object": [], "size_bytes": []})], "no requests"),
    ([pd.DataFrame({"object": ["a"], "size_bytes": ["big"]})], "size_bytes in row 0"),
    ([pd.DataFrame({"object": ["a", None], "size_bytes": [1, 2]})], "have no object"),
    ([pd.DataFrame({"object": ["a"], "size_bytes": [1], "time_s": [math.nan]})],
     "time_s in row 0"),
])
def test_bad_requests_are_refused(chunks, message):
    with pytest.raises(InputError, match=message):
        A.analyze_requests(chunks, name="t.log")


def test_bad_manifests_are_refused():
    with pytest.raises(InputError, match="no 'size_bytes' column"):
        A.analyze_manifest(pd.DataFrame({"path": ["a"]}))
    with pytest.raises(InputError, match="no files"):
        A.analyze_manifest(pd.DataFrame({"size_bytes": []}))
    with pytest.raises(InputError, match="probability"):
        A.analyze_manifest(pd.DataFrame({"size_bytes": [1, 2], "probability": [0.5, -1]}))
