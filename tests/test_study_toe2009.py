"""Seed 000's experiment as a study (``offload study --preset toe-2009``): the preset's
plan and the flags it refuses, and its section (the seed's Tables 4-1, 4-3 and 4-4 beside
ours) from a study on the synthetic testbed (tests/synthetic_testbed.py), in the
report, summary.json and the terminal."""

import math
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console
from synthetic_testbed import Costs, SyntheticTestbed, manifest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.cli.study import seed_table
from offloadlab.errors import InputError
from offloadlab.report.html import write_report
from offloadlab.study import compare, pipeline, plan, run, seed_tables, toe2009

# Files (bytes) of three of seed 000's classes, as the synthetic testbed serves them: a
# small one and two large ones, enough for each of the seed's claims (all five took the
# fixture 15.5 s against 8.6 s, most of it the model's bottom line of the mix).
SIZES = {0: [200, 500, 800, 1000], 2: [20_000, 50_000, 80_000],
         4: [2_000_000, 3_000_000, 4_000_000]}
KiB, MiB = 1024, 1024 * 1024
# The set-up times the synthetic saturation runs are given (it measures none).
CONNECT_S = {"inline": 0.3e-3, "engine": 0.1e-3}


def _plan() -> plan.Plan:
    """Each class on its own, inline against engine mode, on seed 000's file sets."""
    loads = tuple(plan.ClassLoad(f"c{c}", Path("/nonexistent"), manifest(sizes), c)
                  for c, sizes in SIZES.items())
    return plan.Plan(loads, ("inline", "engine"), plan.budget("quick"), None, None, None, 1,
                     "synthetic", {load.name: 1 / len(loads) for load in loads})


@pytest.fixture(scope="module")
def study():
    """The testbed, the study's tables (with set-up times) and the comparison."""
    testbed = SyntheticTestbed(Costs())
    found = run.run(_plan(), measure=testbed)
    tables = compare.tables(found, {})
    saturation = tables.saturation.assign(connect_s=tables.saturation["mode"].map(CONNECT_S))
    tables = replace(tables, saturation=saturation)
    return testbed, found, tables, toe2009.compare(found.plan, tables)


def test_the_preset_studies_classes_0_to_4_inline_and_through_the_engine(tmp_path):
    config = pipeline.StudyConfig(tmp_path / "s", preset="toe-2009", budget="standard",
                                  run_length="1s")
    assert config.size_classes() == (0, 1, 2, 3, 4)
    assert config.mode_names() == ("inline", "engine")
    # The other flags still apply.
    assert config.chosen_budget().name == "standard" and config.chosen_budget().run_s == 1
    # Without the preset the same flags choose freely.
    assert pipeline.StudyConfig(tmp_path, classes="0,3", modes="inline,uring").mode_names(
    ) == ("inline", "uring")
    assert pipeline.StudyConfig(tmp_path).mode_names() == ("inline", "engine")


@pytest.mark.parametrize(("settings", "fragment"), [
    ({"classes": "0,3"}, "--preset toe-2009 and --classes 0,3: give one"),
    ({"modes": "inline,engine"}, "--preset toe-2009 and --modes inline,engine: give one"),
    ({"fileset": Path("files")}, "--preset toe-2009 and --fileset files: give one"),
    ({"trace": Path("access.log")}, "--preset toe-2009 and --trace access.log: give one"),
    ({"preset": "toe-2008"}, "--preset 'toe-2008': use toe-2009"),
])
def test_the_preset_refuses_the_flags_that_choose_what_it_fixes(tmp_path, settings, fragment):
    with pytest.raises(InputError, match=re.escape(fragment)):
        pipeline.StudyConfig(tmp_path / "s", **{"preset": "toe-2009", **settings})
    assert not (tmp_path / "s").exists()


def test_the_command_refuses_the_preset_with_classes_naming_both(tmp_path):
    result = CliRunner().invoke(app, ["study", "--preset", "toe-2009", "--classes", "0",
                                      "--out", str(tmp_path / "o")])
    said = " ".join(result.output.split())  # the terminal wraps lines
    assert result.exit_code == 2 and "--preset toe-2009 and --classes 0" in said, said
    assert not (tmp_path / "o").exists()


