"""Inputs nobody on the team wrote: each gets exit 2 and a message naming the file or
field, never a traceback; text from outside is printed as it is, brackets and all; and
the command starts without loading what its verbs do not need."""

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from offloadlab.cli import app

runner = CliRunner()
SCENARIO = """name = "s"
[[class]]
name = "c0"
rate = 100
app = "{app}"
host_proto = "exp(mean=0.2ms)"
host_overhead = "exp(mean=0.1ms)"
engine_overhead = "exp(mean=0.1ms)"
engine_proto = "exp(mean=0.1ms)"
offload = 1.0
"""


def refused(*args, naming: str):
    """Run the CLI; it must exit 2 with ``naming`` in a message and no traceback."""
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and not isinstance(res.exception, Exception)
    assert naming in " ".join(res.output.split()), res.output
    return res


def test_a_binary_scenario_file(tmp_path):
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\xff\xfe\x00\x01binary")
    refused("model", path, naming="bin.toml: line 1: byte 0xff is not UTF-8")


def test_an_empirical_csv_that_is_not_utf8(tmp_path):
    (tmp_path / "times.csv").write_bytes(b"0.001\n\xe9\n")
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(app="empirical(path=times.csv)"))
    refused("model", path, naming="times.csv: line 2: byte 0xe9 is not UTF-8")


def test_a_deeply_nested_toml(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    refused("model", path, naming="deep.toml: arrays or tables are nested too deeply")


def test_a_figure_in_an_unknown_format(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(app="exp(mean=1ms)"))
    refused("model", path, "--plot", tmp_path / "x.xyz", naming=".png, .svg, .pdf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


@pytest.mark.parametrize("data", [b"garbage", b"PAR1" + b"x" * 12 + b"PAR1"])
def test_a_corrupt_parquet_file(tmp_path, data):
    path = tmp_path / "c.parquet"
    path.write_bytes(data)
    refused("workload", "analyze", path, naming="c.parquet: not a readable Parquet file")


def test_markup_in_paths_and_log_lines_is_printed_as_it_is(tmp_path):
    folder = tmp_path / "[/b]"          # a folder "[" holding one called "b]"
    folder.mkdir(parents=True)
    refused("model", folder / "[red]x.toml", naming="[/b]/[red]x.toml: cannot read")
    log = folder / "access.log"
    log.write_text("1.2.3.4 - - 10/Oct/2000 [/b] x\n")
    res = refused("workload", "analyze", log, naming="[/b] x")
    # a message's own brackets are text too
    assert "the time in brackets, [dd/Mon/yyyy:HH:MM:SS +zzzz]," in " ".join(res.output.split())


def test_objects_with_markup_are_listed_in_the_analysis(tmp_path):
    log = tmp_path / "access.log"
    log.write_text("".join(f'1.2.3.4 - - [10/Oct/2000:13:55:{s:02d} +0000] "GET /[/b]{s % 2} '
                           f'HTTP/1.0" 200 {100 + s}\n' for s in range(20)))
    res = runner.invoke(app, ["workload", "analyze", str(log)])
    assert res.exit_code == 0, res.output
    assert "/[/b]0" in res.output


def test_the_command_starts_without_the_heavy_libraries():
    # `offload --help` and cheap verbs must not pay for pandas, matplotlib or scipy
    code = ("import sys\n"
            "sys.argv = ['offload', '--help']\n"
            "from offloadlab.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('pandas', 'matplotlib', 'scipy', 'pyarrow', "
            "'offloadlab.study') if m in sys.modules]\n"
            "print('loaded:', heavy, file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "Usage" in res.stdout
    assert "loaded: []" in res.stderr, res.stderr
