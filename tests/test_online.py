"""Online placement (:mod:`offloadlab.online`): the estimator against known moments,
the controller against the model's own optimiser, its hysteresis, dwell time and lag
alarm on a synthetic server whose costs are known, and the checks on bad input."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from document_samples import core, stats_document, thread

from offloadlab.documents import ServerStats
from offloadlab.errors import InputError
from offloadlab.model.placement import optimise
from offloadlab.model.tandem import ClassCosts
from offloadlab.online.control import Controller, Policy
from offloadlab.online.estimate import MIN_SAMPLES, Estimator, Snapshot


class FakeServer:
    """A server whose per-request costs are known: each path's work per request has mean
    ``m1`` and second moment ``m2`` (arrays (path, class)); the engine passes a
    connection it does not keep for ``pass_s``. Of each request's work, ``uncharged``
    (host, engine) seconds belong to no connection, as epoll waits do: the server's
    accounts hold the rest, its busy clocks all of it."""

    def __init__(self, m1, m2, pass_s=0.0, uncharged=(0.0, 0.0)):
        self.m1, self.m2 = np.array(m1, float), np.array(m2, float)
        self.pass_s, self.uncharged = pass_s, uncharged
        classes = self.m1.shape[1]
        self.n = np.zeros((3, classes))
        self.sum = np.zeros((3, classes))
        self.sumsq = np.zeros((3, classes))
        self.passed = np.zeros(2)
        self.busy = np.zeros(2)  # host, engine
        self.t = 0.0

    def run(self, rates, f, seconds):
        """``seconds`` at class ``rates`` with fractions ``f``; returns the snapshot."""
        rates, f = np.asarray(rates, float), np.asarray(f, float)
        on_host, off = rates * (1 - f) * seconds, rates * f * seconds
        n = np.array([on_host, off, off])
        o = np.array([[self.uncharged[0]]] * 2 + [[self.uncharged[1]]])
        self.n += n
        self.sum += n * (self.m1 - o)  # the charged part X - o
        self.sumsq += n * (self.m2 - 2 * o * self.m1 + o**2)
        passes = on_host.sum()
        self.passed += [passes, passes * (self.pass_s - self.uncharged[1])]
        self.busy += [(n[:2] * self.m1[:2]).sum(), (n[2] * self.m1[2]).sum()
                      + passes * self.pass_s]
        self.t += seconds
        return self.snapshot()

    def snapshot(self):
        return Snapshot(t_s=self.t, n=self.n.copy(), sum=self.sum.copy(),
                        sumsq=self.sumsq.copy(), passed=self.passed.copy(),
                        host_busy_s=self.busy[0], engine_busy_s=self.busy[1])


def exp_moments(means):
    """Second moments of exponential service times with these means."""
    means = np.asarray(means, float)
    return 2 * means**2


# One class: on the host alone 100 us, offloaded 80 us on the host and 40 us on the engine.
ONE = np.array([[100e-6], [80e-6], [40e-6]])


def test_the_estimator_recovers_known_moments_and_spreads_uncharged_work():
    m1 = np.array([[100e-6, 300e-6], [80e-6, 120e-6], [40e-6, 500e-6]])
    server = FakeServer(m1, exp_moments(m1), pass_s=25e-6, uncharged=(5e-6, 20e-6))
    est = Estimator(window_s=2.0)
    est.add(server.snapshot())
    est.add(server.run([1000, 200], [0.3, 0.5], 1.0))
    e = est.estimate()
    np.testing.assert_allclose(e.rates, [1000, 200])
    # Part of every request's work went uncharged; the busy clocks put it back.
    np.testing.assert_allclose(e.m1, m1, rtol=1e-9)
    np.testing.assert_allclose(e.m2, exp_moments(m1), rtol=1e-9)
    np.testing.assert_allclose(e.u_pass, (700 + 100) * 25e-6)
    np.testing.assert_allclose(e.u_host, (700 * 100e-6 + 100 * 300e-6 + 300 * 80e-6
                                          + 100 * 120e-6))
    assert e.known().all()


def test_the_window_forgets_old_costs_and_a_path_seen_too_little_keeps_its_last():
    server = FakeServer(ONE, exp_moments(ONE))
    est = Estimator(window_s=1.0)
    est.add(server.snapshot())
    for _ in range(4):
        est.add(server.run([1000], [0.5], 0.5))
    server.m1 = ONE * [[1], [1], [3]]  # the engine slows down
    server.m2 = exp_moments(server.m1)
    est.add(server.run([1000], [0.5], 0.5))
    est.add(server.run([1000], [0.5], 0.5))
    np.testing.assert_allclose(est.estimate().m1[2], 3 * ONE[2])  # only the last second
    # Almost nothing offloaded: too few engine samples, so the last estimate stands.
    few = (MIN_SAMPLES - 1) / 1000
    est.add(server.run([1000], [few], 0.5))
    est.add(server.run([1000], [few], 0.5))
    np.testing.assert_allclose(est.estimate().m1[2], 3 * ONE[2])
    assert est.estimate().samples[2, 0] < MIN_SAMPLES


def _settle(controller, server, rates, periods):
    """Run ``periods`` control periods at ``rates`` under the controller's fractions."""
    step = None
    for _ in range(periods):
        snap = server.run(rates, controller.fractions, controller.policy.period_s)
        step = controller.observe(snap)
    return step


