"""What ``genq batches list|get|cancel`` do, over the gateway's HTTP API (``GENQ_URL``,
``GENQ_API_KEY``): a key's own batches through ``/v1/batches``; with ``--all`` (admin key)
every tenant's, through ``/v1/admin/batches``. Exit codes: 0 done, 4 the command failed
(refused, unknown batch, gateway unreachable).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import typer

from genq_client import APIError

from .support import http, run

STATUS_STYLE = {
    "completed": "green",
    "in_progress": "cyan",
    "validating": "cyan",
    "finalizing": "cyan",
    "cancelling": "yellow",
    "cancelled": "yellow",
    "expired": "yellow",
    "failed": "red",
}


def _json(response: httpx.Response) -> Any:
    """The JSON of a 2xx answer; :class:`APIError` with the message otherwise (OpenAI's
    ``{"error": {"message"}}`` or the native ``{"detail"}``)."""
    if response.is_success:
        return response.json()
    try:
        body = response.json()
    except ValueError:
        raise APIError(response.status_code, response.text) from None
    error = body.get("error") if isinstance(body, dict) else None
    detail = error.get("message") if isinstance(error, dict) else body.get("detail")
    raise APIError(response.status_code, detail)


def _get(path: str, params: dict[str, Any] | None = None) -> Any:
    async def go() -> Any:
        async with http() as client:
            return _json(await client.get(path, params=params))

    return run(go)


def _post(path: str) -> Any:
    async def go() -> Any:
        async with http() as client:
            return _json(await client.post(path))

    return run(go)


def progress(batch: dict[str, Any]) -> str:
    counts = batch.get("request_counts") or {}
    total, done = counts.get("total", 0), counts.get("completed", 0) + counts.get("failed", 0)
    return f"{done}/{total}" + (
        f" ({counts.get('failed', 0)} failed)" if counts.get("failed") else ""
    )


def batches_list(every: bool, limit: int, as_json: bool) -> int:
    if every:
        batches = _get("/v1/admin/batches", {"limit": limit})["batches"]
    else:
        batches = _get("/v1/batches", {"limit": limit})["data"]
    if as_json:
        typer.echo(json.dumps(batches, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"batches (newest {limit})")
    columns = ["created", "id", *(["tenant"] if every else []), "endpoint", "status", "progress"]
    for name in columns:
        table.add_column(name)
    for batch in batches:
        status = batch["status"]
        table.add_row(
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(batch["created_at"])),
            batch["id"],
            *([batch.get("tenant", "")] if every else []),
            batch["endpoint"],
            f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]",
            progress(batch),
        )
    Console(width=160).print(table)
    if not batches:
        typer.echo("no batches", err=True)
    return 0


def batches_get(batch_id: str, as_json: bool) -> int:
    batch = _get(f"/v1/batches/{batch_id}")
    if as_json:
        typer.echo(json.dumps(batch, indent=2))
        return 0
    typer.echo(f"{batch['id']}  {batch['status']}  {progress(batch)}  {batch['endpoint']}")
    for name in ("input_file_id", "output_file_id", "error_file_id"):
        if batch.get(name):
            typer.echo(f"  {name}: {batch[name]}")
    for error in (batch.get("errors") or {}).get("data") or []:
        typer.echo(f"  line {error.get('line')}: {error.get('code')}: {error.get('message')}")
    return 0


def batches_cancel(batch_id: str, every: bool) -> int:
    path = f"/v1/admin/batches/{batch_id}/cancel" if every else f"/v1/batches/{batch_id}/cancel"
    batch = _post(path)
    typer.echo(f"{batch['id']}  {batch['status']}  {progress(batch)}")
    return 0
