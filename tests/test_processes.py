"""processes.stop: the clean signal first, SIGKILL for what outlives the grace period,
and with ``group`` also the children a leader leaves behind."""

import signal
import subprocess
import time
from pathlib import Path

from offloadlab.testbed import processes


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """No such process, or a zombie that init has yet to reap."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_process_that_obeys_stops_on_the_first_signal():
    process = subprocess.Popen(["sleep", "30"])
    processes.stop(process, signal.SIGINT, grace_s=5.0)
    assert process.returncode == -signal.SIGINT


def test_a_process_that_ignores_it_is_killed_after_the_grace_period():
    process = subprocess.Popen(["sh", "-c", "trap '' TERM; echo ready; exec sleep 30"],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"  # the trap is set before we signal
    start = time.monotonic()
    processes.stop(process, grace_s=0.3)
    assert process.returncode == -signal.SIGKILL
    assert 0.3 <= time.monotonic() - start < 5.0


def test_an_exited_process_is_only_reaped():
    process = subprocess.Popen(["true"])
    process.wait()
    processes.stop(process)
    assert process.returncode == 0


def test_the_group_takes_the_children_that_outlive_their_leader():
    # The leader dies of SIGTERM; its child ignores SIGTERM and would live on.
    process = subprocess.Popen(
        ["sh", "-c", "(trap '' TERM; exec sleep 30) & echo $!; wait"],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = int(process.stdout.readline())
    time.sleep(0.2)  # the child's trap is set
    processes.stop(process, grace_s=0.3, group=True)
    assert process.returncode == -signal.SIGTERM
    assert _gone(child)
