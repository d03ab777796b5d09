"""Web traces: WC98 and CLF readers and writers, errors on corrupt input, the synthetic
generator, connection assignment."""

import calendar
import gzip
import math
import struct
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from offloadlab.errors import InputError
from offloadlab.workload import traces
from offloadlab.workload.traces import (
    COLUMNS,
    DTYPES,
    SynthSpec,
    assign_connections,
    client_id,
    read_clf,
    read_trace,
    read_wc98,
    synth_clf,
    synth_wc98,
    synthetic,
    write_clf,
    write_wc98,
)

N = 3000  # requests in the small synthetic traces below


def records(*rows) -> bytes:
    """WC98 records packed by hand (struct, not our encoder): independent truth."""
    return b"".join(struct.pack(">IIIIBBBB", *r) for r in rows)


def ten_records(t0=897_429_600):
    return records(*[(t0 + i, 100 + i, 7 * i, 1000 + i, 0, (1 << 6) | 2, 1, 0)
                     for i in range(10)])


def assert_schema(df):
    assert tuple(df.columns[:len(COLUMNS)]) == COLUMNS
    for c in COLUMNS:
        assert df[c].dtype == DTYPES[c], c


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
    assert len(traces.STATUS_CODES) == 37 and traces.OTHER_CODES == 37
    assert traces.STATUS_CODES[2] == 200 and traces.STATUS_CODES[13] == 304
    assert traces.STATUS_CODES[19] == 404 and traces.STATUS_CODES[-1] == 505
    assert traces.WC98_RECORD.itemsize == 20


