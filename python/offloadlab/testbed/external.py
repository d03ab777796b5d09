"""A user's own HTTP server under test (``offload study --server-cmd/--server-pid``).

:class:`ExternalServer` holds what the user gave: a command to start the server
(``{root}``, the folder it should serve, and ``{port}``, a free loopback port, are
filled in) or the PID of one already running, and the ``--target HOST:PORT`` it answers
on. :func:`running` starts the command in a process group of its own and waits until
the target accepts connections, and always stops the whole group on exit (SIGTERM, then
SIGKILL after :data:`STOP_GRACE_S`), also after an error, Ctrl-C or a SIGTERM to us. A
server given by its PID is never stopped: it is the user's.

Its CPU is read from ``/proc``: every thread of the process and of its descendants
(nginx's master forks its workers), each thread's run time from
``/proc/PID/task/TID/schedstat`` (nanoseconds, as the testbed server reads its own
threads) and its name from ``.../stat``. :func:`snapshot` before and after a run and
:func:`used` give each thread's CPU seconds in between; :func:`core_times` does the
same for each core's ``/proc/stat`` times (the hypervisor's steal among them).
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import pwd
import shlex
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from offloadlab.documents import CoreTimes
from offloadlab.errors import InputError, RunError
from offloadlab.testbed import processes
from offloadlab.testbed.load import Target, parse_target

START_TIMEOUT_S = 15.0
# SIGTERM first, so the server shuts down cleanly (nginx's fast shutdown takes
# milliseconds); what still runs after this long is killed.
STOP_GRACE_S = 5.0
PLACEHOLDERS = ("{root}", "{port}")
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_TAIL_LINES = 5
_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ExternalServer:
    """The user's server: started from ``command`` or running as ``pid`` (exactly one),
    answering on ``target`` (HOST:PORT; with a command that has ``{port}``, a free
    loopback port when not given). Loopback only unless ``allow_remote``."""

    command: str | None = None
    pid: int | None = None
    target: str | None = None
    allow_remote: bool = False
    start_timeout_s: float = START_TIMEOUT_S

    def check(self, here: bool = True) -> None:
        """Every flag checked before anything starts (InputError naming the flag); the
        program and the PID only ``here``, on the machine the server runs on."""
        if (self.command is None) == (self.pid is None):
            raise InputError("--server-cmd and --server-pid: give one of them, e.g. "
                             "--server-cmd 'nginx -c /etc/my-nginx.conf' --target "
                             "127.0.0.1:8080, or --server-pid 1234 --target 127.0.0.1:8080")
        if self.command is not None:
            program = self.argv(Path("/"), 1)[0]
            if here and shutil.which(program) is None:
                raise InputError(f"--server-cmd: {program!r} is not a program on PATH; "
                                 "give its full path")
            if self.target is None and "{port}" not in self.command:
                raise InputError("--server-cmd: give --target HOST:PORT (where the server "
                                 "listens), or put {port} in the command for a free "
                                 "loopback port")
        else:
            if self.pid is None or self.pid <= 0 or (
                    here and not Path(f"/proc/{self.pid}").exists()):
                raise InputError(f"--server-pid {self.pid}: no such process; give the PID of "
                                 "the running server (e.g. from 'pgrep -o nginx')")
            if self.target is None:
                raise InputError(f"--server-pid {self.pid}: give --target HOST:PORT, where "
                                 "that server listens")
        if self.target is not None:
            target = self.resolved(0)
            # Another process answering there would be measured in the server's place.
            if here and self.command is not None and _accepts(target):
                raise InputError(f"--target {self.target}: something already accepts "
                                 "connections there, before --server-cmd has started; stop "
                                 "it or give another port, or measure that server with "
                                 "--server-pid PID")

    def argv(self, root: Path, port: int) -> list[str]:
        """The command's words with ``{root}`` and ``{port}`` filled in."""
        assert self.command is not None
        try:
            words = shlex.split(self.command)
        except ValueError as exc:
            raise InputError(f"--server-cmd {self.command!r}: {exc}; quote it as a shell "
                             "would") from None
        if not words:
            raise InputError("--server-cmd '': give the command that starts your server")
        values = {"{root}": str(root.resolve()), "{port}": str(port)}
        for key, value in values.items():
            words = [w.replace(key, value) for w in words]
        return words

    def resolved(self, port: int) -> Target:
        """Where the load goes: --target, or 127.0.0.1:``port`` without one (``port``
        is not used with one); refused (InputError) if not loopback and not allowed."""
        text = self.target if self.target is not None else f"127.0.0.1:{port}"
        try:
            target = parse_target(text)
        except InputError as exc:
            raise InputError(f"--{exc}") from None
        ip = ipaddress.ip_address(target.addr.rpartition(":")[0].strip("[]"))
        if not (ip.is_loopback or self.allow_remote):
            raise InputError(f"--target {text}: {ip} is not a loopback address; study a "
                             "server on another machine only on purpose, with "
                             "--allow-remote")
        return target

    def describe(self) -> str:
        """The server in the words of the flags that chose it."""
        if self.command is not None:
            return f"the command {self.command!r}" + (
                f" on {self.target}" if self.target else "")
        return f"process {self.pid} on {self.target}"


