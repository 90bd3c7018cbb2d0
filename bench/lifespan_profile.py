"""cProfile over a served app's whole life, for the benches that serve the gateway from a
process of their own (``bench.batch``, ``bench.admission``)."""

from __future__ import annotations

import contextlib
import cProfile
import os
from collections.abc import AsyncIterator
from typing import Any


def profile_when_asked(app: Any, env: str) -> Any:
    """``app``, profiled from its startup to its shutdown into the file the environment
    variable ``env`` names (nothing when it is unset)."""
    path = os.environ.get(env)
    if not path:
        return app
    opened = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def profiled(app: Any) -> AsyncIterator[Any]:
        profile = cProfile.Profile()
        profile.enable()
        try:
            async with opened(app) as state:
                yield state
        finally:
            profile.disable()
            profile.dump_stats(path)

    app.router.lifespan_context = profiled
    return app
