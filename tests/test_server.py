"""The testbed server from Python: byte-exact downloads of every size class in each mode
(http.client with keep-alive, curl over HTTP/1.0 and 1.1), the option checks, the
in-process runner (stats endpoint, final document, stop on error, engine takeover),
`offload serve` as a process stopped by SIGTERM or SIGINT, and `offload testbed run`.

Every server listens on an ephemeral loopback port and is stopped by its context
manager or, for processes, killed in a finally."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import http.client
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError, RunError
from offloadlab.testbed.server import MODES, ServerOptions, running

KIB, MIB = 1024, 1024 * 1024
# One file per size class, plus the empty file: (path, size).
FILES = [("empty.bin", 0), ("c0/one.bin", KIB), ("c1/ten.bin", 10 * KIB),
         ("c2/hundred.bin", 100 * KIB), ("c3/mib.bin", MIB), ("c4/ten-mib.bin", 10 * MIB)]
CURL = shutil.which("curl") or "/usr/bin/curl"
CORES = os.cpu_count() or 1


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, bytes]:
    """The files on disk, and their contents by URL path."""
    root = tmp_path_factory.mktemp("site")
    rng = np.random.default_rng(7)
    contents = {}
    for path, size in FILES:
        data = rng.bytes(size)
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        contents[f"/{path}"] = data
    return {"root": root, "files": contents}


def options_for(root: Path, mode: str, **changes) -> ServerOptions:
    """Host and engine on different cores where there are two."""
    cores = dict(host_core=0, engine_core=1) if mode != "inline" and CORES >= 2 else {}
    return ServerOptions(root=root, mode=mode, **cores, **changes)


@pytest.fixture(params=MODES)
def served(request, site, testbed):
    """A server per test (starting one takes milliseconds), so a failure shows in the test
    that met it."""
    with running(options_for(site["root"], request.param)) as server:
        yield server


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_http_client_gets_every_class_byte_exact_on_one_kept_connection(served, site):
    conn = http.client.HTTPConnection(served.host, served.port, timeout=10)
    try:
        first = None
        for path, data in site["files"].items():
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200, path
            assert response.getheader("Content-Length") == str(len(data))
            assert (len(body), digest(body)) == (len(data), digest(data)), path
            first = first or conn.sock
            assert conn.sock is first, "the connection was not kept alive"
        conn.request("HEAD", "/c4/ten-mib.bin")
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, b"")
        assert response.getheader("Content-Length") == str(10 * MIB)
        conn.request("GET", "/no/such/file")
        response = conn.getresponse()
        response.read()
        assert response.status == 404
    finally:
        conn.close()


@pytest.mark.parametrize("version", ["--http1.0", "--http1.1"])
def test_curl_gets_every_class_byte_exact(served, site, version):
    assert Path(CURL).exists(), "these tests need curl (apt-get install curl)"
    urls = [f"{served.url.rstrip('/')}{path}" for path in site["files"]]
    done = subprocess.run([CURL, "-s", "--fail", version, *urls], capture_output=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    expected = b"".join(site["files"].values())
    assert (len(done.stdout), digest(done.stdout)) == (len(expected), digest(expected))


def test_running_keeps_the_final_document_and_serves_live_stats(site, testbed):
    with running(ServerOptions(site["root"], stats_endpoint=True)) as server:
        assert server.url == f"http://127.0.0.1:{server.port}/"
        conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
        conn.request("GET", "/c0/one.bin")
        conn.getresponse().read()
        conn.close()
        live = server.stats()
        assert live.final is False and live.requests == 2  # the file, then the stats
        assert server.final is None
    final = server.final
    assert final.final is True and final.mode == "inline" and final.port == server.port
    assert final.requests == 2 and final.statuses == {"200": 2}
    assert final.per_request.host_cpu_s > 0
    with running(ServerOptions(site["root"])) as server:
        assert server.stats() is None


def test_only_a_spinning_server_thread_gets_the_generator_ahead_of_it(site, monkeypatch, testbed):
    # uring's SQPOLL thread and a busy-polling engine spin on the engine's core; an
    # engine that sleeps when idle, and inline (nothing there), do not; and a generator
    # on the host's core is beside no spinner.
    from offloadlab.testbed import load, modes

    def on(cores, mode, wait="adaptive"):
        return ServerOptions(site["root"], mode=mode, engine_wait=wait, host_core=0,
                             engine_core=1).spins_on(cores)

    spinning = {(mode, wait) for mode in MODES for wait in ("poll", "adaptive", "sleep")
                if on([1], mode, wait)}
    assert spinning == {("uring", "poll"), ("uring", "adaptive"), ("uring", "sleep"),
                        ("engine", "poll"), ("handoff", "poll")}
    assert not on([0], "uring") and not on([], "uring") and on([0, 1], "uring")
    # run_mode passes it on unless told: no server is needed to see what it passes.
    seen = []
    monkeypatch.setattr(load, "run", lambda *args, **options: seen.append(options))
    monkeypatch.setattr(modes, "running", lambda options: contextlib.nullcontext(
        types.SimpleNamespace(url="", final={})))
    monkeypatch.setattr(modes, "ModeRun", lambda *args: None)
    for mode, given in (("uring", {"cores": [1]}), ("engine", {"cores": [1]}),
                        ("uring", {"cores": [0]}),
                        ("uring", {"cores": [1], "beside_spinner": False})):
        options = ServerOptions(site["root"], mode=mode, host_core=0, engine_core=1)
        modes.run_mode(options, None, None, **given)
    assert [s["beside_spinner"] for s in seen] == [True, False, False, False]


def test_the_engine_burns_its_message_cost_for_each_request_and_answer(site, testbed):
    options = ServerOptions(site["root"], mode="engine", engine_message_cost_s=2e-3)
    with running(options) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
        for _ in range(5):
            conn.request("GET", "/c0/one.bin")
            assert conn.getresponse().read() == site["files"]["/c0/one.bin"]
        conn.close()
    final = server.final
    assert final.engine.events == final.engine.commands == 5
    # Two messages of 2 ms each, plus the engine's own work of tens of µs.
    assert 4e-3 <= final.per_request.engine_busy_cpu_s < 6e-3


def test_the_engine_times_each_request_s_trip_through_the_host(site, testbed):
    # The host burns 3 ms per request; one client at a time, so nothing queues: the trip
    # is the work plus two ring hops and the host's wake-up.
    with running(ServerOptions(site["root"], mode="engine", work="det(3ms)")) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
        for _ in range(5):
            conn.request("GET", "/c0/one.bin")
            assert conn.getresponse().read() == site["files"]["/c0/one.bin"]
        conn.close()
    assert 3e-3 <= server.final.per_request.host_turnaround_s < 5e-3
    with running(ServerOptions(site["root"], work="det(3ms)")) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
        conn.request("GET", "/c0/one.bin")
        conn.getresponse().read()
        conn.close()
    assert server.final.per_request.host_turnaround_s is None  # inline: no rings


def test_running_stops_the_server_when_the_body_raises(site, testbed):
    with pytest.raises(ZeroDivisionError), running(ServerOptions(site["root"])) as server:
        port = server.port
        raise ZeroDivisionError
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_a_busy_port_is_a_run_error(site, testbed):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(RunError, match="cannot listen"), \
                running(ServerOptions(site["root"], port=port)):
            pass
        result = CliRunner().invoke(app, ["serve", str(site["root"]), "--port", str(port)])
    assert result.exit_code == 1, result.output
    assert "cannot listen" in result.output


@pytest.mark.parametrize("fault", ["panic", "stall"])
def test_the_host_takes_over_when_the_engine_fails(site, fault, testbed):
    options = options_for(site["root"], "engine", fault=(fault, 2))
    with running(options) as server:
        statuses = [_get_status(server, "/c0/one.bin") for _ in range(2)]
        assert statuses[0] == 200
        deadline = time.monotonic() + 5
        while _get_status(server, "/c1/ten.bin") != 200:
            assert time.monotonic() < deadline, "the host did not take over"
            time.sleep(0.05)
    engine = server.final.engine
    assert engine.failed is True and engine.takeover_reason
    assert server.final.requests >= 2


def test_a_takeover_nobody_injected_invalidates_the_run(site, monkeypatch, testbed):
    """The server's document says the host took over (as a descheduled or stuck engine
    would make it): the measurement is refused, not reported as engine mode."""
    from offloadlab.testbed import server as server_module
    real = server_module._serve_core

    def taken_over(args, control, netns=None):
        stats = real(args, control, netns)
        engine = dataclasses.replace(stats.engine, failed=True, takeover_after_s=1.5,
                                     takeover_reason="no engine progress")
        return dataclasses.replace(stats, engine=engine)

    monkeypatch.setattr(server_module, "_serve_core", taken_over)
    refused = pytest.raises(RunError, match=r"declared failed after 1\.5 s.*not measure engine")
    with refused, running(options_for(site["root"], "engine")) as server:
        assert _get_status(server, "/c0/one.bin") == 200


def _get_status(server, path: str) -> int | None:
    """A new connection per request; None if it failed."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=2)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    except OSError:  # a connection the failed engine held is shut down
        return None
    finally:
        conn.close()


