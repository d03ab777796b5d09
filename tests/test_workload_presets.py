"""File-set presets: seed 000's classes, seed 003's working sets, SPECweb99's layout,
overrides, and their specs as data and as tables."""

import io
import math

import numpy as np
import pytest
from rich.console import Console

from offloadlab.errors import InputError
from offloadlab.report.fileset import class_table, describe
from offloadlab.workload import presets as P
from offloadlab.workload.classes import CLASSES, KiB, MiB, class_range
from offloadlab.workload.fileset import (
    generate,
    spec_from_dict,
    spec_to_dict,
    zipf_probabilities,
)
from offloadlab.workload.specs import SPECWEB99_SIZES, FileSetSpec

Z = 4  # tolerance in standard errors: a false alarm about once in 16,000 checks


def all_preset_specs():
    out = []
    for name in P.PRESETS:
        built = P.preset(name, seed=0)
        out.extend(built if isinstance(built, list) else [built])
    return out


def test_presets_are_listed_with_descriptions():
    assert {"toe-2009", "specweb99", "dc-2004-1", "dc-2004-5", "web"} \
        <= set(P.PRESETS)
    assert all(p.description for p in P.PRESETS.values())
    with pytest.raises(InputError, match="known: toe-2009"):
        P.preset("seed999")


@pytest.mark.parametrize("old, new", [("seed000", "toe-2009"),
                                      ("seed003-4", "dc-2004-4")])
def test_a_preset_under_its_old_seed_name_says_its_new_name(old, new):
    with pytest.raises(InputError, match=f"is now called '{new}'"):
        P.preset(old)
    assert new in P.PRESETS


def test_seed000_classes_each_own_set_within_range():
    specs = P.preset("toe-2009", seed=3)
    assert [s.name for s in specs] == [f"toe-2009-c{c}" for c in CLASSES]
    for c, spec in zip(CLASSES, specs, strict=True):
        fs = generate(spec)
        lo, hi = class_range(c)
        assert fs.n_files > 0
        assert np.all(fs.classes == c)
        assert fs.sizes.min() >= lo and (hi is None or fs.sizes.max() <= hi)
        assert fs.paths[0].startswith(f"c{c}/")


@pytest.mark.parametrize("c, lo, hi", [
    # Reference 000 §8.3: mean bytes "of the order" of ~27-30 KiB, ~160-200 KiB and
    # ~1.9-2.1 MiB for classes 2/3/4 (the inference from the thesis is rough).
    (2, 25 * KiB, 32 * KiB), (3, 155 * KiB, 205 * KiB), (4, 1.85 * MiB, 2.15 * MiB),
])
def test_seed000_class_means_match_the_thesis(c, lo, hi):
    spec = P.preset("toe-2009", seed=1)[c]
    assert lo <= spec.mean_bytes() <= hi
    sizes = generate(spec).sizes
    se = sizes.std(ddof=1) / math.sqrt(len(sizes))
    assert abs(sizes.mean() - spec.mean_bytes()) < Z * se


@pytest.mark.parametrize("i", range(5))
def test_seed003_working_sets(i):
    max_bytes, working_set = P.SEED003[i]
    spec = P.preset(f"dc-2004-{i + 1}", seed=0)
    fs = generate(spec)
    # Reference 003 §C1 checks: total within 5% of the working set; sizes in range.
    assert working_set <= fs.total_bytes <= 1.05 * working_set
    assert fs.sizes.min() >= KiB and fs.sizes.max() <= max_bytes
    assert spec.zipf_alpha == 0.9
    assert fs.large == (working_set >= 2 * 1024 * MiB)


def test_web_preset_has_every_class():
    fs = generate(P.preset("web", seed=0))
    assert fs.n_files == 10_000
    assert np.all(np.bincount(fs.classes, minlength=5) > 0)


def test_specweb99_layout():
    spec = P.preset("specweb99", directories=7)
    fs = generate(spec)
    assert fs.n_files == 7 * 36
    assert fs.paths[:2] == ("dir00000/class0_0", "dir00000/class0_1")
    assert fs.paths[-1] == "dir00006/class3_8"
    dirs = np.array([p.split("/")[0] for p in fs.paths])
    for d in np.unique(dirs):
        assert np.bincount(fs.set_class[dirs == d], minlength=4).tolist() == [9, 9, 9, 9]
    # Sizes: 102 .. 921 bytes, 1 .. 9 KiB, 10 .. 90 KiB, 100 .. 900 KiB.
    assert fs.sizes[:36].tolist() == [s for c in SPECWEB99_SIZES for s in c]
    assert SPECWEB99_SIZES[0][:2] == (102, 204) and SPECWEB99_SIZES[3][-1] == 921_600
    # About 4.9 MiB per directory ("roughly 5 MB").
    assert fs.sizes[:36].sum() == pytest.approx(4.88 * MiB, rel=0.01)
    # Request shares per SPECweb class are the 35/50/14/1 % mix.
    shares = np.bincount(fs.set_class, weights=fs.probability, minlength=4)
    np.testing.assert_allclose(shares, [0.35, 0.50, 0.14, 0.01], rtol=1e-12)
    # Directories by Zipf(1) over their number.
    by_dir = np.array([fs.probability[dirs == d].sum() for d in np.unique(dirs)])
    np.testing.assert_allclose(by_dir, zipf_probabilities(7, 1.0), rtol=1e-12)
    # Mean response about 14 KB (reference 004 §5).
    assert (fs.probability * fs.sizes).sum() == pytest.approx(14.4 * KiB, rel=0.01)
    # SPECweb99's 1 KiB file belongs to its class 1 but to seed 000's class 0.
    one_k = fs.paths.index("dir00000/class1_0")
    assert fs.sizes[one_k] == 1024 and fs.set_class[one_k] == 1 and fs.classes[one_k] == 0


def test_preset_overrides_and_their_errors():
    assert P.preset("web", n_files=50).n_files == 50
    spec = P.preset("dc-2004-1", n_files=10)
    assert spec.n_files == 10 and spec.working_set_bytes is None
    assert all(s.n_files == 3 for s in P.preset("toe-2009", n_files=3))
    with pytest.raises(InputError, match="nfiles"):
        P.preset("web", nfiles=50)


def test_describe_and_class_table_render():
    console = Console(file=io.StringIO(), width=80)
    console.print(describe(all_preset_specs()))
    small = FileSetSpec(name="small", n_files=60, max_bytes=256 * KiB, seed=5)
    console.print(class_table(generate(small)))
    text = console.file.getvalue()
    for name in ("toe-2009-c4", "specweb99", "dc-2004-5", "web", "100 KiB–1 MiB"):
        assert name in text
    assert "…" not in text  # fits 80 columns


@pytest.mark.parametrize("spec", all_preset_specs(), ids=lambda s: s.name)
def test_specs_round_trip_as_data(spec):
    assert spec_from_dict(spec_to_dict(spec)) == spec
