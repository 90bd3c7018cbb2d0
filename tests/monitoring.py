"""What the server's scripts really run, read from ``MONITOR``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis as redis_sync


@contextmanager
def commands_run_by_scripts(redis_url: str, prefix: str) -> Iterator[list[str]]:
    """The commands scripts run on ``prefix``'s keys inside the block (``MONITOR`` shows each
    command a script runs, in order), as "<command> <key suffix>", listed when the block ends."""
    sentinel = f"{prefix}:monitor-done"
    seen: list[str] = []
    with (
        redis_sync.Redis.from_url(redis_url) as watcher,
        redis_sync.Redis.from_url(redis_url) as client,
        watcher.monitor() as monitor,  # returns once the server confirmed MONITOR
    ):
        yield seen
        client.echo(sentinel)  # the feed has reached the end of the block once this shows
        for line in monitor.listen():
            if sentinel in line["command"]:
                return
            words = line["command"].split()
            if line.get("client_type") == "lua" and len(words) > 1 and prefix in words[1]:
                seen.append(f"{words[0].lower()} {words[1].split(':', 1)[1]}")
    raise AssertionError("the monitor ended early")
