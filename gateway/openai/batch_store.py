"""Batches (``/v1/batches``) kept in Redis: one hash per batch, a zset of each tenant's, and
one of the batches not yet final (the runners' work list, :mod:`.batch_runner`).

The hash holds OpenAI's batch object field by field (timestamps, counts, the ids of its
files; ``errors`` and ``metadata`` as JSON) and the state its runner keeps: ``tenant``,
``key_id`` (who it runs as), ``admitted`` (lines admitted so far, in file order).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from genq_contract.keys import GatewayKeys

BATCH_PREFIX = "batch_"
ENDPOINTS = ("/v1/chat/completions", "/v1/responses")
COMPLETION_WINDOWS = ("24h",)

VALIDATING = "validating"
FAILED = "failed"
IN_PROGRESS = "in_progress"
FINALIZING = "finalizing"
COMPLETED = "completed"
EXPIRED = "expired"
CANCELLING = "cancelling"
CANCELLED = "cancelled"
FINAL = frozenset({FAILED, COMPLETED, EXPIRED, CANCELLED})

_TIMES = (
    "created_at",
    "in_progress_at",
    "expires_at",
    "finalizing_at",
    "completed_at",
    "failed_at",
    "expired_at",
    "cancelling_at",
    "cancelled_at",
)
_COUNTS = ("total", "completed", "failed")


def new_batch_id() -> str:
    return f"{BATCH_PREFIX}{uuid.uuid4().hex}"


def batch_object(raw: dict[str, str]) -> dict[str, Any]:
    """OpenAI's batch object from a batch hash."""

    def number(name: str) -> int | None:
        value = raw.get(name)
        return int(value) if value else None

    errors = raw.get("errors")
    return {
        "id": raw["id"],
        "object": "batch",
        "endpoint": raw["endpoint"],
        "errors": json.loads(errors) if errors else None,
        "input_file_id": raw["input_file_id"],
        "completion_window": raw["completion_window"],
        "status": raw["status"],
        "output_file_id": raw.get("output_file_id") or None,
        "error_file_id": raw.get("error_file_id") or None,
        **{name: number(name) for name in _TIMES},
        "request_counts": {name: number(name) or 0 for name in _COUNTS},
        "metadata": json.loads(raw["metadata"]) if raw.get("metadata") else None,
    }


def error_list(errors: list[dict[str, Any]]) -> str:
    """OpenAI's ``errors`` of a batch that failed validation (JSON for the hash)."""
    return json.dumps({"object": "list", "data": errors})


