"""Seed 003's three tiers on the testbed: the load's dynamic share, and short runs of
each set-up against SQLite (the embedded default) and a real PostgreSQL server, checked
by what each tier must have done."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.experiments import multitier
from offloadlab.workload import fileset


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from offloadlab.workload.specs import FileSetSpec

    root = tmp_path_factory.mktemp("tiers") / "set"
    fileset.materialise(fileset.generate(FileSetSpec(name="t", n_files=80,
                                                     max_bytes=100_000, seed=4)), root)
    return root


def test_the_load_mixes_static_files_and_dynamic_pages(site, tmp_path):
    exp = multitier.Experiment(site, db=str(tmp_path / "x.db"), dynamic=0.25, queries=3,
                               work_us=50)
    objects = exp.objects()
    pages = objects["path"].str.contains("?", regex=False)
    assert objects["probability"].sum() == pytest.approx(1.0)
    assert objects.loc[pages, "probability"].sum() == pytest.approx(0.25)
    assert objects.loc[pages, "path"].str.endswith("?work=50&query=3").all()
    # A page's body is its file: same size as the static row.
    assert (objects.loc[pages, "size_bytes"].to_numpy()
            == objects.loc[~pages, "size_bytes"].to_numpy()).all()


def check_tiers(result, dynamic: float, queries: int) -> None:
    runs, table = result.runs, result.medians().set_index("setup")
    assert list(table.index) == list(multitier.SETUPS)
    assert (runs["errors"] == 0).all()
    # Dynamic pages are never cached: every set-up queries the database for them.
    assert table["db_queries_per_request"].to_numpy() == pytest.approx(
        dynamic * queries, rel=0.25)
    assert table.loc["web + db", "proxy_hit_rate"] == 0
    assert (table.loc[["proxy on host", "proxy on engine"], "proxy_hit_rate"] > 0.3).all()
    assert table.loc["proxy on engine", "engine_cpu_us"] > 0
    assert table.loc["web + db", "engine_cpu_us"] == 0
    assert (table["db_us_per_query"] > 0).all()


def test_three_tiers_on_sqlite(site, tmp_path, testbed):
    db = multitier.default_db(tmp_path, rows=1000)
    exp = multitier.Experiment(site, db=str(db), dynamic=0.2, queries=5, clients=4,
                               run_s=0.6, repeats=1, host_core=0, engine_core=1)
    check_tiers(multitier.run(exp), 0.2, 5)


def test_three_tiers_on_postgresql(site, postgres_url, testbed):
    from offloadlab.testbed.server import fill_db

    fill_db(postgres_url, 1000)
    exp = multitier.Experiment(site, db=postgres_url, dynamic=0.2, queries=2, clients=4,
                               run_s=0.6, repeats=1, host_core=0, engine_core=1)
    check_tiers(multitier.run(exp), 0.2, 2)


def test_the_command_runs_with_the_embedded_default_and_refuses_bad_input(site, tmp_path,
                                                                         testbed):
    runner = CliRunner()
    result = runner.invoke(app, ["datacentre", "tiers", "--fileset", str(site), "--rows",
                                 "500", "--run-length", "0.3s", "--repeats", "1",
                                 "--clients", "2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "items.db").is_file() and (tmp_path / "summary.csv").is_file()
    bad = runner.invoke(app, ["datacentre", "tiers", "--fileset", str(site), "--dynamic",
                              "1.5", "--out", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "dynamic" in bad.output
