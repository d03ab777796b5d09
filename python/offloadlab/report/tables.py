"""Rich tables of model results and verdicts."""

from __future__ import annotations

from rich import box
from rich.markup import escape
from rich.table import Table

from offloadlab.model import verdict
from offloadlab.results import Result
from offloadlab.scenario import Scenario
from offloadlab.units import ms, ms_ci, rate, speed, speed_span, util

_STYLE = {"helps": "green", "hurts": "red", "neutral": "yellow"}


def model_table(result: Result) -> Table:
    """Every rate point: host alone against host + engine. Multi-class scenarios get
    a row for all classes together, then one per class."""
    s = result.scenario
    table = _table(f"[bold]{escape(s.name)}[/]: host alone vs host + engine, delays in ms "
                   f"(T = {s.options.system_delay}, CPU queue {s.options.cpu_queue})",
                   ("rate/s", "class", "f", "U alone", "U host", "U eng", "T alone", "T",
                    "T_sum", "offload"))
    multi = len(s.classes) > 1
    for row in result.rows():
        if row["class"] != "all":
            _add_row(table, row, result)
        elif multi:
            _add_row(table, row, result, style="bold")
    return table


def _add_row(table: Table, row: dict, result: Result, style: str | None = None) -> None:
    label = ""
    if row["class"] != "all":
        label, _ = _verdict_of(result.scenario, row)
        label = f"[{_STYLE[label]}]{label}[/]"
    table.add_row(rate(row["rate"]), escape(row["class"]), f"{row['f']:.2f}", util(row["U_noe"]),
                  util(row["U_cpu"]), util(row["U_oe"]), ms(row["T_noe"]), ms(row["T"]),
                  ms(row["T_sum"]), label, style=style)


def bottom_line_table(rows, engine: str) -> Table:
    """:func:`offloadlab.model.answer.answers` as a table: per class and for the mix."""
    table = _table(f"Bottom line with {escape(engine)}", (
        "load", "rate/s", "send to engine", "host cores saved", "pays", "pays from /s",
        "break-even speed"))
    for a in rows:
        table.add_row(escape(a.load), rate(a.rate), f"{a.fraction:.0%}",
                      f"{a.host_cores_saved:+.3f}", "yes" if a.pays else "no",
                      "never" if a.pays_from != a.pays_from else rate(a.pays_from),
                      _break_even(a))
    table.caption = ("each class on its own at its share of the rate, all of it offloaded, "
                     "then the mix with the optimiser's split (send to engine); "
                     "host cores saved: host-alone busy cores minus with offload (less the "
                     "engine's cores if they are host cores); pays: the model finds offload "
                     "beneficial (host relieved, nothing saturates, delay no longer); "
                     "break-even speed: the slowest engine, relative to a host core, that "
                     "still pays at this rate; in brackets, its range were the model's "
                     "capacities off by the error shown (a study: the saturation error it "
                     "measured for that load)")
    return table


def _break_even(a) -> str:
    """The break-even speed, its range in brackets when it has one."""
    span = speed_span(a.break_even_low, a.break_even_high, a.capacity_error)
    return speed(a.break_even_speed) + (f" ({span})" if span else "")


def sim_table(result: Result) -> Table:
    """Simulated means with their 95% half-widths, host alone against host + engine,
    and below the table how the run went."""
    s = result.scenario
    m = result.meta
    intervals = ("batch means" if m["replications"] == 1
                 else f"{m['replications']} replications")
    table = _table(f"[bold]{escape(s.name)}[/]: simulated, delays in ms ± 95% half-width "
                   f"(T = {s.options.system_delay})",
                   ("rate/s", "class", "f", "U alone", "U host", "U eng", "T alone", "T",
                    "T_sum"))
    multi = len(s.classes) > 1
    for row in result.rows():
        if row["class"] == "all" and not multi:
            continue
        table.add_row(rate(row["rate"]), escape(row["class"]), f"{row['f']:.2f}",
                      util(row["U_noe"]),
                      util(row["U_cpu"]), util(row["U_oe"]),
                      ms_ci(row["T_noe"], row["T_noe_hw"]), ms_ci(row["T"], row["T_hw"]),
                      ms_ci(row["T_sum"], row["T_sum_hw"]),
                      style="bold" if row["class"] == "all" else None)
    o = result.overall
    low, high = int(o["warmup"].min()), int(o["warmup"].max())
    warmup = f"{low:,}" if low == high else f"{low:,}-{high:,}"
    table.caption = (f"{int(o['requests'].min()):,} requests measured per point after a "
                     f"warm-up of {warmup}; intervals from {intervals}; seed {result.seed}.\n"
                     f"{result.events:,} events in {result.wall_s:.2f} s "
                     f"({result.events / result.wall_s / 1e6:.1f} M events/s).")
    return table


def _verdict_of(s: Scenario, row: dict) -> tuple[str, str]:
    cls = s.classes[s.class_names.index(row["class"])]
    return verdict(row, cls.host_proto.mean, cls.host_overhead.mean)


def _table(title: str, headers: tuple[str, ...]) -> Table:
    """A compact table that fits 80 columns: numbers right-aligned, names left."""
    table = Table(title=title, box=box.SIMPLE_HEAD, caption_justify="left", pad_edge=False,
                  collapse_padding=True)
    for header in headers:
        table.add_column(header, justify="left" if header == "class" else "right", no_wrap=True)
    return table