class BatchStore:
    def __init__(self, redis: Any, keys: GatewayKeys) -> None:
        self.redis = redis
        self.keys = keys
        self._move = redis.register_script(_MOVE)

    async def create(
        self,
        *,
        tenant: str,
        key_id: str,
        endpoint: str,
        input_file_id: str,
        completion_window: str,
        metadata: dict[str, str] | None,
        window: float,
        traceparent: str | None = None,
    ) -> dict[str, str]:
        now = int(time.time())
        raw = {
            "id": new_batch_id(),
            "tenant": tenant,
            "key_id": key_id,
            "endpoint": endpoint,
            "input_file_id": input_file_id,
            "completion_window": completion_window,
            "status": VALIDATING,
            "created_at": str(now),
            "expires_at": str(now + int(window)),
            "metadata": json.dumps(metadata) if metadata else "",
            "total": "0",
            "completed": "0",
            "failed": "0",
            "admitted": "0",
            # The create's trace: each admission of lines is linked to it.
            "traceparent": traceparent or "",
        }
        created_ms = now * 1000
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.batch(raw["id"]), mapping=raw)
            pipe.zadd(self.keys.batches(tenant), {raw["id"]: created_ms})
            pipe.zadd(self.keys.all_batches, {raw["id"]: created_ms})
            pipe.zadd(self.keys.active_batches, {raw["id"]: created_ms})
            await pipe.execute()
        return raw

    async def read(self, batch_id: str) -> dict[str, str] | None:
        if not batch_id.startswith(BATCH_PREFIX) or len(batch_id) > 80:
            return None
        raw = await self.redis.hgetall(self.keys.batch(batch_id))
        if not raw:
            return None
        return {_text(k): _text(v) for k, v in raw.items()}

    async def get(self, tenant: str, batch_id: str) -> dict[str, str] | None:
        """The tenant's batch; None for an unknown or another tenant's id."""
        raw = await self.read(batch_id)
        return raw if raw is not None and raw.get("tenant") == tenant else None

    async def update(self, batch_id: str, **fields: Any) -> None:
        await self.redis.hset(
            self.keys.batch(batch_id), mapping={k: str(v) for k, v in fields.items()}
        )

    async def move(self, batch_id: str, expected: frozenset[str], status: str) -> bool:
        """Sets ``status`` (and its ``<status>_at``) if the batch is in one of ``expected``:
        a compare and set, so a cancel and a runner's step never both win."""
        moved = await self._move(
            keys=[self.keys.batch(batch_id)],
            args=[status, f"{status}_at", int(time.time()), *sorted(expected)],
        )
        return bool(moved)

    async def finish(self, batch_id: str, keep: float | None) -> None:
        """Takes a final batch off the runners' list; its record is kept ``keep`` seconds."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self.keys.active_batches, batch_id)
            if keep:
                pipe.expire(self.keys.batch(batch_id), int(keep))
                pipe.expire(self.keys.batch_lines(batch_id), int(keep))
            await pipe.execute()

    async def active(self, count: int) -> list[str]:
        ids = await self.redis.zrange(self.keys.active_batches, 0, count - 1)
        return [_text(i) for i in ids]

    async def page(
        self, tenant: str | None, after: str | None, limit: int
    ) -> tuple[list[dict[str, str]], bool]:
        """The tenant's batches (None: every tenant's), newest first, after the batch
        ``after``; and whether more follow. Ids whose record expired are dropped here."""
        index = self.keys.all_batches if tenant is None else self.keys.batches(tenant)
        ids = [_text(i) for i in await self.redis.zrange(index, 0, -1, desc=True)]
        if after is not None:
            ids = ids[ids.index(after) + 1 :] if after in ids else []
        found: list[dict[str, str]] = []
        gone: list[str] = []
        for batch_id in ids:
            raw = await self.read(batch_id)
            if raw is None:
                gone.append(batch_id)
            else:
                found.append(raw)
            if len(found) > limit:
                break
        if gone:
            await self.redis.zrem(index, *gone)
        return found[:limit], len(found) > limit

    # -- lines -----------------------------------------------------------------------------

    async def write_lines(self, batch_id: str, lines: dict[int, dict[str, Any]]) -> None:
        if lines:
            await self.redis.hset(
                self.keys.batch_lines(batch_id),
                mapping={str(n): json.dumps(line) for n, line in lines.items()},
            )

    async def lines(self, batch_id: str) -> dict[int, dict[str, Any]]:
        raw = await self.redis.hgetall(self.keys.batch_lines(batch_id))
        return {int(_text(n)): json.loads(_text(v)) for n, v in raw.items()}

    # -- the runner's lease ----------------------------------------------------------------

    async def claim(self, batch_id: str, owner: str, lease_ms: int) -> bool:
        """Takes or renews the lease on driving the batch; False while another runner's
        lease lives."""
        key = self.keys.batch_runner(batch_id)
        if await self.redis.set(key, owner, nx=True, px=lease_ms):
            return True
        if _text(await self.redis.get(key) or b"") == owner:
            await self.redis.pexpire(key, lease_ms)
            return True
        return False

    async def release(self, batch_id: str, owner: str) -> None:
        key = self.keys.batch_runner(batch_id)
        if _text(await self.redis.get(key) or b"") == owner:
            await self.redis.delete(key)


_MOVE = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 0 end
for i = 4, #ARGV do
  if ARGV[i] == status then
    redis.call('HSET', KEYS[1], 'status', ARGV[1], ARGV[2], ARGV[3])
    return 1
  end
end
return 0
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
