"""Idle cores poll while the testbed measures (testbed/idle.py): the CPU latency request
is held at 0 µs inside a run and let go after it, and OFFLOADLAB_IDLE chooses."""

from __future__ import annotations

import os
import struct

import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError
from offloadlab.testbed import idle
from offloadlab.testbed.server import ServerOptions, running


def kernel_latency_us() -> int:
    """The kernel's current CPU latency target: 0 while some process holds it there, its
    default (2·10⁹ µs, "no limit") when nobody asks."""
    fd = os.open(idle.LATENCY_FILE, os.O_RDONLY)
    try:
        return struct.unpack("i", os.read(fd, 4))[0]
    finally:
        os.close(fd)


def test_the_request_is_a_zero_written_while_inside_and_dropped_on_exit(tmp_path):
    target = tmp_path / "latency"
    target.write_bytes(b"")
    with idle.polled(str(target)) as what:
        assert what == f"poll ({target} held at 0 µs)"
        assert target.read_bytes() == struct.pack("i", 0)


def test_the_kernel_sees_the_request_only_inside_a_run(tmp_path, testbed):
    if not os.path.exists(idle.LATENCY_FILE) or os.geteuid() != 0:
        # Without the device or root the run must say it could not poll, not pretend.
        assert idle.describe().startswith("halt (")
        return
    before = kernel_latency_us()
    assert before > 0, "another process holds the cores polling; the test cannot tell"
    (tmp_path / "a.bin").write_bytes(b"x")
    with running(ServerOptions(tmp_path)):
        assert kernel_latency_us() == 0
    assert kernel_latency_us() == before


def test_a_file_it_cannot_open_leaves_the_cores_halting_and_says_why(tmp_path):
    with idle.polled(str(tmp_path / "missing")) as what:
        assert what.startswith("halt (") and "No such file" in what


def test_offloadlab_idle_halt_touches_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("OFFLOADLAB_IDLE", "halt")
    target = tmp_path / "latency"
    target.write_bytes(b"")
    with idle.polled(str(target)) as what:
        assert what == "halt (OFFLOADLAB_IDLE=halt)"
    assert target.read_bytes() == b""


def test_a_bad_offloadlab_idle_is_an_input_error_naming_it(monkeypatch):
    monkeypatch.setenv("OFFLOADLAB_IDLE", "deep")
    with pytest.raises(InputError, match=r"OFFLOADLAB_IDLE='deep'.*poll.*halt"):
        idle.choice()


def test_a_study_with_a_bad_offloadlab_idle_stops_before_its_first_run(tmp_path):
    result = CliRunner().invoke(app, ["study", "--classes", "0", "--modes", "inline,engine",
                                      "--budget", "quick", "--out", str(tmp_path / "out")],
                                env={"OFFLOADLAB_IDLE": "deep"})
    assert result.exit_code == 2
    assert "OFFLOADLAB_IDLE='deep'" in result.output
    assert not (tmp_path / "out" / "summary.json").exists()
