"""Mean value analysis against independent truth: the finite-source M/M/1 in closed
form, the multi-class product form by brute-force normalisation, the asymptotic bounds,
and Schweitzer's approximation against exact MVA."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloadlab.errors import InputError
from offloadlab.model import mva


@pytest.mark.parametrize("n", [1, 2, 5, 20])
def test_one_class_one_queue_is_the_finite_source_mm1(n):
    d, z = 0.01, 0.05
    sol = mva.exact(mva.Network.of([[d]], [n], think=[z]))
    # P(k at the server) is proportional to n! / (n - k)! (d / z)^k.
    weights = [math.factorial(n) / math.factorial(n - k) * (d / z) ** k for k in range(n + 1)]
    busy = 1 - weights[0] / sum(weights)
    assert sol.utilisation[0] == pytest.approx(busy, rel=1e-12)
    assert sol.throughput[0] == pytest.approx(busy / d, rel=1e-12)
    # Little on the loop of thinking and being served.
    assert sol.response[0] == pytest.approx(n / sol.throughput[0] - z, rel=1e-12)


def product_form_throughput(demands, population, think, delay):
    """X_c = G(N - e_c) / G(N), with G summed over every placement of the customers."""
    demands = np.asarray(demands, float)
    n_classes, n_stations = demands.shape

    def g(pop):
        total = 0.0
        # Each class's customers spread over the stations and its think station.
        spreads = [[s for s in itertools.product(range(p + 1), repeat=n_stations + 1)
                    if sum(s) == p] for p in pop]
        for placement in itertools.product(*spreads):
            term = 1.0
            for k in range(n_stations + 1):
                counts = [placement[c][k] for c in range(n_classes)]
                if k == n_stations or delay[k]:  # infinite server: prod x^n / n!
                    weights = [think[c] if k == n_stations else demands[c, k]
                               for c in range(n_classes)]
                    term *= math.prod(w ** m / math.factorial(m)
                                      for w, m in zip(weights, counts, strict=True))
                else:  # single server: (sum n)! / prod n! * prod d^n
                    term *= math.factorial(sum(counts)) * math.prod(
                        demands[c, k] ** m / math.factorial(m)
                        for c, m in enumerate(counts))
            total += term
        return total
    full = g(population)
    return [g([p - (j == c) for j, p in enumerate(population)]) / full
            for c in range(n_classes)]


def test_two_classes_over_three_stations_match_the_product_form():
    demands = [[0.020, 0.010, 0.005], [0.004, 0.030, 0.012]]
    population, think, delay = [3, 2], [0.1, 0.05], [False, False, True]
    sol = mva.exact(mva.Network.of(demands, population, think, delay))
    truth = product_form_throughput(demands, population, think, delay)
    assert sol.throughput == pytest.approx(truth, rel=1e-10)
    # Utilisation law and Little per class.
    busy = (sol.throughput[:, None] * np.array(demands)).sum(0)
    assert sol.utilisation == pytest.approx(busy, rel=1e-12)
    cycle = np.array(population) / sol.throughput
    assert sol.response + np.array(think) == pytest.approx(cycle, rel=1e-12)


@given(st.integers(1, 60), st.floats(0.0, 2.0), st.floats(1e-3, 0.1), st.floats(1e-3, 0.1))
def test_throughput_respects_the_asymptotic_bounds(n, z, d1, d2):
    sol = mva.exact(mva.Network.of([[d1, d2]], [n], think=[z]))
    total = d1 + d2
    assert sol.throughput[0] <= min(n / (total + z), 1 / max(d1, d2)) * (1 + 1e-9)
    assert sol.throughput[0] >= n / (n * total + z) * (1 - 1e-9)  # everyone queued behind everyone


@pytest.mark.parametrize(("population", "x_error", "r_error"), [
    ([10, 10], 0.08, 0.15),    # near the knee, where Schweitzer errs most
    ([40, 25], 0.05, 0.08),
    ([150, 150], 0.01, 0.01),  # asymptotically exact
])
def test_schweitzer_is_close_to_exact_and_closer_far_from_the_knee(population, x_error,
                                                                   r_error):
    demands = [[0.02, 0.01, 0.03], [0.01, 0.04, 0.005]]
    net = mva.Network.of(demands, population, think=[0.5, 0.2])
    exact, approx = mva.exact(net), mva.approximate(net)
    assert approx.throughput == pytest.approx(exact.throughput, rel=x_error)
    assert approx.response == pytest.approx(exact.response, rel=r_error)
    assert approx.iterations > 1
    # One customer alone never queues: then the approximation is exact.
    alone = mva.Network.of(demands[:1], [1], think=[0.5])
    assert mva.approximate(alone).throughput == pytest.approx(mva.exact(alone).throughput, rel=1e-9)


def test_a_delay_station_adds_its_demand_and_no_queue():
    with_delay = mva.exact(mva.Network.of([[0.01, 0.2]], [30], delay=[False, True]))
    as_think = mva.exact(mva.Network.of([[0.01]], [30], think=[0.2]))
    assert with_delay.throughput == pytest.approx(as_think.throughput, rel=1e-12)
    assert with_delay.residence[0, 1] == 0.2


def machine_repair_throughput(n, m, d, z):
    """N customers thinking Z, m servers of mean D: P(k busy or waiting) is proportional
    to n! / (n - k)! (d / z)^k / (k! below m, m! m^(k - m) above)."""
    weights = [math.factorial(n) / math.factorial(n - k) * (d / z) ** k
               / (math.factorial(k) if k <= m else math.factorial(m) * m ** (k - m))
               for k in range(n + 1)]
    return sum(min(k, m) * w for k, w in enumerate(weights)) / sum(weights) / d


@pytest.mark.parametrize("m", [2, 4, 8])
def test_seidmann_multi_server_is_exact_at_both_ends_and_close_between(m):
    d, errors = 0.01, []
    for n in (1, 2, 4, 8, 16, 32, 64):
        for z in (0.01, 0.05, 0.2):
            net = mva.Network.of([[d]], [n], think=[z], servers=[m])
            sol = mva.exact(net)
            truth = machine_repair_throughput(n, m, d, z)
            errors.append(abs(sol.throughput[0] / truth - 1))
            if n == 1:
                assert sol.throughput[0] == pytest.approx(truth, rel=1e-12)
                assert sol.response[0] == pytest.approx(d, rel=1e-12)
            assert sol.utilisation[0] == pytest.approx(sol.throughput[0] * d / m, rel=1e-12)
            assert sol.queue.sum() == pytest.approx(sol.throughput[0] * sol.response[0])
            approx = mva.approximate(net)
            assert approx.residence.shape == (1, 1)
    # Its known weak spot is the knee, N near m (1 + Z / D): 6.6-7.7% off there, at Z = D.
    assert max(errors) < 0.08
    saturated = mva.exact(mva.Network.of([[d]], [400], think=[0.0], servers=[m]))
    assert saturated.throughput[0] == pytest.approx(m / d, rel=1e-6)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    (dict(demands=[[-1.0]], population=[1]), "demands"),
    (dict(demands=[[0.1]], population=[1.5]), "population"),
    (dict(demands=[[0.1]], population=[1], think=[-1.0]), "think"),
    (dict(demands=[[0.1, 0.1]], population=[1], delay=[True]), "delay"),
    (dict(demands=[[0.0]], population=[3]), "no demand and no think time"),
    (dict(demands=[[0.1]], population=[1], servers=[0]), "servers"),
])
def test_bad_networks_are_refused_naming_the_argument(kwargs, fragment):
    with pytest.raises(InputError, match=fragment):
        mva.Network.of(**kwargs)


def test_too_large_a_population_for_exact_mva_says_to_approximate():
    net = mva.Network.of([[0.01], [0.01]], [1000, 1000])
    with pytest.raises(InputError, match="approximate"):
        mva.exact(net)
    assert mva.approximate(net).throughput.sum() == pytest.approx(100.0, rel=1e-3)  # saturated
