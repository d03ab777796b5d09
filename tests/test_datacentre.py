"""``offload datacentre``: the data-centre file, seed 003's studies on the model (each
check against the mechanism behind it), and the commands with good and bad input."""

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.datacentre import config, studies
from offloadlab.errors import InputError
from offloadlab.model import tiers
from offloadlab.workload import fileset
from offloadlab.workload.specs import FileSetSpec

runner = CliRunner()
EXAMPLE = Path(__file__).parents[1] / "examples/datacentre/dc-2004.toml"


@pytest.fixture(scope="module")
def base():
    return config.load(None)


@pytest.fixture(scope="module")
def results(base):
    return {name: make(base) for name, make in studies.STUDIES.items()}


def test_the_example_file_spells_out_the_defaults(base):
    example = config.load(EXAMPLE)
    for field in fields(tiers.DataCentre):
        if field.name != "sites":
            assert getattr(example, field.name) == getattr(base, field.name), field.name
    assert (example.sites[0].sizes == base.sites[0].sizes).all()
    assert tiers.solve(example).throughput == pytest.approx(tiers.solve(base).throughput)
    # Seed 003's layout: 4 proxies, 3 web servers, 1 database, clients on 8 nodes.
    assert (base.proxy.nodes, base.web.nodes, base.db.nodes) == (4, 3, 1)
    assert base.network.client_nodes == 8 and base.sites[0].clients == 64


def test_a_site_can_be_a_folder_with_a_file_set(tmp_path):
    spec = FileSetSpec(name="tiny", n_files=40, min_bytes=1000, max_bytes=90_000, seed=3)
    fileset.materialise(fileset.generate(spec), tmp_path / "tiny")
    (tmp_path / "dc.toml").write_text('[[site]]\nfiles = "tiny"\nclients = 4\n'
                                      '[[site]]\nname = "hot"\nfiles = "dc-2004-1"\n'
                                      'memory_below = "100KiB"\n')
    dc = config.load(tmp_path / "dc.toml")
    manifest = fileset.read_manifest(tmp_path / "tiny")
    assert dc.sites[0].sizes.tolist() == manifest["size_bytes"].astype(float).tolist()
    assert dc.sites[1].in_memory.sum() > 0
    assert (dc.sites[1].sizes[dc.sites[1].in_memory] < 100 * 1024).all()


@pytest.mark.parametrize(("text", "fragments"), [
    ("[proxy]\nnodes = 0\nbogus = 1\n", ["proxy.nodes = 0", "proxy.bogus: unknown field"]),
    ('[web.disks]\nplacement = "mirror"\n', ["web.disks.placement", "striped"]),
    ('[network]\nlatency = "fast"\n', ["network.latency", 'latency = "59us"']),
    ('[[site]]\nfiles = "nowhere"\n', ["neither a file-set preset", "dc-2004-1"]),
    ('[[site]]\ndynamic = 2\n', ["site #1.dynamic"]),
    ('[[site]]\nname = "a"\n[[site]]\nname = "a"\n', ["distinct names"]),
    ("colour = 1\n", ["unknown field 'colour'"]),
    ("[web\n", ["invalid TOML"]),
])
def test_bad_files_name_every_field_at_fault(tmp_path, text, fragments):
    path = tmp_path / "dc.toml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        config.load(path)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert str(path) in str(info.value)


def checks(study) -> dict[str, bool]:
    return {c.claim: c.holds for c in study.checks}


def test_alpha_the_network_gap_closes_as_the_proxies_hit_more(results):
    s = results["alpha"]
    assert all(checks(s).values())
    # Why: at high alpha the clients' own network (the same on every platform) binds.
    top = s.points[s.points["alpha"] == s.points["alpha"].max()]
    assert top["bottleneck"].str.startswith("client").any()


def test_classes_the_disks_matter_only_once_the_working_set_outgrows_memory(results):
    s = results["classes"]
    assert all(checks(s).values())
    small = s.points[s.points["working_set_class"] <= 2]
    assert small.groupby("working_set_class")["throughput"].agg(np.ptp).max() < 0.01 * \
        small["throughput"].min()
    assert (s.points[s.points["working_set_class"] == 3]["bottleneck"] == "web 1 disk 1").all()


