"""Inputs shared by the trace tests: WC98 records packed by hand, access-log files, and
request tables of any values a format can hold."""

import gzip
import struct

import numpy as np
import pandas as pd
from hypothesis import strategies as st

from offloadlab.workload.traces import COLUMNS, DTYPES
from offloadlab.workload.traces.wc98 import METHODS, STATUS_CODES

N = 3000  # requests in the small synthetic traces


def records(*rows) -> bytes:
    """WC98 records packed by hand (struct, not our encoder): independent truth."""
    return b"".join(struct.pack(">IIIIBBBB", *r) for r in rows)


def ten_records(t0=897_429_600):
    return records(*[(t0 + i, 100 + i, 7 * i, 1000 + i, 0, (1 << 6) | 2, 1, 0)
                     for i in range(10)])


def clf_file(tmp_path, lines, name="access.log"):
    p = tmp_path / name
    data = ("\n".join(lines) + "\n").encode()
    p.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return p


def assert_schema(df):
    assert tuple(df.columns[:len(COLUMNS)]) == COLUMNS
    for c in COLUMNS:
        assert df[c].dtype == DTYPES[c], c


@st.composite
def request_tables(draw, wc98: bool):
    n = draw(st.integers(0, 12))
    text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
                   max_size=12)
    obj = st.integers(0, 2**32 - 1).map(str) if wc98 else text
    status = st.sampled_from(STATUS_CODES + ((-1,) if wc98 else (999, 599)))
    method = st.sampled_from(METHODS + (() if wc98 else ("-", "PROPFIND")))
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
