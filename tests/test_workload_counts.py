"""Count distributions: their specs parse and round-trip."""

import pytest

from offloadlab.workload.counts import Fixed, Geometric, UniformInt, parse_count


@pytest.mark.parametrize("spec, value", [
    (5, Fixed(5)), ("5", Fixed(5)), ("det(5)", Fixed(5)), ("geom(mean=2.5)", Geometric(2.5)),
    ("uniform(lo=5, hi=15)", UniformInt(5, 15)), ("uniform(5, 15)", UniformInt(5, 15)),
])
def test_count_specs(spec, value):
    assert parse_count(spec) == value
    assert parse_count(str(value)) == value
