"""File sets: SURGE sizes and Zipf popularity (refitted), the manifest round trip,
content verification, safe writing, and specs read from data."""

import hashlib
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from offloadlab.errors import InputError
from offloadlab.units import parse_bytes
from offloadlab.workload import fileset as F
from offloadlab.workload.classes import CLASSES, KiB, MiB
from offloadlab.workload.fileset import generate, materialise, read_manifest, verify
from offloadlab.workload.presets import preset
from offloadlab.workload.sizes import LogUniform, Surge, Uniform
from offloadlab.workload.specs import FileSetSpec, SpecWeb99Spec

Z = 4  # tolerance in standard errors: a false alarm about once in 16,000 checks


def small(n=60, seed=5, **kw) -> F.FileSet:
    """A quick set of small files (at most 256 KiB each)."""
    return generate(FileSetSpec(name="small", n_files=n, max_bytes=256 * KiB, seed=seed, **kw))


def data_files(root: Path) -> list[str]:
    """Files of a set's directory other than its manifests and fileset.json."""
    skip = {F.MANIFEST_CSV, F.MANIFEST_PARQUET, F.INFO_FILE}
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.name not in skip)


# ---------------------------------------------------------------- sizes and popularity


def _truncated_normal_fit(y: np.ndarray, upper: float) -> tuple[np.ndarray, np.ndarray]:
    """MLE of (mu, sigma) for a normal sample truncated above at ``upper``, and their
    standard errors from the observed information (a numeric Hessian)."""
    n = len(y)

    def nll(theta):
        mu, log_s = theta
        s = math.exp(log_s)
        return (n * log_s + ((y - mu) ** 2).sum() / (2 * s * s)
                + n * math.log(stats.norm.cdf((upper - mu) / s)))

    fit = optimize.minimize(nll, [y.mean(), math.log(y.std())], method="Nelder-Mead",
                            options={"xatol": 1e-9, "fatol": 1e-9, "maxiter": 4000})
    h, theta = 1e-4, fit.x

    def at(i, j, di, dj):
        t = theta.copy()
        t[i] += di * h
        t[j] += dj * h
        return nll(t)

    hess = np.array([[(at(i, j, 1, 1) - at(i, j, 1, -1) - at(i, j, -1, 1) + at(i, j, -1, -1))
                      / (4 * h * h) for j in range(2)] for i in range(2)])
    se = np.sqrt(np.diag(np.linalg.inv(hess)))
    mu, s = theta[0], math.exp(theta[1])
    return np.array([mu, s]), np.array([se[0], s * se[1]])  # delta method for sigma


def test_generated_sizes_recover_surge_parameters():
    spec = FileSetSpec(n_files=40_000, min_bytes=1, max_bytes=2**40, seed=11)
    sizes = generate(spec).sizes.astype(float)
    s = spec.sizes
    body, tail = sizes[sizes <= s.k], sizes[sizes > s.k]
    # Share of files in the tail: binomial.
    n = len(sizes)
    assert abs(len(tail) / n - s.tail) < Z * math.sqrt(s.tail * (1 - s.tail) / n)
    # Body: lognormal truncated at k, refitted by maximum likelihood.
    (mu, sigma), (se_mu, se_sigma) = _truncated_normal_fit(np.log(body), math.log(s.k))
    assert abs(mu - s.mu) < Z * se_mu
    assert abs(sigma - s.sigma) < Z * se_sigma
    assert se_mu < 0.05 and se_sigma < 0.05  # the check has teeth
    # Tail: the Hill estimator is the Pareto MLE above k; SE = alpha / sqrt(n).
    alpha = len(tail) / np.log(tail / s.k).sum()
    assert abs(alpha - s.alpha) < Z * alpha / math.sqrt(len(tail))


