"""Request streams: reproducible generators, keep-alive grouping, closed clients and
objects drawn by popularity (checked against scipy.stats); the Parquet format round trip
and its errors."""

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import OBJ, P_FLOOR, check_keep_alive, objects_table
from scipy import stats

from offloadlab.errors import InputError
from offloadlab.workload import stream
from offloadlab.workload.stream import Stream


def conn_lengths(frame):
    """Requests per connection, in order of first appearance."""
    return frame.groupby("conn_id", sort=True).size().to_numpy()


# ------------------------------------------------------------------ reproducibility

GENERATORS = {
    "poisson": lambda seed: stream.poisson(OBJ, rate=50, duration_s=5, keep_alive="geom(mean=3)",
                                           seed=seed),
    "constant": lambda seed: stream.constant(OBJ, rate=50, count=300, seed=seed),
    "ramp": lambda seed: stream.ramp(OBJ, [(0, 10), (5, 100)], seed=seed),
    "closed": lambda seed: stream.closed(OBJ, clients=5, think="exp(mean=100ms)",
                                         duration_s=3, keep_alive=4, seed=seed),
    "sessions": lambda seed: stream.sessions(OBJ, "ecommerce", clients=3, sessions=4,
                                             embedded="uniform(lo=0, hi=5)", seed=seed),
}


@pytest.mark.parametrize("name", GENERATORS)
def test_same_seed_same_stream(name):
    a, b, c = GENERATORS[name](7), GENERATORS[name](7), GENERATORS[name](8)
    assert len(a) > 0
    assert a.equals(b)
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert a.meta["seed"] == 7 and a.meta["generator"] == name
    if name != "constant":  # constant draws only objects
        assert not a.frame.equals(c.frame)


def test_a_numpy_generator_seeds_too():
    a = stream.poisson(OBJ, rate=20, count=50, seed=np.random.default_rng(3))
    b = stream.poisson(OBJ, rate=20, count=50, seed=np.random.default_rng(3))
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert a.meta["seed"] is None


def test_keep_alive_does_not_change_the_arrival_times():
    """Times, connection lengths and objects come from independent generators."""
    one = stream.poisson(OBJ, rate=100, duration_s=10, seed=4)
    ka = stream.poisson(OBJ, rate=100, duration_s=10, keep_alive=6, seed=4)
    np.testing.assert_array_equal(ka.frame.groupby("conn_id")["time_s"].first(),
                                  one.frame["time_s"])


# ------------------------------------------------------------------ keep-alive


def test_http10_one_request_per_connection():
    f = stream.poisson(OBJ, rate=100, count=200, seed=1).frame
    assert (conn_lengths(f) == 1).all()
    assert not f["keep_alive"].any()
    np.testing.assert_array_equal(f["conn_id"], np.arange(200))
    np.testing.assert_array_equal(f["client"], f["conn_id"])


def test_keep_alive_fixed_requests_per_connection():
    f = stream.poisson(OBJ, rate=100, count=1003, keep_alive=5, seed=2).frame
    lengths = conn_lengths(f)
    assert (lengths[:-1] == 5).all() and lengths[-1] == 3   # the count cuts the last short
    check_keep_alive(f)
    assert (f.groupby("conn_id")["time_s"].nunique() == 1).all()
    assert np.all(np.diff(f["conn_id"]) >= 0)                # a connection's rows are adjacent


def test_keep_alive_distribution_of_requests_per_connection():
    mean = 4.0
    f = stream.poisson(OBJ, rate=100, duration_s=100, keep_alive=f"geom(mean={mean})",
                       seed=3).frame
    lengths = conn_lengths(f)
    sd = math.sqrt((1 - 1 / mean) * mean**2)                  # geometric: (1-p)/p^2
    assert abs(lengths.mean() - mean) < 4 * sd / math.sqrt(len(lengths))
    observed = np.bincount(lengths)[1:13]
    expected = len(lengths) * stats.geom.pmf(np.arange(1, 13), 1 / mean)
    keep = expected > 5
    chi2 = np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep])
    assert stats.chi2.sf(chi2, keep.sum()) > P_FLOOR
    check_keep_alive(f)
    u = conn_lengths(stream.poisson(OBJ, rate=100, count=3000, keep_alive="uniform(2, 4)",
                                    seed=3).frame)
    assert set(u[:-1]) == {2, 3, 4}


# ------------------------------------------------------------------ closed clients


def test_saturation_mode_zero_think_and_requests_per_client():
    s = stream.closed(OBJ, clients=8, think="det(0)", requests=50)
    f = s.frame
    assert len(f) == 400 and (f["think_s"] == 0).all()
    assert (f.groupby("client").size() == 50).all()
    np.testing.assert_array_equal(f["client"], np.tile(np.arange(8), 50))  # interleaved
    assert s.kind == "closed" and not f["keep_alive"].any()


