"""Figures and table of the connection-handoff matrix (seed 004) from a small synthetic
matrix: two workloads, a few policies, two NIC speeds and one threshold-selection run.
Rates are the paper's where it gives them (reference 004 §6), the rest made up."""

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from offloadlab.report import handoff
from offloadlab.results import write_outputs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NAMES = ["handoff-throughput.png", "handoff-idle.png", "handoff-share.png",
         "handoff-cnum.png", "handoff-nic-speed.png", "handoff-selection.png"]

# setup: (requests/s, host idle, NIC idle, share of connections, share of packets)
RUNS = {
    "W-0-N-N-FCFS-400": (23031, 0.0, 0.62, 0.0, 0.0),
    "W-256-N-N-FCFS-400": (23935, 0.0, 0.49, 0.12, 0.11),
    "W-1024-N-N-FCFS-400": (16121, 0.62, 0.03, 0.88, 0.80),
    "W-1024-P-N-FCFS-400": (26663, 0.0, 0.05, 0.48, 0.45),
    "W-4096-P-N-FCFS-400": (12917, 0.64, 0.0, 1.0, 1.0),
    "W-4096-P-L-FCFS-400": (25830, 0.0, 0.09, 0.45, 0.42),
    "W-4096-P-L-FCFS-800": (36532, 0.0, 0.07, 0.85, 0.83),
    "W-256-P-L-FCFS-400": (24000, 0.0, 0.47, 0.13, 0.12),
    "W-256-P-L-T20-400": (25440, 0.0, 0.34, 0.05, 0.24),
    "S-0-N-N-FCFS-400": (20000, 0.0, 0.69, 0.0, 0.0),
    "S-2048-N-N-FCFS-400": (19600, 0.50, 0.10, 0.60, 0.55),
    "S-2048-P-N-FCFS-400": (23000, 0.0, 0.08, 0.50, 0.48),
    "S-4096-P-L-FCFS-400": (26200, 0.0, 0.10, 0.49, 0.47),
    "S-4096-P-L-FCFS-800": (34400, 0.0, 0.08, 0.90, 0.88),
}
# The table's order: W then S; baseline, N-N, P-N, P-L by hard limit, then selection, MIPS.
ORDER = ["W-0-N-N-FCFS-400", "W-256-N-N-FCFS-400", "W-1024-N-N-FCFS-400",
         "W-1024-P-N-FCFS-400", "W-4096-P-N-FCFS-400", "W-256-P-L-FCFS-400",
         "W-256-P-L-T20-400", "W-4096-P-L-FCFS-400", "W-4096-P-L-FCFS-800",
         "S-0-N-N-FCFS-400", "S-2048-N-N-FCFS-400", "S-2048-P-N-FCFS-400",
         "S-4096-P-L-FCFS-400", "S-4096-P-L-FCFS-800"]


def matrix(setups=tuple(RUNS)) -> pd.DataFrame:
    """The results frame of ``setups`` in a scrambled order, so sorting is tested."""
    rows = []
    for setup in setups:
        wl, limit, prio, lc, sel, mips = setup.split("-")
        rate, host_idle, nic_idle, conns, packets = RUNS[setup]
        naive = prio == "N" and limit != "0"
        rows.append(dict(
            setup=setup, workload=wl, hard_limit=int(limit), priority=prio, load_control=lc,
            selection=sel, mips=int(mips), requests_per_s=float(rate),
            gain=rate / RUNS[f"{wl}-0-N-N-FCFS-400"][0] - 1, host_idle=host_idle,
            nic_idle=nic_idle, offloaded_share=conns, nic_packet_share=packets,
            host_rx_delay_median_s=301e-6 if naive else 2e-6,
            host_tx_delay_median_s=679e-6 if naive else 2e-6,
            response_mean_s=2048 / rate * 0.7, drops=1234.0 if naive else 0.0,
            timeouts=0.0, truncated=setup == "W-4096-P-N-FCFS-400"))
    frame = pd.DataFrame(rows)
    # A delay never observed (no host packets through the NIC) stays missing.
    frame.loc[frame["setup"] == "W-4096-P-N-FCFS-400", "host_rx_delay_median_s"] = np.nan
    return frame.sample(frac=1, random_state=4).reset_index(drop=True)


def trace(settle: float) -> pd.DataFrame:
    """A load controller cutting Soft_limit from 4096 while Cnum drains to ``settle``."""
    t = np.arange(0, 3, 0.01)
    cnum = settle + (2048 - settle) * np.exp(-t / 0.5)
    return pd.DataFrame(dict(t_s=t, cnum=np.round(cnum),
                             soft_limit=np.maximum(4096 - 256 * np.floor(t / 0.1), settle),
                             qlen=1024 * np.exp(-t) * (1 + np.sin(20 * t)) / 2,
                             requests_per_s=25000.0, host_busy=1.0, nic_busy=0.9))


