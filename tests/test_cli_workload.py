"""`offload workload`: each verb end to end on small inputs, and bad flags exit 2."""

import datetime
import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.workload import fileset, stream

runner = CliRunner()
SPEC = 'name = "small"\nn_files = 120\nmax_bytes = "1MiB"\nzipf_alpha = 0.9\nseed = 3\n'


def run(*args):
    return runner.invoke(app, ["workload", *map(str, args)])


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("wl")
    (root / "small.toml").write_text(SPEC)
    res = run("fileset", "--spec", root / "small.toml", "--out", root / "fs")
    assert res.exit_code == 0, res.output
    return root / "fs"


def test_fileset_writes_verified_files_and_a_manifest(small_set):
    manifest = fileset.read_manifest(small_set)
    assert len(manifest) == 120
    assert fileset.verify(small_set).ok


def test_fileset_lists_presets():
    res = run("fileset", "--list")
    assert res.exit_code == 0 and "specweb99" in res.output and "toe-2009" in res.output


def test_stream_poisson_and_sessions_round_trip(small_set, tmp_path):
    out = tmp_path / "s.parquet"
    res = run("stream", small_set, "--out", out, "--rate", 50, "--count", 500,
              "--keep-alive", 5, "--seed", 4)
    assert res.exit_code == 0, res.output
    s = stream.read(out)
    assert len(s.frame) == 500 and s.describe()["requests_per_conn"] == 5
    again = stream.poisson(small_set, 50, count=500, keep_alive="5", seed=4)
    assert s.equals(again)
    res = run("stream", small_set, "--out", tmp_path / "b.parquet", "--kind", "sessions",
              "--clients", 5, "--sessions", 2, "--workload", "banking")
    assert res.exit_code == 0, res.output
    assert stream.read(tmp_path / "b.parquet").has_sessions


@pytest.mark.parametrize("fmt", ["wc98", "clf"])
def test_synth_then_analyze_a_trace(fmt, tmp_path):
    trace, report, figure = tmp_path / f"t.{fmt}.gz", tmp_path / "a.json", tmp_path / "a.png"
    assert run("synth", fmt, trace, "--requests", 5000, "--seed", 2).exit_code == 0
    res = run("analyze", trace, "--out", report, "--plot", figure)
    assert res.exit_code == 0, res.output
    doc = json.loads(report.read_text())
    assert doc["requests"] == 5000
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_analyze_gives_the_true_rate_of_an_access_log_shuffled_within_each_minute(tmp_path):
    # Like a log merged from several workers: whole seconds, in order only minute by
    # minute. Dropping the negative gaps made the rate 2-3 times too low.
    rng = np.random.default_rng(3)
    t = np.floor(np.cumsum(rng.exponential(30, 3000))).astype(int)
    t = np.concatenate([rng.permutation(t[t // 60 == m]) for m in np.unique(t // 60)])
    t0 = datetime.datetime(2015, 5, 17, tzinfo=datetime.UTC)
    stamps = [(t0 + datetime.timedelta(seconds=int(s))).strftime("%d/%b/%Y:%H:%M:%S +0000")
              for s in t]
    lines = [f'10.0.0.{i % 200} - - [{when}] "GET /{i % 40} HTTP/1.1" 200 {100 + i % 40}'
             for i, when in enumerate(stamps)]
    log = tmp_path / "access.log"
    log.write_text("\n".join(lines) + "\n")
    res = run("analyze", log, "--json")
    assert res.exit_code == 0, res.output
    arrivals = json.loads(res.stdout)["arrivals"]
    truth = (t.size - 1) / (t.max() - t.min())
    assert arrivals["rate"] == pytest.approx(truth, rel=0.02)
    assert arrivals["out_of_order"] > 0 and arrivals["late"] == 0
    assert any("sorted before taking the gaps" in n for n in json.loads(res.stdout)["notes"])


def test_analyze_a_manifest_and_a_stream(small_set, tmp_path):
    res = run("analyze", small_set, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["objects"] == 120
    out = tmp_path / "s.parquet"
    assert run("stream", small_set, "--out", out, "--rate", 20, "--count", 300).exit_code == 0
    res = run("analyze", out, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["requests"] == 300


@pytest.mark.parametrize(("args", "fragment"), [
    (["fileset", "--out", "x"], "--preset"),
    (["fileset", "--preset", "nope", "--out", "x"], "nope"),
    (["stream", ".", "--out", "s.parquet", "--kind", "burst"], "--kind"),
    (["stream", ".", "--out", "s.parquet", "--kind", "ramp"], "--ramp"),
    (["stream", ".", "--out", "s.parquet", "--kind", "closed"], "--clients"),
    (["synth", "pcap", "x.bin"], "'wc98' or 'clf'"),
    (["analyze", "no/such/trace.gz"], "no such file"),
    (["analyze", ".", "--format", "pcap"], "--format"),
])
def test_bad_flags_exit_2_and_say_why(args, fragment):
    res = run(*args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output


def test_results_are_readable_by_other_users(small_set):
    # Atomic writes must not leave mkstemp's 0600: a server running as another user
    # reads the manifest. (The umask of this process still applies.)
    mode = (small_set / "manifest.csv").stat().st_mode
    assert mode & 0o044 == 0o044 & ~_umask()


def _umask() -> int:
    import os
    old = os.umask(0)
    os.umask(old)
    return old


def test_seed_flag_overrides_the_spec_seed(tmp_path):
    (tmp_path / "small.toml").write_text(SPEC)
    for seed in (3, 4):
        res = run("fileset", "--spec", tmp_path / "small.toml", "--out", tmp_path / f"s{seed}",
                  "--seed", seed)
        assert res.exit_code == 0, res.output
    same = fileset.read_manifest(tmp_path / "s3")["checksum"]
    other = fileset.read_manifest(tmp_path / "s4")["checksum"]
    assert not same.equals(other)


def test_sessions_with_keep_alive_no_are_http10(small_set, tmp_path):
    out = tmp_path / "s.parquet"
    res = run("stream", small_set, "--out", out, "--kind", "sessions", "--clients", 3,
              "--sessions", 1, "--keep-alive", "no")
    assert res.exit_code == 0, res.output
    assert not stream.read(out).frame["keep_alive"].any()


def test_an_unwritable_output_is_a_runtime_error_not_a_traceback(small_set):
    # /proc exists but takes no new files, even for root (tests may run as root).
    res = run("stream", small_set, "--out", "/proc/s.parquet", "--rate", 5, "--count", 10)
    assert res.exit_code == 1
    assert "error:" in res.output and "Traceback" not in res.output


def test_verify_passes_a_good_set_and_fails_a_damaged_one(small_set, tmp_path):
    assert run("verify", small_set).exit_code == 0
    copy = tmp_path / "copy"
    shutil.copytree(small_set, copy)
    victim = copy / fileset.read_manifest(copy)["path"].iloc[0]
    data = bytearray(victim.read_bytes())
    data[0] ^= 0xFF
    victim.write_bytes(bytes(data))
    res = run("verify", copy)
    assert res.exit_code == 1 and "1 of 120 files do not match" in " ".join(res.output.split())
