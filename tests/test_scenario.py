"""Scenario files: loading, dumps/loads round trips, and error messages."""

import tomllib

import pytest
from conftest import EXAMPLES

from offloadlab import dist, scenario
from offloadlab.errors import InputError

SOURCE = "bad.toml"

GOOD_CLASS = '''
[[class]]
name = "c3"
rate = 50
app = "exp(mean=1ms)"
host_proto = "lognormal(mean=9ms, sigma=1)"
host_overhead = "exp(mean=2.33ms)"
engine_overhead = "exp(mean=0.5ms)"
engine_proto = "lognormal(mean=2.5ms, sigma=1)"
'''


def _error(text):
    with pytest.raises(InputError) as err:
        scenario.loads(text, source=SOURCE)
    return str(err.value)


def test_good_class_loads():
    s = scenario.loads(GOOD_CLASS, source="x/good.toml")
    (c,) = s.classes
    assert s.name == "good"  # defaults to the file's stem
    assert c.name == "c3" and c.rate == 50.0 and c.offload == 1.0
    assert c.host_proto == dist.parse("lognormal(mean=9ms, sigma=1)")
    assert s.options == scenario.Options()


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_examples_load_and_round_trip(path):
    s = scenario.load(path)
    raw = tomllib.loads(path.read_text())
    assert s.class_names == [c["name"] for c in raw["class"]]
    assert s.rate == pytest.approx(sum(c["rate"] for c in raw["class"]))
    for c, rc in zip(s.classes, raw["class"], strict=True):
        for key in scenario.COST_FIELDS:
            assert getattr(c, key) == dist.parse(rc[key])
    again = scenario.loads(scenario.dumps(s), source=str(path))
    assert again == s


def test_examples_present():
    assert {p.stem for p in EXAMPLES.glob("*.toml")} >= {"large-files", "small-files",
                                                         "five-classes"}


def test_round_trip_with_all_kinds_and_options(tmp_path):
    (tmp_path / "costs.csv").write_text("seconds\n0.001\n0.0025\n0.004\n")
    text = '''
name = "mixed"
description = "every kind"
[options]
system_delay = "sum"
cpu_queue = "mg1"
objective = "host_cpu"
util_cap = 0.7
[[class]]
name = "a"
rate = 12.5
app = "empirical(path=costs.csv)"
host_proto = "bpareto(alpha=1.2, lo=100us, hi=80ms)"
host_overhead = "det(0)"
engine_overhead = "det(3us)"
engine_proto = "pareto(alpha=2.5, k=5.4ms)"
offload = "auto"
[[class]]
name = "b"
rate = 3
app = "exp(mean=1ms)"
host_proto = "lognormal(nu=-6.4915, sigma=1)"
host_overhead = "exp(mean=2.33ms)"
engine_overhead = "exp(mean=0.5ms)"
engine_proto = "lognormal(mean=2.5ms, sigma=1)"
offload = 0.25
'''
    (tmp_path / "s.toml").write_text(text)
    s = scenario.load(tmp_path / "s.toml")
    assert s.options == scenario.Options("sum", "mg1", "host_cpu", 0.7)
    assert s.classes[0].auto and s.classes[1].offload == 0.25
    assert list(s.classes[0].app.values) == [0.001, 0.0025, 0.004]
    again = scenario.loads(scenario.dumps(s), base_dir=tmp_path)
    assert again == s


def test_load_missing_path(tmp_path):
    with pytest.raises(InputError, match=r"nothere\.toml"):
        scenario.load(tmp_path / "nothere.toml")


# (replacement of GOOD_CLASS text, words that must appear in the message: field + fix)
CLASS_ERRORS = {
    "pareto_alpha": (("lognormal(mean=9ms, sigma=1)", "pareto(alpha=1.8, k=5ms)"),
                     ["host_proto", "no finite second moment", "alpha > 2", "bpareto"]),
    "rate_zero": (("rate = 50", "rate = 0"), ["rate", "> 0", "e.g. rate ="]),
    "rate_negative": (("rate = 50", "rate = -1"), ["rate", "> 0", "e.g. rate ="]),
    "rate_string": (("rate = 50", 'rate = "fast"'), ["rate", "fast", "e.g. rate ="]),
    "rate_bool": (("rate = 50", "rate = true"), ["rate", "True", "e.g. rate ="]),
    "rate_missing": (("rate = 50", ""), ["rate", "missing", "e.g. rate ="]),
    "unknown_dist": (('app = "exp(mean=1ms)"', 'app = "gamma(mean=1ms)"'),
                     ["app", "gamma", "known", "exp", "lognormal"]),
    "missing_engine_proto": (('engine_proto = "lognormal(mean=2.5ms, sigma=1)"', ""),
                             ["engine_proto", "missing", "add e.g.", "det(0)"]),
    "typo_field": (("host_proto =", "host_protocol ="),
                   ["host_protocol", "known fields", "host_proto", "engine_overhead"]),
    "offload_big": (("rate = 50", "rate = 50\noffload = 1.5"), ["offload", "1.5", "[0, 1]",
                                                                "auto"]),
    "offload_yes": (("rate = 50", 'rate = 50\noffload = "yes"'), ["offload", "yes", "[0, 1]",
                                                                  "auto"]),
    "time_without_unit": (('"exp(mean=2.33ms)"', '"exp(mean=2.33)"'),
                          ["host_overhead", "unit"]),
}