def test_closed_think_times_follow_their_distribution():
    f = stream.closed(OBJ, clients=10, think="lognormal(mean=500ms, sigma=0.8)",
                      requests=500, seed=2).frame
    mean = 0.5
    nu = math.log(mean) - 0.8**2 / 2
    assert stats.kstest(f["think_s"], "lognorm", args=(0.8, 0, math.exp(nu))).pvalue > P_FLOOR


def test_closed_duration_keeps_what_fits_in_the_think_time():
    clients, duration = 20, 30.0
    s = stream.closed(OBJ, clients=clients, think="exp(mean=1s)", duration_s=duration, seed=6)
    f = s.frame
    assert (f.groupby("client")["think_s"].sum() < duration).all()
    # Requests per client are the renewals of a rate-1 Poisson process in 30 s:
    # the total is Poisson(600).
    assert abs(len(f) - clients * duration) < 4 * math.sqrt(clients * duration)
    assert s.meta["duration_s"] == duration and s.describe()["duration_s"] == duration
    capped = stream.closed(OBJ, clients=3, think="exp(mean=1s)", duration_s=1000, requests=7)
    assert (capped.frame.groupby("client").size() == 7).all()
    # Saturation mode (zero think time) with a duration: the request count bounds it.
    busy = stream.closed(OBJ, clients=2, think="det(0)", duration_s=5, requests=5)
    assert (busy.frame.groupby("client").size() == 5).all() and (busy.frame["think_s"] == 0).all()


def test_closed_keep_alive_groups_each_clients_consecutive_requests():
    f = stream.closed(OBJ, clients=4, requests=10, keep_alive=3, seed=1).frame
    check_keep_alive(f)
    for _, rows in f.groupby("client"):
        lengths = rows.groupby("conn_id", sort=False).size().to_numpy()
        np.testing.assert_array_equal(lengths, [3, 3, 3, 1])
        assert np.all(np.diff(rows["conn_id"].to_numpy()) >= 0)  # one connection at a time


# ------------------------------------------------------------------ objects


def test_objects_are_drawn_by_popularity():
    table = objects_table(n=20, alpha=0.8)
    f = stream.poisson(table, rate=100, count=20_000, seed=8).frame
    counts = f["object"].value_counts().reindex(table["path"], fill_value=0).to_numpy()
    p = table["probability"].to_numpy() / table["probability"].sum()
    chi2 = np.sum((counts - len(f) * p) ** 2 / (len(f) * p))
    assert stats.chi2.sf(chi2, len(p) - 1) > P_FLOOR
    sizes = dict(zip(table["path"], table["size_bytes"], strict=True))
    assert (f["size_bytes"] == f["object"].astype(str).map(sizes)).all()


def test_size_class_restricts_the_objects():
    f = stream.closed(OBJ, clients=2, requests=100, size_class=3).frame
    assert f["object"].astype(str).str.startswith("c3/").all()
    no_class = OBJ.drop(columns="class")          # computed from size_bytes instead
    g = stream.closed(no_class, clients=2, requests=100, size_class=3).frame
    pd.testing.assert_frame_equal(f, g)


def test_objects_from_a_file_and_the_params_record_them(tmp_path):
    OBJ.drop(columns="class").to_csv(tmp_path / "objects.csv", index=False)
    OBJ.to_parquet(tmp_path / "objects.parquet", index=False)
    a = stream.closed(tmp_path / "objects.csv", clients=2, requests=20, size_class=np.int8(2))
    b = stream.closed(str(tmp_path / "objects.parquet"), clients=2, requests=20, size_class=2)
    c = stream.closed(OBJ, clients=2, requests=20, size_class=2)
    pd.testing.assert_frame_equal(a.frame, c.frame)
    assert a.meta == b.meta == c.meta
    assert c.meta["params"]["size_class"] == 2 and c.meta["params"]["objects"] == 8
    a.write(tmp_path / "s.parquet")                      # numpy values in meta are JSON too
    assert stream.read(tmp_path / "s.parquet").meta["params"]["size_class"] == 2
    for bad, match in [(tmp_path / "nothing.csv", "no such objects table"),
                       (tmp_path / "s.parquet", "no column 'path'"),
                       (OBJ.assign(path="same"), "'same' appears more than once")]:
        with pytest.raises(InputError, match=match):
            stream.closed(bad, clients=1, requests=1)


