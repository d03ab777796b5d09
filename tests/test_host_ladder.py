"""The host ladder (issue 48): from seed 000's host to today's one mechanism at a time,
what each mechanism takes off a request's protocol work E[X_p], measured at
saturation, and seed 000's experiment on the hosts at both ends. The orchestration
runs here on the synthetic testbed, each step's host costing a known amount more; the
real steps (namespaces, ethtool) in the testbed tier."""

import contextlib
import itertools
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from synthetic_testbed import Costs, SyntheticTestbed, manifest

from offloadlab.cli.study import ladder_table
from offloadlab.errors import InputError
from offloadlab.study import (
    compare,
    host_ladder,
    measure,
    pipeline,
    plan,
    run,
    seed_tables,
    toe2009,
)
from offloadlab.testbed import cores, host_profile, netns

# Protocol work each step adds over today's host, per class (seconds per request):
# copying and checksumming grow with the file, segmenting too.
EXTRA = {"seed-era": (9e-6, 300e-6), "checksum-offload": (6e-6, 180e-6),
         "segmentation-offload": (4e-6, 120e-6), "sendfile": (1e-6, 10e-6), "modern": (0, 0)}
CLASSES = {0: [500, 1000], 4: [2_000_000, 3_000_000]}


def _plan() -> plan.Plan:
    loads = tuple(plan.ClassLoad(f"c{c}", Path("/nonexistent"), manifest(sizes), c)
                  for c, sizes in CLASSES.items())
    return plan.Plan(loads, ("inline", "engine"), plan.budget("quick"), None, None, None, 1,
                     "synthetic", {load.name: 0.5 for load in loads})


class Ladder:
    """The synthetic testbed on the plan's host: each step's host pays :data:`EXTRA`
    more per request (as protocol work, the application's account unchanged), and
    every run is recorded with its step."""

    def __init__(self):
        self.testbed, self.seen = SyntheticTestbed(Costs()), []

    def __call__(self, the_plan, load, mode, use, rate, **_):
        self.seen.append((the_plan.host_profile, the_plan.netns, load.name, mode, use))
        m = self.testbed(the_plan, load, mode, use, rate)
        if mode != "inline":
            return m
        extra = EXTRA[the_plan.host_profile][list(CLASSES).index(load.size_class)]
        host_s = m.run.host_s + extra
        # At saturation the host's work sets the capacity.
        return replace(m, run=replace(m.run, host_s=host_s, app_s=5e-6,
                                      throughput=1 / host_s), connect_s=0.3e-3)


@pytest.fixture
def no_namespaces(monkeypatch):
    """Steps that need no root: hosting() yields a namespace name only."""
    monkeypatch.setattr(netns, "check", lambda: None)

    @contextlib.contextmanager
    def hosting(self):
        yield None if self.offloads is None else netns.Veth(f"ns-{self.name}", "veth0")
    monkeypatch.setattr(host_profile.HostProfile, "hosting", hosting)


def test_each_step_adds_one_mechanism_from_the_seeds_host_to_todays():
    steps = host_profile.LADDER
    assert (steps[0].name, steps[-1].name) == ("seed-era", "modern")
    assert all(host_profile.named(s.name) is s for s in steps)

    def state(p):
        return {"copy": p.copy, "loopback": p.offloads is None, "features": p.offloads}

    for before, after in itertools.pairwise(steps):
        changed = [k for k, v in state(after).items() if state(before)[k] != v]
        # One mechanism: the copy, the veth's features, or loopback for the veth.
        assert len(changed) == 1 or changed == ["loopback", "features"], (before, after)
        assert after.adds
    # Checksum offload comes before segmentation offload, which needs it.
    assert steps[1].offloads == "tx on tso off gso off"
    assert steps[2].offloads == "tx on tso on gso on"


def test_the_ladder_measures_every_class_on_every_step_and_reads_what_each_takes_off(
        no_namespaces):
    testbed = Ladder()
    ladder = host_ladder.run(_plan(), testbed, rounds=2)
    # Interleaved: each round climbs every step, each step serves every class at
    # saturation, inline and (at the ends) through the engine, from the step's own
    # namespace (none for today's loopback host).
    steps = [s.name for s in host_profile.LADDER]
    ends = ("seed-era", "modern")
    runs = [(s, m) for s in steps for _ in CLASSES
            for m in (("inline", "engine") if s in ends else ("inline",))]
    assert [(s[0], s[3]) for s in testbed.seen] == runs * 2
    assert len(testbed.seen) * _plan().budget.saturation_s == host_ladder.load_seconds(
        _plan(), rounds=2)
    assert {s[4] for s in testbed.seen} == {"saturation"}
    assert {(s[0], s[1]) for s in testbed.seen} == {
        (s, None if s == "modern" else f"ns-{s}") for s in steps}
    table = ladder.table.set_index(["class", "profile"])
    for i, c in enumerate(CLASSES):
        name = f"c{c}"
        base = SyntheticTestbed(Costs()).queues(_plan().classes[i], "inline")[0].mean - 5e-6
        for before, step in itertools.pairwise(steps):
            row = table.loc[(name, step)]
            assert row.EXp_s == pytest.approx(base + EXTRA[step][i])
            assert row.removed_s == pytest.approx(EXTRA[before][i] - EXTRA[step][i])
            assert row.removed_share == pytest.approx(
                row.removed_s / (base + EXTRA["seed-era"][i]))
        assert np.isnan(table.loc[(name, "seed-era")].removed_s)
        # What the mechanisms took off together is the seed-era host's extra work.
        assert table.loc[name].removed_s.sum() == pytest.approx(EXTRA["seed-era"][i])
    assert ladder.summary()["steps"][0]["profile"] == "seed-era"
    # Both ends side by side: the engine's capacity is the same on both hosts here, so
    # offload gains more on the seed's host, which pays more per request inline.
    hosts = ladder.hosts.set_index(["class", "host"])
    for c in CLASSES:
        seed_era, modern = hosts.loc[(f"c{c}", "seed-era")], hosts.loc[(f"c{c}", "modern")]
        assert seed_era.offload_saturation == pytest.approx(modern.offload_saturation)
        assert seed_era.ratio_saturation > modern.ratio_saturation
        assert seed_era.ratio_saturation == pytest.approx(
            seed_era.offload_saturation / seed_era.inline_saturation)
        assert seed_era.seed_ratio_connect == pytest.approx(
            seed_tables.CONNECT_S[c][1] / seed_tables.CONNECT_S[c][0])
        assert seed_era.seed_ratio_saturation == pytest.approx(
            seed_tables.conn_per_min_ratio(c))