def test_the_controller_lands_on_the_models_optimum():
    # Two classes; at this load the host alone would pass the cap.
    m1 = np.array([[100e-6, 400e-6], [70e-6, 150e-6], [60e-6, 300e-6]])
    m2 = exp_moments(m1)
    server = FakeServer(m1, m2)
    policy = Policy(dwell_s=0.0, hysteresis=0.0, probe=0.01)
    controller = Controller(2, policy)
    rates = np.array([3000.0, 1400.0])
    _settle(controller, server, rates, 12)
    k = ClassCosts.measured(m1[0], m2[0], m1[1], m2[1], m1[2], m2[2])
    best, ok = optimise(np.array([rates.sum()]), rates / rates.sum(),
                        np.full(2, np.nan), k, policy.model_options())
    assert ok[0]
    np.testing.assert_allclose(controller.fractions, np.clip(best[0], 0.01, 0.99), atol=0.02)
    assert controller.fractions.max() > 0.3  # it does offload


def test_a_light_load_on_a_slow_engine_stays_on_the_host_but_keeps_probing():
    server = FakeServer(ONE * [[1], [1], [10]], exp_moments(ONE * [[1], [1], [10]]))
    controller = Controller(1, Policy(probe=0.02))
    step = _settle(controller, server, [1000], 10)
    assert controller.fractions.tolist() == [0.02]
    assert not step.alarm and step.reason in ("hold", "dwell")


def test_hysteresis_and_dwell_keep_a_small_gain_from_moving_the_split():
    server = FakeServer(ONE, exp_moments(ONE))
    policy = Policy(dwell_s=2.0, hysteresis=0.5)  # only a halving of the delay moves it
    controller = Controller(1, policy, initial=np.array([0.5]))
    steps = [_settle(controller, server, [4000], 1) for _ in range(10)]
    assert not any(s.changed for s in steps)
    assert all(s.delay_best_s >= s.delay_current_s * 0.5 for s in steps[1:])
    # Without hysteresis it moves once the dwell time has passed, and not before.
    controller = Controller(1, Policy(dwell_s=2.0, hysteresis=0.0), initial=np.array([0.5]))
    steps = [_settle(controller, server, [4000], 1) for _ in range(10)]
    changed = [s.t_s for s in steps if s.changed]
    assert changed, [s.reason for s in steps]
    assert all(b - a >= 2.0 for a, b in itertools.pairwise(changed))


def test_an_engine_that_slows_down_raises_the_alarm_and_the_split_follows_at_once():
    m1 = ONE.copy()
    server = FakeServer(m1, exp_moments(m1), pass_s=5e-6)
    controller = Controller(1, Policy(dwell_s=5.0))
    _settle(controller, server, [8000], 8)  # the host alone would be at 0.8
    before = controller.fractions[0]
    assert before > 0.5
    server.m1 = ONE * [[1], [1], [6]]  # a tenant takes the engine: six times slower
    server.m2 = exp_moments(server.m1)
    server.pass_s *= 6
    step = _settle(controller, server, [8000], 1)
    assert step.alarm and step.changed, step
    assert step.u_engine > step.u_engine_predicted
    assert controller.fractions[0] < before / 2


def test_the_controller_checks_its_policy():
    with pytest.raises(InputError, match="hysteresis"):
        Controller(1, Policy(hysteresis=1.0))
    with pytest.raises(InputError, match="window_s"):
        Policy(period_s=2.0, window_s=1.0).check()
    with pytest.raises(InputError, match="probe"):
        Policy(probe=0.5).check()
    with pytest.raises(InputError, match="one per class"):
        Controller(2, Policy(), initial=np.array([0.5]))


def test_a_snapshot_needs_a_placement_section():
    with pytest.raises(ValueError, match="placement"):
        Snapshot.of(ServerStats.from_json(stats_document(placement=None)))


def test_no_traffic_is_no_decision():
    server = FakeServer(ONE, exp_moments(ONE))
    controller = Controller(1)
    controller.observe(server.snapshot())
    step = controller.observe(server.run([0.0], [0.0], 0.5))
    assert step.reason == "no traffic" and not step.changed
    assert math.isnan(step.delay_best_s)