def _zipf_mle(counts: np.ndarray) -> tuple[float, float]:
    """Zipf exponent by maximum likelihood from request counts per rank (rank 1 first),
    and its standard error 1/sqrt(M Var[ln R]) (Fisher information of the family)."""
    log_r = np.log(np.arange(1, len(counts) + 1))
    m = counts.sum()

    def nll(a):
        return a * (counts * log_r).sum() + m * math.log(np.exp(-a * log_r).sum())

    a = optimize.minimize_scalar(nll, bounds=(0.01, 4), method="bounded",
                                 options={"xatol": 1e-10}).x
    p = np.exp(-a * log_r)
    p /= p.sum()
    var = (p * log_r**2).sum() - (p * log_r).sum() ** 2
    return a, 1 / math.sqrt(m * var)


@pytest.mark.parametrize("alpha", [0.6, 0.9, 1.2])
def test_zipf_alpha_recovered_from_sampled_requests(alpha):
    fs = generate(FileSetSpec(n_files=3000, zipf_alpha=alpha, seed=7))
    rng = np.random.default_rng(99)
    requests = rng.choice(fs.n_files, size=200_000, p=fs.probability)
    counts = np.bincount(fs.ranks[requests] - 1, minlength=fs.n_files)
    fitted, se = _zipf_mle(counts)
    assert abs(fitted - alpha) < Z * se
    assert se < 0.01


def test_popularity_is_a_random_permutation_independent_of_size():
    fs = generate(FileSetSpec(n_files=5000, seed=2))
    assert sorted(fs.ranks.tolist()) == list(range(1, 5001))
    expected = np.arange(1, 5001, dtype=float) ** -1.0
    np.testing.assert_allclose(fs.probability, (expected / expected.sum())[fs.ranks - 1])
    assert fs.probability.sum() == pytest.approx(1.0, abs=1e-12)
    rho = stats.spearmanr(fs.ranks, fs.sizes).statistic
    assert abs(rho) < Z / math.sqrt(fs.n_files)  # SE of Spearman's rho under independence


def test_small_first_popularity_ranks_by_size():
    fs = generate(FileSetSpec(n_files=500, popularity="small-first", seed=2))
    assert np.all(np.diff(fs.sizes[np.argsort(fs.ranks)]) >= 0)


def test_zipf_probabilities():
    np.testing.assert_allclose(F.zipf_probabilities(4, 0), [0.25] * 4)
    p = F.zipf_probabilities(3, 1.0)
    np.testing.assert_allclose(p, np.array([1, 1 / 2, 1 / 3]) / (11 / 6))


def test_working_set_mode_stops_once_the_target_is_reached():
    spec = FileSetSpec(n_files=None, working_set_bytes=20 * MiB, min_bytes=KiB,
                       max_bytes=MiB, seed=4)
    sizes = generate(spec).sizes
    assert sizes.sum() >= 20 * MiB > sizes[:-1].sum()
    # The same stream as asking for that many files.
    same = generate(FileSetSpec(n_files=len(sizes), min_bytes=KiB, max_bytes=MiB, seed=4))
    np.testing.assert_array_equal(sizes, same.sizes)


@pytest.mark.parametrize("model", [Uniform(), LogUniform(), Surge()])
def test_sizes_stay_within_the_bounds(model):
    fs = generate(FileSetSpec(n_files=2000, sizes=model, min_bytes=3000, max_bytes=7000))
    assert fs.sizes.min() >= 3000 and fs.sizes.max() <= 7000
    assert fs.sizes.dtype == np.int64


# ---------------------------------------------------------------- on disk


def test_manifest_round_trip(tmp_path):
    fs = small()
    done = materialise(fs, tmp_path / "set")
    assert done.created and done.files == fs.n_files and done.total_bytes == fs.total_bytes
    csv = read_manifest(tmp_path / "set" / F.MANIFEST_CSV)
    parquet = read_manifest(tmp_path / "set" / F.MANIFEST_PARQUET)
    pd.testing.assert_frame_equal(csv, parquet)
    pd.testing.assert_frame_equal(read_manifest(tmp_path / "set"), parquet)
    sums = [hashlib.sha256(F.file_content(fs, i)).hexdigest() for i in range(fs.n_files)]
    pd.testing.assert_frame_equal(parquet, fs.frame(sums))
    assert list(parquet.columns) == list(F.MANIFEST_COLUMNS)
    assert data_files(tmp_path / "set") == sorted(fs.paths)
    for rel, size in zip(fs.paths, fs.sizes, strict=True):
        assert (tmp_path / "set" / rel).stat().st_size == size
    info = F.read_info(tmp_path / "set")
    assert info["status"] == "complete" and info["total_bytes"] == fs.total_bytes
    assert F.spec_from_dict(info["spec"]) == fs.spec


