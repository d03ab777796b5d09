"""Reading the text files users write (scenarios, grids, specs, CSV samples): content
that cannot be read is an :class:`~offloadlab.errors.InputError` naming the file and
the fix. An OSError (a missing file) passes through, for the caller to say which file
it wanted.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from offloadlab.errors import InputError


def read_text(path: str | Path) -> str:
    """The file's text, which must be UTF-8."""
    data = Path(path).read_bytes()
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path}: line {line}: byte {data[exc.start]:#04x} is not UTF-8 "
                         "text; save the file as UTF-8 (or is it a binary file?)") from None


def parse_toml(text: str, source: str) -> dict:
    """TOML text as a table; ``source`` names it in the error."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays or tables
        raise InputError(f"{source}: arrays or tables are nested too deeply to read; "
                         "a few levels are all any file here needs") from None


def read_toml(path: str | Path) -> dict:
    """A UTF-8 TOML file as a table."""
    return parse_toml(read_text(path), str(path))


T = TypeVar("T")


def load_toml(path: str | Path, what: str, build: Callable[[dict, str, Path], T]) -> T:
    """Read the TOML file a user names and build ``what`` it holds from it:
    ``build(table, source, folder)``, where ``source`` names the file in errors and
    relative paths in it are read from ``folder``. A file that cannot be read is an
    InputError that names it and ``what`` it was to be."""
    path = Path(path)
    try:
        data = read_toml(path)
    except FileNotFoundError:
        raise InputError(f"{path}: cannot read {what}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror}") from None
    return build(data, str(path), path.parent)
