"""What ``genq webhooks ...`` does, over the gateway's admin routes (admin key): ``list`` every
tenant's webhook endpoints (``GET /v1/webhooks``), ``deliveries`` one endpoint's delivery log,
newest first (``GET /v1/webhooks/{id}/deliveries``), ``test`` sends it a sample event now
(``POST /v1/webhooks/{id}/test``). Exit codes: 0 done, 4 the command failed (refused, unknown
endpoint, gateway unreachable).
"""

from __future__ import annotations

import json
import time
from typing import Any

import typer

from .support import checked, http, one_line, run

OUTCOME_STYLE = {"delivered": "green", "retrying": "yellow", "given_up": "red"}


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def webhooks_list(tenant: str | None, as_json: bool) -> int:
    async def go() -> dict[str, Any]:
        params = {"tenant": tenant} if tenant is not None else {}
        async with http() as client:
            return dict(checked(await client.get("/v1/webhooks", params=params)))

    endpoints: list[dict[str, Any]] = run(go)["endpoints"]
    if as_json:
        typer.echo(json.dumps(endpoints, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="webhook endpoints")
    for name in ("id", "tenant", "name", "url", "events", "created"):
        table.add_column(name)
    for e in endpoints:
        table.add_row(
            e["id"], e["tenant"], e["name"], e["url"], ", ".join(e["event_types"]),
            _when(e["created_at"]),
        )  # fmt: skip
    Console(width=200).print(table)
    if not endpoints:
        typer.echo("no webhook endpoints", err=True)
    return 0


def webhooks_deliveries(endpoint_id: str, limit: int, as_json: bool) -> int:
    async def go() -> dict[str, Any]:
        async with http() as client:
            path = f"/v1/webhooks/{endpoint_id}/deliveries"
            return dict(checked(await client.get(path, params={"limit": limit})))

    entries: list[dict[str, Any]] = run(go)["data"]
    if as_json:
        typer.echo(json.dumps(entries, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"deliveries to {endpoint_id} (newest {limit})")
    for name in ("when", "event", "type", "webhook-id", "attempt", "result", "outcome"):
        table.add_column(name, justify="right" if name == "attempt" else "left")
    for entry in entries:
        status, error = entry["status"], entry.get("error")
        result = str(status) if status is not None else one_line(error or "")
        outcome = entry["outcome"]
        table.add_row(
            _when(entry["at"]), entry["event_id"], entry["event_type"], entry["webhook_id"],
            str(entry["attempt"]), result, f"[{OUTCOME_STYLE.get(outcome, 'white')}]{outcome}[/]",
        )  # fmt: skip
    Console(width=200).print(table)
    if not entries:
        typer.echo("no deliveries yet", err=True)
    return 0


def webhooks_test(endpoint_id: str, event_type: str) -> int:
    async def go() -> dict[str, Any]:
        async with http() as client:
            path = f"/v1/webhooks/{endpoint_id}/test"
            return dict(checked(await client.post(path, json={"event_type": event_type})))

    answer = run(go)
    typer.echo(f"{event_type} sent to {endpoint_id}: HTTP {answer['status_code']}")
    return 0
