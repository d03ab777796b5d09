"""Load from many hosts (`offload load --cluster`): the plan's split, the exact merge of
histograms, bad input, and runs through the test cluster of network namespaces."""

import base64
import json
import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError, RunError
from offloadlab.experiments import handoff
from offloadlab.study import measure, pipeline
from offloadlab.testbed import cluster, cores, external, netns, remote, testcluster
from offloadlab.testbed.server import ServerOptions
from offloadlab.workload import fileset, stream
from offloadlab.workload.specs import FileSetSpec

P_FLOOR = 0.001  # a K-S p-value below this fails (fixed seeds: deterministic)
runner = CliRunner()


@pytest.fixture(scope="module")
def manifest() -> pd.DataFrame:
    return fileset.generate(FileSetSpec(name="site", n_files=30, max_bytes=50_000, seed=2))


def _bucket(ns: int) -> int:
    """The highest value of an HDR bucket that holds ``ns`` (lowest 1 ns, 3 significant
    digits: 2,048 sub-buckets 1 ns wide, then each bucket of 1,024 twice as wide as the
    one before)."""
    shift = max(0, ns.bit_length() - 11)
    return ((ns >> shift) << shift) + (1 << shift) - 1


def _rows_of_clients(requests, shares) -> list[set]:
    client = requests.frame["client"].to_numpy()
    return [set(client[rows]) for rows in shares]


def test_an_open_loops_shares_are_poisson_at_the_rate_divided_and_add_up_to_the_plan(
        manifest):
    rate, hosts = 600.0, 3
    requests = stream.poisson(manifest, rate, duration_s=60, keep_alive="3", seed=7)
    shares = cluster.split(requests, hosts, seed=1)
    # The superposition is the plan: every row once, rows in order within each share.
    assert np.array_equal(np.sort(np.concatenate(shares)), np.arange(len(requests)))
    clients = _rows_of_clients(requests, shares)
    assert sum(len(c) for c in clients) == len(set().union(*clients))  # no client split
    frame = requests.frame
    for i, rows in enumerate(shares):
        part = cluster.share(requests, rows, i, hosts)
        assert part.frame.equals(frame.iloc[rows].reset_index(drop=True))
        # Connections start at Poisson times at rate / hosts (a thinning).
        starts = part.frame.groupby("conn_id", sort=False)["time_s"].first().to_numpy()
        n = len(starts)
        expected = rate * 60 / hosts
        assert abs(n - expected) < 4 * np.sqrt(expected)
        gaps = np.diff(np.sort(starts))
        assert stats.kstest(gaps, "expon", args=(0, hosts / rate)).pvalue > P_FLOOR


def test_closed_loop_clients_and_sessions_are_dealt_whole(manifest):
    requests = stream.closed(manifest, clients=10, requests=7, seed=3)
    shares = cluster.split(requests, 3)
    assert [len(c) for c in _rows_of_clients(requests, shares)] == [4, 3, 3]
    assert [len(rows) for rows in shares] == [28, 21, 21]
    pages = stream.sessions(manifest, "support", clients=7, sessions=14, seed=4)
    shares = cluster.split(pages, 2)
    frame = pages.frame
    for rows in shares:  # a session's pages stay with its client, on one host
        others = np.setdiff1d(np.arange(len(frame)), rows)
        assert not set(frame["session"].iloc[rows]) & set(frame["session"].iloc[others])
    assert sorted(len(c) for c in _rows_of_clients(pages, shares)) == [3, 4]


def test_a_stream_of_fewer_clients_than_hosts_is_refused(manifest):
    requests = stream.closed(manifest, clients=2, requests=5)
    with pytest.raises(InputError, match="2 client"):
        cluster.split(requests, 3)


