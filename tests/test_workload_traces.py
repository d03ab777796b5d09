"""The traces package: the names the CLI and the analysis use, the reader and its report
on empty, missing and bad input, reproducible and refused writes, read_trace's choice of
format, and connection assignment. Each format has its own test file."""

import gzip
import importlib

import numpy as np
import pandas as pd
import pytest
from trace_samples import assert_schema, records

from offloadlab.errors import InputError
from offloadlab.workload import traces
from offloadlab.workload.traces import SynthSpec, assign_connections, read_trace
from offloadlab.workload.traces.clf import read_clf, write_clf
from offloadlab.workload.traces.synth import synth_clf, synth_wc98, synthetic
from offloadlab.workload.traces.wc98 import read_wc98, write_wc98

# ---------------------------------------------------------------- the package's names


def test_the_package_re_exports_the_formats_functions():
    for module, names in (("wc98", "read_wc98 write_wc98 DEFAULT_EPOCH_S"),
                          ("clf", "read_clf write_clf"),
                          ("synth", "SynthSpec synthetic synthetic_chunks synth_wc98 "
                                    "synth_clf")):
        module = importlib.import_module(f"offloadlab.workload.traces.{module}")
        for name in names.split():
            assert getattr(traces, name) is getattr(module, name), name
    assert set(traces.__all__) <= set(dir(traces))


# ---------------------------------------------------------------- the reader and its report


@pytest.mark.parametrize("reader", [read_wc98, read_clf])
@pytest.mark.parametrize("name", ["empty", "empty.gz"])
def test_empty_file_gives_an_empty_table(tmp_path, reader, name):
    p = tmp_path / name
    p.write_bytes(gzip.compress(b"") if name.endswith(".gz") else b"")
    r = reader(p)
    frames = list(r)
    assert len(frames) == 1 and len(frames[0]) == 0
    assert_schema(frames[0])
    assert r.report.records == 0 and r.report.epoch_s is None and r.report.done
    assert len(r.table()) == 0