def test_the_seeds_numbers_are_the_digests():
    """Reference 000 §5: Tables 4-1, 4-3, 4-4 and Fig. 4-11's changes, as printed."""
    assert seed_tables.SATURATION == {2: (300, 350), 3: (100, 300), 4: (12, 40)}
    ms = {c: tuple(round(t * 1e3, 6) for t in pair) for c, pair in seed_tables.CONNECT_S.items()}
    assert ms == {0: (0.27, 0.09), 1: (0.28, 0.08), 2: (0.28, 0.09), 3: (0.28, 0.12),
                  4: (0.29, 0.78)}
    assert [round(b / KiB, 6) for b in seed_tables.GOODPUT_BPS[0]] == [317.4, 256]
    assert {c: tuple(round(b / MiB, 6) for b in pair)
            for c, pair in seed_tables.GOODPUT_BPS.items() if c > 0} == {
        1: (1.36, 1.35), 2: (7.8, 10.2), 3: (19.6, 46.5), 4: (24.8, 74.1)}
    # Read relative to TOE, as reference 000 reads the goodput's: about 1.27, 2.6, 2.9.
    ratios = [seed_tables.conn_per_min_ratio(c) for c in range(5)]
    assert ratios == pytest.approx([1 / 1.06, 1 / 1.01, 1.266, 2.632, 2.941], abs=1e-3)


def test_the_table_sets_ours_beside_the_seeds_with_both_ratios(study):
    testbed, found, _, seed = study
    t = seed.table.set_index("class")
    assert list(seed.table.columns) == list(toe2009.COLUMNS)
    assert list(t.index) == ["c0", "c2", "c4"] and set(t["mode"]) == {"engine"}
    for load in found.plan.classes:
        row, c = t.loc[load.name], load.size_class
        inline, engine = testbed.capacity(load, "inline"), testbed.capacity(load, "engine")
        # Ours: the saturation runs' numbers and their ratio engine / inline.
        assert row["inline_saturation"] == pytest.approx(inline, rel=1e-9)
        assert row["offload_saturation"] == pytest.approx(engine, rel=1e-9)
        assert row["ratio_saturation"] == pytest.approx(engine / inline, rel=1e-9)
        assert row["inline_conn_per_min"] == pytest.approx(60 * inline, rel=1e-9)
        assert row["ratio_conn_per_min"] == pytest.approx(engine / inline, rel=1e-9)
        mean_size = sum(SIZES[c]) / len(SIZES[c])
        assert row["offload_goodput_Bps"] == pytest.approx(engine * mean_size, rel=1e-9)
        assert row["ratio_goodput"] == pytest.approx(engine / inline, rel=1e-9)
        assert row["inline_connect_s"] == CONNECT_S["inline"]
        assert row["ratio_connect"] == pytest.approx(1 / 3)
        # The seed's: its numbers and its ratio TOE / Non-TOE.
        assert row["seed_inline_connect_s"] == seed_tables.CONNECT_S[c][0]
        assert row["seed_offload_connect_s"] == seed_tables.CONNECT_S[c][1]
        assert row["seed_ratio_connect"] == pytest.approx(
            seed_tables.CONNECT_S[c][1] / seed_tables.CONNECT_S[c][0])
        assert row["seed_offload_goodput_Bps"] == seed_tables.GOODPUT_BPS[c][1]
        assert row["seed_ratio_conn_per_min"] == seed_tables.conn_per_min_ratio(c)
        assert math.isnan(row["seed_inline_conn_per_min"])
    # Table 4-1 has classes 2-4 only.
    assert t.loc[["c2", "c4"], "seed_ratio_saturation"].round(3).tolist() == [1.167, 3.333]
    assert math.isnan(t.loc["c0", "seed_inline_saturation"])
    assert t["seed_ratio_goodput"].round(2).tolist() == [0.81, 1.31, 2.99]


def test_the_checks_hold_ours_to_the_seeds_shape(study):
    _, _, _, seed = study
    ratios = seed.table.set_index("class")["ratio_saturation"]
    checks = {c.claim.split(": ")[1].split(" (")[0]: c for c in seed.checks()}
    assert list(checks) == ["offload hurts or is neutral for classes 0-1",
                            "offload helps classes 2-4, more as files grow",
                            "connection set-up no slower than inline for classes 0-2"]
    # The synthetic engine is faster than its host for every class.
    assert checks["offload hurts or is neutral for classes 0-1"].holds == (
        ratios["c0"] <= toe2009.NEUTRAL_RATIO)
    grows = ratios[["c2", "c4"]]
    assert checks["offload helps classes 2-4, more as files grow"].holds == bool(
        (grows > toe2009.NEUTRAL_RATIO).all() and grows.is_monotonic_increasing)
    assert checks["connection set-up no slower than inline for classes 0-2"].holds
    assert f"c4 ×{ratios['c4']:.2f}" in checks[
        "offload helps classes 2-4, more as files grow"].detail


