"""``offload appcache``: seed 001's object cache on the testbed, set-ups A, B and C under
SPECweb2005-like sessions (:mod:`offloadlab.experiments.appcache`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from offloadlab.cli.common import app, err, flag_time, out, user_errors, write_experiment
from offloadlab.errors import InputError
from offloadlab.units import ms, us

if TYPE_CHECKING:
    from offloadlab.calibrate import appcache as fitting
    from offloadlab.experiments import appcache


@app.command("appcache")
@user_errors
def appcache_cmd(
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Folder for points.csv, model.csv, probes.csv, appcache.png and "
                      "summary.json (created; files in it are replaced).")
    ] = Path("appcache"),
    fileset_dir: Annotated[Path | None, typer.Option(
        "--fileset", help="Serve this SPECweb2005-like site (offload workload fileset); "
                          "default: one for --workload, written under OUT/fileset.")] = None,
    budget: Annotated[str, typer.Option(
        help="quick | standard | thorough: session counts, cache sizes, run lengths.")
    ] = "quick",
    run_length: Annotated[str | None, typer.Option(
        help="Override the budget's length of every measurement, e.g. 2s.")] = None,
    work: Annotated[str, typer.Option(
        help="Application work on every request that reaches the application (the "
             "origin's own cost), e.g. exp(mean=50us), or det(0) for none.")
    ] = "exp(mean=100us)",
    seed: Annotated[int, typer.Option(help="Seed of the site, sessions and work.")] = 1,
    host_core: Annotated[int | None, typer.Option(
        help="Core of the host thread and the load generator (default: the first core "
             "this process may use).")] = None,
    engine_core: Annotated[int | None, typer.Option(
        help="Core of the engine thread, for set-up C (default: the second).")] = None,
    workload: Annotated[str, typer.Option(
        help="The session mix: support, ecommerce or banking.")] = "support",
    think: Annotated[str, typer.Option(help="Think time between pages.")
                     ] = "exp(mean=10s)",
    sessions: Annotated[str | None, typer.Option(
        help="Session counts, e.g. 5,50,100 (default: the budget's).")] = None,
    cache_sizes: Annotated[str | None, typer.Option(
        help="Cache sizes in MiB, e.g. 1,10,100,1000 (default: the budget's).")] = None,
    cache_policy: Annotated[str, typer.Option(
        help="Replacement policy, lru, lfu or gdsf.")] = "lru",
    time_good: Annotated[str, typer.Option(
        help="SPECweb2005's Time_Good (95 % of pages within it).")] = "3s",
    time_tolerable: Annotated[str, typer.Option(
        help="Time_Tolerable (99 % of pages within it).")] = "5s",
    search: Annotated[bool, typer.Option(
        "--search/--no-search",
        help="Also search each set-up's most sessions within the QoS.")] = True,
    proxy: Annotated[str, typer.Option(
        help="The cache of set-ups B and C: emulated (the server's in-process cache), "
             "squid (a real Squid in front of the server; apt-get install squid) or both "
             "side by side.")] = "both",
) -> None:
    """Seed 001's object cache: the server alone (A), the cache on the host (B) and on
    the engine (C) under SPECweb2005-like sessions, with model and simulator beside."""
    from offloadlab.experiments import appcache
    from offloadlab.testbed import cores

    good_s = flag_time("--time-good", time_good)
    tolerable_s = flag_time("--time-tolerable", time_tolerable)
    host, engine = cores.choose(host_core, engine_core)
    chosen = _budget(budget, sessions, cache_sizes, flag_time("--run-length", run_length))
    out_dir.mkdir(parents=True, exist_ok=True)
    if fileset_dir is None:
        err.print("writing the site …")
        fileset_dir = appcache.generated_site(out_dir / "fileset", chosen.sessions, workload,
                                              seed)
    # The load generator shares the host's core, as the seed's client machine did not.
    run(out_dir, appcache.Experiment(
        root=fileset_dir, site=appcache.read_site(fileset_dir), budget=chosen,
        workload=workload, think=think, cache_policy=cache_policy, time_good_s=good_s,
        time_tolerable_s=tolerable_s, work=work, host_core=host, engine_core=engine,
        generator_core=host, search=search, seed=seed, proxy=proxy))


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


def _budget(name: str, sessions: str | None, cache_sizes: str | None,
            measure_s: float | None) -> appcache.Budget:
    """The budget ``name`` with --sessions, --cache-sizes and --run-length in place of its
    own."""
    from offloadlab.experiments import appcache

    chosen = appcache.budget(name)
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
    return chosen


def run(out_dir: Path, exp: appcache.Experiment) -> None:
    """Runs ``exp``, prints its tables and writes points.csv, model.csv, probes.csv, the
    figure and summary.json to ``out_dir``."""
    from offloadlab.experiments import appcache

    exp.check()
    chosen = exp.budget
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
    for proxy in exp.proxies:
        if (balance := result.host_balance(proxy)) is not None:
            out.print(balance_line(balance), highlight=False)
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


def balance_line(b: dict) -> str:
    """Whether the cache on the host can unload it, in the run's own numbers (the
    thesis's B beat A; here it need not: docs/appcache.md, "Against the thesis")."""
    gain = b["spared_us"] - b["cache_us"]
    verdict = ("so B's host core outlasts A's" if gain > 0
               else "so B's host core saturates no later than A's")
    return (f"cache on the host ({b['proxy']}, {b['sessions']:,} sessions): it costs "
            f"{b['cache_us']:.0f} µs of host CPU per request (B {b['B_us']:.0f} less C "
            f"{b['C_us']:.0f}) and its hits spare the origin {b['spared_us']:.0f} µs (A "
            f"{b['A_us']:.0f} less C), {verdict} ({abs(gain):.0f} µs per request "
            f"{'less' if gain > 0 else 'more'})")


def _pct(x) -> str:
    return "" if x is None or x != x else f"{100 * x:.1f}"
