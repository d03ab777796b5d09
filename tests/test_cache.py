"""Seed 001's object cache on the live server, against an independent model of it, and
the dynamic pages of session streams, which it must never store.

A Zipf-popular request trace goes through the real server, with the cache on the engine
(set-up C) and on the host thread (set-up B). Every body must be byte-exact, and the
server's hits, misses, evictions and bytes must equal those of the replayed LRU
(:func:`offloadlab.model.cache.replay`, which the hit-rate benchmark uses) under the
cache's stated rules: key = path, charge = path length + body length, bodies above the
largest object never stored.
"""

from __future__ import annotations

import http.client

import numpy as np
import pytest

from offloadlab.model import cache as lru
from offloadlab.testbed import load
from offloadlab.testbed.server import ServerOptions, running
from offloadlab.units import parse_bytes
from offloadlab.workload import fileset, stream
from offloadlab.workload.specs import FileSetSpec, SpecWeb2005Spec

N_FILES = 60
REQUESTS = 1500
BUDGET = 256 * 1024
LARGEST = 48 * 1024
LARGEST_DEFAULT = parse_bytes(ServerOptions.cache_max_object)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A document root of files of spread sizes, and a Zipf(0.8) trace over them."""
    root = tmp_path_factory.mktemp("cache-root")
    rng = np.random.default_rng(11)
    sizes = np.minimum(rng.lognormal(np.log(6000), 1.2, N_FILES).astype(int) + 1, 200_000)
    files = {}
    for i, size in enumerate(sizes):
        path = f"/o{i}.bin"
        files[path] = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        (root / path[1:]).write_bytes(files[path])
    weights = 1.0 / np.arange(1, N_FILES + 1) ** 0.8
    picks = rng.choice(N_FILES, REQUESTS, p=weights / weights.sum())
    return root, files, [f"/o{i}.bin" for i in picks]


@pytest.mark.parametrize("mode", ["engine", "inline"], ids=["set-up C", "set-up B"])
def test_the_live_cache_matches_the_replayed_lru_and_serves_exact_bytes(trace, mode, testbed):
    root, files, paths = trace
    options = ServerOptions(root, mode=mode, app_offload="cache", cache_size=BUDGET,
                            cache_max_object=LARGEST, cache_policy="lru")
    with running(options) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        for path in paths:
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200 and body == files[path], path
        conn.close()
    cache = server.final.cache
    sizes = {p: len(b) for p, b in files.items()}
    replayed = lru.replay(paths, [len(p) + sizes[p] for p in paths], BUDGET,
                          [sizes[p] <= LARGEST for p in paths])
    hit, hits = replayed.hits, int(replayed.hits.sum())
    expected = dict(evictions=replayed.evictions, entries=replayed.entries,
                    used_bytes=replayed.used, hits=hits, misses=REQUESTS - hits,
                    bytes_from_cache=sum(sizes[p] for p, h in zip(paths, hit, strict=True) if h),
                    too_large=sum(sizes[p] > LARGEST for p in paths))
    got = {k: getattr(cache, k) for k in expected if hasattr(cache, k)}
    got["hits"] += cache.revalidated
    got["too_large"] = cache.refused.too_large
    assert got == expected
    assert expected["evictions"] > 50 and 0.3 < hits / REQUESTS < 0.95
    assert server.final.requests == REQUESTS - hits  # the application saw only misses


def test_session_pages_reach_the_application_as_dynamic_work_and_are_never_cached(
        tmp_path, testbed):
    site = tmp_path / "site"
    fileset.materialise(fileset.generate(FileSetSpec(name="s", n_files=30, seed=2)), site)
    s = stream.sessions(site, "support", clients=4, sessions=3, think="det(1ms)",
                        embedded=4, app_work="det(300us)", seed=3)
    pages = int(s.frame["dynamic"].sum())
    options = ServerOptions(site, mode="engine", app_offload="cache")
    with running(options) as server:
        result = load.run(server.url, s, site, records=True)
    assert (result["completed"], result["failed"]) == (len(s), 0)  # bodies verified
    dynamic = result.records["path"].str.endswith("?work=300")
    assert dynamic.sum() == pages > 0
    doc = server.final
    cache = doc.cache
    assert cache.refused.uncacheable == pages  # no-store, every time
    assert cache.hits + cache.misses == len(s)
    app_s = doc.per_request.app_cpu_s * doc.requests
    assert app_s == pytest.approx(pages * 300e-6, rel=0.1)


def test_a_site_s_sessions_hit_the_live_cache_as_the_replay_says(tmp_path, testbed):
    spec = SpecWeb2005Spec(sessions=2, shared=3, own=2, items_per_session=20, seed=5)
    fileset.materialise(fileset.generate(spec), tmp_path / "site")
    s = stream.sessions(tmp_path / "site", "support", clients=1, sessions=6,
                        think="det(1ms)", seed=4)
    budget = 48 * 1024
    options = ServerOptions(tmp_path / "site", mode="engine", app_offload="cache",
                            cache_size=budget)
    with running(options) as server:
        result = load.run(server.url, s, tmp_path / "site")
    assert (result["completed"], result["failed"]) == (len(s), 0)
    cache = server.final.cache
    replayed = lru.replay_stream(s.frame, budget, LARGEST_DEFAULT)
    assert cache.hits + cache.revalidated == replayed.hits.sum() > 0
    assert cache.evictions == replayed.evictions > 0
    f = s.frame
    assert cache.refused.uncacheable == f["dynamic"].sum()
    assert cache.refused.too_large == f["object"].str.startswith("download/").sum() > 0