def _v2(values_ns: np.ndarray, highest_ns: int = 3_600_000_000_000) -> str:
    """An HdrHistogram V2 encoding (lowest 1 ns, 3 significant digits), base64, written
    here from the format's description: a 40-byte big-endian header, then the counts
    array as zig-zag LEB128 varints, a run of zeros as its negated length."""
    counts: dict[int, int] = {}
    for v in map(int, values_ns):
        shift = max(0, v.bit_length() - 11)  # 2,048 sub-buckets, then 1,024 per bucket
        index = ((shift + 1) << 10) + (v >> shift) - 1024
        counts[index] = counts.get(index, 0) + 1
    payload, index, top = bytearray(), 0, max(counts)
    while index <= top:
        run = 0
        while index + run <= top and index + run not in counts:
            run += 1
        n = -run if run > 1 else counts.get(index, 0)
        index += max(run, 1)
        zz = (n << 1) ^ (n >> 63)
        while zz >= 0x80:
            payload.append(zz & 0x7F | 0x80)
            zz >>= 7
        payload.append(zz)
    head = struct.pack(">IIIIqqd", 0x1C849313, len(payload), 0, 3, 1, highest_ns, 1.0)
    return base64.b64encode(head + payload).decode()


def test_histograms_merge_bucket_for_bucket_into_the_pooled_one():
    # Three hosts' latencies, log-uniform from 1 µs to 0.1, 1 and 30 s.
    rng = np.random.default_rng(4)
    hosts = [np.exp(rng.uniform(np.log(1e3), np.log(high), 5_000)).astype(np.int64)
             for high in (1e8, 1e9, 3e10)]
    merged = cluster.merge_histograms([_v2(h) for h in hosts])
    pooled = np.sort(np.concatenate(hosts))
    tops = np.array([_bucket(int(v)) for v in pooled])
    values, counts = np.unique(tops, return_counts=True)
    assert merged["buckets"] == [[int(v), int(n)] for v, n in zip(values, counts,
                                                                     strict=True)]
    assert merged["count"] == 15_000
    # A quantile is the top of the bucket holding the ceil(q n)-th value.
    assert merged["p50_s"] == tops[7_500 - 1] * 1e-9
    assert merged["max_s"] == tops[-1] * 1e-9


def test_merged_histograms_refuse_what_is_not_one_and_an_empty_sum_has_no_quantiles():
    with pytest.raises(RunError, match="not base64"):
        cluster.merge_histograms(["#"])
    empty = cluster.merge_histograms([])
    assert empty["count"] == 0 and empty["p99_s"] is None and empty["buckets"] == []


def test_workers_of_another_version_or_without_the_project_are_named():
    problems = cluster.mismatched(
        {"tcp://a:1": {"version": "1.0"}, "tcp://b:1": {"version": "0.9"},
         "tcp://c:1": ModuleNotFoundError("No module named 'offloadlab'")}, "1.0")
    assert problems == ["worker tcp://b:1 has offloadlab 0.9",
                        "worker tcp://c:1 could not run offloadlab (No module named "
                        "'offloadlab')"]


def _load_args(site, address, *more):
    return ["load", "127.0.0.1:9", "--objects", str(site), "--rate", "10", "--duration",
            "1s", "--cluster", address, *more]


def test_an_unreachable_scheduler_is_bad_input(served_set, monkeypatch, tmp_path):
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 0.5)
    out = tmp_path / "report.json"
    res = runner.invoke(app, _load_args(served_set, "tcp://127.0.0.1:9", "--out", str(out)))
    assert res.exit_code == 2, res.output
    assert "no Dask scheduler answered" in res.output and "dask scheduler" in res.output
    assert not out.exists()
    res = runner.invoke(app, _load_args(served_set, "127.0.0.1:9"))
    assert res.exit_code == 2 and "tcp://HOST:PORT" in res.output


def _local_dask(**worker_options):
    """A scheduler on loopback with one worker, in this process (no load goes through)."""
    import distributed

    return distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                    protocol="tcp", host="127.0.0.1", dashboard_address=":0",
                                    **worker_options)


