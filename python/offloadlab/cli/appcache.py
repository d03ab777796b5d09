"""``offload study --preset appcache``: seed 001's object cache on the testbed, set-ups
A, B and C under SPECweb2005-like sessions (:mod:`offloadlab.experiments.appcache`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.table import Table

from offloadlab.calibrate import appcache as fitting
from offloadlab.cli.common import err, out, write_experiment
from offloadlab.errors import InputError
from offloadlab.experiments import appcache
from offloadlab.units import ms, us


def parse_sizes(text: str | None, what: str) -> tuple[float, ...] | None:
    """``"1,10,100"`` as numbers > 0 (None stays None)."""
    if text is None:
        return None
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(v > 0 for v in values):
        raise InputError(f"{what} {text!r}: give numbers > 0, comma-separated, e.g. 1,10,100")
    return values


def study(out_dir: Path, fileset_dir: Path | None, exp_args: dict, budget: str,
          sessions: str | None, cache_sizes: str | None,
          measure_s: float | None = None) -> None:
    """Runs the experiment and writes points.csv, probes.csv, summary.json and the
    figure to ``out_dir``. ``sessions``, ``cache_sizes`` and ``measure_s`` override the
    budget's."""
    chosen = appcache.budget(budget)
    if measure_s is not None:
        chosen = replace(chosen, measure_s=measure_s)
    counts = parse_sizes(sessions, "--sessions")
    if counts is not None:
        if not all(c == int(c) for c in counts):
            raise InputError(f"--sessions {sessions!r}: give whole numbers, e.g. 5,50,100")
        chosen = replace(chosen, sessions=tuple(map(int, counts)))
    sizes = parse_sizes(cache_sizes, "--cache-sizes")
    if sizes is not None:
        chosen = replace(chosen, cache_mib=sizes)
    out_dir.mkdir(parents=True, exist_ok=True)
    if fileset_dir is None:
        err.print("writing the site …")
        fileset_dir = appcache.generated_site(out_dir / "fileset", chosen.sessions,
                                              exp_args["workload"], exp_args["seed"])
    exp = appcache.Experiment(root=fileset_dir, site=appcache.read_site(fileset_dir),
                              budget=chosen, **exp_args)
    exp.check()
    runs = len(exp.plan())
    err.print(f"appcache: {runs} runs of {chosen.measure_s:g} s"
              + (", then the search for the most compliant sessions" if exp.search else ""),
              highlight=False)
    result = appcache.run(exp, progress=_say)
    costs, versus = result.model
    for proxy in exp.proxies:
        out.print(hit_table(result, proxy))
    out.print(setup_table(result))
    out.print(model_table(versus, costs))
    if exp.search:
        out.print(search_line(result), highlight=False)
    write_experiment(out_dir, exp, result)

def _say(what: str, done: int, total: int) -> None:
    if what:
        err.print(f"[dim]{done + 1}/{total}: {what}[/]", highlight=False)


def hit_table(result: appcache.Result, proxy: str = "emulated") -> Table:
    table = result.hit_table("C", proxy)
    t = Table("sessions", *(f"{c:g} MiB" for c in table.columns),
              title=f"Hit rate (%), cache on the engine ({proxy}; seed 001 Table 4.4: 95.0 "
                    "/ 94.1 / 93.1 % at 5 / 50 / 100 sessions with 10 MiB)")
    for n, row in table.iterrows():
        t.add_row(str(n), *(f"{v:.2f}" if v == v else "" for v in row))
    return t


def setup_table(result: appcache.Result) -> Table:
    exp = result.experiment
    p = result.points
    at = p[(p["setup"] == "A") | (p["cache_mib"] == exp.operating)]
    t = Table("set-up", "proxy", "sessions", "hit %", "host CPU %", "engine CPU %", "page ms",
              "request ms", "MB/s", f"≤{exp.time_good_s:g} s", f"≤{exp.time_tolerable_s:g} s",
              "errors", title=f"A server alone, B cache on the host, C cache on the engine "
                              f"(B, C at {exp.operating:g} MiB)")
    for r in at.sort_values(["sessions", "setup", "proxy"]).to_dict("records"):
        t.add_row(r["setup"], r["proxy"], str(r["sessions"]), _pct(r["hit_rate"]),
                  _pct(r["host_util"]),
                  _pct(r["engine_util"]), ms(r["page_mean_s"]), ms(r["request_mean_s"]),
                  f"{r['byte_rate'] / 1e6:.2f}", _pct(r["good"]), _pct(r["tolerable"]),
                  _pct(r["error_share"]))
    return t


def model_table(versus, costs: fitting.Costs) -> Table:
    fitted = ", ".join(f"{name} {us(v)} µs" for name, v in (
        ("host alone", costs.host_alone), ("host per page", costs.host_page),
        ("host per missed file", costs.host_file_miss), ("engine per miss", costs.engine_miss),
        ("engine per hit", costs.engine_hit)) if v is not None)
    t = Table("set-up", "sessions", "MiB", "req/s", "hit %", "host CPU % testbed",
              "model", "sim", "engine CPU % testbed", "model", "sim", "ms testbed",
              "model", "sim", title="Model and simulator against the testbed",
              caption=f"fitted per request: {fitted}; testbed times include the client "
                      "and the loopback")
    for r in versus.to_dict("records"):
        t.add_row(r["setup"], str(r["sessions"]),
                  "" if r["cache_mib"] is None or r["cache_mib"] != r["cache_mib"]
                  else f"{r['cache_mib']:g}",
                  f"{r['rate']:,.0f}", _pct(r["hit_rate"]),
                  *(_pct(r[f"{s}host_util"]) for s in ("", "model_", "sim_")),
                  *(_pct(r[f"{s}engine_util"]) for s in ("", "model_", "sim_")),
                  ms(r["request_mean_s"]), ms(r["model_T"]), ms(r["sim_T"]))
    return t


def search_line(result: appcache.Result) -> str:
    parts = []
    for setup in result.most_sessions:
        n, failed = result.most_sessions[setup], result.first_failed(setup)
        if n is None:
            parts.append(f"{setup} none (failed at {failed:,})")
        elif failed is None:
            parts.append(f"{setup} ≥ {n:,} (never failed)")
        else:
            parts.append(f"{setup} {n:,} (failed at {failed:,})")
    exp = result.experiment
    return (f"most sessions within SPECweb2005's QoS (95 % of pages ≤ {exp.time_good_s:g} s, "
            f"99 % ≤ {exp.time_tolerable_s:g} s, ≤ 0.5 % errors): " + ", ".join(parts))


def _pct(x) -> str:
    return "" if x is None or x != x else f"{100 * x:.1f}"
