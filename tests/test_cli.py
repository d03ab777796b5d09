"""The ``offload`` command: verbs, exit codes, outputs written whole."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import offloadlab
from offloadlab import _core
from offloadlab.cli import app
from offloadlab.cli.evidence import example_files, parse_rates
from offloadlab.errors import InputError
from offloadlab.results import METRICS

runner = CliRunner()
ROW_KEYS = {"rate", "class", "lam", "f", *METRICS, "cpu_relieved", "beneficial",
            "lam_star_noe", "lam_star_cpu", "lam_star_oe",
            "saturated_noe", "saturated_cpu", "saturated_oe", "saturated"}


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_help_lists_every_verb_with_a_description():
    result = run("--help")
    assert result.exit_code == 0
    assert "model" in result.output and "host alone" in result.output
    assert "demo" in result.output and "study" in result.output
    assert "appcache" in result.output and "object cache" in result.output


def test_version_matches_the_package_and_the_rust_extension():
    result = run("--version")
    assert result.exit_code == 0
    assert result.output.strip() == f"offload {offloadlab.__version__}"
    assert _core.__version__ == offloadlab.__version__


def test_installed_entry_point_and_module_run(tmp_path):
    for cmd in ([sys.executable, "-m", "offloadlab", "--version"],):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert offloadlab.__version__ in done.stdout


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.stem)
def test_model_json_on_every_example(path):
    result = run("model", path, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["source"] == "model"
    assert doc["rows"], "no rows"
    for row in doc["rows"]:
        assert row.keys() >= ROW_KEYS
        if row["class"] != "all":
            assert "EXo_max" in row
            assert row["verdict"] in ("helps", "hurts", "neutral") and row["reason"]
    classes = {row["class"] for row in doc["rows"]}
    assert classes == {"all", *doc["offload"]}


def test_model_sweep_marks_saturation_as_inf_in_strict_json():
    result = run("model", "examples/large-files.toml", "--rates", "50:150:50", "--json")
    assert result.exit_code == 0
    rows = [r for r in json.loads(result.stdout)["rows"] if r["class"] == "all"]
    assert [r["rate"] for r in rows] == [50, 100, 150]
    assert rows[2]["T_noe"] == "inf" and rows[2]["saturated_noe"] is True
    assert isinstance(rows[2]["T"], float) and rows[2]["saturated_cpu"] is False


def test_model_table_is_the_default():
    result = run("model", "examples/small-files.toml")
    assert result.exit_code == 0
    assert "small files" in result.output and "hurts" in result.output


def test_plot_and_out_are_written_whole(tmp_path):
    png, out = tmp_path / "fig.png", tmp_path / "res.json"
    result = run("model", "examples/five-classes.toml", "--plot", png, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert json.loads(out.read_text())["scenario"] == "five classes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.png", "res.json"]


def test_failed_plot_leaves_nothing_behind(tmp_path):
    bad = tmp_path / "fig.notaformat"
    result = run("model", "examples/large-files.toml", "--plot", bad)
    assert result.exit_code != 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, fragment", [
    (["model", "no/such/file.toml"], "cannot read scenario"),
    (["model", "examples/large-files.toml", "--rates", "10:5:1"], "STOP >= START"),
    (["model", "examples/large-files.toml", "--rates", "fast"], "START:STOP:STEP"),
    (["model", "examples/large-files.toml", "--rates", "10,-5"], ">= 0"),
    (["model", "examples/large-files.toml", "--rates", "0:inf:1"], "finite"),
    (["model", "examples/large-files.toml", "--rates", "1:2"], "START:STOP:STEP"),
    (["model", "examples/large-files.toml", "--json", "--table"], "exclude each other"),
])
def test_bad_input_exits_2_with_a_clear_message(args, fragment):
    result = run(*args)
    assert result.exit_code == 2
    assert fragment in result.output
    assert "Traceback" not in result.output


def test_bad_scenario_exits_2_naming_file_class_and_field(tmp_path):
    bad = tmp_path / "bad.toml"
    text = (example_files()[1].read_text()  # large-files.toml
            .replace('"lognormal(mean=9ms, sigma=1)"', '"pareto(alpha=1.8, k=5ms)"'))
    bad.write_text(text)
    done = subprocess.run([sys.executable, "-m", "offloadlab", "model", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    message = " ".join(done.stderr.split())
    assert str(bad) in message and 'class "c3"' in message and "host_proto" in message
    assert "alpha > 2" in message


@pytest.mark.parametrize(("old", "new", "words"), [
    ("rate = 50", 'rate = 50\nd0 = "-1ms"', ['class "c3": d0', ">= 0"]),
    ("rate = 50", 'rate = 50\nd0 = "soon"', ['class "c3": d0', "not a duration"]),
    ("[[class]]", '[engine]\nwakeup = "det(3)"\n[[class]]', ["engine: wakeup", "needs a unit"]),
    ("[[class]]", '[engine]\nbackground = "x"\n[[class]]',
     ["engine: background", "not a distribution spec"]),
    ("[[class]]", '[engine]\nbackground_share = -0.05\n[[class]]',
     ["engine: background_share = -0.05", "[0, 1)"]),
])
def test_bad_d0_wakeup_or_background_exits_2_naming_the_field(tmp_path, old, new, words):
    bad = tmp_path / "bad.toml"
    bad.write_text(example_files()[1].read_text().replace(old, new))  # large-files.toml
    result = run("model", bad)
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert all(w in message for w in words), message
    assert "Traceback" not in result.output


def test_parse_rates_includes_stop_and_rejects_huge_sweeps():
    assert parse_rates("10:300:10").tolist() == list(range(10, 301, 10))
    assert parse_rates("0.5:1.5:0.5").tolist() == [0.5, 1.0, 1.5]
    assert parse_rates("25,50").tolist() == [25, 50]
    with pytest.raises(InputError, match="at most"):
        parse_rates("0:1e9:1")


def _commands() -> dict[str, str]:
    """Every `offload` command ("offload GROUP VERB") and the module that defines it."""
    from typer.main import get_command_name

    def named(info) -> str:
        return info.name or get_command_name(info.callback.__name__)

    found = {f"offload {named(c)}": c.callback.__module__ for c in app.registered_commands}
    for group in app.registered_groups:
        for c in group.typer_instance.registered_commands:
            found[f"offload {group.name} {named(c)}"] = c.callback.__module__
    return found


def test_each_command_is_in_the_module_named_after_it_and_in_the_docs_table():
    # Issue 45: a newcomer looks for `offload X Y` in cli/X.py. Two modules hold several
    # verbs, as docs/cli.md's table says.
    several = {"model": "evidence", "sim": "evidence", "sweep": "evidence", "demo": "study"}
    commands = _commands()
    for command, module in commands.items():
        group = command.split()[1]
        assert module == f"offloadlab.cli.{several.get(group, group)}", command
    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    table = text.split("## Commands and their modules\n", 1)[1].split("\n## ", 1)[0]
    listed = set()
    for cell in re.findall(r"^\| ([^|]+) \|", table, re.M):
        # "`offload workload fileset`, `verify`": a bare verb is of the row's group
        group = cell.split("`")[1].rsplit(" ", 1)[0] if "`" in cell else ""
        listed |= {w if w.startswith("offload") else f"{group} {w}"
                   for w in re.findall(r"`([\w -]+)`", cell)}
    assert set(commands) <= listed, f"not in docs/cli.md: {sorted(set(commands) - listed)}"


def test_each_testbed_experiment_names_the_command_that_runs_it():
    import offloadlab.experiments as experiments

    commands = _commands()
    for path in sorted(Path(experiments.__file__).parent.glob("[!_]*.py")):
        if path.stem == "protocol":
            continue
        found = re.search(r"[Rr]uns as ``(offload [a-z ]+)``", path.read_text())
        assert found, f"experiments/{path.name}: its notes do not say what command runs it"
        command = found.group(1)
        assert command in commands, f"experiments/{path.name}: no command {command!r}"
        cli = Path(sys.modules[commands[command]].__file__).read_text()
        assert f"from offloadlab.experiments import {path.stem}" in cli, (path.name, command)