@pytest.mark.parametrize("case", list(CLASS_ERRORS))
def test_class_errors_name_file_class_field_and_fix(case):
    (old, new), words = CLASS_ERRORS[case]
    assert old in GOOD_CLASS
    msg = _error(GOOD_CLASS.replace(old, new, 1))
    assert SOURCE in msg
    assert '"c3"' in msg
    for w in words:
        assert w in msg, (w, msg)


@pytest.mark.parametrize("options, words", [
    ('system_delay = "mean"', ["system_delay", "mean", "max", "sum"]),
    ('cpu_queue = "mm2"', ["cpu_queue", "mm2", "mm1", "mg1"]),
    ("util_cap = 1.5", ["util_cap", "1.5", "(0, 1]"]),
    ("util_cap = 0", ["util_cap", "(0, 1]"]),
    ('objective = "speed"', ["objective", "delay", "host_cpu"]),
    ("utilcap = 0.5", ["utilcap", "known fields", "util_cap"]),
])
def test_option_errors(options, words):
    msg = _error(f"[options]\n{options}\n{GOOD_CLASS}")
    assert msg.startswith(SOURCE + ": options: ") or f"{SOURCE}: options: " in msg
    for w in words:
        assert w in msg, (w, msg)


def test_unknown_top_level_key():
    msg = _error('colour = "red"\n' + GOOD_CLASS)
    assert SOURCE in msg and "colour" in msg
    assert "known fields" in msg and "class" in msg and "options" in msg


def test_duplicate_class_names():
    msg = _error(GOOD_CLASS + GOOD_CLASS)
    assert SOURCE in msg and '"c3"' in msg and "unique" in msg


def test_no_classes():
    msg = _error('name = "empty"\n')
    assert SOURCE in msg and "[[class]]" in msg


def test_invalid_toml():
    msg = _error(GOOD_CLASS + "offload = = 3\n")
    assert SOURCE in msg and "invalid TOML" in msg and "line" in msg


def test_all_errors_reported_at_once():
    text = ('colour = "red"\n[options]\ncpu_queue = "mm2"\n'
            + GOOD_CLASS.replace("rate = 50", "rate = 0")
                        .replace('app = "exp(mean=1ms)"', 'app = "gamma(mean=1ms)"')
                        .replace("lognormal(mean=9ms, sigma=1)", "pareto(alpha=1.8, k=5ms)")
            + GOOD_CLASS.replace('"c3"', '"c4"').replace("rate = 50", "rate = -2"))
    msg = _error(text)
    lines = msg.splitlines()
    for needle in ["colour", "cpu_queue", "rate: 0", "gamma", "alpha > 2", '"c4": rate']:
        assert any(needle in line for line in lines), (needle, msg)
    assert all(line.startswith(SOURCE + ": ") for line in lines)
    assert len(lines) >= 6


def test_load_reports_real_path(tmp_path):
    p = tmp_path / "scen.toml"
    p.write_text(GOOD_CLASS.replace("rate = 50", "rate = 0"))
    with pytest.raises(InputError) as err:
        scenario.load(p)
    assert str(p) in str(err.value) and '"c3"' in str(err.value)


def test_with_offload():
    s = scenario.loads(GOOD_CLASS)
    assert s.with_offload(0.0).classes[0].offload == 0.0
    assert s.with_offload("auto").classes[0].auto
    assert s.classes[0].offload == 1.0  # unchanged


# ------------------------------------------------------------------ d0, wake-ups, background

QUEUES = '''
[host]
wakeup = "det(30us)"
cooling = "300us"
[engine]
wakeup = "exp(mean=10us)"
background = "det(40us)"
polls = true
'''


def test_d0_wakeup_and_background_load_and_round_trip():
    text = QUEUES + GOOD_CLASS + 'd0 = "120us"\nd0_offload = "0.2ms"\n'
    s = scenario.loads(text, source="q.toml")
    (c,) = s.classes
    assert c.d0 == pytest.approx(120e-6) and c.d0_sent == pytest.approx(200e-6)
    assert s.host.wakeup == dist.parse("det(30us)") and s.host.cooling == pytest.approx(3e-4)
    # The host alone is the same thread: it takes [host]'s costs unless told otherwise.
    assert s.host_alone == s.host
    assert s.engine == scenario.Queue(dist.parse("exp(mean=10us)"), dist.parse("det(40us)"),
                                      polls=True)
    assert not s.host.polls
    assert scenario.loads(scenario.dumps(s), source="q.toml") == s