# (changes to valid options, a fragment of the error that must name the field)
BAD = [
    (dict(mode="turbo"), "mode"),
    (dict(engine_wait="sleepy"), "engine_wait"),
    (dict(root="missing"), "root"),
    (dict(root="file.txt"), "root"),
    (dict(host_core=CORES), "host_core"),
    (dict(engine_core=-1), "engine_core"),
    (dict(mode="engine", host_core=0, engine_core=0), "share one core"),
    (dict(mode="uring", host_core=0, engine_core=0), "share one core"),
    (dict(host="0.0.0.0"), "allow_remote"),
    (dict(host="no-such-host.invalid"), "host"),
    (dict(port=70000), "port"),
    (dict(engine_slowdown=-1.0), "engine_slowdown"),
    (dict(engine_message_cost_s=-1e-3), "engine_message_cost_s"),
    (dict(engine_message_cost_s=float("nan")), "engine_message_cost_s"),
    (dict(sendfile_above=-1), "sendfile_above"),
    (dict(header_timeout_s=0.0), "header_timeout_s"),
    (dict(idle_timeout_s=-1.0), "idle_timeout_s"),
    (dict(stats_interval_s=0.0), "stats_interval_s"),
    (dict(max_conns=0), "max_conns"),
    (dict(max_headers=0), "max_headers"),
    (dict(max_headers=1000), "at most 128 header fields"),
    (dict(max_work_s=0.0), "max_work_s"),
    (dict(max_header_bytes=0), "max_header_bytes"),
    (dict(max_uri_bytes=0), "max_uri_bytes"),
    (dict(stats_path="nowhere/stats.json"), "stats_path"),
    (dict(stats_path="."), "stats_path"),
    (dict(work="gauss(1ms)"), "work"),
    (dict(work="exp(mean=-1ms)"), "work"),
    (dict(fault=("explode", 1)), "fault"),
    (dict(fault=("stall", 1)), "fault"),  # inline mode has no engine
    (dict(mode="handoff", handoff="P-X-FCFS"), "handoff policy"),
    (dict(mode="handoff", handoff="P-L-T0"), "n of Tn"),
    (dict(mode="handoff", handoff_limit=5000), "handoff_limit"),
    (dict(mode="handoff", handoff_limit=-1), "handoff_limit"),
    (dict(mode="handoff", watermarks=(4, 16, 1, 1)), "lowat (16) must be below hiwat"),
    (dict(mode="handoff", watermarks=(16, 4, 0, 1)), "step_down"),
    (dict(mode="handoff", watermarks=(16, 4, 1)), "watermarks"),
    (dict(app_offload="proxy"), "app_offload"),
    (dict(mode="uring", app_offload="cache"), "set-up C"),
    (dict(app_offload="cache", cache_policy="fifo"), "cache_policy"),
    (dict(app_offload="cache", cache_size="10MB!"), "cache_size"),
    (dict(app_offload="cache", cache_size=0), "cache_size"),
    (dict(app_offload="cache", cache_max_object="1KB"), "KiB for 1024"),
    (dict(max_age=-1), "max_age"),
    (dict(mode="engine", engine_slowdown_mode="burst"), "engine_slowdown_mode"),
]


