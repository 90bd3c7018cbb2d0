"""What ``genq enqueue`` and ``genq jobs ...`` do, over the gateway's HTTP API.

Exit codes of the commands that report a job's outcome (``jobs get``, ``enqueue --watch``):
0 completed, 1 failed, 2 cancelled, 3 not finished yet (``jobs get`` without ``--watch``),
4 the command itself failed (unknown id, bad key, gateway unreachable).

With ``--queue`` (an admin key), ``jobs list`` and ``jobs cancel|retry|delete`` operate any
tenant's jobs in that queue: ids, or ``--all --status S`` (a snapshot taken by the gateway).
Exit codes: 0 every selected job was acted on, 1 some were not (finished, gone, not in that
state) or the confirmation was declined, 4 the command failed.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Literal

import typer

from genq_client import AsyncClient, Event, JobPage
from genq_contract.events import (
    CANCELLED,
    CHUNK,
    COMPLETED,
    FAILED,
    PROGRESS,
    REASONING,
    RESTARTED,
    TOOL_DONE,
)

from .support import client, fail, one_line, run, write

EXIT_BY_STATUS = {COMPLETED: 0, FAILED: 1, CANCELLED: 2}
EXIT_UNFINISHED = 3
NO_PROGRESS = "no progress"  # a record or bar before the handler reports any


def exit_code(status: str) -> int:
    return EXIT_BY_STATUS.get(status, EXIT_UNFINISHED)


def chunk_text(data: Any) -> str:
    if isinstance(data, dict):
        return str(data.get("text", data.get("delta", "")))
    return "" if data is None else str(data)


def enqueue(
    model: str,
    prompt: str,
    *,
    priority: int | None,
    delay_ms: int | None,
    idempotency_key: str | None,
    metadata: str | None,
    watch: bool,
    progress: bool,
) -> int:
    meta = _json_object(metadata) if metadata is not None else None

    async def go() -> int:
        async with client() as genq:
            created = await genq.generate(
                model,
                prompt,
                priority=priority,
                delay_ms=delay_ms,
                idempotency_key=idempotency_key,
                metadata=meta,
            )
            typer.echo(created.id, err=watch)
            if not watch:
                return 0
            return await follow(genq, created.id, progress)

    return run(go)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        fail(f"--metadata is not JSON: {exc}")
    if not isinstance(value, dict):
        fail("--metadata must be a JSON object")
    return value


def get(job_id: str, *, watch: bool, progress: bool, as_json: bool) -> int:
    async def go() -> int:
        async with client() as genq:
            if watch:
                return await follow(genq, job_id, progress)
            record = await genq.get(job_id)
            if as_json:
                typer.echo(json.dumps(record, indent=2))
            else:
                show(record)
            return exit_code(record["status"])

    return run(go)


def cancel(job_id: str) -> int:
    async def go() -> int:
        async with client() as genq:
            answer = await genq.cancel(job_id)
        word = "cancelled" if answer["cancelled"] else "not cancelled"
        typer.echo(f"{job_id} {word} (status: {answer['status']})")
        return 0 if answer["cancelled"] else 1

    return run(go)


# -- operating a queue (admin key) --------------------------------------------------------------

Action = Literal["cancel", "retry", "delete"]
DONE = {"cancel": "cancelled", "retry": "retried", "delete": "deleted"}
LIST_COLUMNS = ("id", "status", "tenant", "model", "attempt", "created", "error")
BULK_IDS = 1000
"""Ids per bulk request (the gateway's limit)."""


def list_jobs(
    queue: str,
    *,
    status: str | None,
    tenant: str | None,
    model: str | None,
    limit: int,
    cursor: str | None,
    all_pages: bool,
    as_json: bool,
) -> int:
    """Prints a queue's jobs, newest first: a table, or one JSON object per line."""

    async def go() -> tuple[list[dict[str, Any]], JobPage]:
        async with client() as genq:
            rows: list[dict[str, Any]] = []
            at = cursor
            while True:
                page = await genq.list_jobs(
                    queue, status=status, tenant=tenant, model=model, limit=limit, cursor=at
                )
                rows += page.jobs
                if not all_pages or page.next_cursor is None:
                    return rows, page
                at = page.next_cursor

    rows, last = run(go)
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
    else:
        _table(queue, rows)
        counts = ", ".join(f"{n} {name}" for name, n in last.counts.items())
        typer.echo(f"{len(rows)} job(s) shown; in {queue}: {counts}", err=True)
    if last.next_cursor is not None:
        typer.echo(f"more: --cursor {last.next_cursor} (or --all-pages)", err=True)
    return 0


def _table(queue: str, rows: list[dict[str, Any]]) -> None:
    import time

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"jobs in {queue}")
    for name in LIST_COLUMNS:
        table.add_column(name, justify="right" if name == "attempt" else "left")
    for row in rows:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["created_at"]))
        table.add_row(
            row["id"],
            row["status"],
            row.get("tenant") or "",
            row.get("model") or "",
            f"{row['attempt']}/{row['max_attempts']}",
            created,
            one_line(row.get("error") or "")[:60],
        )
    Console(width=160).print(table)