@pytest.fixture(scope="module")
def local_dask():
    """A client of a scheduler whose one worker offers `client`."""
    import distributed

    with _local_dask(resources={"client": 1}) as lc, \
            distributed.Client(lc, set_as_default=False) as client:
        yield client


def test_too_few_client_workers_is_bad_input_naming_the_resource(local_dask, served_set):
    address = local_dask.scheduler.address
    res = runner.invoke(app, _load_args(served_set, address, "--client-hosts", "2"))
    assert res.exit_code == 2, res.output
    assert "1 worker(s) with the `client` resource" in res.output
    res = runner.invoke(app, ["load", "127.0.0.1:9", "--objects", str(served_set),
                              "--rate", "10", "--client-hosts", "2"])
    assert res.exit_code == 2 and "give --cluster too" in res.output


def test_each_client_workers_clock_offset_is_measured_by_round_trips(local_dask):
    workers = cluster.client_workers(local_dask, local_dask.scheduler.address, None)
    assert len(workers) == 1
    # One process, one clock: the offset is zero within its stated uncertainty.
    w = workers[0]
    assert 0 <= w.uncertainty_s < 0.5 and abs(w.offset_s) <= w.uncertainty_s + 1e-3


def test_ctrl_c_stops_every_hosts_generator_before_it_returns(local_dask, served_set,
                                                             monkeypatch, testbed):
    # A minute of load to a closed port; Ctrl-C a second after the start.
    requests = stream.poisson(served_set, 5, duration_s=60, seed=2)
    running = []

    def interrupted(client, futures, deadline):
        time.sleep(cluster.LEAD_S + 1.0)
        running.extend(cluster._RUNNING)  # the one worker runs here, in this process
        raise KeyboardInterrupt

    monkeypatch.setattr(cluster, "_collect", interrupted)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        cluster.run(local_dask.scheduler.address, "127.0.0.1:9", requests, served_set,
                    threads=1, timeout_s=0.5)
    assert len(running) == 1 and not cluster._RUNNING  # sending, then stopped
    assert time.monotonic() - started < cluster.LEAD_S + 1.0 + cluster.STOP_S + 1.0


def test_no_worker_with_the_client_resource_is_bad_input(served_set):
    with _local_dask() as lc:
        res = runner.invoke(app, _load_args(served_set, lc.scheduler_address))
    assert res.exit_code == 2, res.output
    assert "no worker offers the `client` resource" in res.output
    assert "--resources client=1" in res.output


def test_a_study_across_hosts_refuses_what_it_cannot_use_and_writes_nothing(
        local_dask, monkeypatch, tmp_path):
    out = tmp_path / "s"

    def study(*flags: str):
        return runner.invoke(app, ["study", "--out", str(out), "--classes", "0",
                                   "--no-handoff", "--cluster", *flags])

    address = local_dask.scheduler.address
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 0.5)
    for flags, says in [
            (["somewhere"], "tcp://HOST:PORT"),
            ([address, "--host-profile", "seed-era"], "--cluster and --host-profile"),
            (["tcp://127.0.0.1:9"], "no Dask scheduler answered"),
            # The one worker offers `client` only.
            ([address], "no worker offers the `server` resource")]:
        res = study(*flags)
        assert res.exit_code == 2, res.output
        text = " ".join(res.output.split())
        assert says in text, text
        assert "--resources server=1" in text or "tcp://HOST:PORT" in text or \
            "give one" in text
    assert not out.exists()


def test_a_remote_target_is_loaded_only_when_allowed_by_name_or_at_all(manifest):
    requests = stream.poisson(manifest, 10, count=6, seed=1)
    for allow in (False, {"10.232.0.99"}):  # refused before any scheduler is asked
        with pytest.raises(InputError, match="--allow-remote"):
            cluster.run("tcp://127.0.0.1:9", "10.232.0.10:8080", requests, manifest,
                        allow_remote=allow)


