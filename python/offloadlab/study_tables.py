"""What a study hands to its report: plain tables, one per kind of evidence, and the
modes a study runs in the order the report shows them. Both :mod:`offloadlab.study` and
:mod:`offloadlab.report` read this module and it reads neither, nor the testbed's
driver.

Times are in seconds, rates in requests/s, utilisations and shares as fractions.
Classes are named ``c0`` … ``c4`` (the file set's size classes); modes are the
testbed's (``inline``, ``engine``, ``uring``). A value that was not measured or does
not apply is NaN (None in text columns).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from offloadlab.mode_traits import modes_where

# Modes the model describes (trait `studied`), inline (the baseline) first: every
# request on the host, or every one through the engine. Handoff mode splits them by
# policy; the study runs it as an experiment of its own (study/pipeline.py).
STUDY_MODES: tuple[str, ...] = modes_where("studied")

# Each table's columns, in order; ``StudyTables.check`` holds the frames to them.
COLUMNS: dict[str, tuple[str, ...]] = {
    # One row per (source, mode, class, rate). source: model | seed_model | sim | testbed.
    # The model's T follows its scenario's system_delay: the tandem sum T_cpu + T_oe for
    # `model`, seed 000's max(T_cpu, T_oe) for `seed_model` (T_noe in inline mode); T_sum
    # is always the sum. Both include the fixed network and client time d0 fitted in
    # calibration. host_trip (offload modes): the testbed's measured time from the engine
    # passing a request up to its answer coming back (engine mode only), and the models'
    # host sojourn T_cpu, which leaves the rings' hops in d0.
    # T_lo, T_hi: 95% interval of T (sim: replications or batch means; testbed: batch
    # means over the run); U_*_lo/_hi likewise for the sim. use: "calibration" for the
    # testbed runs the model was fitted on, "validation" for the sweep, "prediction"
    # for model, seed_model (seed 000's model, the baseline) and sim rows. A saturated
    # model point has T = inf. core_busy (testbed): the busier server core's share of
    # work, its thread's and the rest on it (the load generator's too), which decides
    # with U_host whether a point is scored (study/measure.py, scored). lag, lag_p99
    # (testbed, s): how late the load generator started the requests against the plan,
    # mean and p99; behind its plan it sends in bursts, not the plan's arrivals.
    "points": ("source", "mode", "class", "rate", "U_host", "U_host_lo", "U_host_hi",
               "U_engine", "U_engine_lo", "U_engine_hi", "T", "T_sum", "T_lo", "T_hi",
               "host_trip", "throughput", "p99", "errors", "core_busy", "lag", "lag_p99",
               "use"),
    # One row per (class, mode). measured: closed-loop throughput with zero think time;
    # model: 1 / E[S] of the bottleneck (host or engine) with its core's background.
    # error = model / measured - 1; seed_model, seed_error: the same for seed 000's
    # model fitted on the same runs. generator_bound: the run was limited by the load
    # generator's core, not the server (study/compare.py, generator_bound).
    # host_util: busy share of the host thread during the saturation run. The seed's
    # Tables 4-3 and 4-4: connections per minute, mean connection set-up, goodput (B/s).
    # model_elsewhere: the model's saturation with the load generator on cores of its own
    # (fit.ClassFit.client_elsewhere), what a generator-bound run could not measure.
    "saturation": ("class", "mode", "measured", "model", "bottleneck", "error", "seed_model",
                   "seed_error", "generator_bound", "host_util", "conn_per_min", "connect_s",
                   "goodput_Bps", "model_elsewhere"),
    # One row per (class, mode, core) from the saturation run: shares of the core's wall
    # time (they add up to about 1). role: "host", "engine" or "shared".
    "cpu": ("class", "mode", "core", "role", "user", "system", "softirq", "irq", "idle"),
    # Per-request total times (at most 5000 per curve) of one sweep rate per (class,
    # mode), for latency CDFs.
    "latency": ("class", "mode", "rate", "total_s"),
    # One row per (class, mode, metric, source): metric U_host | U_engine | T; source
    # model | seed_model | sim. mape over the scored validation points (stable, below
    # 80% utilisation; n of them), inf when a prediction there is not finite; floor: the
    # MAPE a model exactly on the truth would score on those points (the same for every
    # source), floor_source: how it was measured (replicates | neighbours: each point
    # against the line through its neighbours | unmeasured); two-sample
    # Kolmogorov-Smirnov D and exact p between the predicted and measured curve (ks_n,
    # ks_m points); target: the MAPE bound; status: met | missed | undecidable
    # (study/judge.py, judge_row); why: the reason in words.
    "accuracy": ("class", "mode", "metric", "source", "mape", "n", "floor", "floor_source",
                 "ks_D", "ks_p", "ks_n", "ks_m", "target", "status", "why"),
    # One row per (class, mode != inline), at the operating point (the exported
    # scenario's own rates; rate is the class's): the verdict helps | hurts | neutral
    # of the class on its own with its reason, the fraction f the optimiser recommends
    # for the mix (0 where the verdict is hurts), the model's delays with and without
    # offload (d0 included), the model's saturation ratio mode / inline; then the
    # testbed's: saturation ratio, delay ratio
    # at the class's rate (NaN: a sweep saturated below it) with its 95% interval
    # delay_low..delay_high (0..inf: unknown) and the pairs of runs it rests on,
    # client_bound (a saturation run of the two was the load generator's: the saturation
    # ratio then decides nothing), and agree: yes | no | inconclusive (study/judge.py,
    # agreement).
    "verdicts": ("class", "mode", "verdict", "reason", "f", "EXp", "EXo", "rate",
                 "T_noe", "T", "saturation_ratio",
                 "measured_saturation_ratio", "measured_delay_ratio", "delay_low",
                 "delay_high", "pairs", "client_bound", "agree"),
    # The answer in a buyer's terms (model/answer.py), per offload mode, for each class on
    # its own (load = its name, all of it offloaded) and the mix (load = "mix", the
    # optimiser's split), at the bottom line's rate (the class's share of it): the
    # fraction to send to the engine, host cores saved (negative: taken; an engine on host
    # cores counts against it), whether offload pays there, the lowest rate from which it
    # pays (0: every rate, NaN: none), and the break-even engine speed relative to a host
    # core (the slowest that still pays; inf: none does), with its range were the
    # model's capacities off by capacity_error, the larger saturation error this study
    # measured for the load, host alone or offloaded (answer.break_even_range).
    "bottom_line": ("mode", "load", "rate", "fraction", "host_cores_saved", "pays",
                    "pays_from", "break_even_speed", "break_even_low", "break_even_high",
                    "capacity_error"),
    # One row per (class, mode): the fitted means (and second moments) of the model's
    # service times, the fitted distribution specs of X_p (inline) or X_q (offload
    # modes), d0, the fixed delay outside host and engine (network and client), and the
    # other work on the host's and the engine's core per request (the part that grows
    # with the rate; the rest is the cost model's background_share).
    "costs": ("class", "mode", "EXa", "EXp", "EXp_m2", "EXo", "EXc", "EXq", "EXq_m2",
              "lognormal", "pareto", "d0", "host_bg", "engine_bg"),
    # The structural cost model E[X](size) = c0 + c_pkt * packets + c_byte * bytes per
    # request, per side (host_proto, host_overhead, engine), with the fit's R² over its
    # classes, and that side's queue's wake-up: its cost D after a long idle period, the
    # cooling time over which an idle queue gets there, the wake-ups the server counted
    # per wake-up of the model, the R² of that fit, the share of the queue's core other
    # work holds at any rate, and the squared coefficient of variation of that work per
    # request (the engine's core: the shape its calibration delays chose; else 0).
    "cost_model": ("mode", "side", "c0", "c_pkt", "c_byte", "r2", "classes", "note",
                   "wakeup", "cooling", "counted_per_wakeup", "wakeup_r2", "background_share",
                   "background_scv"),
}


@dataclass
class StudyTables:
    """Everything the report shows. ``meta`` carries: title, command, started (ISO
    time), duration_s, budget, modes, classes, workload (a sentence), machine (a
    sentence), steal (a sentence: the most of the cores' time the hypervisor took from a
    kept run, and how many runs were made again for it), agreement (the report's first
    line: how many verdicts the testbed confirmed, contradicted or could not decide) and
    agreement_counts (those counts by yes, no, inconclusive), scenario_files (names in the
    output folder), notes (at most five sentences the reader must act on, e.g. a verdict
    the testbed does not back) and more_notes (the rest, e.g. each missed accuracy
    target and why)."""

    points: pd.DataFrame
    saturation: pd.DataFrame
    cpu: pd.DataFrame
    latency: pd.DataFrame
    accuracy: pd.DataFrame
    verdicts: pd.DataFrame
    bottom_line: pd.DataFrame
    costs: pd.DataFrame
    cost_model: pd.DataFrame
    meta: dict = field(default_factory=dict)

    def check(self) -> StudyTables:
        """Every table has exactly its documented columns, in order."""
        for name, columns in COLUMNS.items():
            frame = getattr(self, name)
            if tuple(frame.columns) != columns:
                raise ValueError(f"study table {name}: columns {list(frame.columns)}, "
                                 f"expected {list(columns)}")
        return self

    def frames(self) -> dict[str, pd.DataFrame]:
        return {name: getattr(self, name) for name in COLUMNS}
