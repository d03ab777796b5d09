"""The host the testbed's server runs on (issue 48): today's, and seed 000's, which
copies every body and sends it from a network namespace of its own over a veth pair with
TSO, GSO and transmit checksum offload off (needs root, ip and ethtool)."""

import subprocess

import pytest

from offloadlab.errors import InputError
from offloadlab.study import pipeline
from offloadlab.testbed import host_profile, netns
from offloadlab.testbed.modes import run_mode
from offloadlab.testbed.server import ServerOptions
from offloadlab.workload import fileset, stream


def test_a_profile_changes_only_what_it_says(tmp_path):
    base = ServerOptions(root=tmp_path)
    assert host_profile.named("modern").server(base, None) == base
    seed = host_profile.named("seed-era").server(base, "offload-host-1")
    assert (seed.sendfile_above, seed.netns, seed.host) == (
        host_profile.NEVER_SENDFILE, "offload-host-1", netns.SERVER_IP)
    assert seed.replace(sendfile_above=8000, netns=None, host="127.0.0.1") == base
    # The namespace is the testbed's own: as private as loopback.
    assert seed.address() == netns.SERVER_IP
    with pytest.raises(InputError, match="not a loopback"):
        seed.replace(netns=None).address()
    with pytest.raises(InputError, match="modern, seed-era"):
        host_profile.named("2009")


def test_a_study_refuses_a_host_it_cannot_run_on(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="host profile '2009'"):
        pipeline.StudyConfig(tmp_path, host_profile="2009")
    with monkeypatch.context() as m:
        m.setattr(netns.os, "geteuid", lambda: 1000)
        with pytest.raises(InputError, match="needs root"):
            pipeline.StudyConfig(tmp_path, host_profile="seed-era")
    with pytest.raises(InputError, match="--host-profile seed-era"):
        pipeline.StudyConfig(tmp_path, host_profile="seed-era", server_cmd="nginx",
                             target="127.0.0.1:8080")


def _features(ns: netns.Veth) -> dict[str, str]:
    out = subprocess.run(["ip", "netns", "exec", ns.name, "ethtool", "-k", ns.device],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    return dict(line.strip().split(": ", 1)[:2] for line in out.splitlines()[1:]
                if ": " in line)


def test_the_seed_era_host_serves_from_its_namespace_with_offloads_off(
        served_set, testbed, as_root):
    profile = host_profile.named("seed-era")
    manifest = fileset.read_manifest(served_set)
    with profile.hosting() as ns:
        features = _features(ns)
        for name in ("tx-checksumming", "tcp-segmentation-offload",
                     "generic-segmentation-offload"):
            assert features[name].startswith("off"), (name, features[name])
        options = profile.server(ServerOptions(root=served_set, mode="engine"), ns.name)
        requests = stream.closed(manifest, 4, requests=30, keep_alive="10", seed=3)
        done = run_mode(options, requests, manifest, verify="checksum", max_duration_s=30)
        report = done.load.parsed
        # Every body whole and right, sent from the namespace through its veth pair.
        assert (report.completed, report.failed) == (120, 0)
        assert done.stats.requests == 120
    assert ns.name not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                         text=True, timeout=10).stdout