# The test cluster: namespaces on a bridge, with Dask workers in them (root, real load).

def _left_behind(names: list[str]) -> list[str]:
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return [n for n in names if n in spaces or n in links]


class Failed(Exception):
    pass


def test_the_test_cluster_is_removed_even_when_its_user_fails(as_root, testbed):
    with pytest.raises(Failed), testcluster.started() as c:
        names = [c.server.name, *(h.name for h in c.clients)]
        processes = list(c.workers.values())
        bridge = f"olbr{os.getpid() % 100000}"
        ports = [f"olb{os.getpid() % 100000}p{i}" for i in range(len(names))]
        assert bridge in subprocess.run(["ip", "-o", "link", "show"], capture_output=True,
                                        text=True).stdout
        assert [h.ip for h in c.clients] == [f"{netns.BRIDGE_NET}.{i}" for i in (11, 12, 13)]
        raise Failed
    assert _left_behind([*names, *ports, bridge]) == []
    assert all(p.poll() is not None for p in processes)


@pytest.fixture(scope="module")
def test_cluster(as_root, testbed):
    with testcluster.started() as c:
        yield c


@pytest.fixture(scope="module")
def served(test_cluster, served_set):
    with testcluster.serving(test_cluster, served_set) as target:
        yield target


def test_a_load_across_three_hosts_merges_to_the_sum_of_theirs(test_cluster, served,
                                                              served_set):
    requests = stream.poisson(served_set, 150, duration_s=3, seed=5)
    result = cluster.run(test_cluster.scheduler, served, requests, served_set,
                         allow_remote={test_cluster.server.ip}, records=True, threads=1)
    report, hosts = result.report, result["cluster"]["hosts"]
    assert not result["cluster"]["partial"] and len(hosts) == 3
    assert sum(h["planned"] for h in hosts) == report["planned"] == len(requests)
    assert report["completed"] == sum(h["completed"] for h in hosts) == len(requests)
    assert report["failed"] == 0 and report["total"]["count"] == report["completed"]
    assert result["cluster"]["start_skew_s"] < 0.1  # bench/cluster_load.py holds 10 ms
    assert result.parsed.completed == report["completed"]  # one run's shape
    # Exact: the merged histogram has every pooled record in its bucket.
    merged = cluster.merge_histograms([c["total"] for c in result.parts["classes"]])
    pooled = np.rint(result.records["total_s"].dropna().to_numpy() * 1e9).astype(np.int64)
    values, counts = np.unique([_bucket(int(ns)) for ns in pooled], return_counts=True)
    assert merged["buckets"] == [[int(v), int(n)] for v, n in zip(values, counts,
                                                                     strict=True)]
    assert sorted(result.records["request"]) == list(range(len(requests)))


