"""Sweeps: a grid of scenario variants evaluated by the model and/or the simulator.

A grid file names a scenario and the axes to vary (total rate, any class field, any
option); every combination of axis values (the cartesian product) is a *point*. Points
are evaluated in chunks, in a local process pool by default or on a Dask distributed
cluster, and come back as one table with a row per (point, source, class), the same
whichever way they ran. See ``docs/sweep.md``.

    grid = load_grid("grid.toml")
    frame = run(grid, workers=2)                 # or cluster="tcp://host:8786"
    write(frame, "results.parquet")
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
from rich import box
from rich.markup import escape
from rich.table import Table

from offloadlab import __version__, dask_scheduler, model, scenario
from offloadlab.errors import InputError
from offloadlab.inputs import load_toml, read_toml
from offloadlab.results import write_atomic
from offloadlab.units import ms, parse_range, util

SOURCES = ("model", "sim")
# Keyword arguments of offloadlab.sim.run that the sweep sets itself; the others may be
# given in [sim].
SWEEP_SETS = ("rates", "fractions", "threads", "progress")
# Run facts that are not results: the simulator's wall-clock time differs from run to
# run, and would make two evaluations of the same grid differ.
NOT_RESULTS = ("wall_s",)
CLASS_FIELDS = ("rate", "offload", "hit_ratio", "engine_hit", *scenario.COST_FIELDS)
OPTION_FIELDS = tuple(f.name for f in fields(scenario.Options))
# Fields whose axis may be written START:STOP:STEP.
NUMERIC_FIELDS = ("rate", "offload", "hit_ratio", "util_cap")
MAX_POINTS = 1_000_000
CONNECT_TIMEOUT_S = 10.0

# Chunking. A model point costs about 1 ms (10 ms with offload = "auto"), a Dask task
# about 200 us of scheduling and a pool task about 100 us, so model-only chunks hold at
# least MIN_MODEL_CHUNK points; a sim point costs milliseconds to seconds and may go
# alone. A few chunks per worker even out uneven points; MAX_CHUNK bounds the memory of
# one result and keeps the progress bar moving.
CHUNKS_PER_WORKER = 4
MIN_MODEL_CHUNK = 16
MAX_CHUNK = 1000

Progress = Callable[[int, int], None]
"""Called as ``progress(points_done, points_total)`` each time a chunk completes."""


class SweepError(RuntimeError):
    """A sweep could not run for reasons outside its input (no scheduler, no workers)."""


@dataclass(frozen=True)
class Axis:
    """One grid axis: the key as written (``rate``, ``c3.offload``, ``*.app``,
    ``options.system_delay``) and its values in order."""

    key: str
    values: tuple

    @functools.cached_property
    def column(self) -> tuple:
        """The values as stored in the result column: numbers as floats, strings as
        written, and a mix of both (e.g. offload 0.5 and "auto") as strings."""
        if all(_is_number(v) for v in self.values):
            return tuple(float(v) for v in self.values)
        if all(isinstance(v, str) for v in self.values):
            return self.values
        return tuple(str(v) for v in self.values)


@dataclass(frozen=True)
class Grid:
    """A checked grid: the base scenario as its TOML table, the sources to compute,
    the simulator options and the axes. Points are numbered in the order of
    ``itertools.product(*axes)``: the last axis changes fastest."""

    source: str
    scenario: dict
    scenario_dir: Path | None
    sources: tuple[str, ...]
    sim: dict
    axes: tuple[Axis, ...]

    @property
    def size(self) -> int:
        """Number of points (1 for a grid without axes: the scenario as written)."""
        return math.prod(len(a.values) for a in self.axes)

    def indices(self, point: int) -> tuple[int, ...]:
        """The index into each axis of point number ``point``."""
        out = []
        for axis in reversed(self.axes):
            point, i = divmod(point, len(axis.values))
            out.append(i)
        return tuple(reversed(out))

    def scenario_at(self, point: int) -> scenario.Scenario:
        """The scenario of one point: the base table with the point's axis values set,
        checked again by :func:`offloadlab.scenario.from_dict`."""
        data = copy.deepcopy(self.scenario)
        label = []
        for axis, i in zip(self.axes, self.indices(point), strict=True):
            _set(data, axis.key, axis.values[i])
            label.append(f"{axis.key} = {axis.values[i]!r}")
        return scenario.from_dict(data, f"{self.source}: point {point} ({', '.join(label)})",
                                  self.scenario_dir)

    def rate(self, point: int) -> float | None:
        """The point's total arrival rate, or None (the scenario's own) without a rate axis."""
        for axis, i in zip(self.axes, self.indices(point), strict=True):
            if axis.key == "rate":
                return float(axis.values[i])
        return None


# --- reading a grid ---------------------------------------------------------------------

def load_grid(path: str | Path) -> Grid:
    """Read and check a grid file; a relative ``scenario`` path is resolved against the
    grid file's folder."""
    return load_toml(path, "grid", grid_from_dict)


