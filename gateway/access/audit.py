"""The operations audit log: who did what to which generations, when, and why.

Every operator action writes one entry: retry, purge, cancel, delete, enqueue,
clear_cooldown; ``reason`` is the operator's note (None when none was given).

A Redis stream under a gateway-owned key (``genq_contract.keys.GatewayKeys.audit``), trimmed
to about ``MAX_ENTRIES``; the entry id gives the time (Redis clock).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from genq import as_text

MAX_ENTRIES = 1000
MAX_IDS = 100
"""Ids kept per entry (the count is always exact)."""


@dataclass(frozen=True)
class AuditEntry:
    at: float
    actor: str
    action: str
    queue: str
    count: int
    ids: list[str]
    reason: str | None = None


class Audit:
    def __init__(self, redis: Any, key: str) -> None:
        self.redis = redis
        self.key = key

    async def record(
        self,
        actor: str,
        action: str,
        queue: str,
        count: int,
        ids: list[str],
        reason: str | None = None,
    ) -> None:
        fields = {
            "actor": actor,
            "action": action,
            "queue": queue,
            "count": str(count),
            "ids": json.dumps(ids[:MAX_IDS]),
        }
        if reason is not None:  # Redis has no null: no note is an absent field
            fields["reason"] = reason
        await self.redis.xadd(self.key, fields, maxlen=MAX_ENTRIES, approximate=True)

    async def recent(self, limit: int) -> list[AuditEntry]:
        entries = await self.redis.xrevrange(self.key, count=limit)
        return [_entry(entry_id, fields) for entry_id, fields in entries]


def _entry(entry_id: Any, raw: dict[Any, Any]) -> AuditEntry:
    f = {as_text(k): as_text(v) for k, v in raw.items()}
    return AuditEntry(
        at=int(as_text(entry_id).split("-")[0]) / 1000,
        actor=f.get("actor", ""),
        action=f.get("action", ""),
        queue=f.get("queue", ""),
        count=int(f.get("count", 0)),
        ids=json.loads(f.get("ids", "[]")),
        reason=f.get("reason"),
    )
