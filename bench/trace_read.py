"""Benchmark: streaming a World Cup 98 binary log, ours against a naive full load.

Writes two synthetic WC98 files into a fresh temporary directory: a big one of --size
bytes (default 1 GiB, about 53.7 million 20-byte records; it needs that much free disk
space in --dir, default the system temp directory) and a small one of --small bytes
(default 100 MiB). Then, on the same files in the same run:
  ours  wc98.read_wc98(path): chunk by chunk (--chunk records, 20 bytes each) into
        request tables (the schema of offloadlab.workload.traces), each one dropped
        before the next is read;
  peer  np.fromfile(path, WC98_RECORD) of the whole file, then the same request table
        in one piece (wc98.wc98_table): the obvious code;
  raw   np.fromfile alone, no decoding: the ceiling set by reading the bytes.
The files have just been written, so they come from the page cache: this measures
decoding, not the disk. Times: a warm-up, then the median of --repeat runs. Before
timing, ours and the peer are checked to give the same table on the small file.
Memory: peak RSS (VmHWM) of a fresh process reading the small file and the big one,
for ours and the peer; ours should stay flat (ratio big/small near 1), the peer's grows
with the file. The temporary directory is removed at the end, also on error or Ctrl-C.

    .venv/bin/python bench/trace_read.py [--size 1GiB] [--small 100MiB] [--repeat 5]
        [--chunk 1000000] [--dir /path/with/space]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from measure import high_water_kib, median_seconds  # bench/measure.py

from offloadlab.workload.traces import wc98
from offloadlab.workload.traces.synth import synth_wc98

UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9,
         "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: write a size such as 1GiB or 100MB")
    return int(float(m.group(1)) * UNITS[(m.group(2) or "").upper()])




def ours(path: Path, chunk: int) -> int:
    n = 0
    for df in wc98.read_wc98(path, chunk_records=chunk):
        n += len(df)
    return n


def peer(path: Path) -> int:
    return len(wc98.wc98_table(np.fromfile(path, dtype=wc98.WC98_RECORD)))


def raw(path: Path) -> int:
    return len(np.fromfile(path, dtype=wc98.WC98_RECORD))




def peak_rss_mib(mode: str, path: Path, chunk: int) -> tuple[float, float]:
    """Peak RSS of a fresh interpreter, MiB: after its imports, and after one read."""
    out = subprocess.run([sys.executable, __file__, "--rss-child", mode, str(path),
                          "--chunk", str(chunk)], check=True, capture_output=True,
                         text=True).stdout
    base, peak = (int(x) / 1024 for x in out.split())
    return base, peak


def write(path: Path, nbytes: int) -> tuple[int, float]:
    start = time.perf_counter()
    n = synth_wc98(path, nbytes // wc98.WC98_RECORD.itemsize, seed=1)
    return n, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=parse_size, default=2**30, help="big file (default 1GiB)")
    ap.add_argument("--small", type=parse_size, default=100 * 2**20,
                    help="small file (default 100MiB)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=1_000_000, help="records per chunk, ours")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the files")
    ap.add_argument("--rss-child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        mode, path = args.rss_child[0], Path(args.rss_child[1])
        base = high_water_kib()
        ours(path, args.chunk) if mode == "ours" else peer(path)
        print(base, high_water_kib())
        return

    where = args.dir or Path(tempfile.gettempdir())
    need = args.size + args.small
    free = shutil.disk_usage(where).free
    if free < 1.1 * need:
        sys.exit(f"{where}: {free / 2**30:.1f} GiB free, the benchmark writes "
                 f"{need / 2**30:.2f} GiB; pass --dir with more space or a smaller --size")
    tmp = Path(tempfile.mkdtemp(prefix="offloadlab-trace-bench-", dir=where))
    try:
        run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, tmp: Path) -> None:
    big, small = tmp / "big.wc98", tmp / "small.wc98"
    n, t_write = write(big, args.size)
    n_small, _ = write(small, args.small)
    mb = n * 20 / 1e6
    print(f"file: {n * 20 / 2**30:.2f} GiB, {n:,} synthetic WC98 records (written in "
          f"{t_write:.1f} s, {mb / t_write:.0f} MB/s); small file {n_small * 20 / 2**20:.0f} "
          f"MiB. Read from the page cache; ours in chunks of {args.chunk:,} records.")

    whole = wc98.wc98_table(np.fromfile(small, dtype=wc98.WC98_RECORD))
    streamed = wc98.read_wc98(small, chunk_records=args.chunk).table()
    pd.testing.assert_frame_equal(streamed, whole)
    del whole, streamed
    print(f"check: ours and the peer give the same table on the small file ({n_small:,} rows)")

    timed = {"ours (stream)": lambda: ours(big, args.chunk),
             "peer (fromfile + table)": lambda: peer(big),
             "raw np.fromfile, no table": lambda: raw(big)}
    print(f"{'reader':<27}{'median s':>10}{'records/s':>13}{'MB/s':>9}   "
          f"(warm-up, then median of {args.repeat})")
    wall = {}
    for name, fn in timed.items():
        wall[name] = t = median_seconds(fn, args.repeat)
        print(f"{name:<27}{t:>10.2f}{n / t:>13.3e}{mb / t:>9.0f}")

    rss = {(mode, f): peak_rss_mib(mode, f, args.chunk)
           for mode in ("ours", "peer") for f in (small, big)}
    base = rss["ours", small][0]
    print(f"peak RSS, fresh process ({base:.0f} MiB after imports):")
    for mode in ("ours", "peer"):
        s, b = rss[mode, small][1], rss[mode, big][1]
        print(f"  {mode:<5} {args.small / 2**20:.0f} MiB file: {s:7.0f} MiB   "
              f"{args.size / 2**30:.2f} GiB file: {b:7.0f} MiB   ratio big/small {b / s:5.2f}"
              f"{'  (flat = 1)' if mode == 'ours' else ''}")
    t_ratio = wall["peer (fromfile + table)"] / wall["ours (stream)"]
    m_ratio = rss["ours", big][1] / rss["peer", big][1]
    print(f"ratio ours/peer: throughput {t_ratio:.2f}x, peak RSS {m_ratio:.3f}x "
          f"({rss['ours', big][1]:.0f} vs {rss['peer', big][1]:.0f} MiB)")


if __name__ == "__main__":
    main()
