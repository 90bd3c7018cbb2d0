"""Work that can wait for a quiet moment of the event loop: ending an event stream that has
delivered its terminal event.

Ending a stream costs the gateway far more than writing an event to it: sse-starlette's task
group and cancel scopes and FastAPI's exit stack are many times an event's Python
(docs/KNOWN_LIMITS.md). And streams end together: every viewer of a generation gets the
terminal event at once, and generations started together end together. Torn down on the spot,
thousands of streams hold a core for a stretch during which no other viewer gets an event, and
each of them had just been sent its terminal event. Their clients do not need the teardown
soon (they have every event), the other viewers need their events now: so endings wait here,
and the gate lets them through a batch at a time, on ticks of the event loop that show it has
time to spare (a timer that fired on time), or once they have waited ``MAX_WAIT``.
"""

from __future__ import annotations

import asyncio
from collections import deque

from ._per_loop import PerLoop

TICK = 0.005
"""How often the gate looks at the event loop."""
QUIET = 0.002
"""A tick's timer that fires at most this late finds the loop with time to spare."""
BATCH = 50
"""Endings let through per quiet tick."""
MAX_WAIT = 5.0
"""No ending waits longer than this, however busy the loop stays."""


class QuietGate(PerLoop):
    """The endings waiting for a quiet moment of one event loop, in arrival order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._waiting: deque[tuple[float, asyncio.Future[None]]] = deque()
        self._task: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def wait(self) -> asyncio.Future[None]:
        """Done when this ending's turn comes. Cancelling it only gives up the place."""
        turn: asyncio.Future[None] = self._loop.create_future()
        self._waiting.append((self._loop.time(), turn))
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(self._let_through(), name="quiet gate")
        return turn

    async def _let_through(self) -> None:
        """Runs while endings wait (no task is left sleeping once none does)."""
        loop, waiting = self._loop, self._waiting
        while waiting:
            due = loop.time() + TICK
            await asyncio.sleep(TICK)
            now = loop.time()
            room = BATCH if now - due <= QUIET else 0
            while waiting:
                since, turn = waiting[0]
                if turn.done():  # given up (its stream was cancelled)
                    waiting.popleft()
                elif room > 0 or now - since >= MAX_WAIT:
                    waiting.popleft()
                    turn.set_result(None)
                    room -= 1
                else:
                    break
