"""Trace replay: a synthetic WC98 day and an access log become a file set and an
open-loop stream (sizes, times, rows, connections checked against the trace itself),
filters are counted, the pair is replayed against a small in-test server, and
`offload workload replay` works and refuses bad flags."""

import hashlib

import numpy as np
import pandas as pd
import pytest
from conftest import check_keep_alive
from test_load import serving
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.testbed import load
from offloadlab.workload import fileset, replay, stream, traces

N = 3000
SPEC = traces.SynthSpec(n_objects=400, n_clients=60, rate=300.0, max_size_bytes=300_000)
SEED = 7
EXTS = (".html", ".GIF", "", ".JPeg?v=2", "/")


def urls(objects: pd.Series) -> pd.Series:
    """Access-log targets for the synthetic object ids: extensions, queries, folders."""
    ids = objects.astype(int)
    return pd.Series([f"/d{i % 7}/f{i}{EXTS[i % len(EXTS)]}" for i in ids],
                     dtype=objects.dtype)


@pytest.fixture(scope="module")
def trace_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("traces")
    traces.synth_wc98(root / "t.wc98", N, SEED, SPEC)
    table = traces.synthetic(N, SEED, SPEC)
    table["object"] = urls(table["object"])
    traces.write_clf(root / "t.log", table, combined=True)
    return {"wc98": root / "t.wc98", "clf": root / "t.log"}


def truth(fmt: str) -> pd.DataFrame:
    """The trace as one table, built without the readers."""
    table = traces.synthetic(N, SEED, SPEC)
    if fmt == "clf":
        table["object"] = urls(table["object"])
    return table


def reader(fmt, path):
    # Small chunks, so objects, sizes and counts are carried from chunk to chunk.
    return (traces.read_wc98(path, chunk_records=700) if fmt == "wc98"
            else traces.read_clf(path, chunk_lines=700))


