"""The dead-letter alert delivery log (admin role): every webhook POST attempt the workers made,
newest first, with what came of it (``genq_services.alert_log``; ``/admin`` and
``genq alerts list`` show it)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from genq_contract.alert_attempt import MAX_ENTRIES
from genq_services.alert_log import recent_attempts

from ..deps import AdminDep, GatewayDep
from ..errors import ERRORS

router = APIRouter(tags=["operations"], responses=ERRORS)


class AlertAttemptOut(BaseModel):
    at: float = Field(description="When the attempt ended, epoch seconds")
    webhook: str = Field(description="The webhook's name (`default`: GENQ_ALERT_WEBHOOK_URL)")
    job_id: str = Field(description="The dead-lettered generation the alert is about")
    queue: str = Field(description="Its provider queue")
    attempt: int = Field(description="The delivery's attempt, from 1")
    outcome: Literal["delivered", "retrying", "given_up"]
    status: int | None = Field(description="The receiver's HTTP status; null: no answer")
    error: str | None = None
    delivery: str = Field(description="The delivery id (X-Genq-Delivery), kept across retries")


class AlertLog(BaseModel):
    entries: list[AlertAttemptOut]
    max_entries: int = Field(description="About how many attempts the log keeps")


@router.get("/v1/alerts", response_model=AlertLog)
async def alert_log(
    gateway: GatewayDep,
    _: AdminDep,
    limit: Annotated[int, Query(ge=1, le=MAX_ENTRIES, description="Newest first")] = 50,
) -> AlertLog:
    """Dead-letter alert deliveries, newest first: one entry per webhook POST attempt (time,
    webhook, generation, queue, attempt, HTTP status or error, delivered / retrying /
    given_up)."""
    attempts = await recent_attempts(gateway.redis, gateway.settings.keys.alert_log, limit)
    entries = [AlertAttemptOut(**a.as_dict()) for a in attempts]
    return AlertLog(entries=entries, max_entries=MAX_ENTRIES)
