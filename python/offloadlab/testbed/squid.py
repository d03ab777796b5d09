"""Squid as seed 001's reverse-proxy cache, in front of the testbed server.

Seed 001 ran Squid (10 MB of memory, LRU) before Apache, on the host (set-up B) and on
the network processor's XScale core (set-up C). :func:`running` does the same on this
machine: a Squid accelerator on 127.0.0.1, pinned to one core, whose only parent is the
origin server (``offload serve``, or :func:`offloadlab.testbed.server.running`) on
loopback. The cache lives in memory only, at the experiment's size, largest object and
replacement policy (:class:`SquidOptions`).

Each run gets a private folder for the configuration, the logs and the pid file, and a
service name of its own, so it never meets a system Squid (Debian's, on port 3128).
The context manager always stops Squid and removes the folder, also when its body
raises or is interrupted. Inside it, :class:`Running` tells the process's CPU time
(``/proc/PID/stat``) and the hits and misses in its access log (:func:`count_log`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from offloadlab.errors import RunError, require
from offloadlab.testbed import external, processes

# Our cache policies as Squid's memory replacement policies: Squid has no plain LFU, and
# its heap LFUDA is LFU with aging, the nearest (Debian builds both lru and heap).
POLICIES = {"lru": "lru", "lfu": "heap LFUDA", "gdsf": "heap GDSF"}
START_TIMEOUT_S = 15.0
# The unprivileged user Debian's package runs Squid as; Squid drops to it when started
# as root.
USER = "proxy"
_names = itertools.count()


@dataclass(frozen=True)
class SquidOptions:
    """One Squid: in front of the origin on 127.0.0.1:``origin_port``, listening on
    ``port`` (0: a free one), with ``cache_bytes`` of memory cache, objects up to
    ``max_object_bytes``, ``policy`` (lru, lfu or gdsf, as the testbed's cache), pinned
    to ``core`` (None: not pinned)."""

    origin_port: int
    cache_bytes: int
    max_object_bytes: int
    policy: str = "lru"
    core: int | None = None
    port: int = 0

    def check(self) -> None:
        require(self.policy in POLICIES,
                f"policy {self.policy!r}: use one of {', '.join(POLICIES)}")
        require(1 <= self.origin_port <= 65535,
                f"origin_port={self.origin_port!r}: give the origin's port, 1 to 65535")
        require(0 <= self.port <= 65535, f"port={self.port!r}: use 0 (any free port) to 65535")
        require(self.cache_bytes >= 1, f"cache_bytes={self.cache_bytes!r}: use >= 1")
        require(self.max_object_bytes >= 1,
                f"max_object_bytes={self.max_object_bytes!r}: use >= 1")
        cores = sorted(os.sched_getaffinity(0))
        require(self.core is None or self.core in cores,
                f"core={self.core!r}: this process may use cores {cores}; pick one of them "
                "or leave Squid unpinned")


def binary() -> str:
    """The squid executable (Debian puts it in /usr/sbin, which a user's PATH may lack)."""
    found = shutil.which("squid") or shutil.which("squid", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise RunError("squid is not installed; install it with 'apt-get install squid' "
                       "(the set-ups B and C with proxy 'squid' run it)")
    return found


def config(options: SquidOptions, port: int, folder: Path, user: str | None) -> str:
    """squid.conf for one run: everything in ``folder``, nothing but loopback."""
    lines = [
        "# Written by offloadlab.testbed.squid for one run; removed after it.",
        # An accelerator on loopback only; every URL is the origin's, whatever Host says.
        f"http_port 127.0.0.1:{port} accel defaultsite=127.0.0.1:{options.origin_port} "
        "no-vhost",
        f"cache_peer 127.0.0.1 parent {options.origin_port} 0 no-query no-digest "
        "originserver name=origin",
        "cache_peer_access origin allow all",
        "never_direct allow all",
        "acl loopback src 127.0.0.1/32",
        "http_access allow loopback",
        "http_access deny all",
        # The memory cache alone, as the testbed's (no cache_dir: nothing on disk).
        f"cache_mem {options.cache_bytes} bytes",
        f"maximum_object_size_in_memory {options.max_object_bytes} bytes",
        f"maximum_object_size {options.max_object_bytes} bytes",
        f"memory_replacement_policy {POLICIES[options.policy]}",
        "memory_cache_shared off",
        "workers 1",
        # No other sockets or helpers: no ICP/HTCP, no ICMP pinger, no digests, and DNS
        # (which nothing here needs: the peer is an address) only asks loopback.
        "icp_port 0",
        "htcp_port 0",
        "pinger_enable off",
        "digest_generation off",
        "dns_nameservers 127.0.0.1",
        "udp_outgoing_address 127.0.0.1",
        "client_db off",
        "max_filedescriptors 16384",
        f"pid_filename {folder / 'squid.pid'}",
        f"cache_log {folder / 'cache.log'}",
        f"access_log stdio:{folder / 'access.log'} squid",
        "buffered_logs off",
        "cache_store_log none",
        "netdb_filename none",
        "logfile_rotate 0",
        f"coredump_dir {folder}",
        "shutdown_lifetime 0 seconds",
        "visible_hostname offloadlab",
    ]
    if user is not None:
        lines.append(f"cache_effective_user {user}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class LogCounts:
    """Requests in an access log: hits (memory, disk, revalidated unmodified), misses
    (fetched from the origin, including uncacheable ones), other (parsed but neither,
    e.g. TCP_DENIED) and lines that could not be parsed."""

    hits: int = 0
    misses: int = 0
    other: int = 0
    unparsed: int = 0

    @property
    def served(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.served if self.served else None


def classify(tag: str) -> str:
    """``hit``, ``miss`` or ``other`` for a Squid result code such as TCP_MEM_HIT or
    TCP_MISS_ABORTED. A revalidation the origin answered "not modified" counts as a
    hit, as the testbed's cache counts it."""
    if "REFRESH_UNMODIFIED" in tag or "HIT" in tag:
        return "hit"
    if "MISS" in tag or "REFRESH" in tag:
        return "miss"
    return "other"


def count_log(lines: Iterable[str]) -> LogCounts:
    """Counts the lines of an access log in Squid's native format (``time elapsed
    client CODE/STATUS bytes method URL ...``); never raises on a bad line."""
    counts = {"hit": 0, "miss": 0, "other": 0, "unparsed": 0}
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        tag, slash, status = fields[3].partition("/") if len(fields) >= 7 else ("", "", "")
        if not (slash and status.isdigit() and tag.isupper()):
            counts["unparsed"] += 1
            continue
        counts[classify(tag)] += 1
    return LogCounts(counts["hit"], counts["miss"], counts["other"], counts["unparsed"])


@dataclass
class Running:
    """A running Squid: where it listens, its process and folder. After the context has
    exited, ``log`` holds the whole access log (Squid flushed it when it stopped)."""

    port: int
    process: subprocess.Popen
    folder: Path
    log: bytes | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu_s(self) -> float:
        """CPU seconds (user and system) the process has used so far."""
        return external.stat_cpu_s(self.pid)

    def mark(self, settle_s: float = 0.1, timeout_s: float = 2.0) -> int:
        """The access log's length once it has stopped growing for ``settle_s``: Squid
        writes a request's line when the request ends, just after the client has its
        answer. Count from here with :meth:`counts`."""
        path = self.folder / "access.log"
        size, deadline = -1, time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            now = path.stat().st_size if path.exists() else 0
            if now == size:
                break
            size = now
            time.sleep(settle_s)
        return max(size, 0)

    def counts(self, since: int = 0) -> LogCounts:
        """Hits and misses logged after byte ``since`` (a :meth:`mark`): from the final
        log once Squid has stopped, else from the file as it is."""
        text = self.log if self.log is not None else self._read_log()
        return count_log(text[since:].decode("utf-8", "replace").splitlines())

    def _read_log(self) -> bytes:
        path = self.folder / "access.log"
        return path.read_bytes() if path.exists() else b""


@contextlib.contextmanager
def running(options: SquidOptions,
            start_timeout_s: float = START_TIMEOUT_S) -> Iterator[Running]:
    """Start Squid in the foreground (``squid -N``), pinned to ``options.core``, and wait
    until it accepts connections; always stop it and remove its folder on exit. Raises
    :class:`RunError` if squid is missing, exits, or does not listen in time."""
    options.check()
    squid = binary()
    folder = Path(tempfile.mkdtemp(prefix="offloadlab-squid-"))
    # A service name of our own keeps Squid's shared-memory segments apart from any
    # other Squid's, e.g. Debian's system one.
    name = f"offloadlab{os.getpid()}n{next(_names)}"
    proxy = None
    try:
        user = _user()
        port = options.port or external.free_port()
        conf = folder / "squid.conf"
        conf.write_text(config(options, port, folder, None if user is None else user.pw_name))
        if user is not None:  # Squid writes its logs as that user
            for path in (folder, conf):
                os.chown(path, user.pw_uid, user.pw_gid)
        with open(folder / "stderr.txt", "wb") as stderr:
            process = subprocess.Popen(
                [squid, "-N", "-n", name, "-f", str(conf)], stdin=subprocess.DEVNULL,
                stdout=stderr, stderr=stderr,
                start_new_session=True)  # our Ctrl-C stops it through the finally below
        proxy = Running(port, process, folder)
        if options.core is not None:
            os.sched_setaffinity(process.pid, {options.core})
        _wait_listening(proxy, start_timeout_s)
        yield proxy
    finally:
        if proxy is not None:
            processes.stop(proxy.process)
            proxy.log = proxy._read_log()
        shutil.rmtree(folder, ignore_errors=True)
        # A killed Squid leaves its shared-memory segments behind.
        for segment in Path("/dev/shm").glob(f"{name}-*"):
            segment.unlink(missing_ok=True)


def _user() -> pwd.struct_passwd | None:
    """Whom Squid runs as when started as root (None: not root, it stays who it is)."""
    if os.geteuid() != 0:
        return None
    for name in (USER, "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RunError(f"neither the user {USER!r} nor 'nobody' exists for Squid to run as; "
                   "'apt-get install squid' creates it")


def _wait_listening(proxy: Running, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proxy.process.poll() is not None:
            raise RunError(f"squid exited with code {proxy.process.returncode} before it "
                           f"listened: {_said(proxy.folder)}")
        with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", proxy.port), timeout=0.5):
            return
        if time.monotonic() > deadline:
            raise RunError(f"squid did not listen on 127.0.0.1:{proxy.port} within "
                           f"{timeout_s:g} s: {_said(proxy.folder)}")
        time.sleep(0.05)


def _said(folder: Path, lines: int = 5) -> str:
    """The last lines Squid wrote about itself, for an error message."""
    text = ""
    for name in ("stderr.txt", "cache.log"):
        path = folder / name
        if path.exists():
            text += path.read_text(errors="replace")
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(tail) or "it wrote nothing"
