"""``offload study --trace``: from a trace to the study's plan without load (classes and
their shares, bad lines counted, bad traces refused naming the flag with nothing
written, the mix's windows keeping the trace's rate and gap shape), and one short real
study on a small synthetic trace."""

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from offloadlab import scenario
from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.study import measure, pipeline
from offloadlab.study import trace as study_trace
from offloadlab.testbed import load
from offloadlab.workload import fileset, replay, stream, traces
from offloadlab.workload.trace_window import TraceArrivals

runner = CliRunner()
SEED = 3

# A hand-written access log: 120 requests of two 500 B files (class 0), 78 of a 5,000 B
# one (class 1) and 1 of a 200,000 B one (class 3, 0.5%: too rare), each logged second
# holding a few; plus three malformed lines, a 404 and a POST, which are not replayed.
_LINE = ('10.0.0.{client} - - [29/Nov/2026:10:{minute:02d}:{second:02d} +0000] "{method} '
         '{path} HTTP/1.1" {status} {size} "-" "curl/8"')


def _access_log(path, gz: bool = False) -> None:
    objects = [("/a.html", 500)] * 60 + [("/b.css", 500)] * 60 + [("/big.js", 5000)] * 78
    objects.insert(100, ("/video.mp4", 200_000))
    lines = [_LINE.format(client=i % 7, minute=i // 60 // 3, second=i // 3 % 60,
                          method="GET", path=p, status=200, size=s)
             for i, (p, s) in enumerate(objects)]
    lines[10:10] = ["this is not a log line", "", "10.0.0.1 - - [garbled"]
    lines += [_LINE.format(client=1, minute=1, second=10, method="GET", path="/gone",
                           status=404, size=120),
              _LINE.format(client=2, minute=1, second=10, method="POST", path="/form",
                           status=200, size=80)]
    text = "\n".join(lines) + "\n"
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "access.log"
    _access_log(path)
    return path


def test_classes_and_shares_come_from_the_traces_requests_and_rare_ones_are_left_out(log):
    said = []
    traced = study_trace.read(log, None, SEED, said.append)
    assert "3 skipped" in said[-1] and "access.log:11" in said[-1]  # the first bad line
    assert traced.shares == pytest.approx({0: 120 / 199, 1: 78 / 199, 3: 1 / 199})
    assert traced.classes == (0, 1)
    assert traced.rare == pytest.approx({3: 1 / 199})
    r = traced.replayed.report
    assert (r.kept, r.not_replayed, traced.skipped) == (199, 2, 3)
    # --classes narrows; a class rarer than the rule's share is refused, naming both.
    assert study_trace.read(log, (1,), SEED).classes == (1,)
    with pytest.raises(InputError, match=r"--classes 3: .* 0\.5% .* fewer than the 1%"):
        study_trace.read(log, (0, 3), SEED)


def test_a_gzipped_log_reads_the_same(tmp_path, log):
    _access_log(tmp_path / "access.log.gz", gz=True)
    assert (study_trace.read(tmp_path / "access.log.gz", None, SEED).shares
            == study_trace.read(log, None, SEED).shares)