def test_hit_ratio_study_spreads_by_disk_speed_as_hits_fall(results):
    s = results["hitratio"]
    assert all(checks(s).values())
    # The response time is linear in the miss ratio, one request at a time.
    for _, one in s.points.groupby(["size_KiB", "disks"]):
        t = one.set_index("hit_ratio")["response_ms"]
        assert t[0.5] == pytest.approx((t[0.0] + t[1.0]) / 2, rel=1e-9)


def test_placement_spreading_adds_seek_capacity_which_striping_does_not(results):
    s = results["placement"]
    held = checks(s)
    assert held["class 1: spreading files over the disks is within 10% of striping"]
    # Not the paper's class-3 result: its files (SURGE sizes, mean ~57 KiB) are read in
    # one seek plus a short transfer, so three separate disks give three times the
    # seeks, and a striped array only a faster transfer.
    assert not held["class 3: striping beats every spreading placement"]
    c3 = s.points[s.points["working_set_class"] == 3].set_index("placement")["throughput"]
    assert c3["popularity"] > 2 * c3["striped"] and c3["striped"] > c3["single"]


def test_memory_fs_gain_follows_the_pollution_of_the_page_cache(results):
    s = results["memfs"]
    held = checks(s)
    assert held["the gain grows with the background's working set"]
    # Not the paper's second claim: in the model a larger foreground set has more
    # lukewarm files that the background pushes to disk, so it gains more.
    assert not held["the gain shrinks as the foreground's working set grows"]
    assert (s.points["page_hit"] > 0.99).all()   # with the memory FS, rarely the disk


def test_cpus_more_slow_cpus_win_exactly_when_stalls_dominate(results, base):
    s = results["cpus"]
    assert all(checks(s).values())
    # CPU-bound throughput is m / (a / speed + b): 4 / (a + b) > 2 / (a / 3.43 + b)
    # holds when b > 0.595 a, a stall share above 0.373 of a tier's request cost.
    small = s.points[(s.points["size_KiB"] == 4)].set_index("stall_share")["ratio"]
    assert small[0.2] < 1 < small[0.6]


def test_checksum_study_matches_table_5_and_the_break_even(results):
    s = results["checksum"]
    assert all(checks(s).values())
    gain = s.points[s.points["costs"] == "datacenter"].set_index("size_KiB")["gain"]
    assert 0 < gain[1] < gain[16]


def test_solve_prints_sites_and_stations_and_writes_them(tmp_path):
    result = runner.invoke(app, ["datacentre", "solve", str(EXAMPLE), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "bottleneck: proxy 1 link" in result.output
    stations = pd.read_csv(tmp_path / "stations.csv")
    assert {"station", "servers", "utilisation", "queue"} <= set(stations.columns)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["sites"][0]["throughput"] > 0


def test_solve_with_the_simulator_shows_both(tmp_path):
    result = runner.invoke(app, ["datacentre", "solve", "--sim", "--requests", "20000",
                                 "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    site = json.loads((tmp_path / "summary.json").read_text())["sites"][0]
    # Seidmann's two-CPU stations are within a few percent of the simulated ones.
    assert site["sim_throughput"] == pytest.approx(site["throughput"], rel=0.05)


def test_study_writes_each_presets_table_figure_and_checks(tmp_path):
    result = runner.invoke(app, ["datacentre", "study", "--preset", "hitratio,checksum",
                                 "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name in ("hitratio", "checksum"):
        assert not pd.read_csv(tmp_path / f"{name}.csv").empty
        assert (tmp_path / f"{name}.png").stat().st_size > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [s["study"] for s in summary["studies"]] == ["hitratio", "checksum"]
    assert "5 of 5 of the paper's claims reproduced" in result.output


@pytest.mark.parametrize(("args", "fragment"), [
    (["study", "--preset", "disks"], "--preset 'disks'"),
    (["solve", "no-such.toml"], "cannot read"),
])
def test_bad_commands_exit_2_naming_the_fix(args, fragment, tmp_path):
    result = runner.invoke(app, ["datacentre", *args, *(
        ["--out", str(tmp_path)] if args[0] == "study" else [])])
    assert result.exit_code == 2
    assert fragment in result.output
