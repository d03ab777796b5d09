"""Che's approximation of an LRU cache's hit ratio against the replayed LRU
(:func:`offloadlab.model.cache.replay`) fed the same independent Zipf requests, with
equal and with spread sizes."""

import numpy as np
import pytest

from offloadlab.errors import InputError
from offloadlab.model import cache
from offloadlab.workload.popularity import zipf_probabilities


def simulated_lru(p, sizes, capacity, n_requests, seed):
    """Hit ratio and byte hit ratio of an LRU cache replayed over IRM requests (the
    first half warms it up)."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(p), n_requests, p=p)
    size = sizes[picks]
    hits = cache.replay(picks.tolist(), size.tolist(), capacity, [True] * n_requests).hits
    measured = slice(n_requests // 2, None)
    return hits[measured].mean(), size[measured][hits[measured]].sum() / size[measured].sum()


@pytest.mark.parametrize(("alpha", "cached"), [(0.6, 0.05), (0.8, 0.1), (1.0, 0.02),
                                               (1.2, 0.2)])
def test_che_matches_a_simulated_lru_with_equal_sizes(alpha, cached):
    p = zipf_probabilities(2000, alpha)
    sizes = np.full(2000, 1000.0)
    che = cache.lru(p, sizes, cached * sizes.sum())
    hit, byte_hit = simulated_lru(p, sizes, cached * sizes.sum(), 200_000, seed=3)
    assert che.requests == pytest.approx(hit, abs=0.01)
    assert che.bytes == pytest.approx(byte_hit, abs=0.01)
    assert 0 < che.requests < 1 and np.isfinite(che.characteristic)


def test_che_matches_a_simulated_lru_with_spread_sizes():
    rng = np.random.default_rng(5)
    p = rng.permutation(zipf_probabilities(3000, 0.9))  # popularity independent of size
    sizes = np.ceil(rng.lognormal(np.log(8000), 1.2, 3000))
    capacity = 0.1 * sizes.sum()
    che = cache.lru(p, sizes, capacity)
    hit, byte_hit = simulated_lru(p, sizes, capacity, 200_000, seed=7)
    assert che.requests == pytest.approx(hit, abs=0.015)
    assert che.bytes == pytest.approx(byte_hit, abs=0.015)


def test_more_cache_or_more_skew_never_lowers_the_hit_ratio_and_a_big_cache_holds_all():
    p, sizes = zipf_probabilities(500, 0.8), np.full(500, 10.0)
    ratios = [cache.lru(p, sizes, c).requests for c in (0, 100, 500, 1000, 4999)]
    assert ratios == sorted(ratios) and ratios[0] == 0
    whole = cache.lru(p, sizes, 5000)
    assert whole.requests == 1 and whole.characteristic == np.inf
    skew = [cache.lru(zipf_probabilities(500, a), sizes, 500).requests
            for a in (0.0, 0.5, 1.0, 1.5)]
    assert skew == sorted(skew)
    assert skew[0] == pytest.approx(0.1)  # uniform: the share of objects held
    # An object larger than the cache never hits.
    assert cache.lru([0.5, 0.5], [10.0, 1000.0], 100.0).per_object.tolist() == [1.0, 0.0]


@pytest.mark.parametrize(("args", "fragment"), [
    (([0.5], [1.0, 2.0], 10.0), "one of each"),
    (([-0.5, 1.5], [1.0, 2.0], 10.0), "probabilities"),
    (([0.5, 0.5], [0.0, 2.0], 10.0), "sizes"),
    (([0.5, 0.5], [1.0, 2.0], -1.0), "capacity"),
])
def test_bad_inputs_are_refused_naming_them(args, fragment):
    with pytest.raises(InputError, match=fragment):
        cache.lru(*args)
    with pytest.raises(InputError, match="alpha"):
        zipf_probabilities(10, -1.0)
