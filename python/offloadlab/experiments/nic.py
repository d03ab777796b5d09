"""What checksum and segmentation offload save the host, measured (seed 003 §6, Table 5).

Runs as ``offload datacentre nic`` (:mod:`offloadlab.cli.datacentre`).

The testbed server runs in a private network namespace, reached over a veth pair
(:mod:`offloadlab.testbed.netns`); the load generator stays outside. Three settings of
the server's side:

- ``offloaded``: checksum, TSO and GSO on (a modern NIC);
- ``no segmentation``: checksum on, TSO and GSO off (one packet per MSS);
- ``no offload``: everything off (checksum fused with the copy, as in seed 003).

The server copies every body (no sendfile), as seed 003's Apache did, so the per-byte
cost is the copy, and without checksum offload the checksum with it. For each setting
the host's CPU per request is measured at each message size; :func:`fit` finds the
per-request, per-byte (copy and checksum), per-packet and per-segment costs from all
three together.
It needs root (namespaces, ethtool) and the ``ip`` and ``ethtool`` commands;
:meth:`Experiment.check` says which is missing and how to get it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize

from offloadlab.documents import ServerStats
from offloadlab.errors import RunError, require
from offloadlab.model.protocol_costs import TABLE5, TSO_BYTES, ByteCosts
from offloadlab.results import Check
from offloadlab.testbed import load, netns
from offloadlab.workload import fileset, stream
from offloadlab.workload.specs import ExplicitSpec

# ethtool features of the server's side, per setting.
SETTINGS = {
    "offloaded": "tx on tso on gso on",
    "no segmentation": "tx on tso off gso off",
    "no offload": "tx off tso off gso off",
}
# The veth pair's addresses (a /30 of private space) and the server's port.
# The server's port in its namespace.
PORT = 8080
_START_S = 20.0


@dataclass(frozen=True, kw_only=True)
class Experiment:
    """``root``: the file set served (written there on the first run)."""

    root: Path
    sizes: tuple[int, ...] = (1024, 4096, 16384, 65536, 262144)
    run_s: float = 2.0
    repeats: int = 3
    clients: int = 8
    files_per_size: int = 4

    def check(self) -> None:
        require(len(self.sizes) >= 3 and all(s >= 1 for s in self.sizes),
                "sizes: give three or more message sizes (bytes), to fit per-packet and "
                "per-byte costs apart")
        require(self.run_s > 0 and self.repeats >= 1 and self.clients >= 1,
                "run length > 0, repeats and clients >= 1")
        netns.check()

    def describe(self) -> dict:
        return {"root": str(self.root), "sizes": list(self.sizes), "run_s": self.run_s,
                "repeats": self.repeats, "clients": self.clients,
                "files_per_size": self.files_per_size}


@dataclass(frozen=True)
class Result:
    """The experiment's result (:mod:`offloadlab.experiments.protocol`)."""

    experiment: Experiment
    runs: pd.DataFrame  # one row per run: setting, size, repeat, host CPU, throughput

    def costs(self) -> Costs:
        return fit(self.runs)

    def savings(self) -> pd.DataFrame:
        return savings(self.runs)

    def tables(self) -> dict[str, pd.DataFrame | dict]:
        fitted = self.costs()
        return {"runs.csv": self.runs, "savings.csv": self.savings(),
                # What a data-centre file's network.measured_costs reads.
                "costs.json": {
                    "fit": vars(fitted), "packet_s": fitted.packet,
                    "byte_costs": vars(byte_costs(fitted, TABLE5["datacenter"])),
                    "note": "sender costs measured; receiver costs from Table 5's "
                            "data-centre row"}}

    def summary(self) -> dict:
        return {"fit": vars(self.costs()), "savings": self.savings().to_dict("records")}

    def checks(self) -> list[Check]:
        return []  # none: the savings are measured for the model, not held to a claim

    def figures(self) -> dict:
        from offloadlab.report import datacentre as figure

        return {"nic.png": figure.nic(self.savings())}


def run(exp: Experiment, progress: Callable[[str, int, int], None] | None = None
        ) -> Result:
    """Every setting at every size, ``repeats`` times."""
    exp.check()
    manifest = _fileset(exp)
    rows = []
    total = len(SETTINGS) * len(exp.sizes) * exp.repeats
    with netns.veth() as ns:
        for rep in range(exp.repeats):
            for setting, features in SETTINGS.items():
                ns.set_offloads(features)
                for size in exp.sizes:
                    if progress is not None:
                        progress(f"{setting}, {size:,} B", len(rows), total)
                    objects = manifest[manifest["size_bytes"] == size].reset_index(drop=True)
                    host_s, rate = _one(exp, ns.name, objects)
                    rows.append({"setting": setting, "size": size, "repeat": rep,
                                 "host_us": host_s * 1e6, "throughput": rate})
    if progress is not None:
        progress("", total, total)
    return Result(exp, pd.DataFrame(rows))


@dataclass(frozen=True)
class Costs:
    """The host's cost of sending an answer, fitted jointly over the three settings:
    c0 per request, ``copy`` per byte always, ``checksum`` per byte without checksum
    offload, ``packet`` per MSS segment without segmentation offload, ``segment`` per
    64 KiB segment with it. Seconds; ``r2`` of the fit."""

    c0: float
    copy: float
    checksum: float
    packet: float
    segment: float
    r2: float

    def predict(self, setting: str, size) -> np.ndarray:
        return _columns(setting, np.asarray(size, float)) @ np.array(
            [self.c0, self.copy, self.checksum, self.packet, self.segment])