def test_the_terminal_shows_each_steps_e_xp_and_what_it_took_off(no_namespaces):
    ladder = host_ladder.run(_plan(), Ladder(), rounds=1)
    console = Console(width=250, record=True)
    console.print(ladder_table(ladder.table))
    lines = console.export_text().splitlines()
    assert all(step.name in "".join(lines) for step in host_profile.LADDER)
    row = next(line for line in lines if line.strip("│ ").startswith("c4"))
    table = ladder.table.set_index(["class", "profile"])
    for step in host_profile.LADDER:
        cell = table.loc[("c4", step.name)]
        assert f"{cell.EXp_s * 1e6:.3g}" in row
    # segmentation-offload took 60 of c4's seed-era 300 µs over today's host.
    share = table.loc[("c4", "segmentation-offload")].removed_share
    assert f"({-share:+.0%})" in row and share > 0


def test_a_machine_without_namespaces_gets_the_reason_not_a_failed_study(monkeypatch):
    def refuse():
        raise InputError("the seed-era host needs root")
    monkeypatch.setattr(netns, "check", refuse)
    ladder = host_ladder.run(_plan(), Ladder())
    assert ladder.table is None and ladder.summary()["steps"] is None
    [section] = ladder.sections()
    assert section.table is None and "needs root" in section.setup


def test_the_preset_climbs_the_ladder_and_counts_its_time(tmp_path):
    def prepared(**flags):
        config = pipeline.StudyConfig(tmp_path, handoff_slowdown=None, **flags)
        return pipeline.Prepared(config, replace(_plan(), budget=config.chosen_budget()), 0.0)
    preset = prepared(preset="toe-2009")
    assert preset.climbs_ladder()
    # Five steps inline and the two ends through the engine, for two classes.
    assert preset.load_seconds() - preset.plan.load_seconds() == pytest.approx(
        host_ladder.ROUNDS * (5 + 2) * 2 * preset.plan.budget.saturation_s)
    assert not prepared(classes="0,4").climbs_ladder()


def test_the_report_section_comes_with_seed_000s_tables(no_namespaces):
    found = run.run(_plan(), measure=SyntheticTestbed(Costs()))
    tables = compare.tables(found, {})
    ladder = host_ladder.run(_plan(), Ladder(), rounds=1)
    seed = toe2009.compare(found.plan, tables, ladder)
    hosts, steps = seed.sections()[-2:]
    assert (hosts.title, steps.title) == (host_ladder.HOSTS_TITLE, host_ladder.TITLE)
    # The seed's shape is checked on each host at the ends of the ladder.
    assert {c.claim.split(",")[0] for c in hosts.checks} == {"seed-era host", "modern host"}
    summary = seed.summary()
    assert summary["host_ladder"]["rounds"] == 1
    assert len(summary["checks"]) == len(seed.checks()) + len(hosts.checks)


@pytest.mark.testbed
def test_the_ladder_runs_on_real_namespaces(served_set, as_root):
    """Every file of a small set, one round, short runs: every step's server answers,
    the seed-era host costs the host more per request than today's, and no namespace
    is left behind."""
    from offloadlab.workload import fileset

    files = fileset.read_manifest(served_set)
    load = plan.ClassLoad("all", served_set, files, None)
    host_core, engine_core = cores.choose(None, None)
    the_plan = plan.Plan((load,), ("inline", "engine"),
                         replace(plan.budget("quick"), saturation_s=1.0), None, host_core,
                         engine_core, 1, "served set", {"all": 1.0})
    ladder = host_ladder.run(the_plan, measure.measure, rounds=1)
    table = ladder.table.set_index("profile")
    assert (table.throughput > 0).all()
    assert table.loc["seed-era", "EXp_s"] > table.loc["modern", "EXp_s"]
    assert (ladder.hosts.offload_saturation > 0).all()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                          timeout=10).stdout
    assert "offload-host" not in left
