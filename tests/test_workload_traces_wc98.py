"""WC98 binary logs: the record layout, the reader (chunks, several files, corrupt input)
and the writer."""

import gzip
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from trace_samples import N, assert_schema, records, request_tables, ten_records

from offloadlab.errors import InputError
from offloadlab.workload.traces import wc98
from offloadlab.workload.traces.synth import synth_wc98, synthetic
from offloadlab.workload.traces.wc98 import read_wc98, write_wc98

# ---------------------------------------------------------------- WC98: the format


def test_wc98_fields_decoded_as_the_ita_tools_define_them(tmp_path):
    p = tmp_path / "hand.wc98"
    p.write_bytes(records(
        (897_429_600, 1, 42, 5120, 0, (1 << 6) | 2, 1, (3 << 5) | 4),  # GET 200 HTTP/1.0
        (897_429_603, 2, 43, 0xFFFFFFFF, 1, (2 << 6) | 13, 6, 0),  # HEAD 304 HTTP/1.1
        (897_429_605, 2, 44, 300, 8, (0 << 6) | 37, 10, (1 << 5) | 31),  # OTHER, OTHER_CODES
        (897_429_609, 4294967295, 4294967295, 0, 2, (3 << 6) | 19, 12, 2 << 5),  # POST 404
    ))
    reader = read_wc98(p, wc98_fields=True)
    df = reader.table()
    assert_schema(df)
    assert df.time_s.tolist() == [0.0, 3.0, 5.0, 9.0]
    assert df.attrs["epoch_s"] == reader.report.epoch_s == 897_429_600
    assert df.client.tolist() == [1, 2, 2, 4294967295]
    assert df.object.tolist() == ["42", "43", "44", "4294967295"]
    assert df.size_bytes.tolist() == [5120, -1, 300, 0]
    assert df.status.tolist() == [200, 304, -1, 404]
    assert df.method.tolist() == ["GET", "HEAD", "OTHER", "POST"]
    assert df.conn_id.tolist() == [-1] * 4
    assert df.http_version.tolist() == ["HTTP/1.0", "HTTP/1.1", "HTTP/0.9", "HTTP/other"]
    assert df.file_type.tolist() == ["IMAGE", "DYNAMIC", "DIRECTORY", "OTHER"]
    assert df.region.tolist() == ["Paris", "Santa Clara", "Plano", "Herndon"]
    assert df.server.tolist() == [(3 << 5) | 4, 0, (1 << 5) | 31, 2 << 5]
    assert reader.report.records == 4 and reader.report.skipped == 0 and reader.report.done


def test_wc98_status_table_covers_all_37_codes():
    assert len(wc98.STATUS_CODES) == 37 and wc98.OTHER_CODES == 37
    assert wc98.STATUS_CODES[2] == 200 and wc98.STATUS_CODES[13] == 304
    assert wc98.STATUS_CODES[19] == 404 and wc98.STATUS_CODES[-1] == 505
    assert wc98.WC98_RECORD.itemsize == 20


