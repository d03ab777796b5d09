"""Does the classes' mix cost each thread what its classes cost apart?

The study calibrates each size class alone and predicts the mix as the classes in their
shares: a request of the mix costs each thread the share-weighted mean of what the
classes' requests cost. In every full-scope study of 6-7 Dec 2026 the model met the
classes' engine CPU rows but under-predicted the mix's: engine mode's U_engine by 8-11 %
and uring's by 6-9 %, and engine mode's delay by 15-25 %, at light load too. This
benchmark asks the testbed directly, without a model: at each ``--rates`` it runs every
class alone and the mix (the study's own plan, file sets and ``measure``, made again for
the hypervisor), in every mode, in ``--rounds`` interleaved rounds, and prints per mode
and rate the mix's CPU per request of the host and the engine thread, their wake-ups
per request and the mean delay, beside the share-weighted mean of the classes' own
(medians over the rounds), and the ratio. A ratio near 1 puts the model's miss on the
model; well above 1, on the testbed: mixing the classes costs more than their parts.

    .venv/bin/python bench/mix_parts.py [--classes 0,1,2,3] [--modes inline,engine,uring]
        [--rates 1000,3500] [--rounds 3] [--budget standard]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from testbed_noise import study_runs

from offloadlab.study.plan import MIX

# Per request: seconds of CPU, wake-ups, delay (the delay is not additive under queueing;
# at light load it is close).
FIELDS = {"host_us": 1e6, "engine_us": 1e6, "host_wakeups": 1, "engine_wakeups": 1,
          "T_us": 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", default="0,1,2,3")
    parser.add_argument("--modes", default="inline,engine,uring")
    parser.add_argument("--rates", default="1000,3500",
                        help="Poisson rates in requests/s, each below every class's capacity")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", default="standard")
    args = parser.parse_args()
    try:
        rates = [float(r) for r in args.rates.split(",")]
    except ValueError:
        parser.error(f"--rates {args.rates!r}: give requests/s separated by commas")
    if args.rounds < 1 or min(rates) <= 0:
        parser.error("--rounds must be at least 1 and every rate above 0")
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plan, run, _ = study_runs(Path(tmp), args.classes, args.modes, args.budget,
                                  mix=True)
        loads = [(load, mode) for load in plan.loads for mode in plan.modes]
        total = args.rounds * len(rates) * len(loads)
        for k in range(args.rounds):
            for rate in rates:
                for load, mode in loads:
                    # Each round draws arrivals of its own, as a study's replicates do.
                    m = run(plan, load, mode, "validation", rate, replicate=k)
                    r = m.run
                    rows.append({"round": k, "rate": rate, "load": load.name, "mode": mode,
                                 "host_us": r.host_s, "engine_us": r.engine_s,
                                 "host_wakeups": r.host_wakeups,
                                 "engine_wakeups": r.engine_wakeups, "T_us": r.T})
                    print(f"\r{len(rows)}/{total} runs ({time.monotonic() - started:.0f} s)",
                          end="", flush=True)
    print()
    frame = pd.DataFrame(rows)
    medians = frame.groupby(["mode", "rate", "load"])[list(FIELDS)].median()
    print(f"\nthe mix against its classes in their shares "
          f"({', '.join(f'{c} {s:.0%}' for c, s in plan.shares.items())}); medians of "
          f"{args.rounds} rounds")
    print(f"{'mode':6} {'rate':>6} {'per request':14} {'mix':>9} {'classes':>9} {'ratio':>6}"
          f" {'spread':>6}")
    for (mode, rate), g in medians.groupby(level=["mode", "rate"], sort=False):
        g = g.droplevel(["mode", "rate"])
        for field, scale in FIELDS.items():
            if g[field].isna().all():
                continue
            parts = sum(share * g.loc[c, field] for c, share in plan.shares.items())
            mix = g.loc[MIX, field]
            runs = frame[(frame["mode"] == mode) & (frame["rate"] == rate)
                         & (frame["load"] == MIX)][field]
            # The mix's own round-to-round spread, to read the ratio against.
            spread = np.std(runs, ddof=1) / np.mean(runs) if len(runs) > 1 else np.nan
            print(f"{mode:6} {rate:6,.0f} {field:14} {mix * scale:9.2f} {parts * scale:9.2f}"
                  f" {mix / parts:6.3f} {spread:6.1%}")
    print(f"Run time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