def test_read_manifest_errors(tmp_path):
    frame = small().frame().drop(columns=["checksum", "rank"])
    frame.to_csv(tmp_path / "m.csv", index=False)
    with pytest.raises(InputError, match="rank, checksum"):
        read_manifest(tmp_path / "m.csv")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="cannot read"):
        read_manifest(tmp_path / "bad.parquet")
    with pytest.raises(InputError, match="no such manifest"):
        read_manifest(tmp_path / "missing.csv")
    with pytest.raises(InputError, match=r"\.csv or \.parquet"):
        read_manifest(tmp_path / "m.txt")
    with pytest.raises(InputError, match=r"no manifest\.parquet or manifest\.csv"):
        read_manifest(tmp_path)


def test_verify_catches_a_flipped_byte_and_more(tmp_path):
    fs = small(n=20)
    materialise(fs, tmp_path)
    assert verify(tmp_path).ok
    flipped, cut, gone = (tmp_path / fs.paths[i] for i in (3, 7, 11))
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    cut.write_bytes(cut.read_bytes()[:-1])
    gone.unlink()
    result = verify(tmp_path)
    assert not result.ok and result.files == 20
    assert dict(result.problems) == {
        fs.paths[3]: "content differs from its checksum",
        fs.paths[7]: f"size {fs.sizes[7] - 1} bytes, manifest says {fs.sizes[7]}",
        fs.paths[11]: "missing",
    }


def test_content_is_deterministic_distinct_and_chunk_independent():
    fs = generate(FileSetSpec(name="same", n_files=2, sizes=Uniform(), min_bytes=9 * MiB,
                              max_bytes=9 * MiB))
    a, b = F.file_content(fs, 0), F.file_content(fs, 1)
    assert len(a) == len(b) == 9 * MiB and a != b
    assert a == F.file_content(generate(fs.spec), 0)
    assert b"".join(c.tobytes() for c in F.file_chunks(fs, 0, chunk=8 * 1001)) == a
    # No 4 MiB block repeats (a server that resends a chunk is caught), and no zeros.
    assert a[: 4 * MiB] != a[4 * MiB: 8 * MiB]
    assert a.count(0) < len(a) / 200
    other = generate(FileSetSpec(name="other", n_files=2, sizes=Uniform(),
                                 min_bytes=9 * MiB, max_bytes=9 * MiB))
    assert F.file_content(other, 0) != a  # the set's name keys the content too
    with pytest.raises(InputError, match="multiple of 8"):
        next(F.file_chunks(fs, 0, chunk=1000 + 1))


class Stop(Exception):
    pass


@pytest.mark.parametrize("stop_after", [1, 4])
def test_no_partial_files_after_an_interrupted_write(tmp_path, stop_after):
    # Three 9 MiB files written in 4 MiB chunks, progress after each chunk: the run
    # stops inside file 0 (first call) or inside file 1 (fourth call, file 0 complete).
    fs = generate(FileSetSpec(name="big", n_files=3, sizes=Uniform(), min_bytes=9 * MiB,
                              max_bytes=9 * MiB))
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) >= stop_after:
            raise Stop

    with pytest.raises(Stop):
        materialise(fs, tmp_path, progress)
    on_disk = data_files(tmp_path)
    assert not [p for p in on_disk if p.endswith(".tmp")]
    for rel in on_disk:
        assert (tmp_path / rel).stat().st_size == 9 * MiB  # complete or absent
    assert len(on_disk) == (0 if stop_after == 1 else 1)
    assert not (tmp_path / F.MANIFEST_CSV).exists()
    assert F.read_info(tmp_path)["status"] == "writing"
    # The directory is recognised as an earlier set: writing again needs no overwrite.
    materialise(fs, tmp_path)
    assert verify(tmp_path).ok