def test_missing_file_and_bad_chunk_size(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_wc98(tmp_path / "nope.gz")
    (tmp_path / "x").write_bytes(b"")
    with pytest.raises(InputError, match="chunk_records=0"):
        read_wc98(tmp_path / "x", chunk_records=0)


def test_report_keeps_only_the_first_examples(tmp_path):
    p = tmp_path / "bad.wc98"
    p.write_bytes(records(*[(1000, 1, 1, 1, 99, 2, 1, 0)] * 25))
    reader = read_wc98(p, max_examples=4)
    assert len(reader.table()) == 0
    assert reader.report.skipped == 25 and len(reader.report.errors) == 4


# ---------------------------------------------------------------- reading either format


def test_read_trace_tells_the_formats_apart(tmp_path):
    synth_wc98(tmp_path / "day.bin", 50, seed=1)
    synth_clf(tmp_path / "access.log.gz", 50, seed=1)
    assert read_trace(tmp_path / "day.bin").format == "wc98"
    assert read_trace(tmp_path / "access.log.gz").format == "clf"
    pd.testing.assert_frame_equal(read_trace(tmp_path / "day.bin").table(),
                                  read_trace(tmp_path / "access.log.gz").table())
    with pytest.raises(InputError, match="'wc98' or 'clf'"):
        read_trace(tmp_path / "day.bin", format="ncsa")


def test_a_log_with_a_nul_byte_is_still_a_log(tmp_path):
    # a NUL in the first 4 KiB used to make any file a WC98 log
    lines = [f'10.0.0.1 - - [10/Oct/2000:13:55:{s:02d} +0000] "GET /{s} HTTP/1.0" 200 9'
             for s in range(40)]
    lines[2] = lines[2].replace("GET /2", "GET /2\0x")
    path = tmp_path / "access.log"
    path.write_text("\n".join(lines) + "\n")
    reader = read_trace(path)
    assert reader.format == "clf" and len(reader.table()) == 40


def test_a_file_that_is_neither_format_names_the_one_assumed_and_why(tmp_path):
    path = tmp_path / "junk.log"
    path.write_bytes(b"\0\1 not a log line\n" * 30)
    with pytest.raises(InputError, match=r"junk.log:1: .*no request could be read, 30 "
                                         r"skipped \(read as clf because it does not start "
                                         r"with WC98 records \(the record at byte 0 has method"):
        read_trace(path).table()
    bad = tmp_path / "day.bin"              # WC98 records, the last one cut short
    bad.write_bytes(records(*[(1000 + i, 1, 1, 1, 0, 2, 1, 0) for i in range(5)])[:-3])
    with pytest.raises(InputError, match=r"partial record.*\(read as wc98 because its first "
                                         r"4 records are valid WC98 records\)"):
        read_trace(bad).table()
    assert traces.detect_format(tmp_path / "junk.log")[0] == "clf"


# ---------------------------------------------------------------- writers


def test_gzip_output_is_reproducible(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    synth_wc98(tmp_path / "a" / "day.gz", 500, seed=1)
    synth_wc98(tmp_path / "b" / "day.gz", 500, seed=1)
    assert (tmp_path / "a" / "day.gz").read_bytes() == (tmp_path / "b" / "day.gz").read_bytes()


def test_writers_refuse_values_the_format_cannot_hold(tmp_path):
    table = synthetic(20, seed=1)
    bad = table.assign(object=["/index.html", *table.object.tolist()[1:]])
    with pytest.raises(InputError, match=r"row 0: object '/index.html'.*pd.factorize"):
        write_wc98(tmp_path / "a.wc98", bad)
    with pytest.raises(InputError, match=r"row 3: status 418 .*-1"):
        write_wc98(tmp_path / "a.wc98", table.assign(status=np.where(
            np.arange(20) == 3, 418, table.status).astype(np.int16)))
    with pytest.raises(InputError, match="row 0: status -1 cannot be written"):
        write_clf(tmp_path / "a.log", table.assign(status=np.int16(-1)))
    with pytest.raises(InputError, match="epoch_s"):
        write_clf(tmp_path / "a.log", pd.DataFrame(table.to_dict("list")))
    with pytest.raises(InputError, match="lacks column"):
        write_wc98(tmp_path / "a.wc98", table.drop(columns="method"))
    assert not list(tmp_path.iterdir())  # nothing half-written is left behind


# ---------------------------------------------------------------- connections


def test_assign_connections_opens_a_connection_after_an_idle_window():
    df = pd.DataFrame({"time_s": [0.0, 5.0, 10.0, 20.0, 30.0, 46.0],
                       "client": [1, 2, 1, 2, 1, 1]})
    out = next(assign_connections([df], window_s=15.0))
    # client 1: 0, 10 (gap 10), 30 (gap 20: new), 46 (gap 16: new); client 2: 5, 20 (gap 15)
    assert out.conn_id.tolist() == [0, 1, 0, 1, 2, 3]
    parts = [df.iloc[:3], df.iloc[3:4], df.iloc[4:]]
    got = pd.concat(assign_connections(parts, window_s=15.0))
    assert got.conn_id.tolist() == [0, 1, 0, 1, 2, 3]


def test_assign_connections_does_not_depend_on_chunks(tmp_path):
    p = tmp_path / "t.wc98"
    synth_wc98(p, 20_000, seed=6, spec=SynthSpec(rate=200.0, n_clients=300))
    whole = next(assign_connections([read_wc98(p).table()]))
    chunked = pd.concat(assign_connections(read_wc98(p, chunk_records=777)), ignore_index=True)
    assert chunked.conn_id.tolist() == whole.conn_id.tolist()
    assert whole.conn_id.min() == 0 and whole.conn_id.nunique() == whole.conn_id.max() + 1
    with pytest.raises(InputError, match="window_s"):
        next(assign_connections([whole], window_s=-1))
