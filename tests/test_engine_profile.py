"""Engine profiles: what they do to a scenario's costs, the model's many-core engine, the
break-even speed against a brute-force search, and bad profiles."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import example, klass, make_scenario, one_class

from offloadlab import engine_profile, scenario
from offloadlab.engine_profile import MESSAGES_PER_REQUEST, EngineProfile
from offloadlab.errors import InputError
from offloadlab.model import answer, evaluate

ENGINES = Path(__file__).resolve().parents[1] / "examples" / "engines"


def test_speed_and_messages_scale_the_engine_costs_and_keep_their_moments():
    sc = example("large-files")
    c = sc.classes[0]
    slow = EngineProfile(speed=0.25, message_cost_s=2e-6).apply(sc).classes[0]
    extra = MESSAGES_PER_REQUEST * 2e-6
    assert slow.engine_proto.mean == pytest.approx(4 * c.engine_proto.mean)
    assert slow.engine_proto.m2 == pytest.approx(16 * c.engine_proto.m2)
    x = 4 * c.engine_overhead.mean
    assert slow.engine_overhead.mean == pytest.approx(x + extra)
    # X/s + m: E[(X/s + m)^2] = E[X^2]/s^2 + 2 m E[X]/s + m^2
    assert slow.engine_overhead.m2 == pytest.approx(16 * c.engine_overhead.m2 + 2 * x * extra
                                                    + extra**2)
    # The host's costs are the host's: an engine profile leaves them alone.
    for key in ("app", "host_proto", "host_overhead"):
        assert getattr(slow, key) == getattr(c, key)


def test_the_measured_engine_is_the_scenario_itself():
    sc = example("five-classes")
    assert evaluate(EngineProfile().apply(sc)).overall["T"] == pytest.approx(
        evaluate(sc).overall["T"])


def test_shared_replaces_the_measured_tenants_and_none_keeps_them():
    base = example("large-files")
    sc = replace(base, engine=replace(base.engine, background_share=0.2))
    assert EngineProfile().apply(sc).engine.background_share == 0.2
    assert EngineProfile(shared=0.05).apply(sc).engine.background_share == 0.05


def test_an_engine_of_n_cores_is_n_queues_each_fed_a_share():
    # With the host's part negligible, the offloaded delay is the engine core's: one of
    # n cores at rate lam is one core at lam / n.
    base = one_class(rate=2000, host_overhead="det(1us)", app="det(0)",
                     engine_overhead="exp(mean=100us)", engine_proto="exp(mean=300us)",
                     options={"system_delay": "sum"})
    many = EngineProfile(cores=4).apply(base)
    one = evaluate(base, [500.0]).per_class
    four = evaluate(many, [2000.0]).per_class
    assert four["T_oe"][0, 0] == pytest.approx(one["T_oe"][0, 0])
    # The saturation rate of the engine grows with its cores.
    assert evaluate(many, [2000.0]).overall["lam_star_oe"][0] == pytest.approx(
        4 * evaluate(base, [2000.0]).overall["lam_star_oe"][0])
    assert scenario.loads(scenario.dumps(many)).engine.cores == 4


def test_the_simulator_refuses_a_many_core_engine():
    from offloadlab import sim

    with pytest.raises(InputError, match=r"cores = 4.*offload model"):
        sim.run(EngineProfile(cores=4).apply(example("large-files")), requests=1000)


TWO_CLASSES = make_scenario(
    [klass("small", rate=300, host_proto="det(0.2ms)", host_overhead="det(0.1ms)",
           engine_overhead="det(50us)", engine_proto="exp(mean=0.3ms)"),
     klass("large", rate=100)], system_delay="sum")


@pytest.mark.parametrize("sc", [example("large-files"), TWO_CLASSES], ids=["one", "two"])
def test_break_even_speed_matches_a_brute_force_search(sc):
    profile = EngineProfile(message_cost_s=1e-6)
    speeds = np.geomspace(answer.SLOWEST, 10, 80)
    for row in answer.answers(sc, profile):
        alone = (answer._auto(sc) if row.load == answer.MIX
                 else answer._alone(sc, sc.class_names.index(row.load)))
        paying = np.array([evaluate(profile.at_speed(s).apply(alone), [row.rate]
                                    ).overall["beneficial"][0] for s in speeds])
        if not paying.any():
            assert row.break_even_speed > speeds[-1] / 1.02
            continue
        # Paying is monotone in the speed, and the bisection lands between grid points.
        first = int(np.argmax(paying))
        assert paying[first:].all()
        assert speeds[max(first - 1, 0)] <= row.break_even_speed * (1 + 1e-4)
        assert row.break_even_speed <= speeds[first] * (1 + 1e-4)


def test_the_break_even_range_is_the_break_even_speed_of_slower_and_faster_queues():
    # Every service time 1 + d times longer is the model at (1 + d) the rate: the range
    # for a capacity error e is the break-even speed of those queues, d across [-e, e].
    costs = {"app": "exp(mean=0.1ms)", "host_proto": "exp(mean=1ms)",
             "host_overhead": "exp(mean=0.4ms)", "engine_overhead": "exp(mean=0.05ms)",
             "engine_proto": "exp(mean=0.6ms)"}
    options = {"system_delay": "sum"}
    rate, error = 800.0, 0.05
    low, high = answer.break_even_range(one_class(**costs, options=options), EngineProfile(),
                                        rate, error)

    def scaled(d: float):
        return one_class(options=options, **{k: f"exp(mean={float(v[9:-3]) * (1 + d)}ms)"
                                             for k, v in costs.items()})

    found = [answer.break_even_speed(scaled(d), EngineProfile(), rate)
             for d in np.linspace(-error, error, 5)]
    assert (low, high) == pytest.approx((min(found), max(found)), rel=1e-4)
    speed = answer.break_even_speed(one_class(**costs, options=options), EngineProfile(), rate)
    assert low < speed < high
    assert answer.break_even_range(one_class(**costs, options=options), EngineProfile(),
                                   rate, 0.0) == pytest.approx((speed, speed))


def test_cores_saved_counts_an_engine_on_host_cores():
    sc = example("large-files")
    device = answer.answers(sc, EngineProfile())[0]
    dedicated = answer.answers(sc, EngineProfile(on_host=True))[0]
    shared = answer.answers(sc, EngineProfile(on_host=True, shared=0.1))[0]
    row = evaluate(sc).overall
    assert device.host_cores_saved == pytest.approx(row["U_noe"][0] - row["U_cpu"][0])
    assert dedicated.host_cores_saved == pytest.approx(device.host_cores_saved - 1)
    assert device.host_cores_saved - 1 < shared.host_cores_saved < device.host_cores_saved


def test_offload_pays_from_the_rate_where_the_host_queue_outgrows_the_hop():
    # Offload costs the host less but adds an engine hop: it pays once the host's queue
    # saved outweighs the hop, which the model finds between two solved rates.
    sc = one_class(rate=100, app="det(0)", host_proto="exp(mean=1ms)",
                   host_overhead="exp(mean=0.5ms)", engine_overhead="det(0)",
                   engine_proto="exp(mean=0.8ms)", options={"system_delay": "sum"})
    at = answer.pays_from(sc, EngineProfile())
    # M/M/1 sojourns: 1 ms / (1 - lam 1ms) against 0.5 ms / (1 - lam 0.5ms) + 0.8 ms /
    # (1 - lam 0.8ms) cross near 500/s.
    assert 450 < at < 550
    below, above = evaluate(sc, [at * 0.99, at * 1.01]).overall["beneficial"]
    assert not below and above


def test_a_class_that_costs_the_host_more_never_pays():
    sc = make_scenario([klass("c0", host_proto="det(0.2ms)", host_overhead="det(0.6ms)")])
    row = answer.answers(sc, EngineProfile())[0]
    assert not row.pays and math.isnan(row.pays_from) and row.break_even_speed == math.inf
    assert row.fraction == 0.0


def test_profiles_round_trip_and_every_shipped_one_loads(tmp_path):
    p = EngineProfile(name="x", source="y", speed=0.4, message_cost_s=3e-6, cores=8,
                      shared=0.1, on_host=False)
    assert engine_profile.from_table({"engine": p.to_table()}) == p
    shipped = sorted(ENGINES.glob("*.toml"))
    assert len(shipped) >= 3  # a DPU, a dedicated host core and a kernel SQPOLL thread
    for path in shipped:
        profile = engine_profile.load(path)
        assert profile.source, f"{path.name} must say where its numbers come from"


@pytest.mark.parametrize("table, message", [
    ({}, "no \\[engine\\] table"),
    ({"engine": {"speed": 0}}, "speed = 0"),
    ({"engine": {"speed": "fast"}}, "speed = 'fast'"),
    ({"engine": {"cores": 1.5}}, "cores = 1.5"),
    ({"engine": {"shared": 1}}, "shared = 1"),
    ({"engine": {"message_cost": 2}}, "message_cost = 2: give a time"),
    ({"engine": {"message_cost": "2 parsecs"}}, "message_cost"),
    ({"engine": {"sped": 1}}, "no key 'sped'"),
    ({"engine": {"on_host": "yes"}}, "on_host"),
])
def test_bad_profiles_name_the_key(table, message):
    with pytest.raises(InputError, match=message):
        engine_profile.from_table(table, "e.toml")


def test_flags_override_the_file_and_name_themselves(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text('[engine]\nname = "dpu"\nsource = "illustrative"\nspeed = 0.5\n')
    assert engine_profile.from_flags(None, None, None) is None
    assert engine_profile.from_flags(path, 0.25, "1us") == EngineProfile(
        name="dpu", source="illustrative", speed=0.25, message_cost_s=1e-6)
    with pytest.raises(InputError, match="--engine-speed"):
        engine_profile.from_flags(None, -1.0, None)
    with pytest.raises(InputError, match="--engine-message-cost"):
        engine_profile.from_flags(None, None, "fast")
    with pytest.raises(InputError, match="no such file"):
        engine_profile.from_flags(tmp_path / "none.toml", None, None)


def test_model_command_solves_with_the_engine_and_prints_the_bottom_line(tmp_path):
    from typer.testing import CliRunner

    from offloadlab.cli import app

    runner = CliRunner()
    path = tmp_path / "e.toml"
    path.write_text('[engine]\nname = "a slow DPU"\nsource = "illustrative"\nspeed = 0.25\n')
    example_file = str(Path(__file__).resolve().parents[1] / "examples" / "large-files.toml")
    shown = runner.invoke(app, ["model", example_file, "--engine-profile", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "Bottom line with a slow DPU" in shown.output and "break-even" in shown.output
    doc = runner.invoke(app, ["model", example_file, "--engine-profile", str(path),
                              "--engine-speed", "0.5", "--json"])
    data = json.loads(doc.stdout)
    assert data["engine"]["speed"] == 0.5
    expected = answer.answers(example("large-files"), EngineProfile(speed=0.5))[0]
    assert data["bottom_line"][0]["break_even_speed"] == pytest.approx(
        expected.break_even_speed)
    # The engine's costs in the solved rows are the profile's: twice the engine time.
    plain = evaluate(example("large-files")).per_class["U_oe"][0, 0]
    assert data["rows"][1]["U_oe"] == pytest.approx(2 * plain)
    bad = runner.invoke(app, ["model", example_file, "--engine-speed", "0"])
    assert bad.exit_code == 2 and "--engine-speed" in bad.output
    at = runner.invoke(app, ["model", example_file, "--engine-speed", "0.5", "--rate", "80",
                             "--json"])
    row = json.loads(at.stdout)["bottom_line"][0]
    assert row["rate"] == 80 and row["break_even_speed"] == pytest.approx(
        answer.break_even_speed(example("large-files"), EngineProfile(speed=0.5), 80.0))
    spread = runner.invoke(app, ["model", example_file, "--engine-speed", "0.5", "--rate", "95",
                                 "--capacity-error", "0.05", "--json"])
    row = json.loads(spread.stdout)["bottom_line"][0]
    assert row["capacity_error"] == 0.05
    assert [row["break_even_low"], row["break_even_high"]] == pytest.approx(list(
        answer.break_even_range(example("large-files"), EngineProfile(speed=0.5), 95.0, 0.05)))
    for args, message in ((["--rate", "0", "--engine-speed", "1"], "--rate 0"),
                          (["--rate", "80"], "give an engine"),
                          (["--engine-speed", "1", "--capacity-error", "1.5"],
                           "--capacity-error 1.5")):
        bad = runner.invoke(app, ["model", example_file, *args])
        assert bad.exit_code == 2 and message in bad.output, bad.output


def test_paying_can_stop_and_pays_from_is_seen_from_the_rate_asked():
    # T = max(T_cpu, T_oe): a 0.8 ms engine hides behind the host's 1 ms at light load,
    # so offload pays from the lightest load on, until the engine saturates at 1,250/s;
    # past that nothing pays again.
    sc = one_class(rate=100, app="det(0)", host_proto="exp(mean=1ms)",
                   host_overhead="exp(mean=0.1ms)", engine_overhead="det(0)",
                   engine_proto="exp(mean=0.8ms)")
    rates = np.linspace(10, 1900, 190)
    paying = evaluate(sc, rates).overall["beneficial"]
    stop = rates[np.argmin(paying)]
    assert paying[0] and not paying[rates >= stop].any() and 1240 <= stop <= 1260
    assert answer.pays_from(sc, EngineProfile(), 50.0) == 0.0
    assert answer.pays_from(sc, EngineProfile(), 1000.0) == 0.0
    assert math.isnan(answer.pays_from(sc, EngineProfile(), 1500.0))
    # Seen from below its start, the stretch's start; from inside it, the same.
    slow = one_class(rate=100, app="det(0)", host_proto="exp(mean=1ms)",
                     host_overhead="exp(mean=0.5ms)", engine_overhead="det(0)",
                     engine_proto="exp(mean=0.8ms)", options={"system_delay": "sum"})
    start = answer.pays_from(slow, EngineProfile(), 100.0)
    assert answer.pays_from(slow, EngineProfile(), 800.0) == pytest.approx(start, rel=1e-4)
