"""Stats documents made by hand, for tests of the code that reads them: every key an
idle inline server's document has, with the sections a test cares about replaced."""

from __future__ import annotations

CORE_PARTS = ("user_s", "system_s", "idle_s", "irq_s", "softirq_s", "steal_s")


def stats_document(**sections) -> dict:
    """A complete stats document (a new one each call, so it may be changed in place)."""
    return {
        "mode": "inline", "pid": 1, "port": 8080, "elapsed_s": 1.0, "final": True,
        "requests": 0, "bytes": 0, "statuses": {},
        "connections": {"accepted": 0, "refused": 0, "timed_out": 0},
        "threads": [thread("host", None, 0.0)],
        "engine": {"commands": 0, "command_batches": 0, "events": 0, "event_batches": 0,
                   "command_batch_squares": 0, "event_batch_squares": 0, "idle_poll_s": 0.0,
                   "failed": False, "takeover_after_s": None, "takeover_reason": None,
                   "slowdown_payments": 0, "slowdown_s": 0.0, "slowdown_longest_s": 0.0},
        "per_request": dict.fromkeys(
            ("host_cpu_s", "host_busy_cpu_s", "app_cpu_s", "db_s", "engine_cpu_s",
             "engine_busy_cpu_s", "commands", "batch_mean", "command_batch_others",
             "event_batch_others", "host_wakeups", "host_turns",
             "engine_wakeups", "engine_sq_work_s", "host_turnaround_s")),
        "wakeups": {"host": 0, "engine": None, "host_turns": 0},
        "sqpoll": {"work_s": None, "total_s": None, "cpu_s": None},
        "cores": [core(0)],
        "handoff": None, "placement": None, "cache": None,
        "memory_tier": {"files": 0, "bytes": 0, "hits": 0},
        "database": {"queries": 0, "time_s": 0.0},
        "host": {"idle_poll_s": 0.0},
        "errors": {"count": 0, "last": ""},
        **sections,
    }


def thread(role: str, core: int | None, cpu_s: float) -> dict:
    """A ``threads`` entry."""
    return {"role": role, "tid": 1, "core": core, "cpu_s": cpu_s}


def core(number: int, **seconds: float) -> dict:
    """A ``cores`` entry: the times given, the other parts 0."""
    return {"core": number, **dict.fromkeys(CORE_PARTS, 0.0), **seconds}
