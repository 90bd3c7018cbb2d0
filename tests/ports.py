"""Ports for the servers tests start (gateways, workers' fakes, Redis, collectors).

A port the kernel hands out for ``bind(0)`` and that is closed again is free for anyone: a
server that binds it a second later (a gateway imports for that long) can find it taken by
another xdist worker's server, whose answers then reach the wrong test (a CI run met a 401
from another stack's gateway). So each xdist worker hands out ports from a range of its own,
in turn, below the kernel's ephemeral range (32768 and up, where ``bind(0)`` and outgoing
connections take theirs), skipping any that something holds."""

from __future__ import annotations

import itertools
import os
import socket

FIRST = 20000
PER_WORKER = 1500
SLOTS = 8  # ranges 20000-31999: below the ephemeral range


def _worker_index() -> int:
    """gw0-gw6 (one range each, gw7 on gw0's), or the last range for a pytest run without
    xdist (CI runs the core tests that way beside the whole suite)."""
    digits = os.environ.get("PYTEST_XDIST_WORKER", "").removeprefix("gw")
    return int(digits) % (SLOTS - 1) if digits.isdigit() else SLOTS - 1


_base = FIRST + PER_WORKER * _worker_index()
_next = itertools.cycle(range(_base, _base + PER_WORKER))


def free_port() -> int:
    """A port no one holds now and no other test process of this run will hand out."""
    for _ in range(PER_WORKER):
        port = next(_next)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_base}-{_base + PER_WORKER - 1}")