def test_the_plan_studies_the_traces_classes_with_the_trace_as_the_mix(tmp_path, log):
    out = tmp_path / "study"
    prepared = pipeline.prepare(pipeline.StudyConfig(out, trace=log, seed=SEED))
    the_plan = prepared.plan
    assert [load.name for load in the_plan.classes] == ["c0", "c1"]
    assert the_plan.shares == pytest.approx({"c0": 120 / 198, "c1": 78 / 198})
    # Per-class runs draw from the class's objects with the trace's popularity.
    c1 = the_plan.classes[1].manifest
    assert c1.loc[c1["class"] == 1, "size_bytes"].tolist() == [5000]
    # Each class replays its own requests of the trace, on their connections.
    for traced, cls in zip(the_plan.classes, (0, 1), strict=True):
        frame = traced.trace.stream.frame
        assert len(frame) == {0: 120, 1: 78}[cls]
        assert set(frame["size_bytes"]) == ({500} if cls == 0 else {5000})
        assert traced.trace.requests_per_connection > 1
    # The mix is the trace's requests of the studied classes, in its order.
    mix = the_plan.mix
    assert len(mix.trace.stream) == 198 and set(mix.manifest["class"]) == {0, 1}
    assert mix.trace.stream.frame["time_s"].is_monotonic_increasing
    written = out / study_trace.FOLDER
    assert (written / replay.STREAM_FILE).is_file()
    assert fileset.read_info(written)["status"] == "complete"
    # The workload line says how the trace was used.
    text = the_plan.workload
    for part in (f"trace {log}", "199 kept", "3 malformed lines skipped", "c3 below 1%",
                 "c0 60.3%", "time-compressed by speed = rate /", "wrapping",
                 "HTTP/1.1 keep-alive", "mean per connection (c0 "):
        assert part in text, part
    # A second study of the same trace keeps the files it wrote.
    stamp = (written / c1["path"].iloc[0]).stat().st_mtime_ns
    pipeline.prepare(pipeline.StudyConfig(out, trace=log, seed=SEED))
    assert (written / c1["path"].iloc[0]).stat().st_mtime_ns == stamp


def test_a_traced_loads_saturation_clients_reuse_connections_as_the_trace_did(tmp_path, log):
    the_plan = pipeline.prepare(pipeline.StudyConfig(tmp_path, trace=log, seed=SEED)).plan
    for traced in (*the_plan.classes, the_plan.mix):
        want = traced.trace.requests_per_connection
        requests = measure.stream_of(the_plan, traced, "saturation", 100.0)[0].frame
        assert len(requests) / requests["conn_id"].nunique() == pytest.approx(want, rel=0.1)
    # A trace whose clients never reuse a connection gives HTTP/1.0 clients.
    single = TraceArrivals(stream.poisson(the_plan.classes[0].manifest, 50.0, duration_s=1,
                                          size_class=0, seed=SEED), 1.0)
    assert single.requests_per_connection == 1 and single.keep_alive is False


def test_one_class_of_the_trace_still_runs_the_trace_as_its_mix(tmp_path, log):
    the_plan = pipeline.prepare(pipeline.StudyConfig(tmp_path, trace=log, classes="1")).plan
    assert [load.name for load in the_plan.classes] == ["c1"]
    assert the_plan.shares == {"c1": 1.0} and len(the_plan.mix.trace.stream) == 78
    no_mix = pipeline.prepare(pipeline.StudyConfig(tmp_path, trace=log, mix=False)).plan
    assert no_mix.mix is None and "the mix is" not in no_mix.workload


def test_a_logs_host_names_reach_the_load_generator_as_32_bit_clients(tmp_path, log,
                                                                      monkeypatch):
    """A log's client that is a host name has an id of 2**32 plus a hash (the trace
    table's rule); the generator numbers clients in 32 bits."""
    replayed = replay.replay(traces.read_trace(log), seed=SEED)
    frame = replayed.stream.frame.copy()
    frame["client"] += 2**40
    sent = {}

    def generator(_, args, *rest):
        sent.update(args)
        raise RuntimeError("not started")

    monkeypatch.setattr(load, "watched", generator)
    with pytest.raises(RuntimeError, match="not started"):
        load.run("127.0.0.1:9", stream.Stream(frame, replayed.stream.meta),
                 replayed.fileset.frame())
    clients = np.array(sent["client"])
    assert clients.max() < 2**32
    # The same requests share a client as before.
    assert len(set(zip(clients, frame["client"], strict=True))) == frame["client"].nunique()