def grid_from_dict(data: dict, source: str = "<grid>", base_dir: Path | None = None) -> Grid:
    """Check a parsed grid table and build the :class:`Grid`; all problems are reported
    at once, each naming the key at fault and the fix."""
    errors: list[str] = []
    for key in sorted(set(data) - {"scenario", "sources", "sim", "grid"}):
        errors.append(f"unknown key '{key}'; known keys: grid, scenario, sim, sources")
    base, base_dir_sc = _base_scenario(data.get("scenario"), base_dir, errors)
    sources = _sources(data.get("sources", ["model"]), errors)
    sim = _sim_options(data.get("sim", {}), "sim" in sources, errors)
    raw_axes = data.get("grid", {})
    axes: list[Axis] = []
    if not isinstance(raw_axes, dict):
        errors.append('grid: must be a table of axes, e.g. [grid] rate = "10:90:20"')
    else:
        for key, raw in _flatten(raw_axes).items():
            axis = _axis(key, raw, base, base_dir_sc, "sim" in sources, errors)
            if axis is not None:
                axes.append(axis)
        _overlaps(axes, base, errors)
    size = math.prod(len(a.values) for a in axes)
    if size > MAX_POINTS:
        errors.append(f"grid: {size:,} points; at most {MAX_POINTS:,}: use fewer values or "
                      "coarser steps, or split the grid into several files")
    if errors:
        raise InputError("\n".join(f"{source}: {e}" for e in errors))
    assert base is not None  # no errors means the scenario loaded
    return Grid(source, base, base_dir_sc, sources, sim, tuple(axes))


def _base_scenario(raw: object, base_dir: Path | None,
                   errors: list[str]) -> tuple[dict | None, Path | None]:
    """The scenario as a TOML table, from a path (relative to the grid) or an inline table."""
    if isinstance(raw, dict):
        table, where, folder = raw, "inline table", base_dir
    elif isinstance(raw, str) and raw.strip():
        path = Path(raw) if base_dir is None else base_dir / raw
        try:
            table = read_toml(path)
        except OSError as exc:
            errors.append(f"scenario: cannot read '{raw}' ({path}): {exc.strerror}; the path "
                          "is relative to the grid file")
            return None, None
        except InputError as exc:
            errors.append(f"scenario: {exc}")
            return None, None
        where, folder = str(path), path.parent
    else:
        errors.append('scenario: missing; add scenario = "my-scenario.toml" (a path relative '
                      "to the grid file) or a [scenario] table")
        return None, None
    try:
        scenario.from_dict(table, where, folder)
    except InputError as exc:
        errors.extend(f"scenario: {line}" for line in str(exc).splitlines())
        return None, None
    return table, folder


def _sources(raw: object, errors: list[str]) -> tuple[str, ...]:
    names = [raw] if isinstance(raw, str) else raw
    fix = f'write a list out of {", ".join(map(repr, SOURCES))}, e.g. sources = ["model", "sim"]'
    if not isinstance(names, list) or not names:
        errors.append(f"sources = {raw!r}: {fix}")
        return ("model",)
    before = len(errors)
    for name in names:
        if name not in SOURCES:
            errors.append(f"sources: unknown source {name!r}; {fix}")
    for name in sorted({n for n in names if isinstance(n, str) and names.count(n) > 1}):
        errors.append(f"sources: {name!r} is listed twice; list each source once")
    return tuple(names) if len(errors) == before else ("model",)