SERIES = {"W-4096-P-L-FCFS-400": trace(1000), "S-4096-P-L-FCFS-400": trace(2000)}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("handoff")
    return out, [out / name for name in write_outputs(out, handoff.figures(matrix(), SERIES))]


def test_every_figure_is_a_readable_png(written):
    out, paths = written
    assert [p.name for p in paths] == NAMES
    for path in paths:
        assert path.parent == out and path.read_bytes()[:8] == PNG_MAGIC
        assert path.stat().st_size > 20_000
        height, width, _ = mpimg.imread(path).shape
        assert width > 600 and height > 300
    # Written through temporary files renamed into place: none is left behind.
    assert sorted(p.name for p in out.iterdir()) == sorted(NAMES)


def test_figures_without_their_rows_are_skipped(tmp_path):
    """400 MIPS and FCFS only, no time series: Figures 6, 7 and 8 have nothing to show
    (a lone W-256-P-L-FCFS run compares no selection policies)."""
    quick = [s for s in RUNS if s.endswith("FCFS-400")]
    names = write_outputs(tmp_path / "quick", handoff.figures(matrix(quick), {}))
    assert names == NAMES[:3]
    assert sorted(p.name for p in (tmp_path / "quick").iterdir()) == sorted(NAMES[:3])
    assert write_outputs(tmp_path / "none", handoff.figures(matrix().iloc[:0], {})) == []


def test_throughput_bars_carry_the_gain_against_the_baseline():
    fig = handoff.throughput_figure(matrix())
    w, s = (ax for ax in fig.axes if ax.get_visible())
    assert (w.get_title(), s.get_title()) == ("W: World Cup", "S: SPECweb99 static")
    # Only the 400 MIPS, FCFS rows: W's seven configurations, paper order.
    assert [t.get_text() for t in w.texts] == ["0%", "+4%", "-30%", "+16%", "-44%", "+4%",
                                               "+12%"]
    assert [t.get_text() for t in w.get_xticklabels()] == [
        "0\nbaseline", "256\nN-N", "1024\nN-N", "1024\nP-N", "4096\nP-N", "256\nP-L",
        "4096\nP-L"]
    assert w.lines[0].get_ydata()[0] == 23031  # the dashed baseline


def test_cnum_and_selection_panels():
    cnum = handoff.cnum_figure(matrix(), SERIES)
    titles = [ax.get_title() for ax in cnum.axes if ax.get_title()]
    assert titles == ["W-4096-P-L-FCFS-400", "S-4096-P-L-FCFS-400"]
    selection = handoff.selection_figure(matrix())
    top = [ax for ax in selection.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in top] == ["W-256-P-L-*-400"]
    assert [t.get_text() for t in top[0].texts] == ["0%", "+6%"]


def test_table_rows_order_and_rounding():
    t = handoff.table(matrix())
    assert list(t["setup"]) == ORDER
    assert list(t.columns) == [
        "setup", "req/s", "gain %", "host idle %", "NIC idle %", "conns on NIC %",
        "packets on NIC %", "host-pkt NIC delay rx µs", "host-pkt NIC delay tx µs",
        "response ms", "drops"]
    row = t.set_index("setup").loc["W-1024-N-N-FCFS-400"]
    assert row["req/s"] == 16121 and row["gain %"] == -30.0  # 16121/23031 − 1 = −30.0 %
    assert row["host idle %"] == 62.0 and row["NIC idle %"] == 3.0
    assert row["conns on NIC %"] == 88.0 and row["packets on NIC %"] == 80.0
    assert row["host-pkt NIC delay rx µs"] == 301.0 and row["host-pkt NIC delay tx µs"] == 679.0
    assert row["response ms"] == round(2048 / 16121 * 0.7 * 1e3, 1) and row["drops"] == 1234
    gains = t.set_index("setup")["gain %"]
    assert gains["W-0-N-N-FCFS-400"] == 0.0
    assert gains["W-1024-P-N-FCFS-400"] == 15.8  # 26663 / 23031 − 1 = 15.77 %
    assert gains["W-4096-P-L-FCFS-800"] == 58.6
    assert str(t["req/s"].dtype) == "Int64"
    assert np.isnan(t.set_index("setup").loc["W-4096-P-N-FCFS-400",
                                             "host-pkt NIC delay rx µs"])