def test_progress_counts_every_byte(tmp_path):
    fs = small()
    calls = []
    materialise(fs, tmp_path, lambda done, total: calls.append((done, total)))
    assert calls[-1] == (fs.total_bytes, fs.total_bytes)
    assert all(b[0] >= a[0] for a, b in itertools.pairwise(calls))


def test_refuses_a_foreign_non_empty_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="overwrite"):
        materialise(small(), tmp_path)
    assert data_files(tmp_path) == ["notes.txt"]
    materialise(small(), tmp_path, overwrite=True)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert verify(tmp_path).ok
    with pytest.raises(InputError, match="is a file"):
        materialise(small(), tmp_path / "notes.txt")


def test_rewriting_an_earlier_set_removes_its_stale_files(tmp_path):
    materialise(small(n=80, seed=1), tmp_path)
    newer = small(n=10, seed=2)
    materialise(newer, tmp_path)
    assert data_files(tmp_path) == sorted(newer.paths)
    assert verify(tmp_path).ok


def test_same_seed_same_manifest(tmp_path):
    materialise(small(seed=8), tmp_path / "a")
    materialise(small(seed=8), tmp_path / "b")
    materialise(small(seed=9), tmp_path / "c")
    a, b, c = (read_manifest(tmp_path / d) for d in "abc")
    pd.testing.assert_frame_equal(a, b)
    assert not a["size_bytes"].equals(c["size_bytes"])
    assert (tmp_path / "a" / F.MANIFEST_CSV).read_bytes() == (
        tmp_path / "b" / F.MANIFEST_CSV).read_bytes()


def test_large_sets_are_only_described_unless_asked(tmp_path, monkeypatch):
    fs = generate(preset("dc-2004-4"))
    done = materialise(fs, tmp_path / "big")
    assert fs.large and not done.created and done.total_bytes == 0
    assert data_files(tmp_path / "big") == []
    manifest = read_manifest(tmp_path / "big")
    assert len(manifest) == fs.n_files and (manifest["checksum"] == "").all()
    assert manifest["size_bytes"].sum() == fs.total_bytes
    with pytest.raises(InputError, match="create_large"):
        verify(tmp_path / "big")
    # The same rule on a small scale, and create_large=True writing it.
    monkeypatch.setattr(F, "LARGE_BYTES", 1024)
    fs = small(n=5)
    assert not materialise(fs, tmp_path / "s").created
    assert materialise(fs, tmp_path / "s", create_large=True).created
    assert verify(tmp_path / "s").ok
    # Describing it again over the written set leaves no stale content behind.
    materialise(fs, tmp_path / "s")
    assert data_files(tmp_path / "s") == []
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted(
        [F.INFO_FILE, F.MANIFEST_CSV, F.MANIFEST_PARQUET])


def test_materialise_many_writes_each_class_into_its_own_directory(tmp_path):
    sets = [generate(s) for s in preset("toe-2009", seed=0, n_files=3)]
    calls = []
    results = F.materialise_many(sets, tmp_path, lambda d, t: calls.append((d, t)))
    total = sum(fs.total_bytes for fs in sets)
    assert [r.out_dir.name for r in results] == [f"toe-2009-c{c}" for c in CLASSES]
    assert calls[-1] == (total, total)
    assert all(verify(r.out_dir).ok for r in results)
    assert all(read_manifest(r.out_dir)["class"].eq(c).all() for c, r in enumerate(results))


# ---------------------------------------------------------------- specs and bad input


