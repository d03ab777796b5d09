"""Seed 003's hybrid placement on the real server: which files go to memory, that the
server answers exactly those from memory (byte for byte) and reads every other file
from the device when asked to (counted by the kernel in /proc/self/io, since the server
runs in this process), and the experiment that compares it with all-disk."""

from __future__ import annotations

import http.client
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.experiments import hybrid, protocol
from offloadlab.testbed import load
from offloadlab.testbed.server import ServerOptions, memory_files, running
from offloadlab.workload import fileset, stream
from offloadlab.workload.specs import FileSetSpec

PAGE = 4096


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("hybrid") / "set"
    spec = FileSetSpec(name="h", n_files=120, max_bytes=400_000, zipf_alpha=0.9, seed=5)
    fileset.materialise(fileset.generate(spec), root)
    return root, fileset.read_manifest(root)


def device_reads() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes"))


def test_memory_files_follow_the_budget_or_the_size_rule(site):
    root, manifest = site
    by_popularity = manifest.sort_values("probability", ascending=False, kind="stable")
    budget = int(by_popularity["size_bytes"].iloc[:10].sum())
    chosen = memory_files(root, budget=budget)
    assert set(chosen) == set(by_popularity["path"].iloc[:10].astype(str))
    small = memory_files(root, below="20KiB")
    assert set(small) == set(manifest.loc[manifest["size_bytes"] < 20 * 1024, "path"])
    with pytest.raises(InputError, match="threshold or a memory budget"):
        memory_files(root)


def test_memory_files_are_served_from_memory_and_the_rest_from_the_device(site, testbed):
    root, manifest = site
    memory = memory_files(root, budget="1MiB")
    requests = stream.closed(manifest, 4, requests=150, keep_alive=50, seed=2)
    paths = requests.frame["object"].astype(str)
    in_memory = paths.isin(memory).to_numpy()
    sizes = requests.frame["size_bytes"].to_numpy()
    with running(ServerOptions(root=root, memory=memory, uncached=True)) as server:
        before = device_reads()
        result = load.run(server.url, requests, manifest, threads=1, verify="checksum")
        read = device_reads() - before
    assert result.report["failed"] == 0 and result.report["completed"] == len(paths)
    assert server.final.memory_tier.hits == int(in_memory.sum()) > 0
    assert server.final.memory_tier.files == len(memory)
    # Every other answer was read from the device: its bytes, up to whole pages.
    disk = sizes[~in_memory]
    assert disk.sum() <= read <= (np.ceil(disk / PAGE) * PAGE).sum() + 64 * PAGE


def test_without_uncached_the_page_cache_serves_repeat_reads(site, testbed):
    root, manifest = site
    requests = stream.closed(manifest, 2, requests=100, keep_alive=50, seed=3)
    with running(ServerOptions(root=root)) as server:
        load.run(server.url, requests, manifest, threads=1, verify="length")  # warm
        before = device_reads()
        load.run(server.url, requests, manifest, threads=1, verify="length")
        assert device_reads() - before < 64 * PAGE


def test_a_head_for_a_file_in_memory_has_its_length_and_no_body(site, testbed):
    root, manifest = site
    path = str(manifest["path"].iloc[0])
    with running(ServerOptions(root=root, memory=(path,))) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        conn.request("HEAD", "/" + path)
        response = conn.getresponse()
        assert response.status == 200 and response.read() == b""
        assert int(response.getheader("Content-Length")) == (root / path).stat().st_size
        conn.close()


def test_the_experiment_compares_all_disk_with_the_hybrid(site, tmp_path, testbed):
    root, manifest = site
    exp = hybrid.Experiment({"small": root}, memory_budget="1MiB", clients=4, run_s=0.5,
                            repeats=1)
    result = hybrid.run(exp)
    runs = result.runs
    assert sorted(runs["placement"]) == ["disk", "hybrid"] and (runs["errors"] == 0).all()
    summary = result.medians().iloc[0]
    memory = memory_files(root, budget="1MiB")
    expected = manifest.loc[manifest["path"].isin(memory), "probability"].sum()
    # The share of requests the memory tier answered is the popularity it holds.
    assert summary["memory_share"] == pytest.approx(expected, abs=0.05)
    assert summary["memory_files"] == len(memory)
    assert summary["gain"] == pytest.approx(summary["hybrid_throughput"]
                                            / summary["disk_throughput"] - 1)
    # The folder the command writes: the same files and keys as before the protocol.
    names = protocol.write(tmp_path, exp, result)
    assert names == ["runs.csv", "summary.csv", "hybrid.png", "summary.json"]
    written = json.loads((tmp_path / "summary.json").read_text())
    assert {"classes", "memory_below", "memory_budget", "mode", "clients", "run_s",
            "repeats", "experiment", "checks", "figures"} <= set(written)


def test_bad_placements_are_refused_naming_the_fix(site, tmp_path):
    root, _ = site
    with pytest.raises(InputError, match="memory"):
        ServerOptions(root=root, memory=("no/such.bin",)).check()
    runner = CliRunner()
    bare = tmp_path / "bare"
    bare.mkdir()
    result = runner.invoke(app, ["serve", str(bare), "--memory-budget", "1MiB"])
    assert result.exit_code == 2 and "manifest" in result.output
    result = runner.invoke(app, ["datacentre", "testbed", "--classes", "9", "--out",
                                 str(tmp_path / "o")])
    assert result.exit_code == 2 and "--classes" in result.output