@pytest.mark.parametrize(("changes", "fragment"), BAD, ids=[f for _, f in BAD])
def test_bad_options_are_refused_naming_the_field(tmp_path, changes, fragment):
    (tmp_path / "file.txt").write_text("x")
    paths = {k: tmp_path / v for k, v in changes.items() if k in ("root", "stats_path")}
    options = ServerOptions(**{"root": tmp_path, **changes, **paths})
    with pytest.raises(InputError, match=re.escape(fragment)):
        options.check()


def test_good_options_pass_the_checks(tmp_path):
    ServerOptions(tmp_path).check()
    ServerOptions(tmp_path, host="0.0.0.0", allow_remote=True, mode="engine",
                  work="exp(mean=50us)", stats_path=tmp_path / "s.json").check()
    ServerOptions(tmp_path, host="localhost", mode="engine", fault=("panic", 3)).check()
    handoff = ServerOptions(tmp_path, mode="handoff", handoff="n-n-t4", handoff_limit=0)
    handoff.check()
    # Hard_limit, host first, watermarks (None: no load control), the n of T(n).
    assert handoff.handoff_args() == {"hard_limit": 0, "host_first": False,
                                      "watermarks": None, "threshold": 4}
    assert ServerOptions(tmp_path, mode="handoff").handoff_args() == {
        "hard_limit": 4096, "host_first": True,
        "watermarks": {"hiwat": 16, "lowat": 4, "step_down": 4, "step_up": 2},
        "threshold": None}
    assert ServerOptions(tmp_path).handoff_args() is None
    defaults = {f.name: f.default for f in dataclasses.fields(ServerOptions)}
    assert defaults["sendfile_above"] == 8000 and defaults["engine_wait"] == "adaptive"