@pytest.mark.parametrize("name", ["trace.wc98", "wc_day46_1.gz"])
def test_wc98_round_trip_synthetic(tmp_path, name):
    p = tmp_path / name
    assert synth_wc98(p, N, seed=5) == N
    assert (p.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    back = read_wc98(p).table()
    pd.testing.assert_frame_equal(back, synthetic(N, seed=5))
    assert back.attrs["epoch_s"] == traces.DEFAULT_EPOCH_S


def test_wc98_write_read_write_is_byte_identical(tmp_path):
    src = tmp_path / "a.wc98"
    src.write_bytes(records(
        (897_429_600, 1, 42, 5120, 0, (1 << 6) | 2, 1, (3 << 5) | 4),
        (897_429_603, 2, 43, 0xFFFFFFFF, 1, (2 << 6) | 13, 6, 0),
        (897_429_605, 2, 44, 300, 8, 37, 10, (1 << 5) | 31)))
    table = read_wc98(src, wc98_fields=True).table()
    assert write_wc98(tmp_path / "b.wc98", table) == 3
    assert (tmp_path / "b.wc98").read_bytes() == src.read_bytes()


def test_gzip_output_is_reproducible(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    synth_wc98(tmp_path / "a" / "day.gz", 500, seed=1)
    synth_wc98(tmp_path / "b" / "day.gz", 500, seed=1)
    assert (tmp_path / "a" / "day.gz").read_bytes() == (tmp_path / "b" / "day.gz").read_bytes()


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
    rec = np.fromfile(p, dtype=traces.WC98_RECORD)
    pd.testing.assert_frame_equal(traces.wc98_table(rec), read_wc98(p).table())
    rec[3]["method"] = 200
    with pytest.raises(InputError, match="byte offset 60: record has method 200"):
        traces.wc98_table(rec)


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


def test_report_keeps_only_the_first_examples(tmp_path):
    p = tmp_path / "bad.wc98"
    p.write_bytes(records(*[(1000, 1, 1, 1, 99, 2, 1, 0)] * 25))
    reader = read_wc98(p, max_examples=4)
    assert len(reader.table()) == 0
    assert reader.report.skipped == 25 and len(reader.report.errors) == 4


def test_corrupt_gzip_stream_is_a_clear_error(tmp_path):
    data = gzip.compress(ten_records() * 1000)
    p = tmp_path / "cut.gz"
    p.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputError, match="gzip stream is corrupt or truncated"):
        list(read_wc98(p, chunk_records=100))


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


# ---------------------------------------------------------------- CLF: the format

APACHE = '127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326'
COMBINED = ('192.168.1.2 - - [02/Feb/2016:17:44:13 +0800] "GET /favicon.ico HTTP/1.1" 404 209 '
            '"http://localhost/x1.html" "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_3)"')


def clf_file(tmp_path, lines, name="access.log"):
    p = tmp_path / name
    data = ("\n".join(lines) + "\n").encode()
    p.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return p


def test_clf_fields_of_apache_and_nginx_lines(tmp_path):
    lines = [
        APACHE,
        COMBINED,
        '::1 - - [10/Oct/2000:20:55:40 +0000] "HEAD /a%20b?q=1 HTTP/1.1" 304 -',
        'example.org - - [10/Oct/2000:20:55:41 +0000] "GET /old" 200 10',  # HTTP/0.9
        '10.0.0.1 - - [10/Oct/2000:20:55:42 +0000] "-" 400 0 "-" "-"',  # nginx, no request
        r'10.0.0.1 - - [10/Oct/2000:20:55:43 +0000] "GET /q\"x\\y HTTP/1.1" 200 5',
        '10.0.0.1 - - [10/Oct/2000:20:55:44 +0000] "GET / HTTP/1.1" 200 5 "-" "-" 0.003',
    ]
    reader = read_clf(clf_file(tmp_path, lines))
    df = reader.table()
    assert_schema(df)
    t0 = calendar.timegm((2000, 10, 10, 20, 55, 36))  # 13:55:36 at -0700
    assert reader.report.epoch_s == df.attrs["epoch_s"] == t0
    t1 = calendar.timegm((2016, 2, 2, 9, 44, 13))  # 17:44:13 at +0800
    assert df.time_s.tolist() == [0.0, t1 - t0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert df.client[0] == 127 << 24 | 1 and df.client[1] == (192 << 24 | 168 << 16 | 1 << 8 | 2)
    assert df.client[2] == client_id("::1") >= 2**32 and df.client[3] == client_id("example.org")
    assert df.object.tolist() == ["/apache_pb.gif", "/favicon.ico", "/a%20b?q=1", "/old", "-",
                                  '/q"x\\y', "/"]
    assert df.method.tolist() == ["GET", "GET", "HEAD", "GET", "-", "GET", "GET"]
    assert df.status.tolist() == [200, 404, 304, 200, 400, 200, 200]
    assert df.size_bytes.tolist() == [2326, 209, -1, 10, 0, 5, 5]
    assert reader.report.skipped == 0


def test_client_ids_are_stable_and_keep_ipv4_apart():
    assert client_id("1.2.3.4") == 0x01020304
    assert client_id("255.255.255.255") == 2**32 - 1
    for host in ["256.1.1.1", "1.2.3", "2001:db8::1", "crawler.example.com", "01234.1.1.1"]:
        assert 2**32 <= client_id(host) < 2**63, host
    assert client_id("2001:db8::1") == client_id("2001:db8::1") != client_id("2001:db8::2")


@pytest.mark.parametrize("name", ["a.log", "a.log.gz"])
@pytest.mark.parametrize("combined, offset", [(True, 7200), (False, -19800)])
def test_clf_round_trip_synthetic(tmp_path, name, combined, offset):
    p = tmp_path / name
    assert synth_clf(p, N, seed=8, utc_offset_s=offset, combined=combined) == N
    reader = read_clf(p, chunk_lines=999)
    pd.testing.assert_frame_equal(reader.table(), synthetic(N, seed=8))
    assert reader.report.skipped == 0 and reader.report.records == N
    with gzip.open(p, "rt") if name.endswith(".gz") else p.open() as f:
        first = f.readline()
    zone = "+0200" if offset == 7200 else "-0530"
    assert f":00:00 {zone}]" in first or f" {zone}]" in first
    assert first.rstrip().endswith('"-" "-"') == combined


@pytest.mark.parametrize("chunk", [1, 13, 10**6])
def test_clf_chunking_does_not_change_the_result(tmp_path, chunk):
    p = tmp_path / "a.log"
    synth_clf(p, 400, seed=3)
    lines = p.read_text().splitlines()
    lines[17] = "garbage"
    p.write_text("\n".join(lines) + "\n")
    reader = read_clf(p, chunk_lines=chunk)
    got = pd.concat(list(reader), ignore_index=True)
    pd.testing.assert_frame_equal(got, read_clf(p).table())
    assert len(got) == 399 and reader.report.skipped == 1


# ---------------------------------------------------------------- CLF: corrupt input

BAD_LINES = {  # line number -> (line, what the report says)
    2: ('1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.0" 200', "byte count"),
    4: ("", "empty line"),
    5: ('1.2.3.4 - - [10/Foo/2000:13:55:36 -0700] "GET /a HTTP/1.0" 200 1', "month"),
    6: ('1.2.3.4 - - [30/Feb/2000:13:55:36 -0700] "GET /a HTTP/1.0" 200 1', "valid ranges"),
    7: ('1.2.3.4 - - 10/Oct/2000:13:55:36 -0700 "GET /a HTTP/1.0" 200 1', "time in brackets"),
    9: ('1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.0 200 1', "double quotes"),
    10: ('1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.0" OK 1', "3-digit status"),
    11: ("\x00\x01\x02 binary junk", "host ident authuser"),
    12: ('1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.0" 200 12kB', "byte count"),
}


def corrupt_log(tmp_path, name="mixed.log"):
    good = '1.2.3.4 - - [10/Oct/2000:13:55:{:02d} -0700] "GET /{} HTTP/1.0" 200 {}'
    lines = [BAD_LINES[i][0] if i in BAD_LINES else good.format(i, i, i) for i in range(1, 15)]
    return clf_file(tmp_path, lines, name)


@pytest.mark.parametrize("name", ["mixed.log", "mixed.log.gz"])
def test_corrupt_clf_lines_are_skipped_and_counted_with_line_numbers(tmp_path, name):
    p = corrupt_log(tmp_path, name)
    reader = read_clf(p, chunk_lines=4)
    df = reader.table()
    good = [i for i in range(1, 15) if i not in BAD_LINES]
    assert df.object.tolist() == [f"/{i}" for i in good]
    assert df.time_s.tolist() == [float(i - good[0]) for i in good]
    rep = reader.report
    assert rep.records == len(good) and rep.skipped == len(BAD_LINES)
    assert len(rep.errors) == len(BAD_LINES)
    for error, (lineno, (_, what)) in zip(rep.errors, sorted(BAD_LINES.items()), strict=True):
        assert error.startswith(f"{p}:{lineno}: "), error
        assert what in error, (what, error)
    assert f"{len(BAD_LINES)} skipped" in rep.summary()


def test_strict_mode_stops_at_the_first_bad_line(tmp_path):
    p = corrupt_log(tmp_path)
    with pytest.raises(InputError) as err:
        list(read_clf(p, strict=True))
    text = str(err.value)
    assert text.startswith(f"{p}:2: expected the byte count")
    assert "expected Common or Combined Log Format" in text and "strict=True" in text


def test_read_trace_tells_the_formats_apart(tmp_path):
    synth_wc98(tmp_path / "day.bin", 50, seed=1)
    synth_clf(tmp_path / "access.log.gz", 50, seed=1)
    assert read_trace(tmp_path / "day.bin").format == "wc98"
    assert read_trace(tmp_path / "access.log.gz").format == "clf"
    pd.testing.assert_frame_equal(read_trace(tmp_path / "day.bin").table(),
                                  read_trace(tmp_path / "access.log.gz").table())
    with pytest.raises(InputError, match="'wc98' or 'clf'"):
        read_trace(tmp_path / "day.bin", format="ncsa")


# ---------------------------------------------------------------- writers refuse, clearly


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


# ---------------------------------------------------------------- round trips, any table


@st.composite
def request_tables(draw, wc98: bool):
    n = draw(st.integers(0, 12))
    text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
                   max_size=12)
    obj = st.integers(0, 2**32 - 1).map(str) if wc98 else text
    status = st.sampled_from(traces.STATUS_CODES + ((-1,) if wc98 else (999, 599)))
    method = st.sampled_from(traces.METHODS + (() if wc98 else ("-", "PROPFIND")))
    times = sorted(draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n)))
    df = pd.DataFrame({
        "time_s": np.array([t - times[0] for t in times], dtype=np.float64),
        "client": np.array(draw(st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n)),
                           dtype=np.int64),
        "object": pd.Series(draw(st.lists(obj, min_size=n, max_size=n)), dtype=DTYPES["object"]),
        "size_bytes": np.array(draw(st.lists(st.integers(-1, 2**32 - 2), min_size=n,
                                             max_size=n)), dtype=np.int64),
        "status": np.array(draw(st.lists(status, min_size=n, max_size=n)), dtype=np.int16),
        "method": pd.Series(draw(st.lists(method, min_size=n, max_size=n)),
                            dtype=DTYPES["method"]),
        "conn_id": np.full(n, -1, dtype=np.int64),
    })
    df.attrs["epoch_s"] = float(draw(st.integers(0, 2**31)))
    return df