@dataclass(frozen=True)
class Live:
    """A server under test: its process (the top of the tree whose CPU counts), where it
    answers, and whether we started it."""

    pid: int
    target: Target
    started: bool
    log: Path | None = None  # its stdout and stderr, when we started it

    def alive(self) -> bool:
        return _exists(self.pid)

    def check_alive(self) -> None:
        """RunError with its exit and last words if the server has gone."""
        if not self.alive():
            raise RunError(f"the server under test (PID {self.pid}) is gone"
                           + (f"; it said: {tail(self.log)}" if self.log else ""))

    def reading(self) -> tuple[dict, dict]:
        """Its threads' CPU (:func:`snapshot`) and this host's cores' times now; a
        RunError if it has gone."""
        self.check_alive()
        return snapshot(self.pid), core_times()


@contextlib.contextmanager
def running(server: ExternalServer, root: Path, core: int | None = None,
            with_thread: bool = False) -> Iterator[Live]:
    """The user's server, answering: started from its command (pinned to ``core`` if
    given, with every thread it has by then; threads and processes it makes later
    inherit that) and waited for, or found by its PID and checked to answer. A started
    server is always stopped on exit; ``with_thread``, also when the thread that started
    it ends, however (the kernel's parent-death signal: a process killed outright runs
    no ``finally``)."""
    server.check()
    if server.pid is not None:
        target = server.resolved(0)
        if not _accepts(target):
            raise InputError(f"--target {server.target}: refuses connections; give the "
                             f"address process {server.pid} listens on")
        yield Live(server.pid, target, started=False)
        return
    port = free_port() if server.target is None else 0
    target = server.resolved(port)
    port = port or int(target.addr.rpartition(":")[2])
    words = server.argv(root, port)
    folder = Path(tempfile.mkdtemp(prefix="offloadlab-server-"))
    log = folder / "output.txt"
    process = None
    try:
        with processes.interrupt_on_sigterm(), open(log, "wb") as out:
            process = subprocess.Popen(words, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=_term_with_parent if with_thread else None)
            live = Live(process.pid, target, started=True, log=log)
            _wait_listening(process, live, server.start_timeout_s)
            if core is not None:
                pin(process.pid, core)
            yield live
    finally:
        if process is not None:
            stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def _term_with_parent() -> None:
    """In the child before it runs the server: SIGTERM when the thread that started it
    ends (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the process's group, SIGKILL to what is left after the grace period."""
    processes.stop(process, grace_s=STOP_GRACE_S, group=True)


