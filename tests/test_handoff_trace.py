"""Replaying a real log in the handoff simulator: the paper's 15 s grouping on a small
hand-written access log with malformed lines (skipped and counted), a WC98 log, the
CLI and experiment-file paths, and bad inputs (exit 2, naming the field)."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.handoff import workloads as wl
from offloadlab.workload.traces import DEFAULT_EPOCH_S, write_wc98

# Two clients. A: 0 s, 10 s (same connection), 30 s (20 s later: a new one), then a
# GET without a size. B: 12 s, then a 304 and a HEAD (not static GETs), and a line
# logged out of order (B at 14 s after A's 30 s), which still joins B's connection.
LOG = """\
1.2.3.4 - - [01/Jul/1998:10:00:00 +0000] "GET /a.html HTTP/1.0" 200 1000
1.2.3.4 - - [01/Jul/1998:10:00:10 +0000] "GET /b.gif HTTP/1.0" 200 2000
this is not a log line
5.6.7.8 - - [01/Jul/1998:10:00:12 +0000] "GET /a.html HTTP/1.0" 200 1000
1.2.3.4 - - [01/Jul/1998:10:00:30 +0000] "GET /c.gif HTTP/1.0" 200 3000
5.6.7.8 - - [01/Jul/1998:10:00:14 +0000] "GET /f.gif HTTP/1.0" 200 500
5.6.7.8 - - [01/Jul/1998:10:00:20 +0000] "GET /d.gif HTTP/1.0" 304 -
5.6.7.8 - - [01/Jul/1998:10:00:21 +0000] "HEAD /a.html HTTP/1.0" 200 1000
1.2.3.4 - - [01/Jul/1998:10:00:31 +0000] "GET /e.gif HTTP/1.0" 200 -
1.2.3.4 - - [01/Jul/98:10:00:40] "GET /x HTTP/1.0" 200 10
"""


@pytest.fixture
def log(tmp_path):
    p = tmp_path / "access.log"
    p.write_text(LOG)
    return p


def test_replay_groups_a_clients_requests_within_15_s(log):
    work, read = wl.replay(log)
    # Connections in order of their first request: A's first, B's, A's second.
    np.testing.assert_array_equal(work.offsets, [0, 2, 4, 5])
    np.testing.assert_array_equal(work.sizes, [1000, 2000, 1000, 500, 3000])
    assert not work.dynamic.any() and work.clients == 2048 and work.client_kbps is None
    assert (read.format, read.records, read.skipped) == ("clf", 8, 2)
    assert (read.kept, read.connections) == (5, 3)
    assert "access.log:3" in read.problems[0]
    assert "2 malformed lines" in read.summary()


def test_replay_keeps_the_first_connections_and_reads_wc98(tmp_path, log):
    work, _ = wl.replay(log, connections=2)
    np.testing.assert_array_equal(work.offsets, [0, 2, 4])
    table = pd.DataFrame({"time_s": [0.0, 5.0, 40.0], "client": [7, 7, 7],
                          "object": ["1", "2", "3"], "size_bytes": [100, 200, 300],
                          "status": [200, 200, 200], "method": ["GET"] * 3,
                          "conn_id": [-1] * 3})
    path = tmp_path / "day.wc98"
    write_wc98(path, table, epoch_s=DEFAULT_EPOCH_S)
    work, read = wl.replay(path)
    assert read.format == "wc98" and read.skipped == 0
    np.testing.assert_array_equal(work.offsets, [0, 2, 3])
    np.testing.assert_array_equal(work.sizes, [100, 200, 300])


def test_replay_refuses_a_log_without_static_gets(tmp_path):
    p = tmp_path / "none.log"
    p.write_text('1.2.3.4 - - [01/Jul/1998:10:00:00 +0000] "POST /f HTTP/1.0" 200 10\n'
                 "junk\n")
    with pytest.raises(InputError, match=r"no GET with status 200.*1 lines skipped"):
        wl.replay(p)


SHORT = "[run]\nwarmup_packets = 5000\npackets = 10000\n"


def test_sim_replays_the_log_an_experiment_names(tmp_path, log):
    exp = tmp_path / "exp.toml"
    exp.write_text(f'runs = ["W-1024-P-L-FCFS-400"]\ncalibrate = false\n'
                   f'trace = "{log.name}"\n{SHORT}')
    res = CliRunner().invoke(app, ["handoff", "sim", str(exp), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["trace"]["skipped"] == 2 and summary["trace"]["connections"] == 3
    df = pd.read_csv(tmp_path / "o" / "results.csv")
    assert (df.requests_per_s > 0).all()


def test_matrix_refuses_a_missing_trace(tmp_path):
    res = CliRunner().invoke(app, ["handoff", "matrix", "--quick", "--trace", "missing.log",
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    text = " ".join(res.output.split())  # the message wraps at the terminal width
    assert "missing.log" in text and "no such file" in text


@pytest.mark.parametrize("value, words", [("5", ["trace must be the path"]),
                                          ('"nope.log"', ["nope.log", "no such file"])])
def test_experiment_file_refuses_a_bad_trace(tmp_path, value, words):
    exp = tmp_path / "exp.toml"
    exp.write_text(f'runs = ["W-0-N-N-FCFS-400"]\ncalibrate = false\ntrace = {value}\n{SHORT}')
    res = CliRunner().invoke(app, ["handoff", "sim", str(exp), "--out", str(tmp_path / "o")])
    # The message names the file by its full path, so where it wraps at the terminal
    # width depends on the temporary folder's name.
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and all(w in text for w in words)
    assert not (tmp_path / "o" / "results.csv").exists()
