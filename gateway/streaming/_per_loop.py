"""One object per event loop: the gateway's loop-wide helpers (a stream's send watchdog, the
quiet gate for stream endings) are each made once per loop and found again from any task.

They stay per event loop, not in the process state (:class:`gateway.state.Gateway`): each
owns a task and futures of its loop, and the sends and endings that find them run below the
route, where no request (and so no app) is at hand; a process running several loops (the tests,
an embedded server) gets one of each per loop."""

from __future__ import annotations

import asyncio
import weakref
from typing import ClassVar, Self


class PerLoop:
    """A base for classes with one instance per event loop, made on first use with the loop."""

    _loops: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PerLoop]]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._loops = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    @classmethod
    def of_this_loop(cls) -> Self:
        loop = asyncio.get_running_loop()
        found = cls._loops.get(loop)
        if found is None:
            found = cls._loops[loop] = cls(loop)
        return found  # type: ignore[return-value]
