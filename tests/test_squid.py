"""Squid as seed 001's reverse proxy (offloadlab.testbed.squid) in front of the testbed
server: byte-exact bodies, hits counted from its log, pinned to a core, and always
stopped and cleaned up. CI installs squid (.ci/run)."""

from __future__ import annotations

import os
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from offloadlab.errors import InputError, RunError
from offloadlab.experiments import appcache
from offloadlab.testbed import cores, squid
from offloadlab.testbed.server import ServerOptions, running
from offloadlab.workload.classes import MiB


@pytest.fixture(scope="module")
def origin(served_set, testbed):
    """The testbed server, cache off, as the origin of every Squid here."""
    with running(ServerOptions(served_set)) as server:
        yield server


def _options(origin, **changes) -> squid.SquidOptions:
    return squid.SquidOptions(**{"origin_port": origin.port, "cache_bytes": 8 * MiB,
                                 "max_object_bytes": MiB, **changes})


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def _run_s(pid: int) -> float:
    """The time the scheduler ran the process's threads, seconds (schedstat's first
    field, nanoseconds): an account independent of /proc/PID/stat's clock ticks."""
    return sum(int((task / "schedstat").read_text().split()[0])
               for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("setup", ["B", "C"])
def test_squid_serves_byte_exact_counts_repeats_as_hits_and_runs_pinned(origin, served_set,
                                                                         setup, squid_binary):
    host, engine = cores.choose()
    core = host if setup == "B" else engine
    files = sorted(p for p in served_set.rglob("*") if p.is_file()
                   and p.stat().st_size < MiB and not p.name.endswith(".json"))[:5]
    with squid.running(_options(origin, core=core)) as proxy:
        start = proxy.mark()
        before = proxy.cpu_s(), _run_s(proxy.pid), time.monotonic()
        for _ in range(2):
            for path in files:
                body = _get(proxy.url + path.relative_to(served_set).as_posix())
                assert body == path.read_bytes()
        allowed = Path(f"/proc/{proxy.pid}/status").read_text().split(
            "Cpus_allowed_list:")[1].split()[0]
        if core is not None:
            assert allowed == str(core)
        live = proxy.counts(proxy.mark())
        after = proxy.cpu_s(), _run_s(proxy.pid), time.monotonic()
    # cpu_s() reads clock ticks, user and system apart, each rounded down; the
    # scheduler's own account in nanoseconds must match it within those two roundings,
    # over Squid's life (its start-up alone took 60 ms here, six ticks) and over the
    # requests (6 ms). Serving them took some CPU, and no more than the wall time on
    # the one core Squid runs on.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert after[0] == pytest.approx(after[1], abs=2 * tick)
    assert after[0] - before[0] == pytest.approx(after[1] - before[1], abs=2 * tick)
    assert 0 < after[1] - before[1] <= after[2] - before[2]
    # The first round missed, the second hit every file; the log is kept after exit.
    assert proxy.counts(start) == squid.LogCounts(hits=len(files), misses=len(files))
    assert live.served == 0
    assert _gone(proxy.pid) and not proxy.folder.exists()


def test_an_uncacheable_answer_is_always_a_miss(origin, served_set, squid_binary):
    path = next(p for p in sorted(served_set.rglob("*")) if p.is_file()
                and not p.name.endswith(".json"))
    url_path = path.relative_to(served_set).as_posix()
    with squid.running(_options(origin)) as proxy:
        start = proxy.mark()
        for _ in range(3):  # a dynamic page: the origin answers no-store
            assert _get(f"{proxy.url}{url_path}?work=10") == path.read_bytes()
    assert proxy.counts(start) == squid.LogCounts(misses=3)


def test_squid_is_stopped_and_cleaned_up_when_the_body_raises(origin, squid_binary):
    with pytest.raises(KeyboardInterrupt), squid.running(_options(origin)) as proxy:
        raise KeyboardInterrupt
    assert _gone(proxy.pid) and not proxy.folder.exists()
    assert not list(Path("/dev/shm").glob(f"offloadlab{os.getpid()}n*"))


def test_a_squid_that_cannot_start_is_a_run_error_with_its_reason(origin, monkeypatch,
                                                                  squid_binary):
    config = squid.config
    monkeypatch.setattr(squid, "config", lambda *a: config(*a) + "cache_mem lots\n")
    folders = set(Path(tempfile.gettempdir()).glob("offloadlab-squid-*"))
    with pytest.raises(RunError, match=r"squid exited .*lots"), \
            squid.running(_options(origin)):
        pass
    assert set(Path(tempfile.gettempdir()).glob("offloadlab-squid-*")) <= folders


def test_a_missing_squid_says_how_to_install_it(monkeypatch, small_site):
    monkeypatch.setattr(squid.shutil, "which", lambda *a, **k: None)
    with pytest.raises(RunError, match="apt-get install squid"):
        squid.binary()
    with pytest.raises(RunError, match="apt-get install squid"):
        _experiment(small_site, proxy="squid").check()
    _experiment(small_site, proxy="emulated").check()  # no Squid needed


def test_the_config_binds_loopback_and_maps_the_policy(tmp_path):
    options = squid.SquidOptions(8080, 10 * MiB, MiB, "gdsf")
    text = squid.config(options, 3999, tmp_path, "proxy")
    assert "http_port 127.0.0.1:3999 accel" in text
    assert "cache_peer 127.0.0.1 parent 8080 0 no-query no-digest originserver" in text
    assert f"cache_mem {10 * MiB} bytes" in text and "cache_dir" not in text
    assert f"maximum_object_size_in_memory {MiB} bytes" in text
    assert "memory_replacement_policy heap GDSF" in text and "workers 1" in text
    assert f"access_log stdio:{tmp_path / 'access.log'}" in text
    for bad, field in (({"policy": "fifo"}, "policy"), ({"core": 999}, "core"),
                       ({"cache_bytes": 0}, "cache_bytes")):
        with pytest.raises(InputError, match=field):
            squid.SquidOptions(**{"origin_port": 8080, "cache_bytes": 10 * MiB,
                                  "max_object_bytes": MiB, **bad}).check()


def test_the_log_counts_hits_and_misses_and_counts_what_it_cannot_read():
    lines = [
        "1795742983.369 0 127.0.0.1 TCP_MISS/200 5320 GET http://o/a - FIRSTUP_PARENT/x t",
        "1795742983.370 0 127.0.0.1 TCP_MEM_HIT/200 5326 GET http://o/a - HIER_NONE/- t",
        "1795742983.371 0 127.0.0.1 TCP_HIT/200 5326 GET http://o/a - HIER_NONE/- t",
        "1795742983.372 1 127.0.0.1 TCP_REFRESH_UNMODIFIED/200 9 GET http://o/a - x/y t",
        "1795742983.373 1 127.0.0.1 TCP_REFRESH_MODIFIED/200 9 GET http://o/a - x/y t",
        "1795742983.374 1 127.0.0.1 TCP_MISS_ABORTED/200 9 GET http://o/a - x/y t",
        "1795742983.375 0 127.0.0.1 NONE_NONE/000 0 - error:transaction-end - HIER_NONE/- -",
        "1795742983.376 0 127.0.0.1 TCP_DENIED/403 0 GET http://o/a - HIER_NONE/- -",
        "garbage", "1 2 3 TCP_HIT/abc 5 6 7", "", "\x00\xff half a line",
    ]
    counts = squid.count_log(lines)
    assert counts == squid.LogCounts(hits=3, misses=3, other=2, unparsed=3)
    assert counts.hit_rate == 0.5 and squid.LogCounts().hit_rate is None


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    from offloadlab.workload import fileset
    from offloadlab.workload.specs import SpecWeb2005Spec

    root = tmp_path_factory.mktemp("squid-site")
    fileset.materialise(fileset.generate(SpecWeb2005Spec(name="s", sessions=2, shared=4,
                                                         own=2, items_per_session=3)), root)
    return root


def _experiment(root, **changes) -> appcache.Experiment:
    return appcache.Experiment(root, appcache.read_site(root), appcache.budget("quick"),
                               **changes)


def test_a_bad_proxy_is_an_input_error_naming_the_field(small_site):
    with pytest.raises(InputError, match="proxy 'nginx'"):
        _experiment(small_site, proxy="nginx").check()
    exp = _experiment(small_site, proxy="both", host_core=0, engine_core=1)
    assert exp.variants() == [("A", "none"), ("B", "emulated"), ("C", "emulated"),
                              ("B", "squid"), ("C", "squid")]
    assert len(exp.plan()) == 2 * (1 + 4 * 2)
    # Squid gets the emulated cache's size and largest object, on B's or C's core.
    b, c = (exp.squid_options(s, 10, 8080) for s in ("B", "C"))
    assert (b.cache_bytes, b.max_object_bytes, b.core, c.core) == (10 * MiB, MiB, 0, 1)
