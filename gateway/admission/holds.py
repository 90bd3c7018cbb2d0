"""Per-tenant caps on what a request holds open: event streams and result waits (a stream
hold, a wait hold; a generation's place in the in-flight set is another limit, in Redis:
:mod:`gateway.admission.limits`).

An open SSE response or a server-side wait costs the gateway memory and a socket, not Redis:
so the counts live in memory, per gateway process. A process that dies frees its holds with
it, and nothing can leak a hold across processes; with N gateway processes a tenant may hold
up to N times the cap. A hold is released whatever way its request ends (finished, client
gone, timed out, cancelled): :meth:`TenantHolds.hold` is a context manager, and a taken
hold's release is idempotent.

A route that enqueues a generation and then streams or waits for it takes its hold before it
enqueues, so that its 429 means nothing was queued or charged (a client retrying the 429 piles
nothing up): streams through :func:`gateway.streaming.sse.stream_hold`, waits inside
``gateway.open_waits.hold(tenant)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..errors import RateLimited

RETRY_AFTER = 1.0


class TenantHolds:
    """Counts what each tenant holds open of one kind (``what``), up to ``cap(tenant)``."""

    def __init__(self, what: str, cap: Callable[[str], int]) -> None:
        self.what = what
        self._cap = cap
        self._held: dict[str, int] = {}

    def held(self, tenant: str) -> int:
        return self._held.get(tenant, 0)

    def take(self, tenant: str) -> Callable[[], None]:
        """Takes a hold, or raises :class:`RateLimited` (429 with Retry-After) when the
        tenant holds its cap already. Returns the hold's release (safe to call twice)."""
        cap = self._cap(tenant)
        held = self.held(tenant)
        if held >= cap:
            raise RateLimited(
                f"{cap} {self.what} already open for this tenant (the most allowed); "
                "close one or retry later",
                retry_after=RETRY_AFTER,
            )
        self._held[tenant] = held + 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            left = self._held.get(tenant, 1) - 1
            if left > 0:
                self._held[tenant] = left
            else:
                self._held.pop(tenant, None)

        return release

    @contextmanager
    def hold(self, tenant: str) -> Iterator[None]:
        release = self.take(tenant)
        try:
            yield
        finally:
            release()