def _sim_options(raw: object, use_sim: bool, errors: list[str]) -> dict:
    """The [sim] table, checked by the simulator's own rules (read only when sources
    has "sim")."""
    if not isinstance(raw, dict):
        errors.append("sim: must be a table, e.g. [sim] requests = 100000")
        return {}
    if not use_sim:
        return dict(raw)
    try:
        from offloadlab import sim as simulator
    except ImportError as exc:
        errors.append(f'sources: "sim": the simulator cannot be loaded ({exc})')
        return {}
    params = inspect.signature(simulator.run).parameters
    known = [k for k, p in params.items() if p.kind is p.KEYWORD_ONLY and k not in SWEEP_SETS]
    for key in sorted(set(raw) - set(known)):
        errors.append(f"sim: unknown option '{key}'; known: {', '.join(known)}")
    options = {k: v for k, v in raw.items() if k in known}
    checked = inspect.signature(simulator.check_options).parameters
    try:  # the simulator's own rules, in one place
        simulator.check_options(**{k: v for k, v in options.items() if k in checked})
    except InputError as exc:
        errors.append(f"sim: {exc}")
    return options


def _flatten(table: dict, prefix: str = "") -> dict:
    """``c3.offload = [...]`` written without quotes is a nested table in TOML; flatten it
    back to the dotted key."""
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _axis(key: str, raw: object, base: dict | None, base_dir: Path | None, use_sim: bool,
          errors: list[str]) -> Axis | None:
    before = len(errors)
    field = _check_key(key, base, errors)
    if len(errors) > before:
        return None
    if isinstance(raw, str) and ":" in raw and field in NUMERIC_FIELDS:
        try:
            values = tuple(parse_range(raw))
        except InputError as exc:
            errors.append(f"grid: {key}: {exc}")
            return None
    elif isinstance(raw, list):
        values = tuple(float(v) if _is_number(v) else v for v in raw)
    else:
        values = (float(raw) if _is_number(raw) else raw,)
    if not values:
        errors.append(f"grid: {key} = []: an axis needs at least one value")
        return None
    if len(values) > MAX_POINTS:
        errors.append(f"grid: {key} has {len(values):,} values; at most {MAX_POINTS:,}")
        return None
    for value in values:
        _check_value(key, value, base, base_dir, use_sim, errors)
    return Axis(key, values) if len(errors) == before else None


def _check_key(key: str, base: dict | None, errors: list[str]) -> str:
    """The field an axis key sets, or an error naming the keys that exist."""
    if key == "rate":
        return "rate"
    scope, dot, field = key.rpartition(".")
    if not dot:
        errors.append(f"grid: unknown axis '{key}'; write rate (total requests/s), "
                      "options.FIELD or CLASS.FIELD")
    elif scope == "options":
        if field not in OPTION_FIELDS:
            errors.append(f"grid: {key}: unknown option '{field}'; known: "
                          f"{', '.join(OPTION_FIELDS)}")
    elif field not in CLASS_FIELDS:
        errors.append(f"grid: {key}: unknown class field '{field}'; known: "
                      f"{', '.join(CLASS_FIELDS)}")
    elif base is not None and scope != "*" and scope not in _class_names(base):
        errors.append(f"grid: {key}: no class \"{scope}\" in the scenario; classes: "
                      f"{', '.join(_class_names(base))} (or * for every class)")
    return field


def _check_value(key: str, value: object, base: dict | None, base_dir: Path | None,
                 use_sim: bool, errors: list[str]) -> None:
    """Check one axis value alone against the base scenario, so a bad value is reported
    once, by the scenario module, and never halfway through a sweep."""
    if key == "rate":
        # The model solves an idle system; the simulator needs arrivals.
        if not (_is_number(value) and math.isfinite(value)
                and (value > 0 or (value == 0 and not use_sim))):
            errors.append(f"grid: rate = {value!r}: total rates must be finite numbers "
                          f"{'> 0' if use_sim else '>= 0'} requests/s")
        return
    if base is None:
        return
    data = copy.deepcopy(base)
    _set(data, key, value)
    try:
        scenario.from_dict(data, f"grid: {key} = {value!r}", base_dir)
    except InputError as exc:
        errors.extend(str(exc).splitlines())


def _overlaps(axes: list[Axis], base: dict | None, errors: list[str]) -> None:
    """Two axes that set the same field (``c3.offload`` and ``*.offload``) would let the
    last one silently win."""
    names = _class_names(base) if base is not None else []
    owner: dict[str, str] = {}
    for axis in axes:
        scope, _, field = axis.key.rpartition(".")
        scopes = names if scope == "*" else [scope]
        for target in (f"{s}.{field}" for s in scopes):
            if target in owner:
                errors.append(f"grid: axes '{owner[target]}' and '{axis.key}' both set "
                              f"{target}; keep one")
            owner.setdefault(target, axis.key)


