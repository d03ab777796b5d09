"""Shared helpers: build scenarios from spec strings, and locate the bundled examples."""

from pathlib import Path

import pytest
from hypothesis import settings

from offloadlab import scenario

EXAMPLES = Path(__file__).resolve().parents[1] / "python" / "offloadlab" / "examples"

settings.register_profile("offloadlab", derandomize=True, deadline=None, max_examples=50,
                          print_blob=True)
settings.load_profile("offloadlab")

# Example (b) of reference 000 section 2.10: a class-3-like "large file" class.
LARGE = dict(app="exp(mean=1ms)", host_proto="lognormal(mean=9ms, sigma=1)",
             host_overhead="exp(mean=2.33ms)", engine_overhead="exp(mean=0.5ms)",
             engine_proto="lognormal(mean=2.5ms, sigma=1)")
# Example (c): a class-0-like "small file" class.
SMALL = dict(app="exp(mean=1ms)", host_proto="lognormal(mean=0.2ms, sigma=0.5)",
             host_overhead="exp(mean=0.6ms)", engine_overhead="exp(mean=0.1ms)",
             engine_proto="lognormal(mean=0.15ms, sigma=0.5)")


def klass(name="c", rate=50.0, offload=1.0, base=None, **costs):
    """One [[class]] table as a dict; ``costs`` override the spec strings of ``base``."""
    return {"name": name, "rate": rate, **(base or LARGE), **costs, "offload": offload}


def make_scenario(classes, base_dir=None, **options):
    """A Scenario from a list of class dicts (see :func:`klass`) and option overrides."""
    data = {"name": "test", "class": list(classes)}
    if options:
        data["options"] = options
    return scenario.from_dict(data, "test.toml", base_dir)


def one_class(rate=50.0, offload=1.0, base=None, options=None, **costs):
    """A one-class scenario from spec strings."""
    return make_scenario([klass("c", rate, offload, base, **costs)], **(options or {}))


def example(name):
    return scenario.load(EXAMPLES / f"{name}.toml")


@pytest.fixture
def examples_dir():
    return EXAMPLES
