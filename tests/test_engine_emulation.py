"""The testbed emulating an engine profile: the shipped profiles load and cite their
numbers, a profile becomes server options in one place (speed S: slowdown 1/S - 1, paid
per operation), and the study refuses what one engine thread cannot emulate, naming the
flag or the profile's field and pointing to the model."""

from __future__ import annotations

import re
from dataclasses import replace

import pandas as pd
import pytest
from conftest import EXAMPLES

from offloadlab import engine_profile
from offloadlab.engine_profile import EngineProfile
from offloadlab.errors import InputError
from offloadlab.study import compare, measure, pipeline, plan
from offloadlab.testbed.server import ServerOptions, emulating

ENGINES = EXAMPLES / "engines"


def test_every_shipped_profile_loads_and_says_where_its_numbers_come_from():
    files = sorted(ENGINES.glob("*.toml"))
    assert len(files) >= 3
    for path in files:
        profile = engine_profile.load(path)
        source = profile.source.lower()
        # A public document named, our own bench cited, or the word illustrative.
        assert any(w in source for w in ("datasheet", "bench/", "illustrative")), path


def test_a_profile_becomes_an_engine_slowed_per_operation(tmp_path):
    fields = emulating(EngineProfile(speed=0.25, message_cost_s=2e-6))
    assert fields == {"engine_slowdown": pytest.approx(3.0), "engine_message_cost_s": 2e-6,
                      "engine_slowdown_mode": "operation"}
    args = ServerOptions(tmp_path, mode="engine", **fields).core_args()["engine"]
    assert args["slowdown"] == pytest.approx(3.0) and args["slowdown_mode"] == "operation"
    # The dedicated host core is what the testbed's engine already is.
    same = emulating(engine_profile.load(ENGINES / "host-core.toml"))
    assert same["engine_slowdown"] == 0 and same["engine_message_cost_s"] == 0


@pytest.mark.parametrize(("profile", "fragment"), [
    (EngineProfile(name="dpu", speed=0.3, cores=8), "cores = 8"),
    (EngineProfile(name="busy", shared=0.5), "shared = 0.5"),
    (EngineProfile(name="fast", speed=2.0), "slowed, not sped up"),
])
def test_what_one_engine_thread_cannot_emulate_points_to_the_model(profile, fragment):
    with pytest.raises(InputError, match=re.escape(fragment)) as err:
        emulating(profile)
    assert "offload model" in str(err.value)


def test_the_study_emulates_the_flags_engine_in_its_offload_modes_only(tmp_path):
    config = pipeline.StudyConfig(tmp_path / "s", engine_speed=0.5,
                                  engine_message_cost="2us")
    profile = config.engine()
    assert profile.speed == 0.5 and profile.message_cost_s == pytest.approx(2e-6)
    load = plan.ClassLoad("c0", tmp_path, pd.DataFrame(), 0)
    the_plan = plan.Plan((load,), ("inline", "engine"), plan.budget("quick"), None, None,
                         None, 1, "synthetic", {"c0": 1.0}, engine=profile)
    engine = measure.options(the_plan, load, "engine")
    assert engine.engine_slowdown == pytest.approx(1.0)
    assert engine.engine_slowdown_mode == "operation"
    assert engine.engine_message_cost_s == pytest.approx(2e-6)
    inline = measure.options(the_plan, load, "inline")
    assert inline.engine_slowdown == 0 and inline.engine_message_cost_s == 0
    assert "speed 0.5 of a host core" in pipeline._emulated(profile)
    assert pipeline._emulated(None) == ""
    # The bottom line names the engine it answers for.
    assert compare.engine_named(the_plan, "engine") == (
        "an engine: speed 0.5 of a host core, 1 core (its own cores), 2us more per "
        "message, emulated by the engine mode's engine")
    assert compare.engine_named(replace(the_plan, engine=None), "uring") == (
        "the uring mode's engine")


@pytest.mark.parametrize(("settings", "fragment"), [
    ({"engine_speed": 0.0}, "--engine-speed"),
    ({"engine_speed": 1.5}, "slowed, not sped up"),
    ({"engine_message_cost": "soon"}, "--engine-message-cost"),
    ({"engine_profile": ENGINES / "bluefield2.toml"}, "cores = 8"),
    ({"engine_profile": ENGINES / "sqpoll.toml"}, "shared = 0.5"),
    ({"engine_speed": 0.5, "modes": "inline,uring"}, "kernel thread"),
])
def test_the_study_refuses_an_engine_it_cannot_emulate(tmp_path, settings, fragment):
    with pytest.raises(InputError, match=re.escape(fragment)):
        pipeline.StudyConfig(tmp_path / "s", **settings)
    assert not (tmp_path / "s").exists()