# ------------------------------------------------------------------ on the testbed


def test_phases_parse_and_bad_ones_name_the_fix():
    from offloadlab.experiments import online

    p = online.parse_phase("6s:c0=3000,c2=500:slowdown=4")
    assert (p.duration_s, p.rates, p.slowdown) == (6.0, ((0, 3000.0), (2, 500.0)), 4.0)
    assert online.parse_phase(p.label()) == p
    assert online.parse_phase("250ms:c1=10").slowdown == 0.0
    for bad, match in (("6s", "DURATION"), ("6s:x0=1", "DURATION"), ("6s:c9=1", "c0 to c4"),
                       ("6s:c0=-1", "rate > 0"), ("6s:c0=1:speed=2", "DURATION"),
                       ("0s:c0=1", "time > 0"), ("6s:c0=1:slowdown=-1", "factor >= 0")):
        with pytest.raises(InputError, match=match):
            online.parse_phase(bad)
    assert online.parse_fractions("0, 0.5,1") == (0.0, 0.5, 1.0)
    with pytest.raises(InputError, match="in \\[0, 1\\]"):
        online.parse_fractions("0,2")


def test_placement_options_are_checked(served_set):
    from offloadlab.testbed.server import ServerOptions

    ok = ServerOptions(root=served_set, mode="handoff", handoff="P-N-FCFS",
                       placement=(1024, 10240), fractions=(0.0, 0.5, 1.0))
    ok.check()
    assert ok.core_args()["placement"] == {"edges": [1024, 10240],
                                           "fractions": [0.0, 0.5, 1.0]}
    for changes, match in (({"mode": "engine"}, "handoff mode"),
                           ({"handoff": "P-L-FCFS"}, "without load control"),
                           ({"handoff": "P-N-T4"}, "without load control"),
                           ({"placement": (10240, 1024)}, "increasing"),
                           ({"fractions": (0.5,)}, "one per class"),
                           ({"fractions": (0.0, 0.5, 1.5)}, r"in \[0, 1\]"),
                           ({"placement": None}, "size classes too"),
                           ({"placement": tuple(range(1, 9))}, "at most 8")):
        with pytest.raises(InputError, match=match):
            ok.replace(**changes).check()


def test_a_running_server_reports_its_accounts_live_and_checks_its_knobs(served_set, testbed):
    from offloadlab import _core
    from offloadlab.testbed.server import ServerOptions, running, snapshot
    from offloadlab.workload import fileset, stream

    manifest = fileset.read_manifest(served_set)
    options = ServerOptions(root=served_set, mode="handoff", handoff="P-N-FCFS",
                            placement=(1024, 10240), fractions=(1.0, 1.0, 1.0))
    requests = stream.poisson(manifest, 400, duration_s=0.5, size_class=1, seed=2)
    from offloadlab.testbed import load

    with running(options) as server:
        load.run(server.url, requests, manifest, threads=1, verify="checksum")
        snap = Snapshot.of(snapshot(server.control))
        with pytest.raises(ValueError, match="in \\[0, 1\\]"):
            server.control.set_fractions([2.0])
        with pytest.raises(ValueError, match="factor >= 0"):
            server.control.set_slowdown(-1.0)
    assert _core.ServerControl().snapshot() is None  # not started
    # Every class-1 request went to the engine; its three paths are accounted there.
    assert snap.n[2, 1] == snap.n[1, 1] == len(requests) and snap.n[0].sum() == 0
    assert snap.sum[2, 1] > 0 and snap.engine_busy_s > 0