def test_d0_offload_defaults_to_d0_and_every_cost_to_zero():
    (c,) = scenario.loads(GOOD_CLASS + 'd0 = "1ms"\n').classes
    assert c.d0_sent == c.d0 == pytest.approx(1e-3)
    s = scenario.loads(GOOD_CLASS)
    assert s.classes[0].d0 == 0 and s.host_alone == s.host == s.engine == scenario.Queue()


@pytest.mark.parametrize(("extra", "words"), [
    ('d0 = "-5us"', ['class "c3": d0', ">= 0"]),
    ('d0 = 0.001', ['class "c3": d0', "string with a unit"]),
    ('d0_offload = "fast"', ['class "c3": d0_offload', "not a duration"]),
    ('d0 = "5"', ['class "c3": d0', "needs a unit"]),
])
def test_bad_d0_names_the_field_and_the_fix(extra, words):
    message = _error(GOOD_CLASS + extra + "\n")
    assert all(w in message for w in words), message
    assert 'e.g. d0' in message


@pytest.mark.parametrize(("table", "words"), [
    ('[host]\nwakeup = "det(-1us)"', ["host: wakeup", ">= 0"]),
    ('[engine]\nbackground = "lots"', ["engine: background", "not a distribution spec"]),
    ('[engine]\nbackground = 5', ["engine: background", "not a distribution spec"]),
    ('[host_alone]\nwakeup = "pareto(alpha=1.5, k=1us)"', ["host_alone: wakeup", "alpha > 2"]),
    ('[engine]\nwake = "det(1us)"',
     ["engine: unknown field 'wake'",
      "background, background_share, cooling, cores, polls, release, wakeup"]),
    ('host = 3', ["host: must be a table"]),
    ('[engine.background]\nc9 = "det(1us)"', ["engine: background: no class is named 'c9'"]),
    ('[engine.background]\nc3 = "det(-1us)"', ["engine: background: c3", ">= 0"]),
    ('[engine]\ncooling = "-1ms"', ["engine: cooling", ">= 0", "the cooling time"]),
    ('[host]\ncooling = 0.3', ["host: cooling", "string with a unit"]),
    ('[host]\nrelease = "batch"', ["host: release = 'batch'", "'request', 'round'"]),
    ('[engine]\nrelease = 1', ["engine: release = 1", "'request', 'round'"]),
    ('[engine]\nbackground_share = -0.1', ["engine: background_share = -0.1", "[0, 1)"]),
    ('[engine]\nbackground_share = 1', ["engine: background_share = 1", "[0, 1)"]),
    ('[host]\nbackground_share = "5%"', ["host: background_share = '5%'", "e.g. 0.05"]),
    ('[host]\nbackground_share = nan', ["host: background_share = nan", "[0, 1)"]),
    ('[engine]\nanswers_wake = "yes"', ["engine: answers_wake = 'yes'", "true or false"]),
    ('[host]\nanswers_wake = true', ["host: answers_wake belongs in [engine]"]),
    ('[host]\ncores = 2', ["host: cores belongs in [engine]"]),
    ('[engine]\ncores = 0', ["engine: cores = 0", "whole number >= 1"]),
    ('[engine]\ncores = true', ["engine: cores = True", "whole number >= 1"]),
    ('[host]\npolls = 1', ["host: polls = 1", "true or false", "never sleeps"]),
    ('[engine]\npolls = true\nanswers_wake = true', ["engine: polls and answers_wake"]),
])
def test_bad_queue_costs_name_the_table_and_field(table, words):
    message = _error(table + "\n" + GOOD_CLASS)
    assert all(w in message for w in words), message


def test_release_in_rounds_round_trips_and_defaults_to_each_request():
    s = scenario.loads('[host]\nrelease = "round"\n' + GOOD_CLASS)
    # The host alone takes [host]'s release too, as it takes its other costs.
    assert s.host.release == s.host_alone.release == "round"
    assert s.engine.release == "request"
    assert scenario.loads(scenario.dumps(s)) == s


def test_answers_waking_the_engine_round_trips_and_is_off_by_default():
    s = scenario.loads('[engine]\nanswers_wake = true\n' + GOOD_CLASS)
    assert s.engine.answers_wake and not s.host.answers_wake
    assert scenario.loads(scenario.dumps(s)) == s
    assert not scenario.loads(GOOD_CLASS).engine.answers_wake


def test_background_per_class_round_trips():
    text = '[engine.background]\nc3 = "det(40us)"\n' + GOOD_CLASS
    s = scenario.loads(text)
    assert s.engine.background_of("c3") == dist.parse("det(40us)")
    assert s.engine.background_of("other") == dist.parse("det(0)")
    assert scenario.loads(scenario.dumps(s)) == s


def test_background_share_round_trips_and_the_host_alone_inherits_it():
    s = scenario.loads('[host]\nbackground_share = 0.046\n[engine]\nbackground_share = 0.1\n'
                       + GOOD_CLASS)
    assert s.host.background_share == s.host_alone.background_share == pytest.approx(0.046)
    assert s.engine.background_share == pytest.approx(0.1)
    assert scenario.loads(scenario.dumps(s)) == s
