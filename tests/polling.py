"""Blocking waits for conditions outside the event loop's reach (a process, another client's
view of Redis), for sync tests and for code a test runs inside a producer's own work."""

from __future__ import annotations

import time
from collections.abc import Callable


def waited_for(check: Callable[[], bool], seconds: float = 10.0, poll: float = 0.01) -> bool:
    """Blocks (the event loop too, as a producer's own work does) until ``check`` holds;
    False if it did not within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True