def test_cli_serve_bad_input_exits_2(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["serve", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "root" in result.output
    result = runner.invoke(app, ["serve", str(tmp_path), "--idle-timeout", "soon"])
    assert result.exit_code == 2 and "--idle-timeout" in result.output


@pytest.mark.parametrize(("signum", "mode", "extra"),
                         [(signal.SIGTERM, "engine", []), (signal.SIGINT, "inline", []),
                          (signal.SIGTERM, "engine", ["--app-offload", "cache"])],
                         ids=["SIGTERM", "SIGINT", "cache"])
def test_offload_serve_stops_cleanly_on_a_signal(site, tmp_path, signum, mode, extra, testbed):
    stats = tmp_path / "stats.json"
    command = [sys.executable, "-m", "offloadlab", "serve", str(site["root"]), "--mode", mode,
               "--stats", str(stats), "--stats-interval", "100ms", *extra]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        lines = _lines(proc.stdout)
        url = _wait_for_url(lines, timeout_s=30)
        host, port = re.match(r"http://([\d.]+):(\d+)/", url).groups()
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("GET", "/c2/hundred.bin")
        assert conn.getresponse().read() == site["files"]["/c2/hundred.bin"]
        conn.close()
        proc.send_signal(signum)
        assert proc.wait(timeout=15) == 0, proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    doc = json.loads(stats.read_text())
    assert doc["final"] is True and doc["requests"] >= 1 and doc["mode"] == mode
    summary = "".join(_drain(lines))
    assert re.search(r"requests? in", summary) and "host CPU" in summary
    if extra:
        assert doc["cache"]["misses"] == 1 and "cache 0 hits, 1 misses" in summary


def _lines(stream) -> queue.Queue:
    """The process's output lines as they come (a reader thread; None at the end)."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)
    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for_url(lines: queue.Queue, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        assert line is not None, "offload serve exited before it listened"
        if found := re.search(r"http://\S+", line):
            return found.group(0)
    raise AssertionError(f"offload serve printed no URL within {timeout_s} s")


def _drain(lines: queue.Queue) -> list[str]:
    out = []
    while (line := lines.get(timeout=10)) is not None:
        out.append(line)
    return out


def test_testbed_run_compares_inline_and_engine(served_set, tmp_path, testbed):
    out = tmp_path / "runs.json"
    result = CliRunner().invoke(app, [
        "testbed", "run", "--fileset", str(served_set), "--mode", "inline,engine",
        "--rate", "100", "--duration", "1s", "--keep-alive", "5", "--json", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert [m["mode"] for m in doc["modes"]] == ["inline", "engine"]
    for run in doc["modes"]:
        summary = run["summary"]
        assert summary["requests"] > 0 and summary["failed"] == 0
        assert summary["host_cpu_s"] > 0
        assert run["load"]["completed"] == run["server"]["requests"]
    engine = doc["modes"][1]["summary"]
    assert engine["engine_cpu_s"] > 0 and engine["commands"] >= 1
    assert "engine" in result.output and "host µs" in result.output


@pytest.mark.parametrize(("args", "fragment"), [
    (["--mode", "inline,warp", "--rate", "10"], "--mode"),
    (["--rate", "10", "--clients", "2"], "--rate"),
    (["--rate", "10", "--host-core", "0", "--engine-core", "0", "--mode", "engine"],
     "share one core"),
    (["--rate", "10", "--mode", "engine:P-L-FCFS"], "only handoff takes a policy"),
    (["--rate", "10", "--mode", "handoff:fast"], "handoff policy"),
    (["--rate", "10", "--mode", "handoff", "--watermarks", "16,4"], "--watermarks"),
    (["--rate", "10", "--engine-message-cost", "soon"], "--engine-message-cost"),
])
def test_testbed_run_bad_flags_exit_2(served_set, args, fragment):
    result = CliRunner().invoke(app, ["testbed", "run", "--fileset", str(served_set), *args])
    assert result.exit_code == 2, result.output
    assert fragment in result.output


def test_testbed_run_takes_handoff_policies_and_reports_where_requests_went(served_set,
                                                                            tmp_path, testbed):
    out = tmp_path / "runs.json"
    result = CliRunner().invoke(app, [
        "testbed", "run", "--fileset", str(served_set), "--mode",
        "handoff:P-L-FCFS,handoff:N-N-T2", "--handoff-limit", "2", "--clients", "4",
        "--duration", "1s", "--keep-alive", "10", "--json", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    fcfs, threshold = (m["server"] for m in doc["modes"])
    assert [m["mode"] for m in doc["modes"]] == ["handoff:P-L-FCFS", "handoff:N-N-T2"]
    for server, run in zip((fcfs, threshold), doc["modes"], strict=True):
        assert server["mode"] == "handoff" and run["summary"]["failed"] == 0
        h = server["handoff"]
        # The engine never held more than Hard_limit: 2 of the 4 clients at most.
        assert max(h["series"]["held"], default=0) <= 2
        assert 0 < h["engine_requests"] < server["requests"]
    assert fcfs["handoff"]["passed"] > 0 and fcfs["handoff"]["offered"] == 0
    # T2: every connection starts on the host; some move after their second answer.
    assert threshold["handoff"]["adopted"] > 0
    assert threshold["handoff"]["offered"] == (threshold["handoff"]["adopted"]
                                               + threshold["handoff"]["returned"])
