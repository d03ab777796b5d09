"""The request table every trace reader yields, and the reader that yields it in
chunks with a report of what it skipped (the schema is in the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from offloadlab.errors import InputError

COLUMNS = ("time_s", "client", "object", "size_bytes", "status", "method", "conn_id")
# pandas' own string dtype: pyarrow-backed "str" from pandas 3 on, object before.
_STR = pd.Series([""], dtype=str).dtype
DTYPES = {"time_s": np.dtype(np.float64), "client": np.dtype(np.int64), "object": _STR,
          "size_bytes": np.dtype(np.int64), "status": np.dtype(np.int16), "method": _STR,
          "conn_id": np.dtype(np.int64)}
MAX_EXAMPLES = 10  # errors kept in a ReadReport


def empty_table(extra: Sequence[str] = ()) -> pd.DataFrame:
    """The request table with no rows (and the WC98 ``extra`` columns if asked)."""
    cols = {c: pd.Series([], dtype=DTYPES[c]) for c in COLUMNS}
    for c in extra:
        cols[c] = pd.Series([], dtype=np.int16 if c == "server" else _STR)
    df = pd.DataFrame(cols)
    df.attrs["epoch_s"] = None
    return df


# ------------------------------------------------------------------ building a table


def _strings(values) -> pd.Series | np.ndarray:
    """A pyarrow string array, or a list of str, as pandas' default string column."""
    if isinstance(values, pa.Array | pa.ChunkedArray):
        if isinstance(_STR, pd.StringDtype):
            return pd.Series(values, dtype=_STR)
        return pd.Series(values.to_numpy(zero_copy_only=False), dtype=object)
    return pd.Series(values, dtype=_STR)


def _from_codes(codes: np.ndarray, names: Sequence[str]) -> pd.Series:
    """Strings ``names[codes]``, built by pyarrow (a dictionary cast, no Python loop)."""
    dictionary = pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)),
                                                pa.array(list(names), pa.string()))
    return _strings(pc.cast(dictionary, pa.string()))


def _frame(cols: dict) -> pd.DataFrame:
    return pd.DataFrame(cols, copy=False)


def _joined(frames: list[pd.DataFrame], epoch_s: float | None) -> pd.DataFrame:
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    df.attrs["epoch_s"] = epoch_s
    return df


# ------------------------------------------------------------------ checking a table to write


def _missing(df: pd.DataFrame, where: str) -> None:
    if lacking := [c for c in COLUMNS if c not in df.columns]:
        raise InputError(f"{where}: the table lacks column(s) {', '.join(lacking)}; a request "
                         f"table has {', '.join(COLUMNS)}")


def _refuse(where: str, row_base: int, bad: np.ndarray, column: str, values, fix: str):
    """Raise InputError naming the first ``bad`` row, if there is one."""
    if not bad.any():
        return
    i = int(np.flatnonzero(bad)[0])
    value = values[i].item() if isinstance(values[i], np.generic) else values[i]
    raise InputError(f"{where}: row {row_base + i}: {column} {value!r} {fix}")


# ------------------------------------------------------------------ the reader and its report


@dataclass
class ReadReport:
    """What a read did: rows yielded, records or lines skipped, the first errors.

    ``errors`` holds up to ``max_examples`` messages, each starting with where the
    problem is (``file:line`` for CLF, ``file: byte offset N`` for WC98). ``done`` turns
    true when the last file has been read to its end.
    """

    format: str
    paths: tuple[str, ...]
    records: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    epoch_s: float | None = None
    done: bool = False
    max_examples: int = MAX_EXAMPLES

    def skip(self, count: int, examples: Iterable[str] = ()) -> None:
        self.skipped += count
        self.note(examples)

    def note(self, messages: Iterable[str]) -> None:
        for m in messages:
            if len(self.errors) >= self.max_examples:
                break
            self.errors.append(m)

    @property
    def room(self) -> int:
        """How many more example messages the report keeps."""
        return self.max_examples - len(self.errors)

    def summary(self) -> str:
        text = f"{self.format}: {self.records:,} requests read, {self.skipped:,} skipped"
        if self.errors:
            text += "; first problems:\n  " + "\n  ".join(self.errors)
        return text


class TraceReader:
    """An iterable of request tables (see the module docstring), one per chunk.

    Iterating reads the file(s) from the start, in constant memory, and yields at least
    one (possibly empty) DataFrame; ``report`` describes the latest iteration.
    ``table()`` reads everything into one DataFrame (for files that fit in memory).
    ``chunks(report)`` yields the tables of one read; its ``extra`` names the columns
    beyond :data:`COLUMNS` it adds. ``assumed`` says why the format was chosen when it
    was guessed from the file (see ``traces.read_trace``): then a read that fails, or
    finds no request but skips lines, is an InputError that names the format and why.
    """

    def __init__(self, fmt: str, paths: tuple[Path, ...],
                 chunks: Callable[[ReadReport], Iterator[pd.DataFrame]], max_examples: int):
        self.format = fmt
        self.paths = paths
        self._chunks = chunks
        self._max_examples = max_examples
        self.assumed = ""
        self.report = self._new_report()

    def _new_report(self) -> ReadReport:
        return ReadReport(self.format, tuple(map(str, self.paths)),
                          max_examples=self._max_examples)

    def __iter__(self) -> Iterator[pd.DataFrame]:
        self.report = report = self._new_report()
        return self._run(report)

    def _run(self, report: ReadReport) -> Iterator[pd.DataFrame]:
        yielded = False
        guess = f" (read as {self.format} because {self.assumed})" if self.assumed else ""
        try:
            for df in self._chunks(report):
                report.records += len(df)
                df.attrs["epoch_s"] = report.epoch_s
                yielded = True
                yield df
        except InputError as exc:
            raise InputError(f"{exc}{guess}") from None
        if guess and not report.records and report.skipped:
            raise InputError(f"{report.errors[0]}: no request could be read, "
                             f"{report.skipped:,} skipped{guess}")
        report.done = True
        if not yielded:
            yield empty_table(extra=self._chunks.extra)

    def table(self) -> pd.DataFrame:
        """All requests in one DataFrame, with ``attrs["epoch_s"]``."""
        return _joined(list(self), self.report.epoch_s)
