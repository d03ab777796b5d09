"""Sweeps: grid files, the cartesian product, rows equal to direct evaluation, Parquet
written whole, and the same table from one process, a local pool and a Dask cluster."""

import socket
import tomllib
from pathlib import Path

import distributed
import pandas as pd
import pytest
import tomli_w
from conftest import EXAMPLES, LARGE, SMALL, klass
from typer.testing import CliRunner

from offloadlab import model, scenario, sweep
from offloadlab.cli import app
from offloadlab.cli.evidence import example_files
from offloadlab.errors import InputError
from offloadlab.results import METRICS
from offloadlab.units import parse_range

GRID = EXAMPLES / "grids" / "large-files.toml"
runner = CliRunner()

# Two classes so that "*" axes, class rows and the mix are exercised.
TWO = {"name": "two", "class": [klass("big", 20.0, 1.0, LARGE), klass("small", 60.0, 0.0, SMALL)]}


def grid_of(axes, sources=("model",), sim=None, base=TWO):
    data = {"scenario": base, "sources": list(sources), "grid": axes}
    if sim is not None:
        data["sim"] = sim
    return sweep.grid_from_dict(data, "g.toml")


def error_of(data):
    with pytest.raises(InputError) as err:
        sweep.grid_from_dict({"scenario": TWO, **data}, "g.toml")
    return str(err.value)


# --- grid files ----------------------------------------------------------------------------

def test_example_grid_loads_and_is_not_taken_for_a_scenario():
    grid = sweep.load_grid(GRID)
    assert [a.key for a in grid.axes] == ["rate", "c3.host_overhead", "options.system_delay"]
    assert grid.size == 11 * 3 * 2 and grid.sources == ("model", "sim")
    assert grid.axes[0].values == tuple(float(r) for r in range(25, 276, 25))
    assert all(p.parent == EXAMPLES for p in example_files())


@pytest.mark.parametrize("data, fragments", [
    ({"grid": {"c9.rate": [1]}}, ['no class "c9"', "classes: big, small", "* for every class"]),
    ({"grid": {"big.speed": [1]}}, ["big.speed", "unknown class field 'speed'", "host_proto"]),
    ({"grid": {"options.colour": ["red"]}}, ["unknown option 'colour'", "system_delay"]),
    ({"grid": {"speed": [1]}}, ["unknown axis 'speed'", "CLASS.FIELD"]),
    ({"grid": {"big.offload": []}}, ["big.offload = []", "at least one value"]),
    ({"grid": {"rate": "50:10:5"}}, ["rate", "STOP >= START"]),
    ({"grid": {"rate": "10:50"}}, ["rate", "START:STOP:STEP"]),
    ({"grid": {"rate": [10, -5]}}, ["rate = -5.0", ">= 0"]),
    ({"grid": {"big.offload": [0.5, 1.5]}}, ["big.offload = 1.5", 'class "big": offload',
                                             "[0, 1]"]),
    ({"grid": {"small.host_proto": ["pareto(alpha=1.8, k=5ms)"]}},
     ["small.host_proto = 'pareto(alpha=1.8, k=5ms)'", "alpha > 2"]),
    ({"grid": {"options.system_delay": ["max", "mean"]}}, ["'mean' is not one of"]),
    ({"grid": {"big.offload": [0, 1], "*.offload": [1]}},
     ["axes 'big.offload' and '*.offload' both set big.offload; keep one"]),
    ({"grid": {"rate": "1:1000000:1", "big.offload": [0, 1]}},
     ["2,000,000 points", "at most 1,000,000"]),
    ({"grid": {"rate": "0:1e7:1"}}, ["10,000,001 values"]),
    ({"sources": ["model", "simulator"]}, ["unknown source 'simulator'", '"sim"']),
    ({"sources": ["model", "model"]}, ["'model' is listed twice"]),
    ({"sources": []}, ["sources = []"]),
    ({"sources": ["model", "sim"], "sim": {"requests": 10}}, ["sim: requests=10", ">= 1000"]),
    ({"sources": ["sim"], "sim": {"reqs": 10}}, ["unknown option 'reqs'", "requests"]),
    ({"sources": ["sim"], "grid": {"rate": [0, 10]}}, ["rate = 0.0", "> 0 requests/s"]),
    ({"grid": {"rate": [10]}, "axes": 1}, ["unknown key 'axes'", "known keys"]),
])
def test_bad_grids_name_the_file_the_key_and_the_fix(data, fragments):
    message = error_of(data)
    assert message.startswith("g.toml: ")
    for fragment in fragments:
        assert fragment in message


def test_all_problems_of_a_grid_are_reported_at_once():
    message = error_of({"sources": ["modle"], "grid": {"c9.rate": [1], "big.offload": [2]}})
    assert len(message.splitlines()) == 3
    assert all(line.startswith("g.toml: ") for line in message.splitlines())


