"""Samples with known parameters, shared by the workload analysis tests."""

import math

import numpy as np
from scipy import stats

# SURGE-like sizes: lognormal body, Pareto tail beyond 133 KB with 7 % of the files.
HYBRID = dict(nu=9.357, sigma=1.318, xmin=133_000.0, alpha=1.1, tail=0.07)


def hybrid_sample(rng, n, nu, sigma, xmin, alpha, tail):
    """Body: lognormal truncated to x < xmin (inverse CDF); tail: Pareto(alpha, xmin)."""
    n_tail = rng.binomial(n, tail)
    top = stats.norm.cdf((math.log(xmin) - nu) / sigma)
    body = np.exp(nu + sigma * stats.norm.ppf(rng.random(n - n_tail) * top))
    return np.r_[body, xmin * (1 - rng.random(n_tail)) ** (-1 / alpha)]


def zipf_p(n, alpha):
    """Zipf probabilities over ranks 1..n."""
    p = np.arange(1, n + 1, dtype=float) ** -alpha
    return p / p.sum()


def within(estimate, truth, se, k=4.0):
    return abs(estimate - truth) <= k * se
