"""The closed-network simulator against independent truth: the finite-source M/M/1 and
the machine-repair model (m servers) in closed form, and exact MVA on a multi-class
network where MVA is exact (processor sharing, one server per queueing station).

Seeds are fixed. A closed form is met within three 95% half-widths; MVA, whose numbers
are exact here too, within max(3 half-widths, 2%). The coverage test checks that the
half-widths are honest: that a 95% interval misses about 5% of the time.
"""

import math

import numpy as np
import pytest
from scipy import stats

from offloadlab.errors import InputError
from offloadlab.model import mva
from offloadlab.sim import closed

REQUESTS = 100_000


def machine_repair(n: int, m: int, d: float, z: float) -> tuple[float, float]:
    """Throughput and response time of n customers thinking Exp(z) in front of m
    exponential servers of mean d: P(k there) is proportional to n!/(n-k)! (d/z)^k
    / (k! for k <= m, m! m^(k-m) above), X = E[min(k, m)] / d, R = n / X - z."""
    weights = [math.factorial(n) / math.factorial(n - k) * (d / z) ** k
               / (math.factorial(k) if k <= m else math.factorial(m) * m ** (k - m))
               for k in range(n + 1)]
    x = sum(min(k, m) * w for k, w in enumerate(weights)) / sum(weights) / d
    return x, n / x - z


def within(estimate, half_width, truth, floor=0.0) -> bool:
    return abs(estimate - truth) <= max(3 * half_width, floor * abs(truth))


def two_class_network() -> mva.Network:
    return mva.Network.of([[0.020, 0.010, 0.005], [0.004, 0.030, 0.012]], [3, 2],
                          think=[0.1, 0.05], delay=[False, False, True])


@pytest.mark.parametrize("n", [1, 3, 10])
def test_one_queue_is_the_finite_source_mm1(n):
    d, z = 0.01, 0.05
    r = closed.simulate(mva.Network.of([[d]], [n], think=[z]), requests=REQUESTS, seed=n)
    x, response = machine_repair(n, 1, d, z)
    assert within(r.throughput[0], r.throughput_hw[0], x)
    assert within(r.response[0], r.response_hw[0], response)
    assert r.utilisation[0] == pytest.approx(r.throughput[0] * d, rel=0.01)
    assert r.requests == REQUESTS


def test_two_classes_three_stations_match_exact_mva():
    net = two_class_network()
    r = closed.simulate(net, requests=REQUESTS, seed=3)
    sol = mva.exact(net)
    for c in range(2):
        assert within(r.throughput[c], r.throughput_hw[c], sol.throughput[c], 0.02)
        assert within(r.response[c], r.response_hw[c], sol.response[c], 0.02)
    assert r.residence.shape == sol.residence.shape == r.queue.shape
    assert r.utilisation.shape == sol.utilisation.shape
    # Delay station: the mean number there, as MVA reports it.
    assert r.utilisation[2] == pytest.approx(r.queue[:, 2].sum(), rel=1e-9)


@pytest.mark.parametrize("n", [4, 8, 16])
def test_four_servers_match_the_machine_repair_model(n):
    m, d, z = 4, 0.01, 0.01
    r = closed.simulate(mva.Network.of([[d]], [n], think=[z], servers=[m]),
                        requests=REQUESTS, seed=n)
    x, response = machine_repair(n, m, d, z)
    assert within(r.throughput[0], r.throughput_hw[0], x)
    assert within(r.response[0], r.response_hw[0], response)
    assert r.utilisation[0] == pytest.approx(x * d / m, rel=0.02)


@pytest.mark.parametrize("m", [2, 4, 8])
def test_the_simulator_resolves_seidmanns_error_at_the_knee(m):
    # At the knee, N = m (1 + Z/D), Seidmann's MVA under-estimates X by 6-8%.
    d = z = 0.01
    net = mva.Network.of([[d]], [2 * m], think=[z], servers=[m])
    r = closed.simulate(net, requests=REQUESTS, seed=m)
    x, _ = machine_repair(2 * m, m, d, z)
    assert within(r.throughput[0], r.throughput_hw[0], x)
    assert r.throughput[0] - mva.exact(net).throughput[0] > 3 * r.throughput_hw[0]


def test_intervals_cover_the_truth_at_their_nominal_rate():
    # X and R of the machine-repair model over 40 seeds: 80 intervals. The bound is
    # what 95% coverage would fall below with probability 0.5% at most.
    n, m, d, z = 8, 4, 0.01, 0.01
    net = mva.Network.of([[d]], [n], think=[z], servers=[m])
    x, response = machine_repair(n, m, d, z)
    runs = [closed.simulate(net, requests=20_000, seed=s) for s in range(100, 140)]
    covered = sum(abs(r.throughput[0] - x) <= r.throughput_hw[0] for r in runs) \
        + sum(abs(r.response[0] - response) <= r.response_hw[0] for r in runs)
    assert covered >= stats.binom.ppf(0.005, 2 * len(runs), 0.95)


def test_a_seed_gives_the_same_result_and_another_seed_another():
    net = two_class_network()
    a, b = (closed.simulate(net, requests=10_000, seed=7) for _ in range(2))
    for key in ("throughput", "response", "residence", "queue", "utilisation",
                "throughput_hw", "response_hw"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key
    assert a.events == b.events
    other = closed.simulate(net, requests=10_000, seed=8)
    assert not np.array_equal(a.response, other.response)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    (dict(requests=999), "requests"),
    (dict(requests=5000.5), "requests"),
    (dict(seed=-1), "seed"),
    (dict(net=[[0.1]]), "net"),
    (dict(net=mva.Network.of([[0.1]], [0])), "population"),
])
def test_bad_input_is_refused_naming_the_argument(kwargs, fragment):
    args = dict(net=two_class_network(), requests=REQUESTS, seed=1) | kwargs
    with pytest.raises(InputError, match=fragment):
        closed.simulate(**args)
