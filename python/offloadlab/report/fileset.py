"""Rich tables of file sets (:mod:`offloadlab.workload.fileset`): one row per set, or one
set by size class."""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.markup import escape
from rich.table import Table

from offloadlab.units import format_bytes
from offloadlab.workload.classes import CLASSES
from offloadlab.workload.fileset import FileSet, generate, summary
from offloadlab.workload.specs import Spec, SpecWeb99Spec


def describe(items: Spec | FileSet | Iterable[Spec | FileSet]) -> Table:
    """One row per set: files, bytes, sizes, files per class, and whether
    :func:`~offloadlab.workload.fileset.materialise` creates it by default. Specs are
    generated in memory (cheap: no files are written)."""
    if isinstance(items, Spec | FileSet):
        items = [items]
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False,
                  title="[bold]file sets[/]: files per size class c0..c4",
                  caption="disk: no = only described unless create_large", show_edge=False)
    table.add_column("set", no_wrap=True)
    for name in ("files", "total", "mean", *(f"c{c}" for c in CLASSES), "α", "disk"):
        table.add_column(name, justify="right", no_wrap=True)
    for item in items:
        fs = item if isinstance(item, FileSet) else generate(item)
        s = summary(fs)
        # An explicit set (a trace's) has no Zipf exponent: its popularity is counted.
        alpha = (fs.spec.dir_alpha if isinstance(fs.spec, SpecWeb99Spec)
                 else getattr(fs.spec, "zipf_alpha", None))
        table.add_row(escape(fs.name), str(fs.n_files), format_bytes(s["total_bytes"]),
                      format_bytes(s["mean_bytes"]), *(str(k["files"]) for k in s["classes"]),
                      "–" if alpha is None else f"{alpha:g}",
                      "[yellow]no[/]" if fs.large else "yes")
    return table


def class_table(fileset: FileSet) -> Table:
    """Per size class: files, bytes, mean size, and the shares of requests and requested
    bytes that the set's popularity gives the class."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 2), pad_edge=False, show_edge=False,
                  title=f"[bold]{escape(fileset.name)}[/] by size class",
                  caption="shares of requests and of requested bytes under the set's popularity")
    for name in ("class", "range", "files", "bytes", "mean", "requests", "req. bytes"):
        table.add_column(name, justify="left" if name in ("class", "range") else "right",
                         no_wrap=True)
    for k in summary(fileset)["classes"]:
        table.add_row(f"c{k['class']}", k["label"], f"{k['files']:,}", format_bytes(k["bytes"]),
                      format_bytes(k["mean_bytes"]) if k["files"] else "–",
                      f"{k['request_share']:.1%}", f"{k['byte_share']:.1%}")
    return table