@pytest.mark.parametrize("kwargs, field", [
    (dict(n_files=0), "n_files"),
    (dict(n_files=2.5), "n_files"),
    (dict(n_files=10, working_set_bytes=10**6), "working_set_bytes"),
    (dict(n_files=None), "working_set_bytes"),
    (dict(min_bytes=0), "min_bytes"),
    (dict(min_bytes=100, max_bytes=10), "max_bytes"),
    (dict(max_bytes=2**41), "max_bytes"),
    (dict(zipf_alpha=-1.0), "zipf_alpha"),
    (dict(zipf_alpha=math.nan), "zipf_alpha"),
    (dict(popularity="big-first"), "popularity"),
    (dict(seed=-1), "seed"),
    (dict(name="a/b"), "name"),
    (dict(name=""), "name"),
    (dict(sizes="surge"), "sizes"),
])
def test_bad_spec_values_name_the_field(kwargs, field):
    with pytest.raises(InputError, match=rf"\b{field}\b"):
        FileSetSpec(**kwargs)


@pytest.mark.parametrize("kwargs, field", [
    (dict(directories=0), "directories"), (dict(dir_alpha=-2.0), "dir_alpha"),
    (dict(class_mix=(0.5, 0.5)), "class_mix"), (dict(class_mix=("a", 1, 2, 3)), "class_mix"),
    (dict(file_alpha=math.inf), "file_alpha"),
])
def test_bad_specweb99_values_name_the_field(kwargs, field):
    with pytest.raises(InputError, match=field):
        SpecWeb99Spec(**kwargs)


def test_generate_refuses_other_objects():
    with pytest.raises(InputError, match="FileSetSpec"):
        generate({"n_files": 3})


@pytest.mark.parametrize("text, value", [
    (1500, 1500), ("1500", 1500), ("64KiB", 64 * KiB), ("450MiB", 450 * MiB),
    ("2 GiB", 2 * 1024 * MiB), ("1.5MiB", 1536 * KiB), ("3kB", 3000), ("2MB", 2 * 10**6),
])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text, hint", [
    ("10KB", "KiB for 1024"), ("lots", "byte count"), ("-5", "byte count"),
    ("1.5B", "whole number"), (True, "byte count"),
])
def test_parse_bytes_rejects(text, hint):
    with pytest.raises(InputError, match=hint):
        parse_bytes(text)


def test_load_spec_from_toml(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text('name = "site"\nworking_set_bytes = "3MiB"\nmax_bytes = "256KiB"\n'
                    'zipf_alpha = 0.8\nseed = 4\n'
                    '[sizes]\nkind = "surge"\nmu = 9.0\ntail = 0.05\n')
    spec = F.load_spec(path)
    assert spec == FileSetSpec(name="site", n_files=None, working_set_bytes=3 * MiB,
                               max_bytes=256 * KiB, zipf_alpha=0.8, seed=4,
                               sizes=Surge(mu=9.0, tail=0.05))
    path.write_text('preset = "specweb99"\nseed = 2\ndirectories = 3\n')
    assert F.load_spec(path) == SpecWeb99Spec(directories=3, seed=2,
                                              description="SPECweb99-like static set")


@pytest.mark.parametrize("data, hint", [
    ({"n_files": 10, "bogus": 1}, "bogus"),
    ({"kind": "specweb2009"}, "specweb2005"),
    ({"sizes": "pareto"}, "uniform"),
    ({"sizes": {"kind": "surge", "beta": 2}}, "beta"),
    ({"sizes": {"kind": "surge", "mu": "big"}}, "numbers"),
    ({"max_bytes": "10 KB"}, "KiB"),
    ({"n_files": 0}, "n_files"),
    ({"preset": "nope"}, "known"),
])
def test_spec_from_dict_errors_say_what_and_where(data, hint):
    with pytest.raises(InputError, match=hint) as err:
        F.spec_from_dict(data, "site.toml")
    assert str(err.value).startswith("site.toml: ")


def test_load_spec_errors(tmp_path):
    with pytest.raises(InputError, match="no such"):
        F.load_spec(tmp_path / "none.toml")
    (tmp_path / "bad.toml").write_text("name = \n")
    with pytest.raises(InputError, match=r"bad\.toml"):
        F.load_spec(tmp_path / "bad.toml")
