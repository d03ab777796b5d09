"""A user's own server as the study's host alone (``offload study --server-cmd`` or
``--server-pid`` with ``--target``): the flags' checks, starting and always stopping the
server's process group, the CPU of its process tree from /proc, and one short real study
with nginx (one worker) as the user's server."""

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from offloadlab.errors import InputError, RunError
from offloadlab.mode_traits import BASELINE
from offloadlab.study import external as host_server
from offloadlab.study import pipeline
from offloadlab.testbed import external
from offloadlab.testbed.external import ExternalServer
from offloadlab.testbed.load import parse_target


def _gone(pid: int, within_s: float = 2.0) -> bool:
    """The process has ended (and been reaped, or is a zombie waiting to be)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    return False


def _refused() -> str:
    """A loopback address nothing listens on."""
    return f"127.0.0.1:{external.free_port()}"


def test_placeholders_are_the_served_folder_and_the_port(tmp_path):
    server = ExternalServer("srv --root={root} -p {port} 'a b'")
    assert server.argv(tmp_path, 8080) == ["srv", f"--root={tmp_path.resolve()}", "-p",
                                           "8080", "a b"]


@pytest.mark.parametrize(("flags", "message"), [
    ({}, "--server-cmd and --server-pid: give one"),
    ({"command": "nginx", "pid": 1}, "--server-cmd and --server-pid: give one"),
    ({"command": "no-such-program-here {port}"}, "not a program on PATH"),
    ({"command": "sleep 1"}, "give --target HOST:PORT"),
    ({"command": "sleep 'unclosed"}, "quote it"),
    ({"pid": 2**22 + 7, "target": "127.0.0.1:80"}, "--server-pid 4194311: no such process"),
    ({"pid": os.getpid()}, "--server-pid .*: give --target"),
    ({"pid": os.getpid(), "target": "10.1.2.3:80"}, "not a loopback address.*--allow-remote"),
    ({"pid": os.getpid(), "target": "nonsense"}, "--target 'nonsense': write HOST:PORT"),
])
def test_bad_flags_name_the_flag_and_the_fix(flags, message):
    with pytest.raises(InputError, match=message):
        ExternalServer(**flags).check()


def test_a_remote_target_is_taken_with_allow_remote():
    ExternalServer(pid=os.getpid(), target="10.1.2.3:80", allow_remote=True).check()


def test_the_study_checks_the_flags_when_configured(tmp_path):
    with pytest.raises(InputError, match="--server-pid"):
        pipeline.StudyConfig(tmp_path, server_pid=2**22 + 7, target="127.0.0.1:80")
    with pytest.raises(InputError, match=r"--target .*--server-cmd or --server-pid"):
        pipeline.StudyConfig(tmp_path, target="127.0.0.1:80")
    # A user's server's application work is none unless --work says so.
    config = pipeline.StudyConfig(tmp_path, server_pid=os.getpid(), target="127.0.0.1:80")
    assert config.work_dist().mean == 0
    assert pipeline.StudyConfig(tmp_path).work_dist().mean == pytest.approx(100e-6)


def test_a_target_that_refuses_connections_is_named(tmp_path):
    server = ExternalServer(pid=os.getpid(), target=_refused())
    with pytest.raises(InputError, match=r"--target .*refuses connections"), \
            external.running(server, tmp_path):
        pass


def test_a_target_already_served_is_refused_before_the_command_starts(tmp_path):
    # Another process answering there would be measured in place of the user's server.
    with socket.create_server(("127.0.0.1", 0)) as busy:
        target = f"127.0.0.1:{busy.getsockname()[1]}"
        with pytest.raises(InputError, match=rf"--target {target}: something already "
                           r"accepts connections.*--server-pid"):
            pipeline.StudyConfig(tmp_path / "out", server_cmd="sleep 30", target=target)
    assert not (tmp_path / "out").exists()


def test_a_command_that_exits_at_once_shows_its_status_and_last_words(tmp_path):
    server = ExternalServer("sh -c 'echo cannot bind >&2; exit 3'", target=_refused())
    with pytest.raises(RunError, match=r"exited with status 3.*cannot bind"), \
            external.running(server, tmp_path):
        pass


def test_a_command_that_never_listens_is_stopped_with_its_children(tmp_path):
    # The shell's child sleeps in the same process group: both must go.
    pid_file = tmp_path / "child.pid"
    server = ExternalServer(f"sh -c 'sleep 30 & echo $! > {pid_file}; wait'",
                            target=_refused(), start_timeout_s=0.5)
    with pytest.raises(RunError, match=r"nothing accepted connections .* within 0.5 s"), \
            external.running(server, tmp_path):
        pass
    assert _gone(int(pid_file.read_text()))


def test_the_server_is_stopped_after_an_error_in_the_study(tmp_path):
    (tmp_path / "hello.txt").write_text("hello")
    server = ExternalServer(f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1 "
                            "--directory {root}")
    with pytest.raises(ZeroDivisionError), external.running(server, tmp_path) as live:
        assert live.started and live.alive()
        pid = live.pid
        import urllib.request

        url = f"http://{live.target.host}/hello.txt"
        assert urllib.request.urlopen(url, timeout=5).read() == b"hello"
        1 / 0  # noqa: B018
    assert _gone(pid)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_the_server_is_stopped_after_ctrl_c_or_a_sigterm_to_the_study(tmp_path, how):
    import signal

    server = ExternalServer(f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1")
    with pytest.raises(KeyboardInterrupt), external.running(server, tmp_path) as live:
        pid = live.pid
        if how == "sigterm":  # as a job control or a container stop sends it
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        raise KeyboardInterrupt
    assert _gone(pid)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back


def test_a_server_given_by_its_pid_is_not_stopped(tmp_path):
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        server = ExternalServer(pid=os.getpid(), target=f"127.0.0.1:{port}")
        with external.running(server, tmp_path) as live:
            assert not live.started and live.pid == os.getpid()


BURN = ("import time; t = time.thread_time()\n"
        "while time.thread_time() - t < {s}: pass\n"
        "time.sleep(120)")  # outlives the test's deadline


def test_cpu_of_the_process_tree_counts_a_busy_child_thread_by_thread(tmp_path):
    # sh forks python (more commands follow it), so the burner is a descendant.
    burn_s = 0.3
    script = tmp_path / "burn.py"
    script.write_text(BURN.format(s=burn_s))
    import subprocess

    process = subprocess.Popen(["sh", "-c", f"{sys.executable} {script}; true"],
                               start_new_session=True)
    try:
        before = external.snapshot(process.pid)
        # Generous: on a machine busy with other work the burn waits for its CPU (0.29 s
        # of 0.3 in 10 s beside a build and two test workers).
        deadline = time.monotonic() + 60

        def burner_pid() -> int | None:
            # The descendant running the script: sh's child is sh until it execs python.
            for p in external.tree(process.pid)[1:]:
                with contextlib.suppress(OSError):
                    if str(script) in Path(f"/proc/{p}/cmdline").read_bytes().decode():
                        return p
            return None

        while (child := burner_pid()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert child is not None, "the burner never started"

        def burnt() -> float:
            return sum(t.cpu_s for t in external.used(before, external.snapshot(process.pid))
                       if t.pid == child)

        # Its burn is CPU time, however busy the machine: wait until it is spent.
        while burnt() < burn_s and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)  # then it sleeps, and its CPU stays put
        after = external.snapshot(process.pid)
        threads = external.used(before, after)
        burner = [t for t in threads if t.pid == child]
        # Python's start-up before the burn adds tens of ms.
        assert burn_s <= sum(t.cpu_s for t in burner) < burn_s + 0.15, threads
        assert {t.pid for t in threads} == {process.pid, child}
        assert all(t.name for t in threads)
        # /proc/PID/stat's ticks agree (counted apart, 10 ms each). The child was born
        # after the first snapshot, so both count its whole life; a stat read once it was
        # seen missed what it burnt before that (0.06 s in a busy CI run).
        assert external.stat_cpu_s(child) == pytest.approx(
            sum(t.cpu_s for t in burner), abs=0.05)
    finally:
        external.stop(process)
    assert _gone(process.pid)


def test_core_times_cover_every_core_and_add_up():
    before = external.core_times()
    time.sleep(0.1)
    cores = external.core_delta(before, external.core_times())
    assert {c.core for c in cores} >= set(os.sched_getaffinity(0))
    for c in cores:
        wall = c.user_s + c.system_s + c.idle_s + c.irq_s + c.softirq_s + c.steal_s
        assert 0.05 <= wall <= 0.5


def test_bad_server_flags_exit_2_before_anything_is_written(tmp_path):
    from typer.testing import CliRunner

    from offloadlab.cli import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["study", "--server-pid", str(2**22 + 7), "--target",
                                      "127.0.0.1:80", "--out", str(out)])
    assert result.exit_code == 2 and "--server-pid" in result.output
    assert not out.exists()


def _host(work_s: float, cores: float) -> host_server.HostServer:
    server = ExternalServer(pid=os.getpid(), target="127.0.0.1:80")
    live = external.Live(os.getpid(), parse_target("127.0.0.1:80"), started=False)
    return host_server.HostServer(server, live, Path("/"), work_s, most_cores=cores)


def test_notes_say_when_work_exceeds_the_measured_cpu_or_the_server_used_two_cores():
    from types import SimpleNamespace

    import numpy as np

    from offloadlab.calibrate.fit import Run

    def run(host_s: float) -> SimpleNamespace:
        return SimpleNamespace(run=Run("c0", BASELINE, 100.0, 100.0, 200, host_s, 0.0,
                                       float("nan"), 1e-3, np.zeros(200)))

    study = SimpleNamespace(plan=SimpleNamespace(classes=[SimpleNamespace(name="c0")]),
                            calibration={("c0", BASELINE): [run(40e-6), run(60e-6)]})
    assert _host(30e-6, 0.9).notes(study) == []
    work, cores = _host(80e-6, 1.4).notes(study)
    assert "--work declares 80" in work and "used 50" in work and "lower" not in work
    assert "Give --work no more than" in work
    assert "1.40 cores" in cores


def test_the_section_lists_each_thread_and_the_fits_split_of_all_of_them():
    from types import SimpleNamespace

    from offloadlab.calibrate import fit

    host = _host(0.0, 0.5)
    host.threads["c0"][1, 1, "master"] += 0.0
    host.threads["c0"][1, 2, "worker"] += 0.02
    host.requests["c0"] += 200
    wakeup = fit.Wakeup(cost=50e-6, cooling=1e-3)
    runs = [SimpleNamespace(run=fit.Run("c0", BASELINE, 1000.0, 1000.0, 200, 100e-6, 0.0,
                                        float("nan"), 1e-3, None))]
    woke = wakeup.per_run(runs[0].run, "host")
    study = SimpleNamespace(
        fitted=SimpleNamespace(models=[SimpleNamespace(mode=BASELINE, wakeup=wakeup)],
                               fits={("c0", BASELINE): fit.ClassFit("c0", BASELINE, 0.0,
                                                                    EXp=100e-6 - woke)}),
        calibration={("c0", BASELINE): runs})
    rows = host.summary(study)["threads"]
    assert [(r["tid"], r["name"]) for r in rows] == [(1, "master"), (2, "worker"),
                                                     (None, host_server.ALL_THREADS)]
    assert rows[1]["cpu_per_request_s"] == pytest.approx(100e-6) and rows[1]["share"] == 1
    every = rows[-1]
    assert every["EXa"] + every["EXp"] + every["wakeup_s"] == pytest.approx(100e-6)
    json.dumps(rows)  # plain values, as summary.json needs
    assert host.section(study).table is not None


# --- one short real study, nginx as the user's server ---------------------------------


def _tree_stat_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its children from /proc/PID/stat's ticks: the reading
    of bench/server_vs_nginx.sh, apart from the study's schedstat."""
    total = 0.0
    for p in external.tree(pid):
        with contextlib.suppress(OSError):  # a process that just ended
            total += external.stat_cpu_s(p)
    return total


