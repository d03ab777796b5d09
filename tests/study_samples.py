"""A plausible synthetic study for the report tests: three classes, inline and engine
modes, model points from the M/G/1 Pollaczek-Khinchine formula, sim and testbed
points scattered around them, and the gaps a real study has (NaN, a saturated model
point, a missed and an undecidable accuracy row)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.experiments import handoff
from offloadlab.study_tables import COLUMNS, StudyTables

D0 = 200e-6  # fixed network and client time
CV2 = 2.0  # squared coefficient of variation of every service time
# Per class: host app, host protocol (inline), host overhead and engine protocol
# (engine mode) mean service times, seconds. c3's engine is slower than its host.
COSTS = {"c0": (80e-6, 170e-6, 40e-6, 150e-6),
         "c2": (100e-6, 900e-6, 60e-6, 700e-6),
         "c3": (150e-6, 6e-3, 100e-6, 8e-3)}
SIZE = {"c0": 600, "c2": 40_000, "c3": 400_000}


def mg1(lam: np.ndarray, es: float) -> np.ndarray:
    """Mean sojourn time E[S] + lam E[S^2] / (2 (1 - rho)); inf from rho >= 1."""
    rho = lam * es
    out = np.full(lam.shape, np.inf)
    ok = rho < 1
    out[ok] = es + lam[ok] * es**2 * (1 + CV2) / (2 * (1 - rho[ok]))
    return out


def predict(klass: str, mode: str, lam: np.ndarray) -> dict[str, np.ndarray]:
    """Model utilisations and delays of one class in one mode at rates ``lam``."""
    exa, exp, exo, exq = COSTS[klass]
    if mode == "inline":
        t = mg1(lam, exa + exp) + D0
        return {"U_host": np.minimum(lam * (exa + exp), 1.0),
                "U_engine": np.full(lam.shape, np.nan), "T": t, "T_sum": t}
    t_cpu, t_oe = mg1(lam, exa + exo), mg1(lam, exq)
    return {"U_host": np.minimum(lam * (exa + exo), 1.0), "U_engine": np.minimum(lam * exq, 1.0),
            "T": np.maximum(t_cpu, t_oe) + D0, "T_sum": t_cpu + t_oe + D0}


def capacity(klass: str, mode: str) -> float:
    exa, exp, exo, exq = COSTS[klass]
    return 1 / (exa + exp) if mode == "inline" else 1 / max(exa + exo, exq)


def _points(rng: np.random.Generator, classes, modes) -> pd.DataFrame:
    rows = []

    def add(source, mode, klass, lam, v, use, **extra):
        for i, r in enumerate(lam):
            row = dict.fromkeys(COLUMNS["points"], np.nan)
            row.update(source=source, mode=mode, **{"class": klass}, rate=float(r), use=use,
                       throughput=float(r), **{k: float(a[i]) for k, a in v.items()},
                       **{k: float(a[i]) for k, a in extra.items()})
            rows.append(row)

    for klass in classes:
        top = capacity(klass, "inline")
        # The grid's last point lies just past the inline capacity: a saturated T = inf.
        grid = np.linspace(0.05, 1.02, 20) * top
        for mode in modes:
            add("model", mode, klass, grid, predict(klass, mode, grid), "prediction")
            # The seed's model: the same curve, a tenth slower to saturate.
            add("seed_model", mode, klass, grid * 1.1, predict(klass, mode, grid),
                "prediction")
            cap = capacity(klass, mode)
            lam = np.linspace(0.1, 0.9, 6) * min(cap, top)
            add("sim", mode, klass, lam, _scatter(rng, predict(klass, mode, lam), lam / cap),
                "prediction")
            for use, frac in (("calibration", (0.15, 0.3)),
                              ("validation", (0.2, 0.4, 0.6, 0.75, 0.85))):
                lam = np.array(frac) * min(cap, top)
                v = _scatter(rng, predict(klass, mode, lam), lam / cap, bias=0.1)
                # The testbed gives no interval for utilisations.
                for key in ("U_host_lo", "U_host_hi", "U_engine_lo", "U_engine_hi"):
                    v[key] = np.full(lam.shape, np.nan)
                add("testbed", mode, klass, lam, v, use, p99=3 * v["T"],
                    errors=np.zeros(lam.shape))
    frame = pd.DataFrame(rows, columns=list(COLUMNS["points"]))
    # One testbed interval that was not measured.
    frame.loc[frame.index[frame["source"] == "testbed"][3], ["T_lo", "T_hi"]] = np.nan
    return frame


def _scatter(rng, v: dict[str, np.ndarray], rho: np.ndarray, bias: float = 0.0) -> dict:
    """Noisy observations of model values: 2% noise on U, and on T a noise and a bias
    (testbed) growing with the load ``rho``; 95% intervals around them."""
    out = {}
    for key in ("U_host", "U_engine"):
        u = v[key] * (1 + 0.02 * rng.standard_normal(rho.shape))
        out.update({key: u, f"{key}_lo": u * 0.98, f"{key}_hi": u * 1.02})
    t = v["T"] * (1 + bias * rho**2 + 0.03 * rng.standard_normal(rho.shape))
    half = t * (0.03 + 0.2 * rho**3)
    out.update(T=t, T_sum=np.full(rho.shape, np.nan), T_lo=t - half, T_hi=t + half)
    return out


def _saturation(classes, modes) -> pd.DataFrame:
    rows = []
    for i, klass in enumerate(classes):
        for mode in modes:
            exa, _, exo, exq = COSTS[klass]
            model = capacity(klass, mode)
            measured = model * (0.93 + 0.03 * i)
            bottleneck = "host" if mode == "inline" or exa + exo >= exq else "engine"
            rows.append({"class": klass, "mode": mode, "measured": measured, "model": model,
                         "bottleneck": bottleneck, "error": model / measured - 1,
                         "seed_model": 1.1 * model, "seed_error": 1.1 * model / measured - 1,
                         "generator_bound": False,
                         "host_util": 0.97 if bottleneck == "host" else 0.4,
                         "conn_per_min": measured * 60 / 10, "connect_s": 180e-6 * (1 + i),
                         "goodput_Bps": measured * SIZE[klass], "model_elsewhere": model})
    frame = pd.DataFrame(rows, columns=list(COLUMNS["saturation"]))
    frame.loc[0, "connect_s"] = np.nan  # not measured
    return frame


def _cpu(rng, classes, modes) -> pd.DataFrame:
    rows = []
    for klass in classes:
        for mode in modes:
            roles = ("host", "shared") if mode == "inline" else ("host", "engine")
            for core, role in enumerate(roles):
                busy = 0.95 if role != "shared" else 0.2
                user, system, softirq, irq = rng.dirichlet([3, 4, 2, 0.5]) * busy
                rows.append({"class": klass, "mode": mode, "core": core, "role": role,
                             "user": user, "system": system, "softirq": softirq, "irq": irq,
                             "idle": 1 - busy})
    return pd.DataFrame(rows, columns=list(COLUMNS["cpu"]))


def _latency(rng, classes, modes) -> pd.DataFrame:
    parts = []
    for klass in classes:
        for mode in modes:
            lam = 0.6 * capacity(klass, "inline")
            mean = predict(klass, mode, np.array([lam]))["T"][0]
            sigma = 0.8
            t = rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, 2000)
            parts.append(pd.DataFrame({"class": klass, "mode": mode, "rate": lam,
                                       "total_s": t}))
    return pd.concat(parts, ignore_index=True)[list(COLUMNS["latency"])]


def _accuracy(classes, modes) -> pd.DataFrame:
    rows = []
    for klass in classes:
        for mode in modes:
            for metric, source, target in (("U_host", "model", 0.05), ("T", "model", 0.15),
                                           ("T", "sim", 0.15)):
                miss = klass == "c3" and mode == "engine" and metric == "T"
                # c2 inline's host utilisation wobbles more than its target allows.
                noisy = klass == "c2" and mode == "inline" and metric == "U_host"
                status = "missed" if miss else "undecidable" if noisy else "met"
                why = {"missed": "MAPE 27.0% above the target 15%; K-S p 0.03 <= 0.2",
                       "undecidable": "the testbed's floor 6.0% (from replicates) is above "
                                      "the target 5%",
                       "met": f"MAPE 3.0% within {target:.0%} on 4 points, K-S p 0.8 > 0.2"}
                rows.append({"class": klass, "mode": mode, "metric": metric, "source": source,
                             "mape": 0.27 if miss else 0.03, "n": 4,
                             "floor": 0.06 if noisy else 0.02, "floor_source": "replicates",
                             "ks_D": 0.5 if miss else 0.25,
                             "ks_p": 0.03 if miss else 0.8, "ks_n": 20, "ks_m": 5,
                             "target": target, "status": status, "why": why[status]})
    return pd.DataFrame(rows, columns=list(COLUMNS["accuracy"]))


def _verdicts(classes, modes) -> pd.DataFrame:
    rows = []
    for klass in classes:
        _, exp, exo, _ = COSTS[klass]
        lam = 0.6 * capacity(klass, "inline")
        t_noe = predict(klass, "inline", np.array([lam]))["T"][0]
        for mode in modes:
            if mode == "inline":
                continue
            t = predict(klass, mode, np.array([lam]))["T"][0]
            helps = t < t_noe
            rows.append({"class": klass, "mode": mode, "verdict": "helps" if helps else "hurts",
                         "reason": "E[X_o] < E[X_p] and the engine keeps up" if helps
                         else "the engine saturates first: E[X_q] > E[X_a] + E[X_p]",
                         "f": 1.0 if helps else 0.0, "EXp": exp, "EXo": exo, "rate": lam,
                         "T_noe": t_noe, "T": t,
                         "saturation_ratio": capacity(klass, mode) / capacity(klass, "inline"),
                         "measured_saturation_ratio": capacity(klass, mode)
                         / capacity(klass, "inline") * 0.97,
                         "measured_delay_ratio": t / t_noe * 1.05,
                         "delay_low": t / t_noe * 0.95, "delay_high": t / t_noe * 1.15,
                         "pairs": 1, "agree": "yes"})
    return pd.DataFrame(rows, columns=list(COLUMNS["verdicts"]))


def _bottom_line(classes, modes) -> pd.DataFrame:
    """Each class alone at its verdict's rate, paying where the verdict helps, then the
    mix at their sum."""
    rows = []
    for mode in modes:
        if mode == "inline":
            continue
        for klass in classes:
            _, exp, exo, _ = COSTS[klass]
            lam = 0.6 * capacity(klass, "inline")
            helps = predict(klass, mode, np.array([lam]))["T"][0] < predict(
                klass, "inline", np.array([lam]))["T"][0]
            rows.append({"mode": mode, "load": klass, "rate": lam,
                         "fraction": 1.0 if helps else 0.0,
                         "host_cores_saved": lam * (exp - exo), "pays": helps,
                         "pays_from": 0.0 if helps else math.nan,
                         **dict.fromkeys(("break_even_speed", "break_even_low",
                                          "break_even_high"), 0.4 if helps else math.inf),
                         "capacity_error": 0.0})
        rows.append({"mode": mode, "load": "mix", "rate": sum(r["rate"] for r in rows[-2:]),
                     "fraction": 0.5, "host_cores_saved": 0.1, "pays": True,
                     "pays_from": 120.0, "break_even_speed": 0.55, "break_even_low": 0.45,
                     "break_even_high": 0.8, "capacity_error": 0.06})
    return pd.DataFrame(rows, columns=list(COLUMNS["bottom_line"]))


def _costs(classes, modes) -> pd.DataFrame:
    rows = []
    for klass in classes:
        exa, exp, exo, exq = COSTS[klass]
        for mode in modes:
            inline = mode == "inline"
            rows.append({"class": klass, "mode": mode, "EXa": exa,
                         "EXp": exp if inline else np.nan,
                         "EXp_m2": exp**2 * (1 + CV2) if inline else np.nan,
                         "EXo": np.nan if inline else exo, "EXc": np.nan,
                         "EXq": np.nan if inline else exq,
                         "EXq_m2": np.nan if inline else exq**2 * (1 + CV2),
                         "lognormal": f"lognormal(mean={(exp if inline else exq) * 1e6:.0f}us, "
                                      "sigma=1.1)",
                         "pareto": None if klass == "c0" else "bpareto(alpha=1.4, k=0.1ms, p=1s)",
                         "d0": D0, "host_bg": 4e-6,
                         "engine_bg": np.nan if inline else 70e-6})
    return pd.DataFrame(rows, columns=list(COLUMNS["costs"]))


def _cost_model(classes, modes) -> pd.DataFrame:
    rows = []
    sides = {"inline": ("host_proto",), "engine": ("host_overhead", "engine")}
    for mode in modes:
        for side in sides[mode]:
            rows.append({"mode": mode, "side": side, "c0": 60e-6, "c_pkt": 4.5e-6,
                         "c_byte": 1.2e-9, "r2": 0.991, "classes": " ".join(classes),
                         "note": None if side != "engine" else "one packet per 1448 B segment",
                         "wakeup": 25e-6, "cooling": 300e-6, "counted_per_wakeup": 2.0,
                         "wakeup_r2": 0.93, "background_share": 0.046 * (side == "engine"),
                         "background_scv": 2.0 * (side == "engine")})
    return pd.DataFrame(rows, columns=list(COLUMNS["cost_model"]))


# The handoff experiment: throughput per policy (naive offload loses, P-L wins).
HANDOFF = {"inline": 15_000.0, "handoff:N-N-FCFS": 13_000.0, "handoff:P-L-FCFS": 16_500.0}


def handoff_result(seed: int = 7) -> handoff.Result:
    """The handoff experiment's result, as the study keeps it for its report."""
    experiment = handoff.Experiment(Path("fileset"), pd.DataFrame(), size_class=0, clients=64,
                                    keep_alive=100, work="exp(mean=50us)", slowdown=6.0,
                                    run_s=2.0, repeats=3)
    rng = np.random.default_rng(seed)
    runs = [{"policy": p, "repeat": r, "throughput": x * rng.uniform(0.98, 1.02),
             "mean_s": 64 / x, "p99_s": 2.5 * 64 / x, "errors": 0, "host_cpu_s": 60e-6,
             "engine_cpu_s": np.nan if p == "inline" else 30e-6,
             "engine_share": {"inline": 0.0, "handoff:N-N-FCFS": 1.0}.get(p, 0.5),
             "passed": 0, "moved": 0, "returned": 0, "soft_limit_min": np.nan}
            for r in range(3) for p, x in HANDOFF.items()]
    t = np.arange(1, 31) * 0.1
    series = pd.DataFrame({"policy": "handoff:P-L-FCFS", "repeat": 0, "t_s": t,
                           "held": 30 + 5 * np.sin(t), "soft_limit": 32 + 4 * np.cos(t),
                           "qlen": 10.0})
    return handoff.Result(experiment, pd.DataFrame(runs, columns=list(handoff.RUN_COLUMNS)),
                          series[list(handoff.SERIES_COLUMNS)])