@pytest.mark.parametrize("name", ["trace.wc98", "wc_day46_1.gz"])
def test_wc98_round_trip_synthetic(tmp_path, name):
    p = tmp_path / name
    assert synth_wc98(p, N, seed=5) == N
    assert (p.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    back = read_wc98(p).table()
    pd.testing.assert_frame_equal(back, synthetic(N, seed=5))
    assert back.attrs["epoch_s"] == wc98.DEFAULT_EPOCH_S


def test_wc98_write_read_write_is_byte_identical(tmp_path):
    src = tmp_path / "a.wc98"
    src.write_bytes(records(
        (897_429_600, 1, 42, 5120, 0, (1 << 6) | 2, 1, (3 << 5) | 4),
        (897_429_603, 2, 43, 0xFFFFFFFF, 1, (2 << 6) | 13, 6, 0),
        (897_429_605, 2, 44, 300, 8, 37, 10, (1 << 5) | 31)))
    table = read_wc98(src, wc98_fields=True).table()
    assert write_wc98(tmp_path / "b.wc98", table) == 3
    assert (tmp_path / "b.wc98").read_bytes() == src.read_bytes()


@pytest.mark.parametrize("chunk", [1, 7, 1000, 10**6])
def test_wc98_chunking_does_not_change_the_result(tmp_path, chunk):
    p = tmp_path / "t.wc98"
    synth_wc98(p, N, seed=2)
    frames = list(read_wc98(p, chunk_records=chunk))
    assert len(frames) == math.ceil(N / chunk)
    whole = read_wc98(p, chunk_records=10**6).table()
    pd.testing.assert_frame_equal(pd.concat(frames, ignore_index=True), whole)


def test_wc98_several_files_count_time_from_the_first(tmp_path):
    (tmp_path / "wc_day5_1").write_bytes(ten_records(1000))
    (tmp_path / "wc_day5_2").write_bytes(ten_records(1010))
    df = read_wc98([tmp_path / "wc_day5_1", tmp_path / "wc_day5_2"]).table()
    assert df.time_s.tolist() == [float(i) for i in range(20)]
    assert df.attrs["epoch_s"] == 1000


def test_wc98_table_of_records_in_memory(tmp_path):
    p = tmp_path / "t.wc98"
    synth_wc98(p, 500, seed=4)
    rec = np.fromfile(p, dtype=wc98.WC98_RECORD)
    pd.testing.assert_frame_equal(wc98.wc98_table(rec), read_wc98(p).table())
    rec[3]["method"] = 200
    with pytest.raises(InputError, match="byte offset 60: record has method 200"):
        wc98.wc98_table(rec)


# ---------------------------------------------------------------- WC98: corrupt input


def test_truncated_wc98_names_file_and_offset(tmp_path):
    p = tmp_path / "cut.wc98"
    p.write_bytes(ten_records() + b"\x01" * 7)
    with pytest.raises(InputError) as err:
        list(read_wc98(p))
    text = str(err.value)
    assert str(p) in text and "byte offset 200" in text and "7 bytes" in text
    assert "20 bytes" in text and "skip_bad=True" in text


def test_truncated_gzipped_wc98_names_the_decompressed_offset(tmp_path):
    p = tmp_path / "cut.gz"
    p.write_bytes(gzip.compress(ten_records() + b"\x01" * 13))
    reader = read_wc98(p, chunk_records=4)
    with pytest.raises(InputError, match=r"decompressed byte offset 200: a partial record "
                                         "of 13 bytes"):
        list(reader)


def test_skip_bad_counts_the_partial_record(tmp_path):
    p = tmp_path / "cut.wc98"
    p.write_bytes(ten_records() + b"\x01" * 7)
    reader = read_wc98(p, skip_bad=True)
    df = reader.table()
    assert len(df) == 10 and reader.report.records == 10 and reader.report.skipped == 1
    assert "byte offset 200" in reader.report.errors[0]


def test_invalid_codes_are_skipped_with_their_offsets(tmp_path):
    rows = [(1000 + i, i, i, 10, 0, (1 << 6) | 2, 1, 0) for i in range(8)]
    rows[3] = (1003, 3, 3, 10, 9, (1 << 6) | 2, 1, 0)  # method 9
    rows[5] = (1005, 5, 5, 10, 0, (1 << 6) | 40, 13, 0)  # status code 40, type 13
    p = tmp_path / "bad.wc98"
    p.write_bytes(records(*rows))
    reader = read_wc98(p, chunk_records=3)
    df = reader.table()
    assert df.client.tolist() == [0, 1, 2, 4, 6, 7]
    rep = reader.report
    assert rep.records == 6 and rep.skipped == 2
    assert "byte offset 60: record has method 9" in rep.errors[0]
    assert "byte offset 100" in rep.errors[1] and "status code 40" in rep.errors[1]
    assert "type 13" in rep.errors[1]


def test_corrupt_gzip_stream_is_a_clear_error(tmp_path):
    data = gzip.compress(ten_records() * 1000)
    p = tmp_path / "cut.gz"
    p.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputError, match="gzip stream is corrupt or truncated"):
        list(read_wc98(p, chunk_records=100))


# ---------------------------------------------------------------- round trips, any table


@given(request_tables(wc98=True))
def test_wc98_round_trip_any_table(table):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.wc98"
        write_wc98(p, table)
        back = read_wc98(p).table()
    pd.testing.assert_frame_equal(back, table, check_index_type=False)