def test_the_cli_across_hosts_prints_each_host_and_writes_the_report(test_cluster, served,
                                                                     served_set, tmp_path):
    out = tmp_path / "report.json"
    res = runner.invoke(app, ["load", served, "--objects", str(served_set), "--clients",
                              "6", "--duration", "1s", "--cluster", test_cluster.scheduler,
                              "--client-hosts", "2", "--allow-remote", "--threads", "1",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert [h["name"] for h in doc["cluster"]["hosts"]] == ["client1", "client2"]
    assert doc["completed"] > 0 and doc["failed"] == 0
    assert "start skew" in " ".join(res.output.split())


def test_a_run_across_hosts_serves_on_the_server_host_and_loads_from_every_client(
        test_cluster, served_set):
    hosts = remote.find(test_cluster.scheduler)
    assert (hosts.server_name, hosts.server_ip) == ("server", test_cluster.server.ip)
    assert hosts.clients == ("client1", "client2", "client3")
    host_core, engine_core = cores.choose(allowed=hosts.server_cores)
    requests = stream.poisson(served_set, 120, duration_s=2, seed=8)
    options = ServerOptions(root=served_set, mode="engine", host_core=host_core,
                            engine_core=engine_core)
    done = remote.run_mode(hosts, options, requests, served_set, records=True, threads=1,
                           verify="length", timeout_s=5.0)
    report = done.load.report
    # The server's own account came back through Dask: it served what the hosts sent.
    assert done.stats.requests == report["completed"] == len(requests)
    assert {t.role for t in done.stats.threads} == {"host", "engine"}
    assert {t.core for t in done.stats.threads} == {host_core, engine_core}
    assert set(done.load.records["host"]) == set(hosts.clients)
    assert not report["cluster"]["partial"]


def test_a_study_across_hosts_measures_there_and_says_where(test_cluster, tmp_path):
    config = pipeline.StudyConfig(tmp_path / "s", classes="0", modes="inline,engine",
                                  budget="quick", cluster=test_cluster.scheduler,
                                  handoff_slowdown=handoff.Experiment.slowdown)
    prepared = pipeline.prepare(config)
    the_plan = prepared.plan
    assert the_plan.hosts.server_name == "server" and prepared.handoff() is None
    assert measure.generator_cores(the_plan) == []
    m = measure.measure(the_plan, the_plan.classes[0], "engine", "validation", 300.0)
    assert m.run.requests > 0 and abs(m.run.throughput / 300 - 1) < 0.15
    assert m.errors == 0 and m.foreign == 0.0  # the clients are not a disturbance here
    assert m.U_host > 0 and m.U_engine > 0
    machine = pipeline._machine(the_plan, config.work_dist())
    assert "host server (10.232.0.10)" in machine and "client1, client2, client3" in machine


def test_a_trace_study_across_hosts_keeps_each_logged_client_on_one_host(test_cluster,
                                                                         tmp_path):
    """--trace with --cluster: the mix's window of the log goes out split by the log's
    clients, so each client's connections and their reuse stay on one client host, and
    the study's own run of it measures on the server host."""
    log = tmp_path / "synth.log"
    made = runner.invoke(app, ["workload", "synth", "clf", str(log), "--requests", "3000"])
    assert made.exit_code == 0, made.output
    config = pipeline.StudyConfig(tmp_path / "s", trace=log, modes="inline,engine",
                                  budget="quick", cluster=test_cluster.scheduler,
                                  handoff_slowdown=None)
    the_plan = pipeline.prepare(config).plan
    mix = the_plan.mix
    assert mix.trace is not None and the_plan.hosts.server_name == "server"
    requests, extra, _ = measure.stream_of(the_plan, mix, "validation", 300.0)
    assert requests.frame.groupby("client").size().max() > 1  # clients that reuse
    done = remote.run_mode(the_plan.hosts, measure.options(the_plan, mix, "engine"),
                           requests, mix.manifest, records=True, threads=1, verify="length",
                           timeout_s=5.0, **extra)
    report, records = done.load.report, done.load.records
    assert done.stats.requests == report["completed"] == len(requests)
    clients = requests.frame["client"].to_numpy()[records["request"].to_numpy()]
    hosts_per_client = pd.Series(records["host"].to_numpy()).groupby(clients).nunique()
    assert (hosts_per_client == 1).all() and set(records["host"]) == set(the_plan.hosts.clients)
    m = measure.measure(the_plan, mix, "engine", "validation", 300.0)
    assert m.errors == 0 and m.run.requests > 0 and m.U_host > 0 and m.U_engine > 0


def test_a_study_across_hosts_measures_the_users_server_on_the_server_host(
        test_cluster, tmp_path, nginx_binary):
    """--server-cmd with --cluster: nginx starts on the server host for the whole study,
    the client hosts load it there, its CPU is read from that host's /proc, and it is
    stopped on the way out."""
    # Another port than the module's testbed server's, which may still listen there.
    ip, port = test_cluster.server.ip, testcluster.SERVER_PORT + 1
    out, folder = tmp_path / "s", tmp_path / "nginx"
    conf = external.nginx_config(folder, out / "fileset", port, address=ip)
    # Two classes: nginx serves the folder that holds both file sets.
    config = pipeline.StudyConfig(out, classes="0,3", modes="inline,engine", budget="quick",
                                  cluster=test_cluster.scheduler, handoff_slowdown=None,
                                  server_cmd=f"{nginx_binary} -c {conf} -p {folder}",
                                  target=f"{ip}:{port}")
    prepared = pipeline.prepare(config)
    the_plan = prepared.plan
    with pipeline._hosting(prepared) as host:
        assert host.hosts == the_plan.hosts and host.live.target.addr == f"{ip}:{port}"
        assert "on host server" in host.describe()
        m = host.measure(the_plan, the_plan.classes[0], "inline", "calibration", 300.0)
        assert m.errors == 0 and abs(m.run.throughput / 300 - 1) < 0.15
        assert m.run.host_s > 0 and m.U_host > 0
        assert host.requests["c0"] == m.run.requests
        assert {name for _, _, name in host.threads["c0"]} == {"nginx"}
        pid = host.live.pid
        assert Path(f"/proc/{pid}").exists()  # one PID space: the namespace's process
    assert not Path(f"/proc/{pid}").exists()


def test_a_users_server_nobody_calls_stops_by_itself(monkeypatch, tmp_path, testbed):
    """The server host's actor stops the user's server when no call has come for its
    lease: a driver that died leaves nothing running for long."""
    monkeypatch.setattr(remote, "LEASE_S", 0.5)
    command = f"{sys.executable} -m http.server {{port}} --bind 127.0.0.1"
    held = remote.UserServer(external.ExternalServer(command), str(tmp_path), None,
                             "127.0.0.1")
    live = held.where()
    assert live.target.addr.startswith("127.0.0.1:") and live.alive()
    held.snapshot()
    deadline = time.monotonic() + 10
    while live.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not live.alive()
    with pytest.raises(RunError, match="is gone"):
        held.snapshot()
    held.stop()  # stopping again is harmless


def test_a_users_server_goes_down_with_a_worker_killed_outright(tmp_path, testbed):
    """SIGKILL runs no cleanup in the worker: the kernel's parent-death signal stops the
    server all the same."""
    code = ("import sys, time\n"
            "from offloadlab.testbed import external, remote\n"
            f"cmd = '{sys.executable} -m http.server {{port}} --bind 127.0.0.1'\n"
            f"held = remote.UserServer(external.ExternalServer(cmd), '{tmp_path}', None, "
            "'127.0.0.1')\n"
            "print(held.where().pid, flush=True)\n"
            "time.sleep(60)\n")
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(worker.stdout.readline())
        assert Path(f"/proc/{pid}").exists()
    finally:
        worker.kill()
        worker.wait()
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid)


def _running(pid: int) -> bool:
    """The process is there and not a zombie waiting for its reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_killed_host_is_reported_lost_and_the_others_kept(test_cluster, served,
                                                             served_set):
    # Last in the module: it kills one of the module's workers.
    duration = 6.0
    requests = stream.poisson(served_set, 60, duration_s=duration, seed=6)
    victim = test_cluster.clients[2]
    killer = threading.Timer(cluster.LEAD_S + 2.0, test_cluster.kill, [victim])
    killer.start()
    try:
        result = cluster.run(test_cluster.scheduler, served, requests, served_set,
                             allow_remote={test_cluster.server.ip}, threads=1)
    finally:
        killer.cancel()
    reported = time.time()
    section = result["cluster"]
    assert section["partial"] and section["lost"] == ["client3"]
    kept = [h for h in section["hosts"] if not h["lost"]]
    assert len(kept) == 2 and all(h["failed"] == 0 for h in kept)
    assert result["completed"] == sum(h["completed"] for h in kept) == sum(
        h["planned"] for h in kept)
    assert reported - section["planned_start_unix_s"] <= duration + cluster.GRACE_S