@given(request_tables(wc98=False))
def test_clf_round_trip_any_table(table):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.log"
        write_clf(p, table)
        back = read_clf(p, strict=True).table()
    if len(table):
        assert back.attrs["epoch_s"] == table.attrs["epoch_s"]
    pd.testing.assert_frame_equal(back, table, check_index_type=False)


@given(request_tables(wc98=True))
def test_wc98_round_trip_any_table(table):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.wc98"
        write_wc98(p, table)
        back = read_wc98(p).table()
    pd.testing.assert_frame_equal(back, table, check_index_type=False)


# ---------------------------------------------------------------- the synthetic generator


def test_synthetic_is_reproducible_and_chunk_invariant():
    a = synthetic(300_000, seed=11)
    pd.testing.assert_frame_equal(a, synthetic(300_000, seed=11))
    assert not a.object.equals(synthetic(300_000, seed=12).object)
    chunks = list(traces.synthetic_chunks(300_000, seed=11))
    assert len(chunks) == 2  # one block boundary (BLOCK = 2**18) inside
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), a)
    assert a.time_s.iloc[0] == 0 and a.time_s.is_monotonic_increasing
    assert len(synthetic(0)) == 0


def test_synthetic_popularity_is_zipf():
    spec = SynthSpec(n_objects=1000, zipf_alpha=1.0)
    n = 200_000
    counts = synthetic(n, seed=3, spec=spec).object.value_counts().to_numpy()
    harmonic = np.sum(1.0 / np.arange(1, 1001))
    for rank in (1, 2, 3):  # tens of standard errors apart: the sorted counts keep rank
        p = 1.0 / rank / harmonic
        se = math.sqrt(p * (1 - p) / n)
        assert abs(counts[rank - 1] / n - p) < 5 * se