def _set(data: dict, key: str, value: object) -> None:
    """Set an axis value in a scenario table (``rate`` is not a table field: it is passed
    to the evaluation as the total rate)."""
    if key == "rate":
        return
    scope, _, field = key.rpartition(".")
    if scope == "options":
        data.setdefault("options", {})[field] = value
        return
    for cls in data["class"]:
        if scope in ("*", cls.get("name")):
            cls[field] = value


def _class_names(table: dict) -> list[str]:
    return [c["name"] for c in table.get("class", [])]


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


# --- evaluating -------------------------------------------------------------------------

def run(grid: Grid | str | Path, *, workers: int | None = None, cluster: str | None = None,
        progress: Progress | None = None,
        connect_timeout: float | None = None) -> pd.DataFrame:
    """Evaluate every point of ``grid`` and return one row per (point, source, class).

    ``workers``: local processes (default: one per CPU; 1 runs in this process).
    ``cluster``: a Dask scheduler address, ``tcp://HOST:PORT``, to run on instead.
    ``connect_timeout``: seconds to wait for the scheduler and for a first worker
    (default ``CONNECT_TIMEOUT_S``). Every point uses the same simulator seed (common
    random numbers), and the result does not depend on how points were spread over workers.
    """
    if not isinstance(grid, Grid):
        grid = load_grid(grid)
    if workers is not None and cluster is not None:
        raise InputError("--workers and --cluster exclude each other: a cluster's size is "
                         "set by the workers started on it")
    if workers is not None and workers < 1:
        raise InputError(f"--workers {workers}: use 1 or more processes")
    if cluster is not None:
        timeout = CONNECT_TIMEOUT_S if connect_timeout is None else connect_timeout
        parts = _run_dask(grid, cluster, progress, timeout)
    else:
        parts = _run_local(grid, workers or os.cpu_count() or 1, progress)
    return _assemble(grid, parts)


def write(frame: pd.DataFrame, path: str | Path) -> None:
    """Write a sweep's rows to Parquet atomically (temporary file, then rename)."""
    write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


def evaluate_chunk(grid: Grid, points: range) -> pd.DataFrame:
    """The rows of some points; the unit of work sent to a pool process or Dask worker."""
    return pd.DataFrame([row for point in points for row in _point_rows(grid, point)])


def _point_rows(grid: Grid, point: int) -> list[dict]:
    sc = grid.scenario_at(point)
    rates = None if (rate := grid.rate(point)) is None else [rate]
    axes = {a.key: a.column[i] for a, i in zip(grid.axes, grid.indices(point), strict=True)}
    rows = []
    for source in grid.sources:
        for row in _evaluate(source, sc, rates, grid.sim).rows():
            metrics = {k: v for k, v in row.items()
                       if k != "class" and k not in axes and k not in NOT_RESULTS}
            rows.append({**axes, "source": source, "class": row["class"], "point": point,
                         **metrics})
    return rows


def _evaluate(source: str, sc: scenario.Scenario, rates: list[float] | None, sim: dict):
    if source == "model":
        return model.evaluate(sc, rates=rates)
    # Imported here so that model-only sweeps do not load the simulator. One thread per
    # point: the parallelism is across points, and results must not depend on it.
    from offloadlab import sim as simulator
    return simulator.run(sc, rates=rates, threads=1, **sim)


def _chunks(size: int, workers: int, sources: Iterable[str]) -> list[range]:
    """Strided chunks: chunk k of n holds points k, k + n, k + 2n, ... Neighbouring
    points cost alike (a simulation at U = 1 takes 20 times longer than one at U = 0.5),
    so striding spreads the expensive ones over all workers."""
    low = 1 if "sim" in sources else MIN_MODEL_CHUNK
    points = min(max(math.ceil(size / (CHUNKS_PER_WORKER * workers)), low), MAX_CHUNK)
    count = math.ceil(size / points)
    return [range(k, size, count) for k in range(count)]


def _run_local(grid: Grid, workers: int, progress: Progress | None) -> list[pd.DataFrame]:
    chunks = _chunks(grid.size, workers, grid.sources)
    if workers == 1 or len(chunks) == 1:
        parts, done = [], 0
        for chunk in chunks:
            parts.append(evaluate_chunk(grid, chunk))
            done += len(chunk)
            _report(progress, done, grid.size)
        return parts
    # "spawn": the caller may have threads (a progress bar, a Dask client), and forking a
    # process with threads can deadlock it.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=context)
    try:
        futures = [pool.submit(evaluate_chunk, grid, chunk) for chunk in chunks]
        return _gather(futures, as_completed(futures), chunks, grid.size, progress)
    except BrokenProcessPool:
        raise SweepError("a worker process died: out of memory, killed, or started from a "
                         "script that calls sweep.run without `if __name__ == \"__main__\":` "
                         "(worker processes import the main script again)") from None
    finally:
        pool.shutdown(cancel_futures=True)