@pytest.fixture(scope="module")
def nginx_study(tmp_path_factory, testbed, nginx_binary, monkeypatch_module):
    """Classes 0 and 3 with nginx as the host alone, inline against engine on the quick
    budget trimmed to a few seconds of load per phase; and nginx's CPU per request over
    the calibration runs of each class, read apart from the study."""
    tmp = tmp_path_factory.mktemp("nginx-study")
    out, folder, port = tmp / "study", tmp / "nginx", external.free_port()
    conf = external.nginx_config(folder, out / "fileset", port)
    seen: dict = {}
    real = host_server.HostServer.measure

    def measure(self, plan, load, mode, use, rate, *args, **kwargs):
        if mode != BASELINE or use != "calibration":
            return real(self, plan, load, mode, use, rate, *args, **kwargs)
        before = _tree_stat_cpu_s(self.live.pid)
        m = real(self, plan, load, mode, use, rate, *args, **kwargs)
        cpu, n = seen.get(load.name, (0.0, 0))
        seen[load.name] = (cpu + _tree_stat_cpu_s(self.live.pid) - before,
                           n + m.run.requests)
        return m

    monkeypatch_module.setattr(host_server.HostServer, "measure", measure)
    config = pipeline.StudyConfig(
        out, classes="0,3", modes="inline,engine", run_length="1s", sweep_points=3,
        replicates=1, steal_repeats=0, mix=False, handoff_slowdown=None,
        server_cmd=f"{nginx_binary} -c {conf} -p {folder}", target=f"127.0.0.1:{port}")
    tables = pipeline.run(pipeline.prepare(config)).tables
    return out, tables, {c: cpu / n for c, (cpu, n) in seen.items()}


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_an_nginx_study_measures_nginx_as_the_host(nginx_study):
    out, tables, _ = nginx_study
    summary = json.loads((out / "summary.json").read_text())
    meta = summary["meta"]
    assert "nginx" in meta["host_server"] and "user's server" in meta["host_server"]
    assert meta["offload_side"] == host_server.OFFLOAD_SIDE
    assert "user's server" in meta["workload"]
    host = summary["host_server"]
    assert host["work_s"] == 0
    threads = [t for t in host["threads"] if t["name"] != host_server.ALL_THREADS]
    assert {t["class"] for t in threads} == {"c0", "c3"}
    assert {t["name"] for t in threads} == {"nginx"}  # the master and its worker
    assert all(t["cpu_per_request_s"] >= 0 for t in threads)
    assert host_server.TITLE in (out / "report.html").read_text()
    # The engine side still ran on our server: it has engine CPU.
    engine = tables.costs[tables.costs["mode"] != BASELINE]
    assert (engine["EXc"] + engine["EXq"] > 0).all()


def test_nginx_costs_are_its_cpu_per_request(nginx_study):
    out, tables, stat = nginx_study
    rows = {t["class"]: t for t in json.loads((out / "summary.json").read_text())
            ["host_server"]["threads"] if t["name"] == host_server.ALL_THREADS}
    inline = tables.costs[tables.costs["mode"] == BASELINE].set_index("class")
    for cls in ("c0", "c3"):
        row = rows[cls]
        assert row["EXa"] == inline.loc[cls, "EXa"] and row["EXp"] == inline.loc[cls, "EXp"]
        assert row["EXa"] + row["EXp"] > 0
        # The model's host demand at the calibration runs: E[X_a] + E[X_p] and what the
        # fit puts on wake-ups there (nginx's CPU per request falls as the rate rises).
        demand = row["EXa"] + row["EXp"] + row["wakeup_s"]
        assert demand == pytest.approx(row["cpu_per_request_s"], rel=1e-6)
        # Generous: ticks of 10 ms over a few seconds of runs; bench/study_nginx.py
        # checks the 10%.
        assert demand == pytest.approx(stat[cls], rel=0.35), (cls, demand, stat[cls])
