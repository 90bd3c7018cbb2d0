"""What ``genq alerts list`` does: the dead-letter alert delivery log, over the gateway's admin
route ``GET /v1/alerts`` (admin key): one row per webhook POST attempt, newest first. Exit
codes: 0 shown, 4 the command failed (refused, gateway unreachable).
"""

from __future__ import annotations

import json
import time
from typing import Any

import typer

from .support import checked, http, one_line, run

OUTCOME_STYLE = {"delivered": "green", "retrying": "yellow", "given_up": "red"}


def alerts_list(limit: int, as_json: bool) -> int:
    async def go() -> dict[str, Any]:
        async with http() as client:
            return dict(checked(await client.get("/v1/alerts", params={"limit": limit})))

    answer = run(go)
    entries: list[dict[str, Any]] = answer["entries"]
    if as_json:
        typer.echo(json.dumps(entries, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"dead-letter alert deliveries (newest {limit})")
    for name in ("when", "webhook", "queue", "job", "attempt", "result", "outcome"):
        table.add_column(name, justify="right" if name == "attempt" else "left")
    for entry in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry["at"]))
        # the HTTP status when the receiver answered, else why no answer came
        status, error = entry["status"], entry.get("error")
        result = str(status) if status is not None else one_line(error or "")
        outcome = entry["outcome"]
        table.add_row(
            when,
            entry["webhook"],
            entry["queue"],
            entry["job_id"],
            str(entry["attempt"]),
            result,
            f"[{OUTCOME_STYLE.get(outcome, 'white')}]{outcome}[/]",
        )
    Console(width=160).print(table)
    if not entries:
        typer.echo("no alert deliveries yet", err=True)
    return 0
