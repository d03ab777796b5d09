"""``offload study --trace FILE``: the study's workload from an access log or a World
Cup 98 log (docs/study.md, "Study your traffic").

:func:`read` replays the trace (:func:`~offloadlab.workload.replay.replay`: its GET and
HEAD requests answered 200, its objects as a file set weighted by their requests) and
finds its size classes and their shares of the requests, before anything is written.
:meth:`Traced.loads` puts the file set and the stream under OUT/trace (kept when an
earlier study wrote the same set there) and gives the loads: runs of the trace's own
requests on their clients' connections, played at each rate of the sweep
(:class:`~offloadlab.workload.trace_window.TraceArrivals`): each class its own requests,
and the mix those of every class studied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from offloadlab.errors import InputError
from offloadlab.study import plan
from offloadlab.workload import fileset, replay, traces
from offloadlab.workload.classes import class_name
from offloadlab.workload.trace_window import TraceArrivals

FOLDER = "trace"
# A class with fewer of the trace's requests is not studied: its runs would cost as much
# load as a main class's, for a share of the mix the model's error in it cannot move.
RARE_SHARE = 0.01
# A client's requests at most this far apart share a keep-alive connection (reference
# 004's replayer; the logs do not say which requests shared one).
WINDOW_S = 15.0

Say = Callable[[str], None]

@dataclass(frozen=True, eq=False)
class Traced:
    """A trace replayed for a study: the replay, the lines its reader skipped, each
    size class's share of the kept requests, and the classes studied."""

    path: Path
    replayed: replay.Replay
    skipped: int
    shares: dict[int, float]
    classes: tuple[int, ...]

    @property
    def rare(self) -> dict[int, float]:
        """The classes left out for :data:`RARE_SHARE`, and their shares."""
        return {c: s for c, s in self.shares.items() if s < RARE_SHARE}

    def loads(self, out_dir: Path, seed: int, mixed: bool, say: Say
              ) -> tuple[tuple[plan.ClassLoad, ...], plan.ClassLoad, dict[str, float], str]:
        """Write the file set and ``stream.parquet`` under OUT/trace (the files kept when
        an earlier study wrote the same set there); the studied classes' loads, the mix
        (the trace's requests of those classes, in its order, on its clients'
        connections), each class's share of it, and the workload line (``mixed``: the
        study runs the mix)."""
        folder = out_dir / FOLDER
        if _same_set(folder, self.replayed.fileset):
            self.replayed.stream.write(folder / replay.STREAM_FILE)
        else:
            say(f"writing the trace's file set under {folder} …")
            self.replayed.write(folder, create_large=True)
        manifest = fileset.read_manifest(folder)
        arrivals = TraceArrivals.of(self.replayed.stream, seed)
        # Each class replays its own requests of the trace on their connections, so that
        # its calibration pays for connections as the mix does.
        loads = tuple(plan.ClassLoad(class_name(c), folder, manifest, c,
                                     arrivals.only(manifest.loc[manifest["class"] == c, "path"]))
                      for c in self.classes)
        mix, shares = plan.mix(loads)
        mix = replace(mix, trace=arrivals.only(mix.manifest["path"]))
        return loads, mix, shares, self.describe(loads, mix if mixed else None)

    def describe(self, loads: tuple[plan.ClassLoad, ...], mix: plan.ClassLoad | None) -> str:
        """How the study used the trace, for the report's workload line."""
        r = self.replayed.report
        text = (f"trace {self.path}: {r.read:,} requests read, {self.skipped:,} malformed "
                f"lines skipped, {r.kept:,} kept (GET or HEAD answered 200; "
                f"{r.not_replayed:,} others and {r.unknown_size:,} of objects of unknown size "
                f"left out), {r.objects:,} objects; size classes by share of the kept "
                "requests: " + ", ".join(f"{class_name(c)} {s:.1%}"
                                         for c, s in self.shares.items()))
        if self.rare:
            text += (f" ({', '.join(map(class_name, self.rare))} below {RARE_SHARE:.0%}: not "
                     "studied)")
        text += ("; every load below plays the trace's own requests (each class only its "
                 "own, the mix those of every class studied) on its clients' connections: "
                 "at each rate the arrivals are time-compressed by speed = rate / the "
                 "load's trace rate, shape kept (a logged second's requests spread at "
                 "random over it, in their order), each run a window from its own start, "
                 "wrapping round the trace where it is shorter than the run; a client's "
                 f"requests at most {WINDOW_S:g} s of trace apart share one HTTP/1.1 "
                 "keep-alive connection, one request at a time; the saturation runs are "
                 "closed-loop over the same objects, each client's connection carrying a "
                 "geometric number of requests with the load's mean per connection (")
        text += ", ".join(f"{load.name} {load.trace.requests_per_connection:.2f}"
                          for load in (*loads, *([mix] if mix is not None else [])))
        if mix is None:
            return text + ")"
        arrivals = mix.trace
        return text + (
            f"); the mix is the trace itself ({len(arrivals.stream):,} requests of the "
            f"studied classes over {arrivals.period_s:,.0f} s, {arrivals.rate:,.1f} "
            f"requests/s, {arrivals.stream.frame['conn_id'].nunique():,} connections)")


def read(path: Path, classes: tuple[int, ...] | None, seed: int,
         say: Say = lambda text: None) -> Traced:
    """Replay the trace at ``path`` and choose its classes: ``classes`` (--classes), or
    every class with at least :data:`RARE_SHARE` of its kept requests. Bad input raises
    :class:`~offloadlab.errors.InputError` naming --trace, before anything is written."""
    say(f"replaying {path} …")
    try:
        reader = traces.read_trace(path)
        replayed = replay.replay(reader, window_s=WINDOW_S, seed=seed, source=str(path))
    except InputError as exc:
        # The reader's and replay's own fixes name their keywords; keep what went wrong.
        raise InputError(f"--trace {path}: nothing to study ({str(exc).split('; ')[0]}); "
                         "give an access log (Common or Combined Log Format) or a World Cup "
                         "98 log, gzipped or not, with GET or HEAD requests answered 200"
                         ) from None
    except OSError as exc:
        raise InputError(f"--trace {path}: cannot read it ({exc.strerror or exc}); check "
                         "the path and its permissions") from None
    if reader.report.skipped:
        say(reader.report.summary())  # with the first malformed lines, file:line
    manifest = replayed.fileset.frame()
    by_class = manifest.groupby("class")["probability"].sum()
    shares = {int(c): float(s) for c, s in by_class.items()}
    common = tuple(c for c, s in shares.items() if s >= RARE_SHARE)
    chosen = classes or common
    if missing := [c for c in chosen if c not in common]:
        c = missing[0]
        raise InputError(f"--classes {c}: the trace {path} has class {c} in "
                         f"{shares.get(c, 0.0):.1%} of its kept requests, fewer than the "
                         f"{RARE_SHARE:.0%} a class needs to be studied; pick from "
                         f"{', '.join(map(str, common))}")
    return Traced(Path(path), replayed, reader.report.skipped, shares, chosen)


def _same_set(folder: Path, replayed: fileset.FileSet) -> bool:
    """``folder`` holds this set, complete: the same spec (name, seed and trace), paths
    and sizes (the content follows from the seed and the file ids)."""
    if not plan.same_set(folder, replayed.spec):
        return False
    columns = ["path", "size_bytes"]
    return fileset.read_manifest(folder)[columns].equals(replayed.frame()[columns])