def _garbage(path):
    path.write_bytes(bytes(range(256)) * 16)


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda p: p.write_text(""), "nothing to study"),
    (_garbage, "nothing to study"),
    (lambda p: p.write_text(_LINE.format(client=1, minute=0, second=0, method="POST",
                                         path="/x", status=200, size=9) + "\n"),
     "nothing to study"),
    (lambda p: None, "no such file"),
    (lambda p: p.mkdir(), "is a directory"),
])
def test_a_trace_with_nothing_to_study_exits_2_naming_the_flag_and_writes_nothing(
        tmp_path, make, fragment):
    trace = tmp_path / "bad.log"
    make(trace)
    out = tmp_path / "out"
    result = runner.invoke(app, ["study", "--trace", str(trace), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "--trace" in result.output and fragment in result.output
    assert not out.exists()


def test_trace_and_fileset_together_are_refused(tmp_path, log):
    with pytest.raises(InputError, match=r"--trace .* and --fileset .*: give one"):
        pipeline.StudyConfig(tmp_path, trace=log, fileset=tmp_path)


@pytest.fixture(scope="module")
def arrivals():
    """A synthetic trace of 20,000 requests at 400/s, bursty (a lognormal rate factor of
    log standard deviation 0.3 per 2 s), replayed and spread within its logged seconds."""
    spec = traces.SynthSpec(n_objects=500, n_clients=80, rate=400.0, burstiness=0.3,
                            burst_s=2.0, max_size_bytes=100_000)
    replayed = replay.replay(traces.synthetic(20_000, SEED, spec), seed=SEED)
    return replayed, TraceArrivals.of(replayed.stream, SEED)


def _gaps_cv(times: np.ndarray) -> float:
    gaps = np.diff(times)
    return float(gaps.std() / gaps.mean())


def test_spreading_a_logged_second_keeps_its_requests_and_their_order(arrivals):
    replayed, spread = arrivals
    before, after = replayed.stream.frame, spread.stream.frame
    assert np.array_equal(np.floor(after["time_s"]), before["time_s"])
    assert after.drop(columns="time_s").equals(before.drop(columns="time_s"))
    assert spread.period_s == before["time_s"].iloc[-1] + 1
    assert spread.rate == pytest.approx(len(before) / spread.period_s)


@pytest.mark.parametrize("rate", [200.0, 2_000.0, 20_000.0])
def test_a_window_plays_the_trace_at_the_rate_asked_with_its_gaps_shape(arrivals, rate):
    _, spread = arrivals
    trace_cv = _gaps_cv(spread.stream.frame["time_s"].to_numpy())
    assert trace_cv > 1.05  # bursty: a Poisson stream's would be 1
    # Windows of a quarter of the trace each, from starts the seeds draw. A window's
    # mean rate follows the trace's swings; over random starts it is the asked rate
    # (within three standard errors, a few %), and their gaps keep the trace's shape.
    duration = spread.period_s / 4 * spread.rate / rate
    windows = [spread.window(rate, duration, seed) for seed in range(100)]
    assert len({round(w.meta["params"]["start_s"], 6) for w in windows}) == 100
    rates = np.array([len(w) / duration for w in windows])
    error = rates.std(ddof=1) / np.sqrt(len(rates))
    assert 3 * error < 0.05 * rate
    assert rates.mean() == pytest.approx(rate, abs=3 * error)
    # Each window is the trace's own stretch, its clock divided by the speed...
    # (the trace twice over: a window may wrap round its end)
    t = spread.stream.frame["time_s"].to_numpy()
    t = np.concatenate([t, t + spread.period_s])
    for w in windows[:10]:
        params = w.meta["params"]
        start, speed = params["start_s"], params["speed"]
        stretch = t[(t >= start) & (t < start + duration * speed)]
        assert speed == pytest.approx(rate / spread.rate)
        assert w.frame["time_s"].to_numpy() * speed + start == pytest.approx(stretch)
    # ... so their gaps together have the trace's coefficient of variation.
    gaps = np.concatenate([np.diff(w.frame["time_s"].to_numpy()) for w in windows])
    assert gaps.std() / gaps.mean() == pytest.approx(trace_cv, rel=0.03)


def test_a_window_longer_than_the_trace_wraps_round_with_connections_of_its_own(arrivals):
    _, spread = arrivals
    speed = 2.5
    window = spread.window(speed * spread.rate, spread.period_s, SEED)  # 2.5 passes
    frame = window.frame
    assert len(frame) == pytest.approx(2.5 * len(spread.stream), rel=0.05)
    # Every connection of the window belongs to one pass over the trace: none has more
    # requests than the trace's largest, and each ends with keep_alive false.
    trace_conns = spread.stream.frame.groupby("conn_id").size()
    assert frame.groupby("conn_id").size().max() <= trace_conns.max()
    assert frame["conn_id"].nunique() >= 2 * len(trace_conns)
    last = frame.drop_duplicates("conn_id", keep="last")
    assert not last["keep_alive"].any()
    assert frame["keep_alive"].sum() == len(frame) - frame["conn_id"].nunique()


def test_only_keeps_the_chosen_objects_requests_and_ends_their_connections(arrivals):
    _, spread = arrivals
    frame = spread.stream.frame
    small = frame.loc[frame["size_bytes"] < 10_000, "object"].astype(str).unique()
    kept = spread.only(small).stream.frame
    assert len(kept) == frame["object"].astype(str).isin(set(small)).sum()
    assert kept["time_s"].is_monotonic_increasing
    assert (kept.drop_duplicates("conn_id", keep="last")["keep_alive"] == False).all()  # noqa: E712
    assert spread.only(small).period_s == spread.period_s


# --------------------------------------------------------------- one real study

# Two of the trace's classes and a trimmed budget: three sweep rates, 1 s runs, single
# replicates, no runs made again and no handoff experiment (tests/test_study.py checks
# those): about a minute of load.
REAL_ARGS = ["--classes", "1,2", "--sweep-points", "3", "--run-length", "1s",
             "--replicates", "1", "--steal-repeats", "0", "--no-handoff"]


@pytest.fixture(scope="module")
def real_trace_study(tmp_path_factory, testbed):
    """A short real study of a 5,000-request synthetic access log."""
    root = tmp_path_factory.mktemp("trace-study")
    log = root / "synth.log"
    made = runner.invoke(app, ["workload", "synth", "clf", str(log), "--requests", "5000"])
    assert made.exit_code == 0, made.output
    out = root / "study"
    result = runner.invoke(app, ["study", "--trace", str(log), "--out", str(out), *REAL_ARGS])
    assert result.exit_code == 0, result.output
    return log, out


def test_a_real_trace_study_completes_with_the_mix_rows_and_names_the_trace(real_trace_study):
    log, out = real_trace_study
    summary = json.loads((out / "summary.json").read_text())
    workload = summary["meta"]["workload"]
    assert workload.startswith(f"trace {log}:") and "the mix is the trace itself" in workload
    mix_rows = [a for a in summary["accuracy"] if a["class"] == "mix"]
    assert {(a["mode"], a["metric"]) for a in mix_rows} >= {
        ("inline", "U_host"), ("inline", "T"), ("engine", "U_host"), ("engine", "T")}
    frame = pd.read_parquet(out / "results.parquet")
    mix = frame[(frame["class"] == "mix") & (frame["source"] == "testbed")
                & (frame["use"] == "validation")]
    assert set(mix["mode"]) == {"inline", "engine"} and (mix["throughput"] > 0).all()
    # The classes asked for, with the trace's shares of them in the fitted scenario.
    assert summary["meta"]["classes"] == ["c1", "c2"]
    rates = {c.name: c.rate for c in scenario.load(out / "scenario-engine.toml").classes}
    shares = study_trace.read(log, (1, 2), SEED).shares
    assert rates["c1"] / rates["c2"] == pytest.approx(shares[1] / shares[2])
    assert (out / "trace" / replay.STREAM_FILE).is_file() and (out / "report.html").is_file()
