"""What checksum and segmentation offload save, measured through a veth pair in a
private network namespace (needs root, ip and ethtool; .ci/run installs ethtool): the
joint fit against costs it must recover, a short real run, the namespace's cleanup,
and the measured costs fed to the data-centre model."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.datacentre import config
from offloadlab.errors import InputError
from offloadlab.experiments import nic, protocol
from offloadlab.model.protocol_costs import TABLE5
from offloadlab.testbed import netns

SIZES = (1024, 4096, 16384, 65536, 262144)


def namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                          timeout=10).stdout


def test_the_joint_fit_recovers_known_costs():
    truth = nic.Costs(c0=12e-6, copy=0.2e-9, checksum=0.25e-9, packet=1.1e-6,
                      segment=3e-6, r2=1.0)
    runs = pd.DataFrame([{"setting": s, "size": n, "repeat": 0,
                          "host_us": float(truth.predict(s, n)[0]) * 1e6}
                         for s in nic.SETTINGS for n in SIZES])
    fitted = nic.fit(runs)
    for field in ("c0", "copy", "checksum", "packet", "segment"):
        assert getattr(fitted, field) == pytest.approx(getattr(truth, field), rel=1e-6)
    assert fitted.r2 == pytest.approx(1.0)
    costs = nic.byte_costs(fitted, TABLE5["datacenter"])
    assert costs.send(False) == pytest.approx(0.45e-9)   # checksum fused with the copy
    assert costs.send(True) == pytest.approx(0.2e-9)
    assert costs.receive(False) == TABLE5["datacenter"].receive(False)
    saved = nic.savings(runs).set_index("size")
    expected = 1 - truth.predict("offloaded", 65536) / truth.predict("no segmentation", 65536)
    assert saved.loc[65536, "segmentation_saves"] == pytest.approx(expected[0])


def test_a_short_run_over_the_veth_pair(tmp_path, testbed, as_root):
    exp = nic.Experiment(root=tmp_path / "set", sizes=(4096, 16384, 65536), run_s=0.5,
                         repeats=1)
    result = nic.run(exp)
    runs = result.runs
    assert len(runs) == 9 and (runs["throughput"] > 0).all()
    at = runs.set_index(["setting", "size"])["host_us"]
    # Segmenting 64 KiB into 46 packets costs the host more than handing the NIC one
    # segment (measured: 38 against 77 µs).
    assert at["no segmentation", 65536] > at["offloaded", 65536]
    assert "offload-nic-" not in namespaces()
    # The folder the command writes: the same files and keys as before the protocol,
    # and a costs.json the data-centre model reads.
    out = tmp_path / "out"
    names = protocol.write(out, exp, result)
    assert names == ["runs.csv", "savings.csv", "nic.png", "costs.json", "summary.json"]
    costs = json.loads((out / "costs.json").read_text())
    assert {"fit", "packet_s", "byte_costs", "note"} <= set(costs)
    (out / "dc.toml").write_text('[network]\nmeasured_costs = "costs.json"\n')
    assert config.load(out / "dc.toml").network.packet_s == costs["packet_s"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["experiment"]["sizes"] == [4096, 16384, 65536]
    assert {"fit", "savings", "checks", "figures"} <= set(summary)


def test_the_namespace_is_removed_when_a_run_fails(as_root):
    with pytest.raises(RuntimeError), netns.veth() as ns:
        assert ns.name in namespaces()
        raise RuntimeError("a run failed")
    assert ns.name not in namespaces()


def test_measured_costs_feed_the_data_centre_model(tmp_path):
    fitted = nic.Costs(14e-6, 0.18e-9, 0.23e-9, 1.1e-6, 0.0, 0.99)
    costs = nic.byte_costs(fitted, TABLE5["datacenter"])
    (tmp_path / "costs.json").write_text(json.dumps(
        {"fit": fitted.__dict__, "packet_s": fitted.packet, "byte_costs": costs.__dict__}))
    (tmp_path / "dc.toml").write_text('[network]\nmeasured_costs = "costs.json"\n')
    dc = config.load(tmp_path / "dc.toml")
    assert dc.network.packet_s == fitted.packet and dc.network.bytes == costs
    (tmp_path / "bad.toml").write_text('[network]\nmeasured_costs = "dc.toml"\n')
    with pytest.raises(InputError, match=r"network\.measured_costs"):
        config.load(tmp_path / "bad.toml")


@pytest.mark.parametrize(("args", "fragment"), [
    (["--sizes", "4KiB,8KiB"], "three or more"),
    (["--sizes", "4KB,8KiB,16KiB"], "--sizes"),
])
def test_bad_sizes_exit_2(args, fragment, tmp_path):
    result = CliRunner().invoke(app, ["datacentre", "nic", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2 and fragment in result.output


def test_an_experiment_checks_its_sizes(tmp_path):
    with pytest.raises(InputError, match="sizes"):
        nic.Experiment(root=tmp_path, sizes=(0, 1, 2)).check()


def test_an_experiment_names_what_the_machine_lacks(tmp_path, monkeypatch):
    exp = nic.Experiment(root=tmp_path)
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(InputError, match="needs root; run as root"):
        exp.check()
    monkeypatch.setattr(netns.shutil, "which", lambda _: None)
    with pytest.raises(InputError, match="apt-get install iproute2 ethtool"):
        exp.check()
