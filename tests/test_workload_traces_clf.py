"""Common and Combined Log Format: the fields of Apache and nginx lines, client ids, the
writer, and bad lines skipped (or, strictly, refused) with their line numbers."""

import calendar
import gzip
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from trace_samples import N, assert_schema, clf_file, request_tables

from offloadlab.errors import InputError
from offloadlab.workload.traces.clf import client_id, read_clf, write_clf
from offloadlab.workload.traces.synth import synth_clf, synthetic

# ---------------------------------------------------------------- CLF: the format

APACHE = '127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326'
COMBINED = ('192.168.1.2 - - [02/Feb/2016:17:44:13 +0800] "GET /favicon.ico HTTP/1.1" 404 209 '
            '"http://localhost/x1.html" "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_3)"')


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


# ---------------------------------------------------------------- round trips, any table


@given(request_tables(wc98=False))
def test_clf_round_trip_any_table(table):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.log"
        write_clf(p, table)
        back = read_clf(p, strict=True).table()
    if len(table):
        assert back.attrs["epoch_s"] == table.attrs["epoch_s"]
    pd.testing.assert_frame_equal(back, table, check_index_type=False)

