"""A replayed trace as an arrival process that plays at any rate: its requests keep
their order, their gaps' shape and their connections; only the clock changes.

:meth:`TraceArrivals.of` takes the open-loop stream :func:`~offloadlab.workload.replay.replay`
makes (times from 0, on the trace's connections). Access logs and WC98 logs stamp whole
seconds, so the k requests of one logged second are placed at k sorted uniform times
within it (seeded; their order kept): at a rate many times the trace's, a second's
requests would otherwise leave at one instant, a burst the real traffic did not have.
The trace then covers ``period_s`` seconds (its last logged second included), and
:meth:`TraceArrivals.window` plays ``duration_s`` seconds of it at a mean ``rate``:
time compressed by ``speed = rate / trace rate`` from a start the seed draws, wrapping
around to the trace's beginning when the window passes its end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from offloadlab.errors import InputError
from offloadlab.workload.stream_format import Stream

# The logs' time stamps: both formats count whole seconds (docs/workload.md).
RESOLUTION_S = 1.0


@dataclass(frozen=True, eq=False)
class TraceArrivals:
    """The trace's requests (``stream``, open loop, times in [0, ``period_s``))."""

    stream: Stream
    period_s: float

    @classmethod
    def of(cls, replayed: Stream, seed: int) -> TraceArrivals:
        """A replay's stream with each logged second's requests spread over it (module
        notes); a stream with times finer than whole seconds keeps them."""
        frame = replayed.frame.copy()
        t = frame["time_s"].to_numpy(float)
        second = np.floor(t / RESOLUTION_S) * RESOLUTION_S
        if np.array_equal(second, t):
            offsets = np.random.default_rng(seed).uniform(0, RESOLUTION_S, len(t))
            # Rows are in time order: sorting the offsets within each second keeps it.
            frame["time_s"] = second + offsets[np.lexsort((offsets, second))]
            period = float(second[-1]) + RESOLUTION_S
        else:
            period = float(t[-1]) + float(np.diff(t).mean() if len(t) > 1 else RESOLUTION_S)
        return cls(Stream(frame, replayed.meta), period)

    @property
    def rate(self) -> float:
        """The trace's mean rate, requests per second."""
        return len(self.stream) / self.period_s

    @property
    def requests_per_connection(self) -> float:
        """The trace's mean requests per connection."""
        return len(self.stream) / self.stream.frame["conn_id"].nunique()

    @property
    def keep_alive(self) -> str | bool:
        """Closed-loop clients' keep-alive that carries the trace's mean requests per
        connection: geometric with that mean, or HTTP/1.0 (False) where the trace
        never reuses a connection."""
        mean = self.requests_per_connection
        return f"geom(mean={mean:.6g})" if mean > 1 else False

    def only(self, paths) -> TraceArrivals:
        """The requests for the objects at ``paths`` (the rest left out, each connection
        ending at its last request left), at their trace times."""
        frame = self.stream.frame
        kept = frame[frame["object"].astype(str).isin(set(paths))]
        if not len(kept):
            raise InputError("no request of the trace is for the objects kept")
        return TraceArrivals(Stream(_closed_at_ends(kept), self.stream.meta), self.period_s)

    def window(self, rate: float, duration_s: float, seed: int) -> Stream:
        """``duration_s`` seconds of the trace played at a mean ``rate`` requests/s
        (module notes): from a start drawn by ``seed``, wrapping around the trace. A
        connection cut by the window's start or end begins or ends there; each pass
        over the trace has connections of its own."""
        if not (rate > 0 and duration_s > 0):
            raise InputError(f"a trace window needs rate > 0 and duration_s > 0 (got rate "
                             f"{rate!r}, duration_s {duration_s!r})")
        speed = rate / self.rate
        frame = self.stream.frame
        t = frame["time_s"].to_numpy(float)
        start = np.random.default_rng(seed).uniform(0, self.period_s)
        end = start + duration_s * speed
        passes = np.arange(int(np.ceil(end / self.period_s)))
        # Every request of every pass over the trace, in time order, then the window.
        times = (t[None, :] + passes[:, None] * self.period_s).ravel()
        inside = (times >= start) & (times < end)
        rows = np.tile(np.arange(len(t)), len(passes))[inside]
        conns = frame["conn_id"].to_numpy(np.int64)
        n_conns = int(conns.max()) + 1
        out = frame.iloc[rows].reset_index(drop=True)
        out["time_s"] = (times[inside] - start) / speed
        out["conn_id"] = pd.factorize(
            np.repeat(passes, len(t))[inside] * n_conns + conns[rows])[0].astype(np.int64)
        return Stream(_closed_at_ends(out), {
            **self.stream.meta, "generator": "trace_window", "duration_s": duration_s,
            "params": {**self.stream.meta.get("params", {}), "rate": rate, "speed": speed,
                       "start_s": start, "period_s": self.period_s}})


def _closed_at_ends(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with keep_alive false exactly on each connection's last row."""
    frame = frame.reset_index(drop=True)
    conn = frame["conn_id"].to_numpy()
    last = np.zeros(len(conn), dtype=bool)
    _, from_end = np.unique(conn[::-1], return_index=True)
    last[len(conn) - 1 - from_end] = True
    frame["keep_alive"] = ~last
    return frame