def test_scenario_problems_are_reported_through_the_grid(tmp_path):
    (tmp_path / "bad.toml").write_text('name = "bad"\n')
    (tmp_path / "grid.toml").write_text('scenario = "bad.toml"\n')
    with pytest.raises(InputError, match=r"grid.toml: scenario: .*bad.toml: no traffic classes"):
        sweep.load_grid(tmp_path / "grid.toml")
    (tmp_path / "grid.toml").write_text('scenario = "missing.toml"\n')
    with pytest.raises(InputError, match=r"cannot read 'missing.toml'.*relative to the grid"):
        sweep.load_grid(tmp_path / "grid.toml")
    with pytest.raises(InputError, match="scenario: missing"):
        sweep.grid_from_dict({"grid": {}}, "g.toml")


def test_a_grid_file_may_hold_its_scenario_and_need_no_axes(tmp_path):
    inline = {"scenario": {"name": "inline", "class": [klass("c", 40.0, 1.0, LARGE)]}}
    (tmp_path / "grid.toml").write_text(tomli_w.dumps(inline))
    grid = sweep.load_grid(tmp_path / "grid.toml")
    assert grid.size == 1 and grid.axes == ()
    assert grid.scenario_at(0).name == "inline"
    rows = sweep.run(grid, workers=1)
    assert rows["rate"].tolist() == [40.0, 40.0] and rows["class"].tolist() == ["all", "c"]


def test_the_model_accepts_an_idle_rate():
    rows = sweep.run(grid_of({"rate": [0, 10]}), workers=1)
    assert rows[rows["rate"] == 0]["U_noe"].tolist() == [0.0, 0.0, 0.0]


def test_dotted_keys_may_be_written_as_tables(tmp_path):
    quoted = '"big.offload" = [0, 1]\n"options.cpu_queue" = ["mm1", "mg1"]\n'
    bare = "big.offload = [0, 1]\noptions.cpu_queue = [\"mm1\", \"mg1\"]\n"
    grids = [sweep.grid_from_dict({"scenario": TWO, "grid": tomllib.loads(text)})
             for text in (quoted, bare)]
    assert grids[0].axes == grids[1].axes


def test_ranges_include_stop_and_give_clean_values():
    assert parse_range("0:1:0.1") == [i / 10 for i in range(11)]
    assert parse_range("10:90:20") == [10, 30, 50, 70, 90]
    grid = grid_of({"big.offload": "0:1:0.25", "options.util_cap": "0.5:0.9:0.2"})
    assert grid.axes[0].values == (0, 0.25, 0.5, 0.75, 1)
    assert grid.axes[1].values == (0.5, 0.7, 0.9)


# --- points and rows -------------------------------------------------------------------------

def test_points_are_the_cartesian_product_with_the_last_axis_fastest():
    axes = {"rate": [40, 80], "*.offload": [0, 0.5, 1], "options.system_delay": ["max", "sum"]}
    grid = grid_of(axes)
    assert grid.size == 12
    frame = sweep.run(grid, workers=1)
    assert list(frame.columns[:6]) == [*axes, "source", "class", "point"]
    assert len(frame) == 12 * 3  # points x (all + 2 classes)
    points = frame[frame["class"] == "all"]
    expected = [(r, f, d) for r in (40.0, 80.0) for f in (0.0, 0.5, 1.0) for d in ("max", "sum")]
    assert list(points[list(axes)].itertuples(index=False, name=None)) == expected
    assert points["point"].tolist() == list(range(12))
    assert list(frame["class"][:3]) == ["all", "big", "small"]
    # "*" set every class; the overall f is the rate-weighted mean of the classes'.
    per_class = frame[frame["class"] != "all"]
    assert (per_class["f"] == per_class["*.offload"]).all()


def test_model_rows_equal_evaluating_the_point_directly():
    grid = grid_of({"rate": [50, 90], "small.offload": [0, 1],
                    "big.host_overhead": ["exp(mean=1ms)", "det(4ms)"]})
    frame = sweep.run(grid, workers=1)
    point = 7  # rate 90, small.offload 1, big.host_overhead det(4ms)
    data = {**TWO, "class": [dict(c) for c in TWO["class"]]}
    data["class"][0]["host_overhead"] = "det(4ms)"
    data["class"][1]["offload"] = 1
    direct = model.evaluate(scenario.from_dict(data), rates=[90]).rows()
    got = frame[frame["point"] == point]
    assert got["rate"].tolist() == [90.0] * 3
    assert got["big.host_overhead"].tolist() == ["det(4ms)"] * 3
    for row, want in zip(got.to_dict("records"), direct, strict=True):
        assert {k: row[k] for k in want} == want
        assert row["source"] == "model"
        assert pd.isna(row["EXo_max"]) == (row["class"] == "all")  # a per-class bound