def study_tables(classes=("c0", "c2", "c3"), modes=("inline", "engine"),
                 seed: int = 7) -> StudyTables:
    """A checked StudyTables of ``classes`` × ``modes`` (modes among inline, engine)."""
    rng = np.random.default_rng(seed)
    classes, modes = list(classes), list(modes)
    meta = {"title": "offload study: nginx on 2 cores, engine on a SmartNIC model",
            "command": "offload study --classes 0,2,3 --budget standard --out study-out",
            "started": "2025-03-14T09:26:53+00:00", "duration_s": 5025.0, "budget": "standard",
            "modes": modes, "classes": classes,
            "workload": "SURGE-like file set, 2000 files, Zipf(1.0) popularity",
            "machine": "2 × x86_64 cores at 2.4 GHz, Linux 6.1, loopback",
            "scenario_files": ["study.toml"],
            "agreement": "The testbed confirmed 3 of 3 verdicts, contradicted 0 and could not "
                         "decide 0.",
            "agreement_counts": {"yes": 3, "no": 0, "inconclusive": 0},
            "notes": ["c3 engine: T MAPE 27% misses the 15% target; engine service times "
                      "are not independent of the host's"],
            "handoff": {"clients": 64, "keep_alive": 100, "size_class": 0,
                        "work": "exp(mean=50us)", "engine_slowdown": 6.0, "repeats": 3,
                        "run_s": 2.0}}
    return StudyTables(points=_points(rng, classes, modes), saturation=_saturation(classes, modes),
                       cpu=_cpu(rng, classes, modes), latency=_latency(rng, classes, modes),
                       accuracy=_accuracy(classes, modes), verdicts=_verdicts(classes, modes),
                       bottom_line=_bottom_line(classes, modes),
                       costs=_costs(classes, modes), cost_model=_cost_model(classes, modes),
                       meta=meta).check()