def test_synthetic_poisson_rate_and_bursts():
    n, rate = 100_000, 500.0
    exact = SynthSpec(rate=rate, resolution_s=None)
    t = synthetic(n, seed=4, spec=exact).time_s.to_numpy()
    # n - 1 exponential gaps: the span is Gamma(n - 1, rate)
    assert abs(t[-1] - (n - 1) / rate) < 5 * math.sqrt(n - 1) / rate
    assert stats.kstest(np.diff(t) * rate, "expon").pvalue > 1e-3
    per_s = np.bincount(t.astype(int))[:-1]
    fano = per_s.var() / per_s.mean()
    assert abs(fano - 1) < 5 * math.sqrt(2 / (len(per_s) - 1))
    bursty = SynthSpec(rate=rate, resolution_s=None, burstiness=1.0, burst_s=5.0)
    tb = synthetic(n, seed=4, spec=bursty).time_s.to_numpy()
    per_s = np.bincount(tb.astype(int))[:-1]
    assert per_s.var() / per_s.mean() > 20  # rate 500 * lognormal(sigma 1) factors


def test_synthetic_sizes_splice_lognormal_and_pareto():
    spec = SynthSpec(n_objects=50_000)
    sizes = traces.object_sizes(spec, np.random.default_rng(0)).astype(float)
    (mu, sigma), (alpha, k) = spec.size_body, spec.size_tail
    p_tail = stats.norm.sf((math.log(k) - mu) / sigma)
    share = np.mean(sizes > k)
    assert abs(share - p_tail) < 5 * math.sqrt(p_tail * (1 - p_tail) / sizes.size)
    tail = sizes[sizes > k]
    assert stats.kstest(tail[tail < spec.max_size_bytes], stats.pareto(alpha, scale=k).cdf
                        ).pvalue > 1e-3


def test_synthetic_status_and_method_rules():
    df = synthetic(20_000, seed=2)
    assert (df.size_bytes[df.status == 304] == -1).all()
    assert (df.size_bytes[df.method == "HEAD"] == -1).all()
    assert (df.size_bytes[(df.status == 404) & (df.method != "HEAD")] == 350).all()
    ok = df[(df.status == 200) & (df.method != "HEAD")]
    assert (ok.groupby("object").size_bytes.nunique() == 1).all()  # one size per object


def test_synth_spec_is_checked():
    with pytest.raises(InputError, match="status_mix probabilities"):
        SynthSpec(status_mix=((200, 0.5),))
    with pytest.raises(InputError, match="rate"):
        SynthSpec(rate=0)
    with pytest.raises(InputError, match="whole number of seconds"):
        synth_wc98("unused.wc98", 10, spec=SynthSpec(resolution_s=0.5))


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