def fit(runs: pd.DataFrame) -> Costs:
    """Non-negative least squares of the median host CPU per setting and size. One
    setting alone cannot tell per-packet from per-byte costs (at a fixed MSS, packets
    grow with bytes); the settings together can."""
    med = runs.groupby(["setting", "size"])["host_us"].median().mul(1e-6).reset_index()
    a = np.vstack([_columns(r.setting, np.array([float(r.size)]))
                   for r in med.itertuples()])
    y = med["host_us"].to_numpy()
    scale = np.where(a.max(0) > 0, a.max(0), 1.0)  # columns of 1 and of ~1e5: condition
    coef, _ = optimize.nnls(a / scale, y)
    coef = coef / scale
    residual = y - a @ coef
    r2 = 1 - (residual ** 2).sum() / ((y - y.mean()) ** 2).sum()
    return Costs(*map(float, coef), float(r2))


def _columns(setting: str, size: np.ndarray) -> np.ndarray:
    """The fit's regressors: 1, bytes, checksummed bytes, MSS packets, 64 KiB segments."""
    segmented = setting == "offloaded"
    checksummed = setting == "no offload"
    ones = np.ones_like(size)
    return np.column_stack([
        ones, size, size * checksummed,
        np.maximum(1, np.ceil(size / netns.MSS)) * (not segmented),
        np.maximum(1, np.ceil(size / TSO_BYTES)) * segmented])


def savings(runs: pd.DataFrame) -> pd.DataFrame:
    """Per size: the medians, and what segmentation offload and checksum offload save
    (as shares of the cost without them)."""
    med = runs.groupby(["size", "setting"])["host_us"].median().unstack()
    return pd.DataFrame({
        "size": med.index,
        **{f"{s}_us": med[s].to_numpy() for s in SETTINGS},
        "segmentation_saves": 1 - med["offloaded"] / med["no segmentation"],
        "checksum_saves": 1 - med["no segmentation"] / med["no offload"],
        "both_save": 1 - med["offloaded"] / med["no offload"],
    }).reset_index(drop=True)


def byte_costs(costs: Costs, receive: ByteCosts) -> ByteCosts:
    """Sender costs as measured (the checksum fused with the copy without offload, the
    copy alone with it); the receiver's, which the server does not measure, from
    ``receive``."""
    return ByteCosts(tx_fused=costs.copy + costs.checksum, tx_copy=costs.copy,
                     rx_checksum=receive.rx_checksum, rx_copy=receive.rx_copy,
                     rx_copy_offload=receive.rx_copy_offload)


def _fileset(exp: Experiment) -> pd.DataFrame:
    root = exp.root
    if not (root / "fileset.json").exists():
        paths = [f"s{s}/f{i}.bin" for s in exp.sizes for i in range(exp.files_per_size)]
        sizes = np.array([s for s in exp.sizes for _ in range(exp.files_per_size)])
        fileset.materialise(fileset.explicit(ExplicitSpec(name="nic"), sizes,
                                             np.ones(len(sizes)), paths), root)
    manifest = fileset.read_manifest(root)
    missing = sorted(set(exp.sizes) - set(manifest["size_bytes"]))
    require(not missing, f"{root}: holds no files of {missing} bytes; remove it to rewrite")
    return manifest


def _one(exp: Experiment, ns: str, objects: pd.DataFrame) -> tuple[float, float]:
    """Serve ``objects`` inside ``ns`` (host thread on the first core, bodies copied)
    under closed-loop keep-alive load from outside; the host's CPU per request and the
    throughput."""
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "offloadlab", "serve",
             str(exp.root), "--host", netns.SERVER_IP, "--allow-remote", "--port", str(PORT),
             "--host-core", "0", "--sendfile-above", str(2**62), "--stats", str(stats)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait_listening(server)
            requests = stream.closed(objects, exp.clients, requests=500, keep_alive=100,
                                     seed=1)
            result = load.run(f"{netns.SERVER_IP}:{PORT}", requests, objects, allow_remote=True,
                              repeat=True, max_duration_s=exp.run_s, threads=1,
                              verify="length", cores=_generator_cores())
        finally:
            server.send_signal(2)
            try:
                _, error = server.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                raise RunError("the server in the namespace did not stop") from None
        if server.returncode != 0:
            raise RunError(f"the server in the namespace failed: {error.strip()}")
        doc = ServerStats.from_json(json.loads(stats.read_text()))
    report = result.parsed
    if report.failed:
        raise RunError(f"{report.failed} requests failed over the veth pair")
    return doc.per_request.host_cpu_s, report.throughput


def _generator_cores() -> list[int]:
    """The load generator off the server's core 0, where there is another."""
    return [c for c in sorted(os.sched_getaffinity(0)) if c != 0][:1]


def _wait_listening(server: subprocess.Popen) -> None:
    deadline = time.monotonic() + _START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RunError(f"the server in the namespace stopped: {server.stderr.read()}")
        with contextlib.suppress(OSError), socket.create_connection((netns.SERVER_IP, PORT), 0.2):
            return
        time.sleep(0.1)
    raise RunError(f"the server in the namespace did not listen within {_START_S:g} s")
