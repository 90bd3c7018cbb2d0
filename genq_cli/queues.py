"""What ``genq stats`` and ``genq dead ...`` do, over the gateway's admin routes.

These need a key with the admin role (``genq keys create --admin``). A job id names its queue
(``<provider>.<hex>``), so ``retry``/``purge`` of ids need no ``--queue``. ``dead watch`` is the
one command that reads Redis directly (``GENQ_REDIS_URL``, any URL form the servers take):
dead-letter notices are a Redis pub/sub channel, not an HTTP resource.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

import typer

from genq_contract.settings import CommonSettings

from .support import checked, fail, http, one_line, run


async def _queue_names(client: Any, queue: str | None) -> list[str]:
    if queue is not None:
        return [queue]
    return [q["name"] for q in checked(await client.get("/v1/queues"))]


def stats(as_json: bool) -> int:
    async def go() -> list[dict[str, Any]]:
        async with http() as client:
            return list(checked(await client.get("/v1/queues")))

    rows = run(go)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="genq queues")
    columns = ("waiting", "scheduled", "active", "dead", "oldest_wait", "cooldown_remaining")
    table.add_column("queue")
    for name in columns:
        table.add_column(name.replace("_", " "), justify="right")
    for row in rows:
        table.add_row(row["name"], *(_cell(row[name]) for name in columns))
    Console(width=120).print(table)
    return 0


def _cell(value: Any) -> str:
    return f"{value:.1f}s" if isinstance(value, float) else str(value)


def dead_list(queue: str | None, count: int, as_json: bool) -> int:
    async def go() -> list[dict[str, Any]]:
        async with http() as client:
            pages = []
            for name in await _queue_names(client, queue):
                page = checked(await client.get(f"/v1/queues/{name}/dead", params={"count": count}))
                pages.append(page)
            return pages

    pages = run(go)
    if as_json:
        typer.echo(json.dumps(pages, indent=2))
        return 0
    for page in pages:
        for entry in page["entries"]:
            died = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry["died_at"]))
            error = one_line(entry["error"] or "")
            typer.echo(
                f"{entry['id']}  {page['queue']}  {died}  {entry['reason']}  "
                f"attempts={entry['attempts']}  {error}"
            )
    total = sum(page["total"] for page in pages)
    typer.echo(f"{total} dead job(s)", err=True)
    return 0


def _by_queue(ids: list[str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for job_id in ids:
        provider, dot, _ = job_id.partition(".")
        if not dot or not provider:
            fail(f"{job_id!r} is not a generation id (<provider>.<hex>)")
        grouped[provider].append(job_id)
    return grouped


def dead_apply(action: str, ids: list[str], all_: bool, queue: str | None) -> int:
    """``action`` is ``retry`` or ``purge``: the given ids, or ``--all`` of every queue."""
    if bool(ids) == all_:
        fail("give job ids or --all (not both)")

    async def go() -> tuple[int, int]:
        async with http() as client:
            selections: dict[str, dict[str, Any]]
            if all_:
                selections = {name: {"all": True} for name in await _queue_names(client, queue)}
            else:
                selections = {name: {"ids": group} for name, group in _by_queue(ids).items()}
            done = 0
            for name, body in selections.items():
                answer = checked(await client.post(f"/v1/queues/{name}/dead/{action}", json=body))
                done += int(answer["count"])
            return done, len(ids)

    done, asked = run(go)
    verb = "retried" if action == "retry" else "purged"
    typer.echo(f"{verb} {done} dead job(s)")
    if not all_ and done < asked:
        typer.echo(f"{asked - done} id(s) were not dead letters", err=True)
        return 1
    return 0


def dead_watch(count: int | None) -> int:
    """Prints each dead-letter notice (one JSON line, with its queue) as it is published."""
    from genq import DeadLetterWatch, Queue, connect

    settings = CommonSettings()
    names = {p.queue_prefix: name for name, p in settings.routing().providers.items()}

    async def go() -> int:
        redis = connect(settings.redis_url)
        try:
            queues = [Queue(redis, prefix) for prefix in names]
            async with DeadLetterWatch(queues) as watch:
                typer.echo(f"watching {len(queues)} queue(s) for dead letters", err=True)
                seen = 0
                while count is None or seen < count:
                    queue, notice = await anext(watch)
                    typer.echo(json.dumps({"queue": names[queue.prefix], **notice}))
                    seen += 1
                return 0
        finally:
            await redis.aclose()

    return run(go)