def test_a_short_online_experiment_follows_a_slowed_engine(served_set, tmp_path, testbed):
    from typer.testing import CliRunner

    from offloadlab.cli import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "handoff", "online", "--fileset", str(served_set), "--out", str(out),
        "--phase", "2s:c1=1500", "--phase", "2s:c1=1500:slowdown=8", "--fixed", "0,1",
        "--period", "250ms", "--window", "1s", "--dwell", "500ms", "--probe", "0.1",
        "--repeats", "1"])
    assert result.exit_code == 0, result.output
    runs = pd.read_csv(out / "runs.csv").set_index("policy")
    assert list(runs.index) == ["online", "fixed:0", "fixed:1"]
    assert runs.at["fixed:0", "engine_share"] == 0 and runs.at["fixed:1", "engine_share"] == 1
    assert (runs[["errors"]].loc[["online", "fixed:0"]] == 0).all().all()
    assert {"phase0_mean_s", "phase1_mean_s"} <= set(runs.columns)
    steps = pd.read_csv(out / "steps.csv")
    assert ((steps["f1"] >= 0.1 - 1e-9) & (steps["f1"] <= 0.9 + 1e-9)).all()
    # The estimate sees the engine slow down about nine-fold, and the split follows it.
    cost = steps.dropna(subset=["engine_s1"]).groupby("phase")["engine_s1"].median()
    assert cost[1] > 3 * cost[0], cost
    late = steps[steps["t_s"] > 3.0]
    assert late["f1"].iloc[-1] <= steps.loc[steps["phase"] == 0, "f1"].iloc[-1]
    assert late["f1"].iloc[-1] == pytest.approx(0.1)
    latency = pd.read_csv(out / "latency.csv")
    assert set(latency["policy"]) == {"online", "fixed:0", "fixed:1"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["checks"][0]["claim"].startswith("online placement beats")
    assert summary["figures"] == ["handoff-online.png"]
    assert (out / "handoff-online.png").stat().st_size > 10_000


def test_an_overload_no_split_can_carry_is_shared_between_host_and_engine():
    # Host alone 0.5 ms, offloaded 0.3 ms on the host and 0.3 ms on the engine: at
    # 4000/s no split is stable; the larger utilisation is least when both are equal,
    # 4000 (0.5 - 0.2 f) = 4000 (0.3 f), f = 1.
    m1 = np.array([[500e-6], [300e-6], [300e-6]])
    server = FakeServer(m1, exp_moments(m1))
    controller = Controller(1, Policy(dwell_s=0.0, probe=0.0), initial=np.array([0.5]))
    step = _settle(controller, server, [4000], 6)
    assert step.reason == "the current split breaks a cap"
    assert controller.fractions[0] == pytest.approx(1.0, abs=1e-6)
    # With a slower engine the balance moves: 0.5 - 0.2 f = 0.9 f, f = 5/11.
    m1 = np.array([[500e-6], [300e-6], [900e-6]])
    server = FakeServer(m1, exp_moments(m1))
    controller = Controller(1, Policy(dwell_s=0.0, probe=0.0), initial=np.array([0.5]))
    _settle(controller, server, [4000], 6)
    assert controller.fractions[0] == pytest.approx(5 / 11, abs=1e-6)


def test_wall_clock_charges_beyond_the_busy_clock_are_scaled_back():
    # Preempted half the time: every charge is twice the CPU it stands for.
    server = FakeServer(ONE, exp_moments(ONE))
    est = Estimator(window_s=2.0)
    est.add(server.snapshot())
    snap = server.run([1000], [0.5], 1.0)
    inflated = Snapshot(t_s=snap.t_s, n=snap.n, sum=2 * snap.sum, sumsq=4 * snap.sumsq,
                        passed=snap.passed * [1, 2], host_busy_s=snap.host_busy_s,
                        engine_busy_s=snap.engine_busy_s)
    est.add(inflated)
    e = est.estimate()
    np.testing.assert_allclose(e.m1, ONE, rtol=1e-9)
    np.testing.assert_allclose(e.m2, exp_moments(ONE), rtol=1e-9)


def _stats(t, host_cpu, engine_cpu, core0_busy, core1_busy, n=100) -> ServerStats:
    """The stats of a placement server with one class, host on core 0 and engine on
    core 1."""
    moments = [{"n": n, "sum_s": n * 1e-4, "sumsq_s2": n * 2e-8}]
    doc = stats_document(
        elapsed_s=t, placement={
            "edges": [], "host": moments, "offloaded_host": moments, "engine": moments,
            "passed": {"n": 0, "sum_s": 0.0, "sumsq_s2": 0.0}},
        threads=[thread("host", 0, host_cpu), thread("engine", 1, engine_cpu)],
        cores=[core(c, user_s=busy, idle_s=1.0) for c, busy in ((0, core0_busy),
                                                                (1, core1_busy))])
    doc["engine"]["idle_poll_s"] = 0.1 * engine_cpu
    return ServerStats.from_json(doc)


def test_other_work_on_the_cores_is_background_that_leaves_less_room():
    est = Estimator(window_s=5.0)
    est.add(Snapshot.of(_stats(1.0, 0.2, 0.1, 0.3, 0.1)))
    # Over 2 s the host thread ran 0.6 s on a core busy 1.4 s: 0.4 of a core is others'.
    # The engine's core ran only the engine (its idle polling is no one else's).
    est.add(Snapshot.of(_stats(3.0, 0.8, 0.5, 1.7, 0.5, n=300)))
    e = est.estimate()
    assert e.u_host_other == pytest.approx(0.4)
    assert e.u_engine_other == pytest.approx(0.0)
    assert e.room() == pytest.approx((0.6, 1.0))
    assert e.u_host == pytest.approx(0.3) and e.u_engine == pytest.approx(0.18)
