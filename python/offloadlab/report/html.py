"""The study report as one self-contained HTML page, readable offline.

Figures are embedded as base64 data URIs and also linked to their PNG files by
relative path; CSS is inline; there is no script and no external link. Every piece
of text from the tables is escaped. Numbers are shown with 3 significant digits, times
in ms or µs, NaN as – and inf as ∞.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from offloadlab.report.section import Section
from offloadlab.report.study import FIGURES, MAPE_CUT, write_figures
from offloadlab.results import write_atomic, write_outputs
from offloadlab.study_tables import StudyTables
from offloadlab.units import speed_span
from offloadlab.workload.classes import MiB

MISSING = "–"
VERDICT_STYLES = ("helps", "hurts", "neutral")  # CSS classes of the same names
CSS = """
body { font: 15px/1.45 system-ui, sans-serif; color: #222; margin: 2em auto; max-width: 1200px;
       padding: 0 1.5em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; vertical-align: top; }
th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.meta th { background: none; border: none; padding-left: 0; }
table.meta td { border: none; }
code { background: #f3f3f3; padding: 0.1em 0.3em; }
.helps, .yes, .met { color: #176a1d; font-weight: bold; }
.hurts, .no, .missed { color: #b00020; font-weight: bold; }
.neutral, .inconclusive, .undecidable { color: #8a6d00; font-weight: bold; }
.headline { font-size: 1.1em; font-weight: bold; }
.notes { border: 2px solid #b00020; border-left-width: 8px; background: #fff4e5;
         padding: 0.5em 1em; margin: 1em 0; }
.notes h2 { margin-top: 0.3em; border: none; color: #b00020; }
.caption { color: #555; font-size: 0.9em; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.92em; margin-top: 0.3em; }
"""

# A cell: plain text, or text with a CSS class (e.g. "num", "yes").
Cell = str | tuple[str, str]


def write_report(tables: StudyTables, out_dir: str | Path,
                 sections: Sequence[Section] = ()) -> Path:
    """Write the figures to ``out_dir/figures/`` and ``out_dir/report.html``; return the
    path of report.html. ``sections`` are the experiments' parts of the report, each
    after the study's own, its figures among the study's."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = write_figures(tables, out_dir / "figures")
    captions = {name: kind.caption for name, kind in FIGURES.items()}
    for section in sections:
        drawn = {name: fig for name, (fig, _) in section.figures.items()}
        for name in write_outputs(out_dir / "figures", drawn):
            figures[Path(name).stem] = out_dir / "figures" / name
            captions[Path(name).stem] = section.figures[name][1]
    meta = tables.meta
    title = _esc(str(meta.get("title", "offload study")))
    body = [f"<h1>{title}</h1>",
            _headline(meta),
            _bottom_line(tables.bottom_line, tables.verdicts),
            _meta_table(meta, out_dir),
            _section("Verdicts", _verdicts(tables.verdicts),
                     "Does offloading help each class? The model's verdict at the operating "
                     "rate, the recommended offload fraction f, and whether the testbed agrees: "
                     "yes when the measured delay ratio's 95% interval lies wholly on the "
                     "verdict's side of the ±5% band (helps below, hurts above, neutral "
                     "inside), no when it lies on another, inconclusive when it crosses an "
                     "edge. A sweep that saturated below the rate decides by the saturation "
                     "ratios; capacity measured moving the other way from the model's is no."),
            _notes(meta.get("notes") or []),
            _section("Model accuracy", _accuracy(tables.accuracy),
                     f"MAPE over the stable validation points below {MAPE_CUT:.0%} "
                     "utilisation (n of them); the floor, the MAPE a model exactly on the "
                     "truth would score on them, and how it was measured; two-sample "
                     "Kolmogorov-Smirnov D and p between predicted and measured curves. A "
                     "row is met when the MAPE is within its target, p > 0.2 and it has at "
                     "least 4 points; undecidable when the floor is above the target or it "
                     "has fewer points; missed otherwise, and always when a prediction is "
                     "infinite at a scored point. The notes say why a curve was missed."),
            _section("Saturation", _saturation(tables.saturation),
                     "Closed-loop saturation with zero think time against the model's 1/E[S] "
                     "of the bottleneck; connections per minute, connection set-up time and "
                     "goodput from the same run."),
            _section("Fitted service costs", _costs(tables.costs),
                     "Means in µs of the model's service times fitted on the calibration runs "
                     "(CV: coefficient of variation), the fitted distributions, d0, the "
                     "fixed delay outside host and engine, and other work on each core per "
                     "request (the load generator's, on the engine's)."),
            _section("Structural cost model", _cost_model(tables.cost_model),
                     "E[X](size) = c0 + c_pkt · packets + c_byte · bytes per request and side, "
                     "fitted over the classes listed, and the side's wake-up cost and cooling "
                     "time, fitted on CPU per request against the model's wake-ups per "
                     "request over the calibration runs; R² says how much of the variation "
                     "each explains; counted per wake-up compares the server's own count. "
                     "Core held by other work is the share of the side's core that its "
                     "neighbours (the load generator) hold at any rate, fitted with their "
                     "CPU per request on the calibration runs' background."),
            *(_section(s.title, _experiment(s), s.caption) for s in sections),
            _list("More notes", meta.get("more_notes") or []),
            _figures(figures, captions, out_dir)]
    page = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{title}</title>\n"
            f"<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")
    path = out_dir / "report.html"
    write_atomic(path, lambda tmp: tmp.write_text(page, encoding="utf-8"))
    return path


# ---------------------------------------------------------------------------------------
# Sections


def _meta_table(meta: dict, out_dir: Path) -> str:
    files = []
    for name in meta.get("scenario_files") or []:
        # Only files that are there get a link: a broken link is worse than a name.
        if (out_dir / name).is_file():
            files.append(f'<a href="{_esc(quote(name))}">{_esc(name)}</a>')
        else:
            files.append(_esc(name))
    rows = [("Command", f"<code>{_esc(str(meta['command']))}</code>" if meta.get("command")
             else MISSING),
            ("Started", _esc(_when(meta.get("started")))),
            ("Duration", _esc(_duration(meta.get("duration_s")))),
            ("Budget", _esc(_text(meta.get("budget")))),
            ("Machine", _esc(_text(meta.get("machine")))),
            ("Hypervisor", _esc(_text(meta.get("steal")))),
            ("Load generator", _esc(_text(meta.get("generator")))),
            ("Workload", _esc(_text(meta.get("workload")))),
            ("Modes", _esc(", ".join(map(str, meta.get("modes") or [])) or MISSING)),
            ("Classes", _esc(", ".join(map(str, meta.get("classes") or [])) or MISSING)),
            ("Scenario files", ", ".join(files) or MISSING)]
    cells = "\n".join(f"<tr><th>{key}</th><td>{value}</td></tr>" for key, value in rows)
    return f'<table class="meta">\n{cells}\n</table>'


def _notes(notes: Iterable[str]) -> str:
    """The notes to act on, boxed so nobody reads past them."""
    listed = _list("Notes: read these first", notes)
    return f'<div class="notes">\n{listed}\n</div>' if listed else ""


def _list(heading: str, items: Iterable[str]) -> str:
    """A heading and the items as a list, escaped; nothing without items."""
    rows = "\n".join(f"<li>{_esc(str(n))}</li>" for n in items)
    return f"<h2>{heading}</h2>\n<ul>\n{rows}\n</ul>" if rows else ""


def _headline(meta: dict) -> str:
    """The first line: how many verdicts the testbed confirmed, contradicted or could not
    decide."""
    line = meta.get("agreement")
    return f'<p class="headline">{_esc(str(line))}</p>' if line else ""


def _bottom_line(answers: pd.DataFrame, v: pd.DataFrame) -> str:
    """Per offload mode, one line for each class and one for the mix: what to send to the
    engine, the host cores that saves or costs at the bottom line's rate, from which rate
    offload pays, the slowest engine that still pays, and (classes) the verdict and
    whether the testbed backs it."""
    verdicts = {(d["class"], d["mode"]): d for d in v.to_dict("records")}
    items = []
    for d in answers.to_dict("records"):
        load, mode = _text(d["load"]), _text(d["mode"])
        saved = _f(d["host_cores_saved"])
        cores = (f"{'saves' if saved >= 0 else 'costs'} {abs(saved):.3g} host cores"
                 if math.isfinite(saved) else "host cores not known")
        start = _f(d["pays_from"])
        pays = ("pays at every rate" if start == 0 else
                f"pays from {start:,.0f} req/s on" if math.isfinite(start) else
                "pays at no rate")
        speed = _f(d["break_even_speed"])
        span = speed_span(_f(d["break_even_low"]), _f(d["break_even_high"]),
                          _f(d["capacity_error"]))
        slowest = ((f"the slowest engine that still pays there runs at {speed:.3g} of a host "
                    "core" if math.isfinite(speed) else "no engine pays there, however fast")
                   + (f" ({span}: the model's capacities off by the error its saturation "
                      "runs measured)" if span else ""))
        verdict = verdicts.get((load, mode))
        head = (f'<span class="{_text(verdict["verdict"])}">{_esc(_text(verdict["verdict"]))}'
                f'</span>. ' if verdict else "")
        tail = f' Testbed: {_esc(_text(verdict["agree"]))}.' if verdict else ""
        name = "the mix" if load == "mix" else load
        items.append(f"<li><b>{_esc(name)}</b> through the {_esc(mode)}: {head}At "
                     f"{_sig(d['rate'])} req/s send {_f(d['fraction']):.0%} of it; "
                     f"offloading {'that' if load == 'mix' else 'all of it'} {cores}; it "
                     f"{pays}; {slowest}.{tail}</li>")
    if not items:
        return ""
    return "<h2>Bottom line</h2>\n<ul>\n" + "\n".join(items) + "\n</ul>"


def _verdicts(v: pd.DataFrame) -> str:
    rows = []
    for d in v.to_dict("records"):
        verdict = _text(d["verdict"])
        model = (f"E[X_p] {_us(d['EXp'])} µs, E[X_o] {_us(d['EXo'])} µs; "
                 f"T {_ms(d['T_noe'])} → {_ms(d['T'])} ms at {_sig(d['rate'])}/s; "
                 f"saturation ×{_sig(d['saturation_ratio'])}")
        pairs = _int(d["pairs"])
        measured = (f"saturation ×{_sig(d['measured_saturation_ratio'])}, "
                    f"delay ×{_sig(d['measured_delay_ratio'])} "
                    f"(95% ×{_sig(d['delay_low'])}–×{_sig(d['delay_high'])}, "
                    f"{pairs} pair{'' if pairs == '1' else 's'})")
        rows.append([_text(d["class"]), _text(d["mode"]),
                     (verdict, verdict if verdict in VERDICT_STYLES else ""),
                     _text(d["reason"]), (_pct(d["f"]), "num"), model, measured,
                     (_text(d["agree"]), _text(d["agree"]))])
    return _table(("class", "mode", "verdict", "reason (model)", "recommended f",
                   "model at the operating rate", "measured (mode / inline)", "agree"), rows)


def _accuracy(a: pd.DataFrame) -> str:
    rows = []
    for d in a.to_dict("records"):
        status = _text(d["status"])
        rows.append([_text(d["class"]), _text(d["mode"]), _text(d["metric"]),
                     _text(d["source"]), (_pct(d["mape"]), "num"), (_int(d["n"]), "num"),
                     (_pct(d["floor"]), "num"), _text(d["floor_source"]),
                     (_sig(d["ks_D"]), "num"), (_sig(d["ks_p"], 2), "num"),
                     (f"{_int(d['ks_n'])} / {_int(d['ks_m'])}", "num"),
                     (_pct(d["target"]), "num"), (status, status), _text(d["why"])])
    return _table(("class", "mode", "metric", "source", "MAPE", "n", "floor", "floor from",
                   "K-S D", "K-S p", "K-S points (pred. / meas.)", "target", "outcome",
                   "why"), rows)


def _saturation(s: pd.DataFrame) -> str:
    rows = []
    for d in s.to_dict("records"):
        rows.append([_text(d["class"]), _text(d["mode"]), (_sig(d["measured"]), "num"),
                     (_sig(d["model"]), "num"), _text(d["bottleneck"]),
                     (_pct(d["error"], signed=True), "num"),
                     (_pct(d["seed_error"], signed=True), "num"), (_pct(d["host_util"]), "num"),
                     (_sig(d["conn_per_min"]), "num"), (_ms(d["connect_s"]), "num"),
                     (_sig(_f(d["goodput_Bps"]) / 1e6), "num")])
    return _table(("class", "mode", "measured (req/s)", "model (req/s)", "bottleneck",
                   "model error", "seed model error", "host busy", "connections/min",
                   "connect (ms)", "goodput (MB/s)"), rows)


def _experiment(s: Section) -> str:
    """How the experiment ran, its table and its claims checked."""
    parts = [f"<p>{_esc(s.setup)}</p>"] if s.setup else []
    records = [] if s.table is None else s.table.to_dict("records")
    parts.append(_table([header for header, _ in s.columns.values()],
                        [[_shown(d[name], how) for name, (_, how) in s.columns.items()]
                         for d in records]))
    checks = [f'<li>{_esc(c.claim)}: <span class="{"yes" if c.holds else "no"}">'
              f'{"holds" if c.holds else "does not hold"}</span> ({_esc(c.detail)})</li>'
              for c in s.checks]
    if checks:
        parts.append("<ul>\n" + "\n".join(checks) + "\n</ul>")
    return "\n".join(parts)


def _costs(c: pd.DataFrame) -> str:
    rows = []
    for d in c.to_dict("records"):
        rows.append([_text(d["class"]), _text(d["mode"]),
                     *((_us(d[k]), "num") for k in ("EXa", "EXp")),
                     (_sig(_cv(d["EXp"], d["EXp_m2"])), "num"),
                     *((_us(d[k]), "num") for k in ("EXo", "EXc", "EXq")),
                     (_sig(_cv(d["EXq"], d["EXq_m2"])), "num"),
                     _text(d["lognormal"]), _text(d["pareto"]), (_us(d["d0"]), "num"),
                     (_us(d["host_bg"]), "num"), (_us(d["engine_bg"]), "num")])
    return _table(("class", "mode", "E[X_a] (µs)", "E[X_p] (µs)", "CV X_p", "E[X_o] (µs)",
                   "E[X_c] (µs)", "E[X_q] (µs)", "CV X_q", "lognormal fit", "Pareto fit",
                   "d0 (µs)", "other work, host core (µs)", "other work, engine core (µs)"),
                  rows)


def _cost_model(c: pd.DataFrame) -> str:
    rows = []
    for d in c.to_dict("records"):
        rows.append([_text(d["mode"]), _text(d["side"]), (_us(d["c0"]), "num"),
                     (_us(d["c_pkt"]), "num"), (_sig(_f(d["c_byte"]) * 1e9), "num"),
                     (_sig(d["r2"]), "num"), _text(d["classes"]), _text(d["note"]),
                     (_us(d["wakeup"]), "num"), (_us(d["cooling"]), "num"),
                     (_sig(d["counted_per_wakeup"]), "num"), (_sig(d["wakeup_r2"]), "num"),
                     (_pct(d["background_share"]), "num"),
                     (_sig(d["background_scv"]), "num")])
    return _table(("mode", "side", "c0 (µs)", "c_pkt (µs/packet)", "c_byte (ns/byte)", "R²",
                   "classes", "note", "wake-up (µs)", "cooling (µs)", "counted per wake-up",
                   "R² (wake-ups)", "core held by other work", "other work's SCV"), rows)


def _figures(figures: dict[str, Path], captions: dict[str, str], out_dir: Path) -> str:
    if not figures:
        return "<h2>Figures</h2>\n<p>No table had data to draw.</p>"
    parts = ["<h2>Figures</h2>"]
    for name, path in figures.items():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        href = quote(path.relative_to(out_dir).as_posix())
        caption = captions[name]
        parts.append(f'<figure>\n<a href="{_esc(href)}"><img src="data:image/png;base64,'
                     f'{data}" alt="{_esc(name)} figure"></a>\n'
                     f"<figcaption>{_esc(caption)} "
                     f'<a href="{_esc(href)}">PNG</a></figcaption>\n</figure>')
    return "\n".join(parts)


def _section(title: str, content: str, caption: str) -> str:
    return f'<h2>{_esc(title)}</h2>\n<p class="caption">{_esc(caption)}</p>\n{content}'


def _table(headers: Iterable[str], rows: list[list[Cell]]) -> str:
    if not rows:
        return "<p>No rows: this part of the study did not run.</p>"
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _cell(cell: Cell) -> str:
    text, css = cell if isinstance(cell, tuple) else (cell, "")
    attr = f' class="{_esc(css)}"' if css else ""
    return f"<td{attr}>{_esc(text)}</td>"


# ---------------------------------------------------------------------------------------
# Values for humans


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _f(value) -> float:
    """A table value as a float; missing (None, NaN, pd.NA) is NaN."""
    return math.nan if pd.isna(value) else float(value)


def _text(value) -> str:
    return MISSING if pd.isna(value) else str(value)


def _fmt(value, show: Callable[[float], str]) -> str:
    x = _f(value)
    if math.isnan(x):
        return MISSING
    return ("∞" if x > 0 else "−∞") if math.isinf(x) else show(x)


def _sig(value, digits: int = 3) -> str:
    """``0.0123``, ``4.5``, ``3,720`` (not ``3.72e+03``): ``digits`` significant digits."""
    return _fmt(value, lambda x: _digits(x, digits))


def _digits(x: float, digits: int) -> str:
    if x == 0:
        return "0"
    rounded = round(x, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{rounded:,.0f}" if abs(rounded) >= 10 ** (digits - 1) else f"{x:.{digits}g}"


def _ms(seconds) -> str:  # table cells: thousands separated, pd.NA as –
    return _sig(_f(seconds) * 1e3)


def _us(seconds) -> str:
    return _sig(_f(seconds) * 1e6)


def _pct(value, signed: bool = False) -> str:
    return _fmt(value, lambda x: f"{'+' if signed and x > 0 else ''}{_digits(x * 100, 3)}%")


def _mib(bytes_per_s) -> str:  # seed 000's "MB/s" is MiB/s
    return _sig(_f(bytes_per_s) / MiB)


def _int(value) -> str:
    return _fmt(value, lambda x: f"{x:.0f}")


def _change(ratio) -> str:
    return _pct(_f(ratio) - 1, signed=True)


# How a section's column reads (report.section.Section.columns); all but text are numbers.
SHOWN: dict[str, Callable[[object], str]] = {
    "text": _text, "number": _sig, "ms": _ms, "us": _us, "share": _pct, "change": _change,
    "count": _int, "MiBps": _mib}


def _shown(value, how: str) -> Cell:
    text = SHOWN[how](value)
    return text if how == "text" else (text, "num")


def _cv(mean, m2) -> float:
    """Coefficient of variation from the first two moments; NaN where they cannot be
    one distribution's (a second moment below the squared mean)."""
    mean, m2 = _f(mean), _f(m2)
    if not (math.isfinite(mean) and math.isfinite(m2) and mean > 0 and m2 >= mean**2):
        return math.nan
    return math.sqrt(m2 / mean**2 - 1)


def _when(started) -> str:
    """An ISO time as ``2025-03-14 09:26:53+00:00``; anything else as given."""
    if pd.isna(started):
        return MISSING
    try:
        t = datetime.fromisoformat(str(started))
    except ValueError:
        return str(started)
    return t.isoformat(sep=" ", timespec="seconds")


def _duration(seconds) -> str:
    """``1 h 23 min 45 s``, ``12.3 s``."""
    s = _f(seconds)
    if not math.isfinite(s):
        return MISSING
    if s < 60:
        return f"{s:.3g} s"
    h, rest = divmod(round(s), 3600)
    m, s = divmod(rest, 60)
    return " ".join(f"{v} {u}" for v, u in ((h, "h"), (m, "min"), (s, "s")) if v)