def _wait_listening(process: subprocess.Popen, live: Live, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RunError(f"--server-cmd exited with status {process.returncode} before "
                           f"{live.target.host} accepted connections; it said: "
                           f"{tail(live.log)}")
        if _accepts(live.target):
            return
        if time.monotonic() > deadline:
            raise RunError(f"--server-cmd: nothing accepted connections on "
                           f"{live.target.host} within {timeout_s:g} s; check that the "
                           f"server listens there (--target, or {{port}} in the command); "
                           f"it said: {tail(live.log)}")
        time.sleep(0.05)


def _accepts(target: Target) -> bool:
    host, _, port = target.addr.rpartition(":")
    with contextlib.suppress(OSError), socket.create_connection(
            (host.strip("[]"), int(port)), timeout=0.5):
        return True
    return False


def tail(log: Path | None, lines: int = _TAIL_LINES) -> str:
    """The last lines a started server wrote, for an error message."""
    text = log.read_text(errors="replace") if log is not None and log.exists() else ""
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "nothing"


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _exists(pid: int) -> bool:
    """Running (a zombie has exited: it only waits to be reaped)."""
    try:
        return _stat(pid, pid)[1] != "Z"
    except OSError:
        return False


@dataclass(frozen=True)
class Thread:
    """One thread of the server's tree and its CPU seconds (so far, or in a run)."""

    pid: int
    tid: int
    name: str
    cpu_s: float


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from every process's parent in ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                child = int(entry.name)
                children.setdefault(int(_stat(child, child)[2]), []).append(child)
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def pin(pid: int, core: int) -> None:
    """Every thread of ``pid``'s tree onto ``core``."""
    for p in tree(pid):
        for task in _tasks(p):
            with contextlib.suppress(OSError):  # a thread that just ended
                os.sched_setaffinity(task, {core})


def snapshot(pid: int) -> dict[tuple[int, int], Thread]:
    """Every thread of ``pid``'s tree now, by (pid, tid), with its run time so far."""
    found = {}
    for p in tree(pid):
        for tid in _tasks(p):
            with contextlib.suppress(OSError, ValueError, IndexError):
                ns = int(Path(f"/proc/{p}/task/{tid}/schedstat").read_text().split()[0])
                found[p, tid] = Thread(p, tid, _stat(p, tid)[0], ns / 1e9)
    return found


def used(before: dict[tuple[int, int], Thread],
         after: dict[tuple[int, int], Thread]) -> list[Thread]:
    """Each thread's CPU seconds between two snapshots; a thread born in between counts
    from 0. A thread that ended in between is not in ``after``, and its time since
    ``before`` is lost (a server that forks a process per request needs a longer-lived
    parent to be measured)."""
    return [Thread(t.pid, t.tid, t.name,
                   t.cpu_s - (before[key].cpu_s if key in before else 0.0))
            for key, t in after.items()]


def stat_cpu_s(pid: int) -> float:
    """A process's CPU seconds so far, all its threads, user and system, from
    ``/proc/PID/stat`` (clock ticks, 10 ms here: coarser than schedstat, and counted
    apart from it)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # stat's fields 14 and 15


def core_times() -> dict[int, CoreTimes]:
    """Each core's times so far from ``/proc/stat``, as the testbed server reads them
    (user with nice, idle with iowait)."""
    found = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            user, nice, system, idle, iowait, irq, softirq, steal = (
                int(x) / _CLK_TCK for x in fields[:8])
            core = int(name[3:])
            found[core] = CoreTimes(core, user + nice, system, idle + iowait, irq, softirq,
                                    steal)
    return found


def core_delta(before: dict[int, CoreTimes], after: dict[int, CoreTimes]
               ) -> tuple[CoreTimes, ...]:
    """Each core's times between two :func:`core_times`."""
    parts = ("user_s", "system_s", "idle_s", "irq_s", "softirq_s", "steal_s")
    return tuple(CoreTimes(c, **{p: getattr(a, p) - getattr(before[c], p) for p in parts})
                 for c, a in after.items() if c in before)


def nginx_config(folder: Path, root: Path, port: int, listen: str = "",
                 extra: str = "", address: str = "127.0.0.1") -> Path:
    """nginx's configuration for one server on ``address``:``port`` serving ``root``
    (``examples/nginx.conf``, one worker), written to ``folder`` with everything nginx
    writes; returns its path. Start it with ``nginx -c PATH -p FOLDER``."""
    template = Path(__file__).parents[1] / "examples" / "nginx.conf"
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    path = folder / f"nginx-{port}.conf"
    path.write_text(string.Template(template.read_text()).substitute(
        address=address, port=port, root=Path(root).resolve(), folder=Path(folder).resolve(),
        listen=listen, extra=extra, user=pwd.getpwuid(os.geteuid()).pw_name))
    return path


def _tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _stat(pid: int, tid: int) -> tuple[str, str, str]:
    """(name, state, parent PID) from a thread's ``stat``; the name is in parentheses
    and may hold spaces."""
    text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    head, _, rest = text.rpartition(")")
    state, ppid = rest.split()[:2]
    return head.partition("(")[2], state, ppid
