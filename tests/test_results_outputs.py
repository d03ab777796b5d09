"""write_outputs: one writer for every experiment's output folder, and the experiments'
protocol's write on top of it."""

import json

import pandas as pd
import pytest
from matplotlib.figure import Figure

from offloadlab.experiments import protocol
from offloadlab.results import Check, write_outputs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_each_file_is_written_in_the_form_its_suffix_names_json_last(tmp_path):
    frame = pd.DataFrame({"rate": [1.0, 2.0], "T": [0.1, float("nan")]})
    fig = Figure()
    fig.add_subplot().plot([0, 1], [1, 0])
    names = write_outputs(tmp_path / "out", {
        "summary.json": {"inf": float("inf"), "nan": float("nan")},
        "runs.csv": frame, "series.parquet": frame, "plot.png": fig,
        "nothing.png": None, "scenario.toml": 'name = "x"\n'})
    assert names == ["runs.csv", "series.parquet", "plot.png", "scenario.toml",
                     "summary.json"]
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(names)  # no temporary left
    pd.testing.assert_frame_equal(pd.read_csv(out / "runs.csv"), frame)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "series.parquet"), frame)
    assert (out / "plot.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "scenario.toml").read_text() == 'name = "x"\n'
    assert json.loads((out / "summary.json").read_text()) == {"inf": "inf", "nan": None}


def test_an_unknown_suffix_is_refused_and_a_failed_file_leaves_nothing(tmp_path):
    with pytest.raises(ValueError, match=r"no writer for '\.xlsx'"):
        write_outputs(tmp_path, {"runs.xlsx": pd.DataFrame()})

    class Broken(Figure):
        def savefig(self, *args, **kwargs):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_outputs(tmp_path, {"plot.png": Broken(), "summary.json": {}})
    assert list(tmp_path.iterdir()) == []


class _Experiment:
    def describe(self) -> dict:
        return {"clients": 4}

    def check(self) -> None:
        pass


class _Result:
    def tables(self) -> dict:
        return {"runs.csv": pd.DataFrame({"rate": [1.0]})}

    def summary(self) -> dict:
        return {"summary": [{"rate": 1.0}], "extra": 1}

    def checks(self) -> list[Check]:
        return [Check("a claim", True, "1 > 0")]

    def figures(self) -> dict:
        return {"plot.png": Figure(), "empty.png": None}


def test_an_experiments_folder_holds_its_tables_figures_and_summary(tmp_path):
    names = protocol.write(tmp_path, _Experiment(), _Result())
    assert names == ["runs.csv", "plot.png", "summary.json"]
    assert json.loads((tmp_path / "summary.json").read_text()) == {
        "experiment": {"clients": 4}, "summary": [{"rate": 1.0}], "extra": 1,
        "checks": [{"claim": "a claim", "holds": True, "detail": "1 > 0"}],
        "figures": ["plot.png"]}