def expected_rows(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """GET/HEAD with status 200 whose object has a size: the rows, and the sizes."""
    rows = table[table["method"].isin(["GET", "HEAD"]) & (table["status"] == 200)]
    sizes = rows.groupby("object", sort=False)["size_bytes"].max()
    sizes = sizes[sizes >= 0]
    return rows[rows["object"].isin(sizes.index)].reset_index(drop=True), sizes


def trace_objects(r: replay.Replay) -> pd.Series:
    """The stream's rows as the trace's object names (via the manifest)."""
    m = r.fileset.frame().set_index("path")["object"]
    return r.stream.frame["object"].astype(str).map(m).reset_index(drop=True)


@pytest.mark.parametrize("fmt", ["wc98", "clf"])
def test_a_trace_becomes_its_file_set_and_its_stream(fmt, trace_files, tmp_path):
    r = replay.replay(reader(fmt, trace_files[fmt]), speed=2, source=fmt)
    table = truth(fmt)
    rows, sizes = expected_rows(table)
    # One file per kept object, as large as the largest size the trace saw for it.
    manifest = r.fileset.frame()
    assert len(manifest) == len(sizes) == r.report.objects
    assert manifest.set_index("object")["size_bytes"].to_dict() == sizes.to_dict()
    # Popularity from the request counts.
    counts = rows["object"].value_counts()
    assert np.allclose(manifest["probability"] * len(rows),
                       counts.loc[manifest["object"]].to_numpy())
    assert manifest.loc[manifest["rank"] == 1, "object"].item() == counts.index[0]
    # Safe, distinct paths under o/, keeping an extension where the object has one.
    paths = manifest["path"]
    assert paths.is_unique and paths.str.match(r"^o/\d{3}/\d{6}\.[a-z0-9]+$").all()
    if fmt == "clf":
        ext = manifest["object"].str.extract(r"\.(\w+)(?:\?.*)?$", expand=False).str.lower()
        assert (paths.str.rsplit(".", n=1).str[-1] == ext.fillna("bin")).all()
    # The stream: the kept requests, in order, at the trace's times over the speed.
    f = r.stream.frame
    assert len(f) == len(rows) == r.report.kept
    assert trace_objects(r).tolist() == rows["object"].tolist()
    assert np.array_equal(f["time_s"], (rows["time_s"] - rows["time_s"].iloc[0]) / 2)
    assert np.array_equal(f["client"], rows["client"])
    assert np.array_equal(f["size_bytes"], sizes.loc[rows["object"]].to_numpy())
    # Connections: a client's requests at most 15 s apart share one (reference 004).
    derived = next(traces.assign_connections([rows], 15.0))
    assert np.array_equal(f["conn_id"], derived["conn_id"])
    check_keep_alive(f)
    assert (f.groupby("conn_id")["client"].nunique() == 1).all()
    gaps = f.groupby("client")["time_s"].diff() * 2
    new_conn = f["conn_id"] != f.groupby("client")["conn_id"].shift()
    assert (new_conn[gaps.notna()] == (gaps[gaps.notna()] > 15)).all()
    # What was dropped is counted.
    rep = r.report
    assert rep.read == N and rep.outside_window == 0 and not rep.stopped_at_limit
    assert rep.not_replayed == N - (table["method"].isin(["GET", "HEAD"])
                                    & (table["status"] == 200)).sum()
    assert rep.unknown_size > 0 and rep.objects_unknown_size > 0
    assert rep.read == rep.not_replayed + rep.outside_window + rep.unknown_size + rep.kept
    assert rep.span_s == f["time_s"].iloc[-1] and rep.trace_span_s == 2 * rep.span_s
    assert rep.start_epoch_s == SPEC.epoch_s + rows["time_s"].iloc[0]
    # The stream file round-trips, and the file set is written and verified.
    r.write(tmp_path / "set")
    assert stream.read(tmp_path / "set" / replay.STREAM_FILE).equals(r.stream)
    assert fileset.verify(tmp_path / "set").ok
    back = fileset.read_manifest(tmp_path / "set")
    assert back["object"].tolist() == manifest["object"].tolist()  # text, even "123"


def test_both_formats_of_one_trace_give_the_same_replay(trace_files):
    a = replay.replay(reader("wc98", trace_files["wc98"]))
    b = replay.replay(trace_files["wc98"])  # a path, the default chunks
    assert a.stream.frame.equals(b.stream.frame)
    assert a.fileset.frame().equals(b.fileset.frame())
    assert fileset.file_content(a.fileset, 3) == fileset.file_content(b.fileset, 3)


def test_filters_are_applied_and_counted(trace_files):
    table = truth("wc98")
    path = trace_files["wc98"]
    # A window of trace time: [2 s, 5 s). Reading stops at the first chunk past it.
    r = replay.replay(reader("wc98", path), start_s=2, duration_s=3, unknown_size=100)
    rep = r.report
    rows = table[table["method"].isin(["GET", "HEAD"]) & (table["status"] == 200)]
    inside = rows[(rows["time_s"] >= 2) & (rows["time_s"] < 5)]
    assert rep.kept == len(inside) == len(r.stream)
    assert rep.read % 700 == 0 and table["time_s"].iloc[rep.read - 700] >= 5 and rep.read < N
    assert rep.outside_window == (rows.index < rep.read).sum() - len(inside)
    assert rep.read == rep.not_replayed + rep.outside_window + rep.kept
    assert r.stream.frame["time_s"].iloc[0] == 0
    assert r.report.trace_span_s == inside["time_s"].iloc[-1] - inside["time_s"].iloc[0]
    # The first N; unknown sizes given a size instead of dropped.
    r = replay.replay(reader("wc98", path), limit=500, unknown_size=1000)
    assert len(r.stream) == 500 and r.report.stopped_at_limit and r.report.unknown_size == 0
    assert trace_objects(r).tolist() == rows["object"].iloc[:500].tolist()
    unknown = r.fileset.frame().set_index("object").loc[
        rows.iloc[:500].groupby("object")["size_bytes"].max().pipe(lambda s: s[s < 0]).index,
        "size_bytes"]
    assert len(unknown) and (unknown == 1000).all()
    # Every request, and HTTP/1.0 (one connection per request).
    r = replay.replay(reader("wc98", path), all_requests=True, window_s=None)
    assert r.report.not_replayed == 0
    assert r.report.kept + r.report.unknown_size == N
    f = r.stream.frame
    assert np.array_equal(f["conn_id"], np.arange(len(f))) and not f["keep_alive"].any()


def test_unsorted_logs_given_connections_and_safe_paths():
    t = pd.DataFrame({"time_s": [0.0, 3.0, 2.0, 40.0], "client": [1, 1, 2, 1],
                      "object": ["/a.css", "../../etc/passwd", "/a.css", "C:\\x.EXE"],
                      "size_bytes": [10, 20, 10, 30], "status": [200] * 4,
                      "method": ["GET"] * 4, "conn_id": [-1] * 4})
    r = replay.replay(t)
    f = r.stream.frame
    assert f["time_s"].tolist() == [0, 2, 3, 40] and r.report.reordered == 2
    assert f["conn_id"].tolist() == [0, 1, 0, 2]  # client 1's third request: 37 s later
    assert f["keep_alive"].tolist() == [True, False, False, False]
    assert list(r.fileset.paths) == ["o/000/000000.css", "o/000/000001.bin",
                                     "o/000/000002.exe"]
    given = t.assign(conn_id=[5, 5, 9, 7])
    assert replay.replay(given).stream.frame["conn_id"].tolist() == [0, 1, 0, 2]
    with pytest.raises(InputError, match="some requests"):
        replay.replay(t.assign(conn_id=[5, -1, 9, 7]))
    assert replay.object_paths(["/x.tar.GZ?a=b.c", "/dir/", "/x.toolongext", "#.png"]) == (
        "o/000/000000.gz", "o/000/000001.bin", "o/000/000002.bin", "o/000/000003.bin")


@pytest.mark.parametrize("kwargs, fragment", [
    ({"speed": 0}, "speed=0"), ({"speed": float("inf")}, "finite"),
    ({"limit": 0}, "limit=0"), ({"window_s": -1}, "window_s"),
    ({"duration_s": 0}, "duration_s"), ({"unknown_size": -5}, "unknown_size"),
    ({"start_s": 1e6}, "no request to replay"), ({"seed": -1}, "seed"),
])
def test_bad_arguments_are_refused(kwargs, fragment):
    with pytest.raises(InputError, match=fragment):
        replay.replay(traces.synthetic(200, 1, SPEC), **kwargs)


def test_a_replayed_trace_is_served_and_verified(tmp_path, testbed):
    # Few clients: the in-test server's listen backlog is 5 (80 connections opening in one
    # second timed out), and a keep-alive request to it takes about 44 ms here (measured;
    # the mark of Nagle meeting delayed ACKs), so 16 connections of up to 26 requests.
    small = traces.SynthSpec(n_objects=120, n_clients=16, client_alpha=0.0, rate=150.0,
                             max_size_bytes=100_000)
    traces.synth_wc98(tmp_path / "t.wc98", 300, 3, small)
    r = replay.replay(tmp_path / "t.wc98", speed=4)
    r.write(tmp_path / "site")
    assert r.stream.frame["keep_alive"].any()  # keep-alive connections are exercised
    with serving(tmp_path / "site") as (target, _):
        res = load.run(target, stream.read(tmp_path / "site" / replay.STREAM_FILE),
                       tmp_path / "site", verify="checksum", timeout_s=5)
    assert (res["completed"], res["failed"]) == (len(r.stream), 0)
    assert res["connections"] == r.report.connections


runner = CliRunner()


def words(text: str) -> str:
    """Output with the console's line wrapping undone."""
    return " ".join(text.split())


def test_cli_replay_writes_the_set_and_the_stream(trace_files, tmp_path):
    out = tmp_path / "rp"
    res = runner.invoke(app, ["workload", "replay", str(trace_files["clf"]), "--out", str(out),
                              "--speed", "2", "--limit", "1000", "--window", "10s",
                              "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert "offload load" in res.output and "stopped reading" in res.output
    s = stream.read(out / "stream.parquet")
    assert 0 < len(s) <= 1000 and s.meta["params"]["speed"] == 2.0
    assert s.meta["params"]["window_s"] == 10.0 and s.meta["seed"] == 3
    assert fileset.verify(out).ok
    again = replay.replay(trace_files["clf"], speed=2, limit=1000, window_s=10, seed=3)
    assert fileset.read_manifest(out)["checksum"].tolist() == [
        hashlib.sha256(fileset.file_content(again.fileset, i)).hexdigest()
        for i in range(again.fileset.n_files)]


@pytest.mark.parametrize("args, fragment", [
    (["--speed", "0"], "--speed"), (["--speed", "-2"], "--speed"),
    (["--limit", "0"], "--limit"), (["--window", "3"], "--window"),
    (["--duration", "0s"], "--duration"), (["--start", "100000s"], "--start"),
    (["--unknown-size", "2KB"], "--unknown-size"), (["--format", "json"], "--format"),
    (["--seed", "-1"], "--seed"),
])
def test_cli_replay_bad_flags_exit_2(trace_files, tmp_path, args, fragment):
    res = runner.invoke(app, ["workload", "replay", str(trace_files["wc98"]),
                              "--out", str(tmp_path / "o"), *args])
    assert res.exit_code == 2, res.output
    assert fragment in words(res.output)


def test_cli_replay_refuses_a_missing_trace_and_a_foreign_folder(trace_files, tmp_path):
    res = runner.invoke(app, ["workload", "replay", str(tmp_path / "nope"), "--out",
                              str(tmp_path / "o")])
    assert res.exit_code == 2 and "no such file" in words(res.output)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    res = runner.invoke(app, ["workload", "replay", str(trace_files["wc98"]), "--out",
                              str(tmp_path / "busy")])
    assert res.exit_code == 2 and "--force" in words(res.output)
    assert (tmp_path / "busy" / "keep.txt").read_text() == "mine"