def test_summary_json_gives_the_rows_checks_and_host_profile(study):
    _, _, tables, seed = study
    part = pipeline.summary(tables, None, seed_experiment=seed)["toe_2009"]
    assert set(part) == {"host_profile", "rows", "checks", "host_ladder"}
    # The ladder runs with the preset only (tests/test_host_ladder.py).
    assert part["host_profile"] == "modern" and part["host_ladder"] is None
    assert [set(row) for row in part["rows"]] == [set(toe2009.COLUMNS)] * 3
    # summary.json writes NaN as null.
    assert part["rows"][0]["seed_inline_saturation"] is None
    assert part["rows"][1]["seed_inline_saturation"] == 300
    assert [c["claim"] for c in part["checks"]] == [c.claim for c in seed.checks()]
    assert pipeline.summary(tables, None)["toe_2009"] is None


def test_a_study_of_other_files_has_no_seed_section(study):
    _, found, tables, _ = study
    assert toe2009.compare(replace(found.plan, floors_key="file set /srv/www"), tables) is None


class _Text(HTMLParser):
    def __init__(self, page: str):
        super().__init__()
        self.parts: list[str] = []
        self.feed(page)

    def handle_data(self, data):
        self.parts.append(data)


def test_the_report_shows_the_seeds_tables_beside_ours(study, tmp_path):
    _, _, tables, seed = study
    # Only the saturation table: the study's figures, which take seconds, are not drawn.
    bare = replace(tables, **{name: frame.iloc[:0] for name, frame in tables.frames().items()
                              if name != "saturation"})
    page = write_report(bare, tmp_path, pipeline.sections(None, seed_experiment=seed))
    text = "|".join(_Text(page.read_text(encoding="utf-8")).parts)
    parts = {name: text.split(f"Seed 000's experiment: {name}")[1].split("Seed 000's")[0]
             for name in ("saturation", "connections per minute", "connection set-up",
                          "goodput")}
    assert "Host profile: modern" in parts["saturation"]
    # c2's row: the seed's 300 and 350 req/s and their ratio.
    assert "|c2|engine|" in parts["saturation"]
    assert "|300|" in parts["saturation"] and "|350|" in parts["saturation"]
    assert "|1.17|" in parts["saturation"]
    assert "|0.27|" in parts["connection set-up"] and "|0.78|" in parts["connection set-up"]
    assert "|0.333|" in parts["connection set-up"]  # ours, and the seed's class 0
    assert "|74.1|" in parts["goodput"] and "|2.99|" in parts["goodput"]
    assert "|0.943|" in parts["connections per minute"]
    assert "offload helps classes 2-4, more as files grow" in parts["saturation"]


def test_a_generator_bound_row_gives_the_models_ratio_with_the_client_elsewhere(study):
    _, found, tables, seed = study
    # The synthetic testbed has no load generator on the engine's core: the model's
    # saturation is the same with it elsewhere, and no run is generator-bound.
    sat = tables.saturation.set_index(["class", "mode"])
    assert (sat["model_elsewhere"] == sat["model"]).all()
    assert not seed.table["generator_bound"].any()
    t = seed.table.set_index("class")
    assert t.loc["c4", "model_ratio_elsewhere"] == pytest.approx(
        sat.loc[("c4", "engine"), "model"] / sat.loc[("c4", "inline"), "model"])
    # c4's engine run bound by the generator, which held its core's capacity down:
    # the row says so, and the terminal gives the model's ratio without it.
    bound = tables.saturation.assign(
        generator_bound=(tables.saturation["class"] == "c4")
        & (tables.saturation["mode"] == "engine"))
    row = toe2009.compare(found.plan, replace(tables, saturation=bound)).table.set_index(
        "class")
    assert row["generator_bound"].tolist() == [False, False, True]
    console = Console(width=250, record=True)
    console.print(seed_table(toe2009.compare(found.plan, replace(tables, saturation=bound))))
    assert f"*model {row.loc['c4', 'model_ratio_elsewhere']:.2f}" in console.export_text()


def test_the_terminal_shows_both_ratios_per_class(study):
    _, _, _, seed = study
    console = Console(width=200, record=True)
    console.print(seed_table(seed))
    text = console.export_text()
    assert "c2" in text and "(1.17)" in text and "(2.99)" in text and "(0.33)" in text
