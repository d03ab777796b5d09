"""The load generator end to end from Python: streams against a small in-test HTTP
server on loopback (started per module, always stopped), verified responses, the send
schedule, keep-alive, coordinated omission, errors, and `offload load`."""

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.testbed import cores, load
from offloadlab.workload import fileset, stream
from offloadlab.workload.specs import FileSetSpec

P_FLOOR = 0.001  # a K-S p-value below this fails (fixed seeds: deterministic)


class Handler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless the client closes
    # Headers and body go out in separate writes: with Nagle on, a keep-alive response
    # waits for the client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    stall: tuple[float, float] = (0.0, 0.0)  # responses are held during [start, end)

    def do_GET(self):
        start, end = self.stall
        now = time.monotonic()
        if start <= now < end:
            time.sleep(end - now)
        super().do_GET()

    def log_message(self, *args):  # quiet
        pass


@contextlib.contextmanager
def serving(root):
    handler = type("H", (Handler,), {})
    server_class = type("S", (ThreadingHTTPServer,), {"request_queue_size": 256})
    server = server_class(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    spec = FileSetSpec(name="site", n_files=60, max_bytes=200_000, seed=5)
    fileset.materialise(fileset.generate(spec), root)
    return root


@pytest.fixture
def server(site, testbed):
    with serving(site) as (target, handler):
        yield target, handler


def test_poisson_stream_is_sent_on_schedule_and_verified(server, site):
    target, _ = server
    s = stream.poisson(site, 300, duration_s=1.5, seed=3)
    r = load.run(target, s, site, records=True)
    assert (r["completed"], r["failed"]) == (len(s), 0)
    assert (r.records["error"] == "").all() and (r.records["status"] == 200).all()
    assert r["connections"] == len(s)  # HTTP/1.0: one connection per request
    assert r["connections_per_min"] == pytest.approx(len(s) * 60 / r["duration_s"])
    gaps = np.diff(np.sort(r.records["sent_s"].to_numpy()))
    assert stats.kstest(gaps, "expon", args=(0, 1 / 300)).pvalue > P_FLOOR
    assert r["achieved_rate"] == pytest.approx(r["offered_rate"], rel=0.02)
    assert (r.records["bytes"] == fileset.read_manifest(site).set_index("path")
            .loc[r.records["path"], "size_bytes"].to_numpy()).all()


def test_keep_alive_reuses_each_connection(server, site):
    target, _ = server
    s = stream.poisson(site, 200, count=200, keep_alive="5", seed=4)
    r = load.run(target, s, site)
    assert (r["completed"], r["failed"]) == (200, 0)
    assert r["connections"] == s.frame["conn_id"].nunique() == 40


def test_a_stalled_server_shows_in_open_loop_latency(server, site):
    # No coordinated omission: a 200 ms stall delays every request due during it, and
    # their latencies count from when they were due.
    target, handler = server
    s = stream.constant(site, 400, duration_s=1.0, seed=1)
    start = time.monotonic()
    handler.stall = (start + 0.3, start + 0.5)
    r = load.run(target, s, site, records=True)
    assert r["failed"] == 0
    assert r["total"]["p99_s"] >= 0.15
    assert (r.records["total_s"] > 0.1).mean() > 0.05


def test_closed_loop_repeat_runs_for_its_duration(server, site):
    target, _ = server
    s = stream.closed(site, 2, requests=5, keep_alive="10", seed=2)
    r = load.run(target, s, site, repeat=True, max_duration_s=0.5)
    assert r["completed"] > 10 and r["failed"] == 0
    assert r["duration_s"] == pytest.approx(0.5, abs=0.2)


def test_a_corrupt_file_is_caught_by_its_checksum(site, tmp_path, testbed):
    manifest = fileset.read_manifest(site)
    victim = manifest.iloc[0]
    copy = tmp_path / "copy"
    shutil.copytree(site, copy)
    data = bytearray((copy / victim["path"]).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / victim["path"]).write_bytes(bytes(data))
    one = manifest.iloc[[0]]
    s = stream.poisson(one, 100, count=20, seed=1)
    with serving(copy) as (corrupt, _):
        r = load.run(corrupt, s, one)
        assert r["errors"]["bad_content"] == 20
        assert load.run(corrupt, s, one, verify="length")["failed"] == 0


def _pinned_threads(target, site, requests=None, **options) -> dict[int, int]:
    """Run a short load (default: Poisson) pinned to the last core; the new threads
    found on that core alone while it ran, with their niceness."""
    core = max(os.sched_getaffinity(0))
    others = {int(t) for t in os.listdir("/proc/self/task")}
    pinned = {}

    def look(_control):
        for tid in {int(t) for t in os.listdir("/proc/self/task")} - others:
            with contextlib.suppress(OSError):
                if os.sched_getaffinity(tid) == {core}:
                    pinned[tid] = os.getpriority(os.PRIO_PROCESS, tid)

    s = requests or stream.poisson(site, 200, duration_s=1.0, seed=2)
    r = load.run(target, s, site, threads=2, cores=[core], progress=look, **options)
    assert r["failed"] == 0
    return pinned


def test_generator_threads_run_on_the_cores_given(server, site):
    target, _ = server
    assert len(_pinned_threads(target, site)) >= 2
    with pytest.raises(InputError, match="may run on cores"):
        load.run(target, stream.poisson(site, 200, count=5, seed=2), site, cores=[100_000])


def test_pinned_generator_threads_run_ahead_of_a_spinning_server(server, site):
    # Beside a spinning SQPOLL thread a generator at nice 0 waited for its time slice
    # (open loop) or got half the core (closed loop), and beside an engine that sleeps a
    # generator at -20 held it off its core (docs/testbed.md): pinned beside a spinner,
    # in an open or a closed loop, it takes the shared-core niceness; otherwise the
    # niceness it inherits (nice 0 leaves it), or the one given.
    target, _ = server
    inherited = os.nice(0)
    expected = cores.SHARED_CORE_NICE if os.geteuid() == 0 else inherited
    assert set(_pinned_threads(target, site, beside_spinner=True).values()) == {expected}
    assert set(_pinned_threads(target, site).values()) == {inherited}
    assert set(_pinned_threads(target, site, nice=7, beside_spinner=True).values()) == {7}
    closed = stream.closed(site, 4, think="exp(mean=10ms)", requests=50, seed=2)
    assert set(_pinned_threads(target, site, requests=closed,
                               beside_spinner=True).values()) == {expected}
    assert set(_pinned_threads(target, site, requests=closed).values()) == {inherited}
    s = stream.poisson(site, 200, count=5, seed=2)
    for bad in (-21, 20, 1.5):
        with pytest.raises(InputError, match="nice"):
            load.run(target, s, site, nice=bad)
    with pytest.raises(InputError, match="busy_poll_s"):
        load.run(target, s, site, nice=-1, busy_poll_s=0.001)


def test_a_read_mark_keeps_every_answer_correct(server, site):
    # http.server writes head and body apart. With a mark of 4096 the larger answers
    # wake the generator once 4096 of their bytes are there, smaller ones at their size:
    # every answer still arrives whole and checks out.
    target, _ = server
    s = stream.closed(site, 4, requests=60, keep_alive="20", seed=6)
    plain = load.run(target, s, site, records=True)
    marked = load.run(target, s, site, records=True, rcvlowat=4096)
    for r in (plain, marked):
        assert (r["completed"], r["failed"]) == (240, 0)
        assert (r.records["error"] == "").all()
    assert marked["body_bytes"] == plain["body_bytes"]
    with pytest.raises(InputError, match="rcvlowat"):
        load.run(target, s, site, rcvlowat=-1)


def test_discarded_bodies_are_still_counted_and_held_to_their_size(server, site):
    # Bodies dropped in the kernel unread: the same bytes counted, every answer whole.
    target, _ = server
    s = stream.closed(site, 4, requests=60, keep_alive="20", seed=6)
    plain = load.run(target, s, site, verify="length", records=True)
    dropped = load.run(target, s, site, verify="length", records=True, discard=True)
    for r in (plain, dropped):
        assert (r["completed"], r["failed"]) == (240, 0)
        assert (r.records["error"] == "").all()
    assert dropped["body_bytes"] == plain["body_bytes"] > 0
    with pytest.raises(InputError, match="checksummed"):
        load.run(target, s, site, discard=True)  # verify defaults to checksum


def test_bad_targets_and_streams_are_refused(site, testbed):
    s = stream.poisson(site, 10, count=5, seed=1)
    with pytest.raises(InputError, match="loopback"):
        load.run("10.1.2.3:80", s, site)
    with pytest.raises(InputError, match="HOST:PORT"):
        load.run("ftp://127.0.0.1:21", s, site)
    other = pd.DataFrame({"path": ["elsewhere.bin"], "size_bytes": [10], "probability": [1.0]})
    with pytest.raises(InputError, match="not in the manifest"):
        load.run("127.0.0.1:9", stream.poisson(other, 10, count=3), site)


def test_a_refused_port_is_counted_not_raised_and_recorded_by_name(site, testbed):
    s = stream.poisson(site, 50, count=10, seed=1)
    r = load.run("127.0.0.1:9", s, site, timeout_s=1.0, records=True)
    assert r["errors"]["connect_refused"] == 10 and r["completed"] == 0
    assert (r.records["error"] == "connect_refused").all()


def test_head_requests_check_the_length_even_when_checksums_are_asked(server, site):
    target, _ = server
    s = stream.poisson(site, 100, count=20, seed=2)
    r = load.run(target, s, site, method="HEAD", verify="checksum", records=True)
    assert (r["completed"], r["failed"], r["body_bytes"]) == (20, 0, 0)
    assert (r.records["error"] == "").all()


runner = CliRunner()


def test_cli_load_json_and_records(server, site, tmp_path):
    target, _ = server
    records = tmp_path / "r.parquet"
    res = runner.invoke(app, ["load", target, "--objects", str(site), "--rate", "100",
                              "--duration", "0.5s", "--records", str(records), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["failed"] == 0 and doc["completed"] > 20
    assert len(pd.read_parquet(records)) == doc["completed"]


def test_cli_load_text_summary_shows_connections_per_minute(server, site):
    target, _ = server
    res = runner.invoke(app, ["load", target, "--objects", str(site), "--rate", "100",
                              "--duration", "0.3s"])
    assert res.exit_code == 0, res.output
    per_min = re.search(r"([\d,]+) connections \(mean connect [\d.]+ ms, ([\d,]+)/min\)",
                        " ".join(res.output.split()))
    assert per_min, res.output
    connections, rate = (int(g.replace(",", "")) for g in per_min.groups())
    assert connections > 10 and rate > connections  # a run of under a minute


def test_cli_load_steps_stop_at_the_bound(server, site):
    target, _ = server
    res = runner.invoke(app, ["load", target, "--objects", str(site), "--steps", "50:150:50",
                              "--duration", "0.3s", "--stop-p99", "1us", "--json"])
    assert res.exit_code == 0, res.output
    steps = json.loads(res.stdout)["steps"]
    assert len(steps) == 1 and "p99" in steps[0]["stop_reason"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--rate", "10", "--clients", "2"], "give one of"),
    (["--rate", "10", "--duration", "soon"], "--duration"),
    (["--steps", "10:5:1"], "--steps"),
    (["--rate", "10", "--verify", "md5"], "verify"),
])
def test_cli_load_bad_flags_exit_2(site, args, fragment):
    res = runner.invoke(app, ["load", "127.0.0.1:9", "--objects", str(site), *args])
    assert res.exit_code == 2, res.output
    assert fragment in res.output


def _installed(name: str) -> str:
    """A console script of this environment (pip puts it beside the interpreter)."""
    script = Path(sys.executable).with_name(name)
    assert script.exists(), f"{name} is not installed beside {sys.executable}"
    return str(script)


def test_the_installed_offload_load_command_runs_refuses_bad_input_and_stops_on_ctrl_c(
        server, site, testbed):
    target, _ = server
    first = next(p for p in sorted(site.rglob("*.bin")))
    url = f"http://{target}/{first.relative_to(site).as_posix()}"
    ran = subprocess.run([_installed("offload-load"), url, "--clients", "2", "--requests",
                          "40", "--json"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["completed"] == 40
    bad = subprocess.run([_installed("offload-load"), "https://example.com/"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "https is not supported" in bad.stderr
    # A 60 s run interrupted after 1 s: it stops within seconds and still reports.
    long = subprocess.Popen([_installed("offload-load"), url, "--clients", "2",
                             "--duration", "60s"], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    long.send_signal(signal.SIGINT)
    stdout, _ = long.communicate(timeout=10)
    assert long.returncode == 130
    assert "status" in stdout
