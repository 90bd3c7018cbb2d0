"""Child processes that cannot outlive their parent, whatever kills it.

A child started with ``preexec_fn=die_with_parent`` is killed by the kernel (SIGKILL) when its
parent dies, even by SIGKILL, when no handler could clean up. The worker supervisor, the dev
stack and the embedded Valkey server rely on it so that no orphan keeps leases or ports.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Runs in a child between fork and exec: the kernel kills it when its parent dies.

    Linux only (``prctl(PR_SET_PDEATHSIG)``); elsewhere it does nothing. The "parent" is the
    thread that forked, so fork from a thread that lives as long as the process."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