def test_a_hit_ratio_axis_takes_the_host_work_of_the_hits_away():
    frame = sweep.run(grid_of({"big.hit_ratio": "0:1:0.25"}), workers=1)
    big = frame[frame["class"] == "big"].sort_values("big.hit_ratio")
    assert big["big.hit_ratio"].tolist() == [0, 0.25, 0.5, 0.75, 1]
    u = big["U_cpu"].to_numpy()
    assert u[-1] == 0 and u[0] > 0
    assert u[1:] == pytest.approx(u[0] * (1 - big["big.hit_ratio"].to_numpy()[1:]))


def test_without_a_rate_axis_class_rates_set_the_total():
    grid = grid_of({"big.rate": [10, 30]})
    rows = sweep.run(grid, workers=1)
    assert rows[rows["class"] == "all"]["rate"].tolist() == [70.0, 90.0]


def test_a_mixed_axis_is_stored_as_text_and_written(tmp_path):
    grid = grid_of({"big.offload": [0.5, "auto"]})
    frame = sweep.run(grid, workers=1)
    assert frame["big.offload"].unique().tolist() == ["0.5", "auto"]
    sweep.write(frame, tmp_path / "mixed.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "mixed.parquet"), frame)


@pytest.fixture(scope="module")
def example_frame():
    """The example grid swept in one process (66 points of model and sim): computed once,
    the reference the pool, the cluster and the CLI must each reproduce exactly."""
    return sweep.run(sweep.load_grid(GRID), workers=1)


def test_parquet_round_trip_keeps_values_types_and_grid_description(tmp_path, example_frame):
    frame = example_frame
    path = tmp_path / "sweep.parquet"
    sweep.write(frame, path)
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(back, frame)
    assert back["saturated"].dtype == bool and back["T"].dtype == float
    assert back.attrs["axes"] == ["rate", "c3.host_overhead", "options.system_delay"]
    assert back.attrs["scenario"] == "large files" and back.attrs["points"] == 66
    assert set(METRICS) <= set(back.columns)
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.parquet"]


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    frame = sweep.run(grid_of({"rate": [10]}), workers=1)

    def half_then_fail(self, path, **kwargs):
        Path(path).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        sweep.write(frame, tmp_path / "out.parquet")
    assert list(tmp_path.iterdir()) == []


def test_progress_counts_points_up_to_the_total():
    seen = []
    sweep.run(grid_of({"rate": "1:40:1"}), workers=1, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(14, 40), (27, 40), (40, 40)]  # 3 chunks of at most MIN_MODEL_CHUNK


def test_chunks_cover_every_point_once_and_spread_neighbours():
    for size, workers, sources in [(1, 2, ["model"]), (66, 2, ["model"]), (66, 2, ["sim"]),
                                   (10_007, 3, ["model"]), (5, 8, ["sim"])]:
        chunks = sweep._chunks(size, workers, sources)
        assert sorted(p for c in chunks for p in c) == list(range(size))
        assert max(map(len, chunks)) <= sweep.MAX_CHUNK
    assert len(sweep._chunks(66, 2, ["sim"])) == 8  # CHUNKS_PER_WORKER per worker
    assert list(sweep._chunks(66, 2, ["sim"])[0])[:3] == [0, 8, 16]


# --- where points run ------------------------------------------------------------------------

def test_local_pool_equals_one_process(example_frame):
    grid = sweep.load_grid(GRID)
    seen = []
    pooled = sweep.run(grid, workers=2, progress=lambda d, t: seen.append(d))
    pd.testing.assert_frame_equal(pooled, example_frame, check_exact=True)
    assert len(seen) > 2 and sorted(seen) == seen and seen[-1] == grid.size


@pytest.mark.parametrize("kwargs, fragment", [
    ({"cluster": "localhost:8786"}, "tcp://HOST:PORT"),
    ({"cluster": "tcp://localhost:8786", "workers": 2}, "exclude each other"),
    ({"workers": 0}, "1 or more"),
])
def test_bad_run_options_are_input_errors(kwargs, fragment):
    with pytest.raises(InputError, match=fragment):
        sweep.run(grid_of({}), **kwargs)


def test_an_unreachable_scheduler_fails_within_the_timeout():
    with socket.socket() as s:  # a loopback port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(sweep.SweepError, match="no Dask scheduler answered within 1 s"):
        sweep.run(grid_of({}), cluster=f"tcp://127.0.0.1:{port}", connect_timeout=1)


def grid_reading(tmp_path):
    """A grid whose points read a cost file, which is then removed: every point fails in
    its worker with the scenario module's message."""
    costs = tmp_path / "costs.csv"
    costs.write_text("0.001\n0.002\n")
    base = {"name": "e", "class": [klass("c", 50.0, 1.0, LARGE, app="empirical(path=costs.csv)")]}
    grid = sweep.grid_from_dict({"scenario": base, "grid": {"rate": "1:40:1"}}, "g.toml", tmp_path)
    costs.unlink()
    return grid


def test_a_failing_point_stops_the_pool_with_its_message(tmp_path):
    with pytest.raises(InputError, match=r"g.toml: point \d+ \(rate = .*cannot read .*costs"):
        sweep.run(grid_reading(tmp_path), workers=2)


@pytest.fixture(scope="module")
def dask_cluster():
    # Ephemeral loopback ports only; dashboard_address=None would still bind its HTTP
    # status server to port 8787.
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0")
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def test_cluster_equals_one_process_for_the_example_grid(dask_cluster, example_frame):
    grid = sweep.load_grid(GRID)
    seen = []
    remote = sweep.run(grid, cluster=dask_cluster, progress=lambda d, t: seen.append(d))
    pd.testing.assert_frame_equal(remote, example_frame, check_exact=True)
    assert seen[-1] == grid.size


def test_cluster_equals_local_pool_for_model_and_sim(dask_cluster):
    grid = grid_of({"rate": [30, 60], "big.offload": [0, 1]}, sources=("model", "sim"),
                   sim={"requests": 5000, "seed": 7})
    local = sweep.run(grid, workers=2)
    pd.testing.assert_frame_equal(sweep.run(grid, cluster=dask_cluster), local,
                                  check_exact=True)
    assert local["source"].unique().tolist() == ["model", "sim"]
    assert {"T_hw", "U_cpu_hw"} <= set(local.columns)
    assert local.attrs["sim"] == {"requests": 5000, "seed": 7}


def test_a_failing_point_stops_the_cluster_with_its_message(dask_cluster, tmp_path):
    with pytest.raises(InputError, match=r"cannot read .*costs\.csv"):
        sweep.run(grid_reading(tmp_path), cluster=dask_cluster)


def test_every_point_uses_the_same_seed():
    """Common random numbers: a point's sim rows do not depend on which other points
    the grid has, or where the point falls in it."""
    sim = {"requests": 5000, "seed": 3}
    both = sweep.run(grid_of({"rate": [30, 60]}, ("sim",), sim), workers=1)
    alone = sweep.run(grid_of({"rate": [60]}, ("sim",), sim), workers=1)
    metrics = [c for c in alone.columns if c not in ("point",)]
    pd.testing.assert_frame_equal(both[both["rate"] == 60][metrics].reset_index(drop=True),
                                  alone[metrics], check_exact=True)


# --- the command -----------------------------------------------------------------------------

def test_cli_writes_parquet(tmp_path, example_frame):
    out = tmp_path / "large.parquet"
    result = runner.invoke(app, ["sweep", str(GRID), "--workers", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "264 rows written" in result.output
    frame = pd.read_parquet(out)
    assert len(frame) == 264 and frame["point"].max() == 65
    pd.testing.assert_frame_equal(frame, example_frame, check_exact=True)


def test_cli_prints_a_summary_without_out(tmp_path):
    # The example grid's file with two rates and short simulations: the summary and its
    # hint do not need 66 points of 50,000 requests.
    data = tomllib.loads(GRID.read_text())
    data["scenario"] = str(EXAMPLES / "large-files.toml")
    data["grid"]["rate"] = "25:50:25"
    data["sim"]["requests"] = 5_000
    small = tmp_path / "grid.toml"
    small.write_text(tomli_w.dumps(data))
    result = runner.invoke(app, ["sweep", str(small), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "12 points" in result.output and "--out results.parquet" in result.output


def test_cli_bad_grid_exits_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(f'scenario = "{EXAMPLES / "large-files.toml"}"\n[grid]\n"c4.rate" = [1]\n')
    result = runner.invoke(app, ["sweep", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}: grid: c4.rate" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_cli_failed_sweep_leaves_no_file(tmp_path, monkeypatch):
    calls, evaluate = [], model.evaluate

    def fail_on_third(sc, rates=None):
        calls.append(rates)
        if len(calls) == 3:
            raise RuntimeError("solver crashed")
        return evaluate(sc, rates)

    monkeypatch.setattr(sweep.model, "evaluate", fail_on_third)  # workers=1: in-process
    result = runner.invoke(app, ["sweep", str(GRID), "--workers", "1",
                                 "--out", str(tmp_path / "r.parquet")])
    assert result.exit_code == 1 and "solver crashed" in str(result.exception)
    assert list(tmp_path.iterdir()) == []


def test_cli_unreachable_scheduler_exits_1(monkeypatch):
    monkeypatch.setattr(sweep, "CONNECT_TIMEOUT_S", 1.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = runner.invoke(app, ["sweep", str(GRID), "--cluster", f"tcp://127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert "dask scheduler" in result.output and "Traceback" not in result.output
