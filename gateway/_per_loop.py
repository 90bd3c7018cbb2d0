"""One object per event loop: the gateway's loop-wide helpers (a stream's send watchdog, the
quiet gate for stream endings) are each made once per loop and found again from any task."""

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
