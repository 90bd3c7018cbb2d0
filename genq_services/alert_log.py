"""The alert delivery log: one entry per webhook POST attempt, written by workers, read by the
gateway (``GET /v1/alerts``, the ``/admin`` panel, ``genq alerts list``).

A Redis stream under the queue namespace (:attr:`genq_contract.keys.GatewayKeys.alert_log`) of
:class:`~genq_contract.alert_attempt.AlertAttempt` entries, trimmed to about ``MAX_ENTRIES``.
"""

from __future__ import annotations

from typing import Any

from genq_contract.alert_attempt import MAX_ENTRIES, AlertAttempt


async def record_attempt(redis: Any, key: str, attempt: AlertAttempt) -> None:
    await redis.xadd(key, attempt.fields(), maxlen=MAX_ENTRIES, approximate=True)


async def recent_attempts(redis: Any, key: str, limit: int) -> list[AlertAttempt]:
    """The newest ``limit`` attempts, newest first."""
    entries = await redis.xrevrange(key, count=limit)
    return [AlertAttempt.from_entry(entry_id, fields) for entry_id, fields in entries]
