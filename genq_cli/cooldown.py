"""What ``genq cooldown clear`` does, over the gateway's admin route (admin key).

A provider's 429 with a Retry-After pauses its whole queue (at most ``GENQ_MAX_COOLDOWN`` per
429). When the provider is known to be fine again, an operator ends the pause early; the
gateway records it in its audit log.
"""

from __future__ import annotations

from typing import Any

import typer

from .support import checked, http, run


def clear(queue: str) -> int:
    async def go() -> tuple[float, dict[str, Any]]:
        async with http() as client:
            before = checked(await client.get(f"/v1/queues/{queue}"))
            after = checked(await client.delete(f"/v1/queues/{queue}/cooldown"))
            return float(before["cooldown_remaining"]), after

    remaining, stats = run(go)
    if remaining > 0:
        typer.echo(f"{queue}: cooldown cleared ({remaining:.1f}s were left)")
    else:
        typer.echo(f"{queue}: no cooldown was in force")
    typer.echo(f"{stats['waiting']} waiting, {stats['scheduled']} scheduled", err=True)
    return 0