def act(
    action: Action,
    queue: str,
    ids: list[str],
    *,
    all_: bool,
    status: str | None,
    tenant: str | None,
    reason: str | None,
    yes: bool,
) -> int:
    """Cancels, retries or deletes the given ids, or (``--all``) every job of ``status``."""
    if bool(ids) == all_:
        fail("give job ids or --all --status S (not both)")
    if all_ and status is None:
        fail("--all needs --status")
    if not all_ and (status is not None or tenant is not None):
        fail("--status and --tenant select with --all, not with ids")

    async def matching() -> int:
        async with client() as genq:
            page = await genq.list_jobs(queue, status=status, tenant=tenant, limit=1)
        return page.counts.get("failed" if status == "dead" else str(status), 0)

    if all_ and not yes:
        count = run(matching)
        whose = f" of tenant {tenant}" if tenant else ""
        if not typer.confirm(f"{action} {count} {status} job(s){whose} in {queue}?"):
            typer.echo("nothing done", err=True)
            return 1

    async def go() -> tuple[int, int]:
        async with client() as genq:
            if all_:
                done = await genq.bulk(action, queue, status=status, tenant=tenant, reason=reason)
                return done.count, done.matched
            acted = matched = 0
            for start in range(0, len(ids), BULK_IDS):
                chunk = ids[start : start + BULK_IDS]
                done = await genq.bulk(action, queue, chunk, reason=reason)
                acted, matched = acted + done.count, matched + done.matched
            return acted, matched

    acted, matched = run(go)
    typer.echo(f"{DONE[action]} {acted} of {matched} matching job(s) in {queue}")
    missing = len(set(ids)) - matched
    if missing > 0:
        typer.echo(f"{missing} id(s) are not jobs of {queue}", err=True)
    return 0 if acted == matched and missing <= 0 else 1


def show(record: dict[str, Any]) -> None:
    for name in ("id", "status", "model", "attempt", "max_attempts", "progress", "error"):
        if record.get(name) is not None:
            typer.echo(f"{name}: {record[name]}")
        elif name == "progress":
            typer.echo(f"progress: {NO_PROGRESS}")
    if isinstance(record.get("reasoning"), str):
        typer.echo("")
        typer.echo("reasoning:")
        typer.echo(record["reasoning"])
    if record.get("text") is not None:
        typer.echo("")
        typer.echo(record["text"])
    calls = record.get("tool_calls")
    if isinstance(calls, list) and calls:
        typer.echo("")
        for call in calls:
            typer.echo(tool_call_line(call))


def tool_call_line(call: Any) -> str:
    """``tool call <name> <id>: <arguments>`` (what a record or a tool_done event holds)."""
    call = call if isinstance(call, dict) else {}
    return f"tool call {call.get('name')} {call.get('id')}: {call.get('arguments')}"


async def follow(genq: AsyncClient, job_id: str, progress: bool) -> int:
    """Streams the job until it ends (text on stdout, or a progress bar); the exit code."""
    watcher = _Bar() if progress else _Text()
    terminal: Event | None = None
    with watcher:
        async for event in genq.stream(job_id):
            watcher.on(event)
            if event.terminal:
                terminal = event
    if terminal is None:  # the stream was already past its end: ask the record
        status = (await genq.get(job_id))["status"]
        error = None
    else:
        status, error = terminal.type, terminal.data
    if status == FAILED:
        typer.echo(f"failed: {chunk_text(error) or 'no error message'}", err=True)
    elif status == CANCELLED:
        typer.echo("cancelled", err=True)
    elif status not in EXIT_BY_STATUS:
        typer.echo(f"stream ended while the job is {status}", err=True)
    return exit_code(status)


class _Text:
    """Prints the text as it streams, and each tool call once whole; the reasoning streams on
    stderr; a retried attempt is announced on stderr."""

    def __init__(self) -> None:
        self.wrote = False

    def __enter__(self) -> _Text:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.wrote:
            write("\n")

    def on(self, event: Event) -> None:
        if event.type == CHUNK:
            piece = chunk_text(event.data)
            self.wrote = self.wrote or bool(piece)
            write(piece)
        elif event.type == REASONING and isinstance(event.data, str):
            typer.echo(event.data, err=True, nl=False)
        elif event.type == TOOL_DONE:
            if self.wrote:
                write("\n")
                self.wrote = False
            typer.echo(tool_call_line(event.data))
        elif event.type == RESTARTED:
            if self.wrote:
                write("\n")
                self.wrote = False
            typer.echo("[restarted: the output starts again]", err=True)


class _Bar:
    """A rich progress bar (on stderr): ``progress`` events, or the characters received.

    Until the handler reports progress the bar pulses and reads "no progress" (not 0%).
    """

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[done]}"),
            TextColumn("{task.fields[chars]} chars"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self.task = self.progress.add_task("running", total=None, chars=0, done=NO_PROGRESS)
        self.chars = 0

    def __enter__(self) -> _Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _report(self, fraction: float) -> None:
        self.progress.update(self.task, total=1.0, completed=fraction, done=f"{fraction:>4.0%}")

    def on(self, event: Event) -> None:
        if event.type == CHUNK:
            self.chars += len(chunk_text(event.data))
        elif event.type == RESTARTED:
            self.chars = 0
            self.progress.update(self.task, total=None, completed=0.0, done=NO_PROGRESS)
        elif event.type == PROGRESS:
            with contextlib.suppress(TypeError, ValueError):
                self._report(float(event.data))
        elif event.terminal:
            if event.type == COMPLETED:
                self._report(1.0)
            self.progress.update(self.task, description=event.type)
        self.progress.update(self.task, chars=self.chars)
