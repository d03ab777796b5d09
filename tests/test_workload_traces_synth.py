"""The synthetic trace: reproducible and chunk-invariant, with Zipf popularity, Poisson
or bursty arrivals, spliced lognormal-Pareto sizes, and the status and method rules."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from offloadlab.errors import InputError
from offloadlab.workload.traces.synth import (
    SynthSpec,
    object_sizes,
    synth_wc98,
    synthetic,
    synthetic_chunks,
)


def test_synthetic_is_reproducible_and_chunk_invariant():
    a = synthetic(300_000, seed=11)
    pd.testing.assert_frame_equal(a, synthetic(300_000, seed=11))
    assert not a.object.equals(synthetic(300_000, seed=12).object)
    chunks = list(synthetic_chunks(300_000, seed=11))
    assert len(chunks) == 2  # one block boundary (BLOCK = 2**18) inside
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), a)
    assert a.time_s.iloc[0] == 0 and a.time_s.is_monotonic_increasing
    assert len(synthetic(0)) == 0


def test_synthetic_popularity_is_zipf():
    spec = SynthSpec(n_objects=1000, zipf_alpha=1.0)
    n = 200_000
    counts = synthetic(n, seed=3, spec=spec).object.value_counts().to_numpy()
    harmonic = np.sum(1.0 / np.arange(1, 1001))
    for rank in (1, 2, 3):  # tens of standard errors apart: the sorted counts keep rank
        p = 1.0 / rank / harmonic
        se = math.sqrt(p * (1 - p) / n)
        assert abs(counts[rank - 1] / n - p) < 5 * se


def test_synthetic_poisson_rate_and_bursts():
    n, rate = 100_000, 500.0
    exact = SynthSpec(rate=rate, resolution_s=None)
    t = synthetic(n, seed=4, spec=exact).time_s.to_numpy()
    # n - 1 exponential gaps: the span is Gamma(n - 1, rate)
    assert abs(t[-1] - (n - 1) / rate) < 5 * math.sqrt(n - 1) / rate
    assert stats.kstest(np.diff(t) * rate, "expon").pvalue > 1e-3
    per_s = np.bincount(t.astype(int))[:-1]
    fano = per_s.var() / per_s.mean()
    assert abs(fano - 1) < 5 * math.sqrt(2 / (len(per_s) - 1))
    bursty = SynthSpec(rate=rate, resolution_s=None, burstiness=1.0, burst_s=5.0)
    tb = synthetic(n, seed=4, spec=bursty).time_s.to_numpy()
    per_s = np.bincount(tb.astype(int))[:-1]
    assert per_s.var() / per_s.mean() > 20  # rate 500 * lognormal(sigma 1) factors


def test_synthetic_sizes_splice_lognormal_and_pareto():
    spec = SynthSpec(n_objects=50_000)
    sizes = object_sizes(spec, np.random.default_rng(0)).astype(float)
    (mu, sigma), (alpha, k) = spec.size_body, spec.size_tail
    p_tail = stats.norm.sf((math.log(k) - mu) / sigma)
    share = np.mean(sizes > k)
    assert abs(share - p_tail) < 5 * math.sqrt(p_tail * (1 - p_tail) / sizes.size)
    tail = sizes[sizes > k]
    assert stats.kstest(tail[tail < spec.max_size_bytes], stats.pareto(alpha, scale=k).cdf
                        ).pvalue > 1e-3


def test_synthetic_status_and_method_rules():
    df = synthetic(20_000, seed=2)
    assert (df.size_bytes[df.status == 304] == -1).all()
    assert (df.size_bytes[df.method == "HEAD"] == -1).all()
    assert (df.size_bytes[(df.status == 404) & (df.method != "HEAD")] == 350).all()
    ok = df[(df.status == 200) & (df.method != "HEAD")]
    assert (ok.groupby("object").size_bytes.nunique() == 1).all()  # one size per object


def test_synth_spec_is_checked():
    with pytest.raises(InputError, match="status_mix probabilities"):
        SynthSpec(status_mix=((200, 0.5),))
    with pytest.raises(InputError, match="rate"):
        SynthSpec(rate=0)
    with pytest.raises(InputError, match="whole number of seconds"):
        synth_wc98("unused.wc98", 10, spec=SynthSpec(resolution_s=0.5))

