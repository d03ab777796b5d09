"""The result schema shared by every source of evidence (model, sim, testbed), and
writing results safely.

A result is a list of flat rows, one per (rate point, class) plus one per rate
point for all classes together (``class = "all"``). Times are in seconds, rates in
requests/s, utilisations and fractions as plain numbers. A saturated queue gives
``inf`` (written ``"inf"`` in JSON, which has no infinity) and ``saturated: true``.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from offloadlab.errors import InputError

if TYPE_CHECKING:
    from offloadlab.scenario import Scenario

# Per class and overall, in this order, in every source.
METRICS = ("U_noe", "W_noe", "T_noe", "U_cpu", "W_cpu", "T_cpu",
           "U_oe", "W_oe", "T_oe", "T", "T_sum", "N_q", "N_oe")
VERDICTS = ("cpu_relieved", "beneficial")
# A queue is saturated from this utilisation on. At U = 1 exactly no queue is stable;
# the margin keeps rounding (U = 0.9999999999999999 for an exact 1) from passing for a
# finite delay of 1e17 s. The simulator uses the same threshold.
SATURATED_AT = 1 - 1e-12
# Resolution of every figure written (PNG).
DPI = 110
# The formats a figure may be written in, named by the file's suffix.
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


@dataclass(frozen=True)
class Check:
    """A claim of a paper checked against our numbers: whether it holds here, and the
    numbers that say so."""

    claim: str
    holds: bool
    detail: str


@dataclass(frozen=True)
class Result:
    """Outputs of one source (model, sim, ...) at R total arrival rates for C classes.

    ``overall[key]`` has shape (R,), ``per_class[key]`` shape (R, C). Keys are the
    metrics of :data:`METRICS`, ``lam`` (arrival rate), ``f`` (offloaded fraction), the
    verdicts, the ``saturated*`` flags, and whatever else the source measures (the
    model's ``EXo_max`` and ``lam_star_*``, the simulator's ``*_hw`` half-widths).
    ``meta`` holds run facts for the JSON header (e.g. the simulator's event count).
    """

    scenario: Scenario
    rates: np.ndarray
    fractions: np.ndarray
    overall: dict[str, np.ndarray]
    per_class: dict[str, np.ndarray]
    notes: tuple[str, ...] = ()
    source: str = "model"
    seed: int | None = None
    meta: dict = field(default_factory=dict)

    def rows(self) -> list[dict]:
        """Flat rows: for each rate, one for all classes (``class = "all"``), then one per class."""
        out = []
        names = self.scenario.class_names
        for r, rate in enumerate(self.rates):
            out.append({"rate": float(rate), "class": "all",
                        **{k: v[r].item() for k, v in self.overall.items()}})
            for c, name in enumerate(names):
                out.append({"rate": float(rate), "class": name,
                            **{k: v[r, c].item() for k, v in self.per_class.items()}})
        return out

    def to_json(self) -> dict:
        s = self.scenario
        return jsonable({
            "source": self.source, "scenario": s.name, "seed": self.seed,
            "options": asdict(s.options),
            "offload": {c.name: c.offload for c in s.classes},
            **self.meta,
            "notes": list(self.notes),
            "rows": self.rows(),
        })


def operating_points(scenario: Scenario, rates=None, fractions=None, *, positive: bool = False
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Checked total rates (R,) (default: the scenario's own), each class's share of them
    (C,), and the offload fractions (R, C) if given (None: the scenario decides).
    ``positive`` refuses a rate of 0 (the simulator has nothing to simulate there)."""
    rates = np.atleast_1d(np.asarray(scenario.rate if rates is None else rates, dtype=float))
    low_ok = rates > 0 if positive else rates >= 0
    if rates.ndim != 1 or not np.all(np.isfinite(rates)) or not np.all(low_ok):
        raise InputError(f"rates {rates.tolist()}: use finite rates {'>' if positive else '>='} "
                         "0 requests/s, e.g. --rates 10:300:10")
    share = np.array([c.rate for c in scenario.classes]) / scenario.rate
    if fractions is None:
        return rates, share, None
    f = np.broadcast_to(np.asarray(fractions, dtype=float), (len(rates), len(share))).copy()
    if not np.all((f >= 0) & (f <= 1)):
        raise InputError("offload fractions must lie in [0, 1]")
    return rates, share, f


def saturation_flags(U_noe, U_cpu, U_oe) -> dict[str, np.ndarray]:
    """Which queue is offered a load of 1 or more (it has no steady state)."""
    flags = {"saturated_noe": U_noe >= SATURATED_AT, "saturated_cpu": U_cpu >= SATURATED_AT,
             "saturated_oe": U_oe >= SATURATED_AT}
    flags["saturated"] = flags["saturated_noe"] | flags["saturated_cpu"] | flags["saturated_oe"]
    return flags


def jsonable(value):
    """Plain JSON types; infinities become the string "inf" (strict JSON has no infinity)
    and NaN (a quantity with no observation, e.g. a path no request took) becomes null."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write_atomic(path: str | Path, write: Callable[[Path], None]) -> None:
    """Let ``write`` fill a temporary file next to ``path``, then rename it into place,
    so a crash never leaves half a result behind."""
    path = Path(path)
    # Not mkstemp: its 0600 mode would make results unreadable to other users (a server
    # or load generator reading a manifest); 0666 minus the umask is what open() gives.
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}{path.suffix}"
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def figure_format(path: str | Path) -> str:
    """The format a figure's file name asks for; check it before drawing."""
    suffix = Path(path).suffix.lower()
    if suffix not in FIGURE_SUFFIXES:
        raise InputError(f"{path}: a figure is written as {', '.join(FIGURE_SUFFIXES)}; "
                         "name the file with one of these")
    return suffix[1:]


def write_figure(fig, path: str | Path) -> None:
    """Write a matplotlib figure atomically, in the format its suffix names."""
    fmt = figure_format(path)
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=DPI, format=fmt))


def write_json(path: str | Path, obj) -> None:
    text = json.dumps(jsonable(obj), indent=2, allow_nan=False) + "\n"
    write_atomic(path, lambda tmp: tmp.write_text(text))


def write_outputs(out_dir: str | Path, files: Mapping[str, object]) -> list[str]:
    """Write an experiment's folder (created if missing): each file atomically, in the
    form its suffix names. ``.csv`` and ``.parquet`` take a DataFrame, ``.png`` a
    matplotlib Figure, ``.toml`` text, ``.json`` anything JSON-able; None is skipped.
    The JSON files go last, so a summary exists only once what it describes does.
    Returns the names written, in the order written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = sorted((n for n, v in files.items() if v is not None),
                   key=lambda n: n.endswith(".json"))
    for name in names:
        value, path = files[name], out / name
        match path.suffix:
            case ".csv":
                write_atomic(path, lambda tmp, v=value: v.to_csv(tmp, index=False))
            case ".parquet":
                write_atomic(path, lambda tmp, v=value: v.to_parquet(tmp, index=False))
            case ".png":
                write_atomic(path, lambda tmp, v=value: v.savefig(tmp, dpi=DPI, format="png"))
            case ".toml":
                write_atomic(path, lambda tmp, v=value: tmp.write_text(v))
            case ".json":
                write_json(path, value)
            case _:
                raise ValueError(f"{name}: no writer for {path.suffix!r} files")
    return names
