"""Why work of a revoked API key or a disabled tenant is refused, in the words every holder
gives: the gateway (a key, a watch token, a pull receipt) and the workers (a job's attempt or
its stream) refuse with the same reason, so a client sees one message whoever stopped it.
"""

from __future__ import annotations


def revoked_reason(key_id: str) -> str:
    return f"API key {key_id} was revoked"


def disabled_reason(tenant: str) -> str:
    return f"tenant {tenant!r} is disabled"