def _run_dask(grid: Grid, address: str, progress: Progress | None,
              timeout: float) -> list[pd.DataFrame]:
    client = dask_scheduler.connect(
        address, timeout, f"workers with `dask worker {address}`, or leave out --cluster "
        "to use local processes", unreachable=SweepError)
    import distributed

    with client:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise SweepError(f"--cluster {address}: the scheduler has no workers; start "
                             f"some with `dask worker {address}`") from None
        threads = sum(client.nthreads().values())
        chunks = _chunks(grid.size, threads, grid.sources)
        # pure=False: each chunk is its own task; hashing the grid for every key
        # would cost more than the deduplication could save.
        futures = [client.submit(evaluate_chunk, grid, chunk, pure=False) for chunk in chunks]
        completed = distributed.as_completed(futures, loop=client.loop)
        return _gather(futures, completed, chunks, grid.size, progress)


def _gather(futures: list, completed: Iterable, chunks: list[range], total: int,
            progress: Progress | None) -> list[pd.DataFrame]:
    """Results in chunk order, whatever order they finish in; the first failure raises
    (and the caller's pool or client then cancels the rest)."""
    index = {id(f): i for i, f in enumerate(futures)}
    parts: list[pd.DataFrame | None] = [None] * len(futures)
    done = 0
    for future in completed:
        i = index[id(future)]
        parts[i] = future.result()  # re-raises a worker's exception here
        done += len(chunks[i])
        _report(progress, done, total)
    return parts  # type: ignore[return-value]  # every slot is filled


def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)


def _assemble(grid: Grid, parts: list[pd.DataFrame]) -> pd.DataFrame:
    """One frame with a fixed column order and dtypes that depend only on the values,
    not on how the points were chunked."""
    # Back in point order; a stable sort keeps each point's rows (source, class) in order.
    frame = pd.concat(parts, ignore_index=True)
    frame = frame.sort_values("point", kind="stable", ignore_index=True)
    head = [a.key for a in grid.axes] + ["source", "class", "point"]
    frame = frame[head + [c for c in frame.columns if c not in head]]
    for name in frame.columns:
        column = frame[name]
        present = column.dropna()
        if column.dtype == object and len(present) and all(
                isinstance(v, bool | np.bool_) for v in present):
            # A verdict missing from some rows (e.g. only one source has it).
            frame[name] = column.astype("boolean" if column.isna().any() else bool)
    frame.attrs = {
        "offloadlab": __version__, "grid": grid.source,
        "scenario": grid.scenario.get("name", ""), "sources": list(grid.sources),
        "sim": grid.sim if "sim" in grid.sources else {},
        "axes": [a.key for a in grid.axes], "points": grid.size,
    }
    return frame


# --- terminal summary -------------------------------------------------------------------

def summary_table(frame: pd.DataFrame, limit: int = 40) -> Table:
    """The all-classes rows of a sweep, at most ``limit`` of them: axes, source, mean delay
    (ms) of the host alone and with the engine, host and engine utilisation."""
    axes = list(frame.attrs.get("axes", []))
    rows = frame[frame["class"] == "all"]
    table = Table(box=box.SIMPLE_HEAD, title=f"[bold]{escape(frame.attrs.get('scenario', ''))}[/]: "
                  f"{frame.attrs.get('points', '?')} points, all classes, delays in ms")
    table.add_column("point", justify="right", no_wrap=True)
    for name in axes:  # long values (cost specs) wrap rather than being cut
        table.add_column(name, justify="right", overflow="fold")
    table.add_column("source", no_wrap=True)
    for name in ("T alone", "T", "U host", "U eng"):
        table.add_column(name, justify="right", no_wrap=True)
    for _, row in rows.head(limit).iterrows():
        table.add_row(str(row["point"]), *(_cell(row[a]) for a in axes), row["source"],
                      ms(row["T_noe"]), ms(row["T"]), util(row["U_cpu"]), util(row["U_oe"]))
    if len(rows) > limit:
        table.caption = f"... and {len(rows) - limit:,} more"
    return table


def _cell(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else escape(str(value))
