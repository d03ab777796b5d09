"""Seed 001's cache in the model, fitted to the testbed's set-ups A and C
(:mod:`offloadlab.experiments.appcache`), then model and simulator set against every run.

Two classes share each run's request rate λ:

- **pages**: the dynamic requests, a share d. They are never cached and carry the
  page's application work.
- **files**: the static ones, 1 - d. They hit the cache with h_f = h / (1 - d), where h
  is the run's measured hit ratio over all requests.

The costs come from CPU seconds per second over the runs, by least squares through the
origin with no cost below zero:

- **A** (host alone): U_host = λ E[X_a + X_p], one cost over both classes. Their mix
  is the same in every run, so they cannot be told apart.
- **C** (cache on the engine, every request offloaded):
  - U_host = λ d E[page] + λ (1 - d)(1 - h_f) E[file miss]. Hits never reach the host.
  - U_engine = λ (1 - h) E[X_c + X_q] + λ h E[X_h]. Every miss costs the engine alike.

The runs of C differ in their hit ratios (cache sizes, sessions), and that is what
separates the costs. Each run is then evaluated at its own rate, dynamic share and hit
ratio, two ways:

- by the tandem model (:func:`offloadlab.model.evaluate`);
- by the request-level simulator (:func:`offloadlab.sim.run`), with exponential costs
  of the fitted means.

Their utilisations and mean times in the server sit beside the measured utilisations
and mean request times. The measured times also hold the client's and the loopback's
share, which no fitted cost covers. With think times far above the response times, the
sessions' arrivals are close to the model's Poisson streams.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from offloadlab import model, scenario, sim

COMPARE_COLUMNS = ("setup", "sessions", "cache_mib", "rate", "dynamic_share", "hit_rate",
                   "host_util", "model_host_util", "sim_host_util", "engine_util",
                   "model_engine_util", "sim_engine_util", "request_mean_s", "model_T",
                   "sim_T")
# Simulated requests per run (the CLI shows utilisations and means to 2-3 digits).
SIM_REQUESTS = 50_000


@dataclass(frozen=True)
class Costs:
    """Mean CPU seconds per request, fitted (None where no run gave them)."""

    host_alone: float | None  # A: E[X_a + X_p] over pages and files
    host_page: float | None  # C: the host's time for a dynamic page
    host_file_miss: float | None  # C: the host's time for a file the cache missed
    engine_miss: float | None  # C: E[X_c + X_q]
    engine_hit: float | None  # C: E[X_h]

    def to_json(self) -> dict:
        return {f"{k}_s": v for k, v in asdict(self).items()}


def fit(points: pd.DataFrame) -> Costs:
    """The costs from the runs of A and C (see the module notes)."""
    a = points[points["setup"] == "A"]
    c = points[(points["setup"] == "C") & points["hit_rate"].notna()]
    host_alone = _through_origin(a[["rate"]].to_numpy(float), a["host_util"])[0] \
        if len(a) else None
    lam = c["rate"].to_numpy(float)
    d, h = c["dynamic_share"].to_numpy(float), c["hit_rate"].to_numpy(float)
    host = _through_origin(np.column_stack([lam * d, lam * (1 - d - h)]), c["host_util"])
    engine = _through_origin(np.column_stack([lam * (1 - h), lam * h]), c["engine_util"])
    return Costs(host_alone, *host, *engine)


def _through_origin(x: np.ndarray, y) -> tuple:
    """Least-squares coefficients of y on the columns of x, no intercept, none below
    zero (a CPU cost is not negative: plain least squares gave a hit -6 µs and a missed
    file -17 µs on a quick run whose hit ratios barely spread); Nones when the columns
    do not tell them apart (too few runs, or no spread in the hit ratios)."""
    from scipy.optimize import nnls

    if len(x) == 0 or np.linalg.matrix_rank(x) < x.shape[1]:
        return (None,) * x.shape[1]
    coef, _ = nnls(x, np.asarray(y, float))
    return tuple(float(v) for v in coef)


def compare(points: pd.DataFrame, costs: Costs, sim_requests: int = SIM_REQUESTS
            ) -> pd.DataFrame:
    """Model and simulator next to the measurements, for every run of A and C whose
    costs were fitted (A is the host alone: its columns are the ``noe`` ones)."""
    rows = []
    for p in points.to_dict("records"):
        sc = _scenario(p, costs)
        if sc is None:
            continue
        row = {k: p.get(k) for k in COMPARE_COLUMNS}
        alone = p["setup"] == "A"
        for source, result in (("model", model.evaluate(sc)),
                               ("sim", sim.run(sc, requests=sim_requests, seed=1))):
            r = result.overall
            row[f"{source}_host_util"] = float(r["U_noe" if alone else "U_cpu"][0])
            row[f"{source}_engine_util"] = None if alone else float(r["U_oe"][0])
            row[f"{source}_T"] = float(r["T_noe" if alone else "T"][0])
        rows.append(row)
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


def _scenario(p: dict, costs: Costs) -> scenario.Scenario | None:
    """One run as a scenario: A as one class on the host alone; C as pages and files,
    everything offloaded, the files hitting the cache."""
    rate = float(p["rate"])
    if p["setup"] == "A" and costs.host_alone is not None:
        classes = [_class("requests", rate, 0.0, 0.0, host=costs.host_alone)]
    elif p["setup"] == "C" and None not in asdict(costs).values():
        d, h = float(p["dynamic_share"]), float(p["hit_rate"])
        files_hit = min(max(h / (1 - d), 0.0), 1.0)
        engine = dict(engine_miss=costs.engine_miss, engine_hit=costs.engine_hit)
        classes = [_class("pages", rate * d, 1.0, 0.0, host=costs.host_page, **engine),
                   _class("files", rate * (1 - d), 1.0, files_hit, host=costs.host_file_miss,
                          **engine)]
    else:
        return None
    classes = [c for c in classes if c["rate"] > 0]
    return scenario.from_dict({"name": f"{p['setup']}-{p['sessions']}", "class": classes},
                              source=f"appcache run {p['setup']}, {p['sessions']} sessions")


def _class(name: str, rate: float, offload: float, hit: float, host: float,
           engine_miss: float = 0.0, engine_hit: float = 0.0) -> dict:
    """A [[class]] table with exponential costs of these means (utilisations need the
    means only). The host's time goes in X_a when the class stays on the host, in X_o
    when it is offloaded."""
    def spec(v: float) -> str:
        return f"exp(mean={v * 1e6:.6g}us)" if v > 0 else "det(0)"
    on_host = offload == 0.0
    return {"name": name, "rate": rate, "offload": offload, "hit_ratio": hit,
            "app": spec(host if on_host else 0.0), "host_proto": "det(0)",
            "host_overhead": spec(0.0 if on_host else host), "engine_overhead": "det(0)",
            "engine_proto": spec(engine_miss), "engine_hit": spec(engine_hit)}