def test_file_set_as_objects():
    fileset = pytest.importorskip("offloadlab.workload.fileset")
    fs = fileset.generate(fileset.preset("web", seed=1, n_files=300))
    s = stream.poisson(fs, rate=50, count=500, seed=1)
    manifest = fs.frame()
    assert set(s.frame["object"].astype(str)) <= set(manifest["path"])
    per_class = fileset.generate(fileset.preset("toe-2009", seed=1)[2])
    c2 = stream.closed(per_class.frame(), clients=4, requests=50, size_class=2)
    assert c2.frame["size_bytes"].between(10 * 1024 + 1, 100 * 1024).all()


# ------------------------------------------------------------------ the Parquet format


@pytest.mark.parametrize("name", GENERATORS)
def test_parquet_round_trip_is_identical(tmp_path, name):
    s = GENERATORS[name](3)
    path = tmp_path / "s.parquet"
    s.write(path)
    back = stream.read(path)
    assert back.equals(s)
    pd.testing.assert_frame_equal(back.frame, s.frame)
    assert back.meta == s.meta
    assert [p.name for p in tmp_path.iterdir()] == ["s.parquet"]   # no temporary left


def test_on_disk_schema_and_version(tmp_path):
    s = GENERATORS["sessions"](1)
    s.write(tmp_path / "s.parquet")
    schema = pq.read_schema(tmp_path / "s.parquet")
    assert schema.names == ["think_s", "object", "size_bytes", "conn_id", "keep_alive", "client",
                            "session", "page", "dynamic", "app_work_s"]
    assert [str(t) for t in schema.types] == ["double", "string", "int64", "int64", "bool",
                                              "int64", "int64", "string", "bool", "double"]
    assert schema.metadata[b"offloadlab.stream.format_version"] == b"1"


def test_iter_batches_gives_the_same_rows_in_pieces(tmp_path):
    s = GENERATORS["poisson"](2)
    s.write(tmp_path / "s.parquet")
    batches = list(stream.iter_batches(tmp_path / "s.parquet", rows=37))
    assert max(len(b) for b in batches) <= 37 and len(batches) > 3
    whole = pd.concat(batches, ignore_index=True)
    assert list(whole.columns) == list(s.frame.columns)
    for col in s.frame:
        a, b = whole[col], s.frame[col]
        if col == "object":
            a, b = a.astype(str), b.astype(str)
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())


def test_hand_built_frame_is_normalised():
    frame = pd.DataFrame({"think_s": [0, 0.5, 0], "object": ["b", "a", "b"],
                          "size_bytes": np.array([1, 2, 1], dtype=np.int32),
                          "conn_id": [0, 0, 1], "keep_alive": [True, False, False],
                          "client": np.array([0, 0, 1], dtype=np.uint8)})
    s = Stream(frame)
    assert s.frame["size_bytes"].dtype == np.int64 and s.frame["think_s"].dtype == np.float64
    assert list(s.frame["object"].cat.categories) == ["a", "b"]
    assert s.meta == {"format_version": 1}


def write_frame(path, frame, metadata=None):
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if metadata is not None:
        table = table.replace_schema_metadata(metadata)
    pq.write_table(table, path)


def base_frame():
    return GENERATORS["poisson"](1).frame.astype({"object": str})


@pytest.mark.parametrize("change, match", [
    (lambda f: f.assign(client=f["client"].astype(str)), "'client'.*int64"),
    (lambda f: f.assign(size_bytes=f["size_bytes"] * 1.0), "'size_bytes'.*int64"),
    (lambda f: f.assign(keep_alive=f["keep_alive"].astype(int)), "'keep_alive'.*bool"),
    (lambda f: f.assign(extra=1), "unknown column 'extra'"),
    (lambda f: f.drop(columns="conn_id"), "missing column 'conn_id'"),
    (lambda f: f.assign(think_s=0.0), "exactly one of the columns time_s"),
    (lambda f: f.drop(columns="time_s"), "exactly one of the columns time_s"),
    (lambda f: f.assign(page="x"), "missing column 'session'"),
    (lambda f: f.assign(time_s=f["time_s"][::-1].to_numpy()), "'time_s'.*back in time"),
    (lambda f: f.assign(keep_alive=True), "keep_alive.*true on its last request"),
    (lambda f: f.assign(object="/etc/passwd"), "'object'.*relative"),
    (lambda f: f.assign(object="../up"), "'object'.*relative"),
    (lambda f: f.assign(size_bytes=-1), "'size_bytes'.*negative"),
])
def test_reading_a_bad_file_names_the_column(tmp_path, change, match):
    path = tmp_path / "bad.parquet"
    write_frame(path, change(base_frame()))
    with pytest.raises(InputError, match=match) as err:
        stream.read(path)
    assert str(path) in str(err.value)


