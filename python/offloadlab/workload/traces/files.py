"""Trace files, for every format: the paths a reader is given, plain or gzipped input
(told by the magic bytes), errors naming a corrupt gzip stream, and atomic writing of
chunks (gzipped by the name, byte for byte reproducible)."""

from __future__ import annotations

import gzip
import itertools
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from offloadlab.errors import InputError
from offloadlab.results import write_atomic

GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def trace_paths(path) -> tuple[Path, ...]:
    """One path or a sequence of them (read in the order given, e.g. wc_day46_1..8.gz)."""
    items = [path] if isinstance(path, str | os.PathLike) else list(path)
    if not items:
        raise InputError("no trace file given; pass a path or a list of paths")
    out = tuple(Path(p) for p in items)
    for p in out:
        if not p.is_file():
            what = "is a directory, not a trace file" if p.is_dir() else "no such file"
            raise InputError(f"{p}: {what}; check the path (a day of the WC98 logs is several "
                             "files: pass them as a list, e.g. wc_day46_1.gz ... wc_day46_8.gz)")
    return out


def chunk_size(name: str, value: int) -> int:
    if not isinstance(value, int | np.integer) or value < 1:
        raise InputError(f"{name}={value!r}: use a whole number >= 1")
    return int(value)


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def open_binary(path: Path):
    """The file's bytes, decompressed if it is a gzip stream (whatever its name)."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


def gzip_error(path: Path, where: str, exc: Exception) -> str:
    return (f"{path}: the gzip stream is corrupt or truncated {where} ({exc}); download "
            "the file again (compare its size with the archive's)")


def chunks_and_epoch(table, epoch_s: float | None) -> tuple[float, Iterator[pd.DataFrame]]:
    """A table, or an iterable of them, as chunks, and the epoch to write them with:
    ``epoch_s``, else the first chunk's ``attrs`` (peeked, so nothing is read twice)."""
    chunks = iter([table]) if isinstance(table, pd.DataFrame) else iter(table)
    first = next(chunks, None)
    if first is not None:
        chunks = itertools.chain([first], chunks)
        if epoch_s is None:
            epoch_s = first.attrs.get("epoch_s")
    if epoch_s is None:
        if first is None or len(first) == 0:
            return 0.0, chunks
        raise InputError("the table has no attrs['epoch_s'] (the Unix time of its first "
                         "request); pass epoch_s=..., e.g. traces.DEFAULT_EPOCH_S")
    return float(epoch_s), chunks


@contextmanager
def _open_for_writing(tmp: Path, final: Path):
    """``tmp`` for writing; a gzip stream if ``final`` ends in .gz, with the final name
    and no time in its header, so the same table always gives the same bytes."""
    with open(tmp, "wb") as raw:
        if not final.name.endswith(".gz"):
            yield raw
            return
        with gzip.GzipFile(final.name.removesuffix(".gz"), "wb", 6, raw, mtime=0) as f:
            yield f


def write_chunks(path: Path, chunks: Iterable, encode: Callable[[object, int], bytes]) -> int:
    """Write ``encode(chunk, rows before it)`` of each chunk to ``path``, atomically,
    gzipped if the name ends in .gz; returns the number of rows (``len`` of the chunks)."""
    count = 0

    def fill(tmp: Path) -> None:
        nonlocal count
        with _open_for_writing(tmp, path) as f:
            for chunk in chunks:
                f.write(encode(chunk, count))
                count += len(chunk)

    write_atomic(path, fill)
    return count