def test_a_connection_split_between_clients_is_refused():
    f = stream.poisson(OBJ, rate=10, count=5).frame
    f.loc[1, "conn_id"] = 0
    f.loc[0, "keep_alive"] = True
    with pytest.raises(InputError, match="conn_id 0 is used by more than one client"):
        Stream(f)


def test_reading_other_bad_files(tmp_path):
    with pytest.raises(InputError, match="no such stream file"):
        stream.read(tmp_path / "missing.parquet")
    (tmp_path / "text.parquet").write_text("time_s,object\n")
    with pytest.raises(InputError, match="not a Parquet stream file"):
        stream.read(tmp_path / "text.parquet")
    write_frame(tmp_path / "new.parquet", base_frame(),
                {b"offloadlab.stream.format_version": b"99"})
    with pytest.raises(InputError, match=r"format version 99.*upgrade"):
        stream.read(tmp_path / "new.parquet")
    write_frame(tmp_path / "bad.parquet", base_frame().assign(client="x"))
    with pytest.raises(InputError, match="'client'"):
        next(stream.iter_batches(tmp_path / "bad.parquet"))
    with pytest.raises(InputError, match="folder"):
        GENERATORS["constant"](1).write(tmp_path / "no" / "such" / "s.parquet")


def test_a_file_without_our_metadata_is_read_as_version_1(tmp_path):
    write_frame(tmp_path / "plain.parquet", base_frame())
    s = stream.read(tmp_path / "plain.parquet")
    assert s.meta == {"format_version": 1} and len(s) == len(base_frame())


# ------------------------------------------------------------------ bad inputs


@pytest.mark.parametrize("make, match", [
    (lambda: stream.poisson(OBJ, rate=-1, count=5), "rate"),
    (lambda: stream.poisson(OBJ, rate="fast", count=5), "rate"),
    (lambda: stream.poisson(OBJ, rate=10), "count= .*duration_s="),
    (lambda: stream.poisson(OBJ, rate=10, count=0), "count=0"),
    (lambda: stream.poisson(OBJ, rate=10, duration_s="5"), "duration_s.*unit"),
    (lambda: stream.poisson(OBJ, rate=10, duration_s=-2), "duration_s"),
    (lambda: stream.poisson(OBJ, rate=10, count=5, keep_alive=True), "keep_alive=True"),
    (lambda: stream.poisson(OBJ, rate=10, count=5, keep_alive=0), "keep_alive"),
    (lambda: stream.poisson(OBJ, rate=10, count=5, keep_alive="geom(mean=0.5)"), "keep_alive"),
    (lambda: stream.poisson(OBJ, rate=10, count=5, keep_alive="zipf(2)"), "keep_alive"),
    (lambda: stream.poisson(OBJ, rate=10, count=5, seed=-1), "seed"),
    (lambda: stream.poisson(OBJ, rate=10, count=5, size_class=7), "class 7"),
    (lambda: stream.poisson(OBJ.drop(columns="probability"), rate=10, count=5), "probability"),
    (lambda: stream.poisson(OBJ.assign(probability=0.0), rate=10, count=5), "probability"),
    (lambda: stream.poisson(OBJ.assign(size_bytes=1.5), rate=10, count=5), "size_bytes"),
    (lambda: stream.poisson([1, 2], rate=10, count=5), "objects"),
    (lambda: stream.ramp(OBJ, [(1, 10), (2, 20)]), "ramp.*start at 0"),
    (lambda: stream.ramp(OBJ, [(0, 10), (0, 20)]), "ramp.*increasing"),
    (lambda: stream.ramp(OBJ, [(0, 0), (5, 0)]), "ramp.*every rate is 0"),
    (lambda: stream.ramp(OBJ, "0s:10, 60"), "ramp breakpoint"),
    (lambda: stream.open_loop(OBJ, "burst(5)", count=5), "arrivals"),
    (lambda: stream.closed(OBJ, clients=0, requests=5), "clients"),
    (lambda: stream.closed(OBJ, clients=2), "requests= .*duration_s="),
    (lambda: stream.closed(OBJ, clients=2, duration_s=5), "think=det\\(0s\\).*requests="),
    (lambda: stream.closed(OBJ, clients=2, requests=5, think="exp(1)"), "think"),
])
def test_bad_inputs_name_the_field(make, match):
    with pytest.raises(InputError, match=match):
        make()


def test_describe_summarises():
    d = GENERATORS["sessions"](1).describe()
    assert d["generator"] == "sessions" and d["kind"] == "closed" and d["sessions"] == 12
    assert d["requests"] == d["connections"] * d["requests_per_conn"]
    assert all(isinstance(v, int | float | str | type(None)) for v in d.values())
