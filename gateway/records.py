"""A job as the API shows it: the caller's own view, no other tenant's data, no prompt echo.

It names the API key the job runs as (``key_id``); the operators' views add the tenant. The
bodies (:class:`Generation` and its kin, also the OpenAPI schema) are here, beside the code
that fills them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from genq import Job, JobStatus
from genq_contract.parts import ToolCall
from genq_contract.payload import payload_fields
from genq_contract.result import read_result
from genq_contract.spend import Usage


class AttemptOut(BaseModel):
    """One attempt that ended, and what it cost."""

    attempt: int
    started_at: float | None = Field(description="Epoch seconds")
    ended_at: float = Field(description="Epoch seconds")
    outcome: str = Field(
        description="completed | retry | failed | cancelled | lease_expired | released"
    )
    error: str | None = None
    model: str | None = Field(default=None, description="The model this attempt called")
    usage: dict[str, Any] | None = Field(
        default=None, description="This attempt's tokens and cost (the shape of usage above)"
    )


class Generation(BaseModel):
    """A generation's record. ``text`` (and ``reasoning`` and ``tool_calls``, when the model
    returned any) is set once it completed."""

    id: str
    status: Literal["waiting", "scheduled", "active", "completed", "failed", "cancelled"]
    model: str | None = None
    text: str | None = None
    reasoning: str | None = Field(
        default=None, description="The model's reasoning text, when it completed with any"
    )
    tool_calls: list[ToolCall] = Field(
        default=[],
        description="The tool calls it completed with (`finish_reason` tool_calls), in order: "
        "run them and send their results back in a new generation",
    )
    finish_reason: str | None = None
    usage: dict[str, Any] | None = Field(
        default=None,
        description="Tokens and cost of every attempt so far, summed (restarts cost too): "
        "prompt_tokens, completion_tokens, cached_tokens, total_tokens, cost_usd, estimated",
    )
    answered_by: str | None = Field(
        default=None,
        description="The model whose text is the result (a fallback's, if it took over)",
    )
    error: str | None = None
    attempt: int
    max_attempts: int
    progress: float | None = Field(
        default=None, description="0..1 as the handler last reported it; null until it reports"
    )
    priority: int
    cancel_requested: bool
    idempotency_key: str | None = None
    key_id: str | None = Field(
        default=None,
        description="The API key it runs as (first 8 hex digits of the key's digest, as "
        "`genq keys list` shows): revoking that key stops it",
    )
    metadata: dict[str, Any] = {}
    created_at: float
    updated_at: float
    started_at: float | None = None
    finished_at: float | None = None
    run_at: float | None = Field(
        default=None, description="When a scheduled generation may start (epoch seconds)"
    )
    retry_in: float | None = Field(
        default=None, description="Seconds until a scheduled generation may start (Redis clock)"
    )
    events_url: str
    attempts: list[AttemptOut] = Field(
        default=[], description="Every attempt that ended (the newest 50), oldest first"
    )


class AdminGeneration(Generation):
    """Any tenant's generation, with what it was asked and a token to follow it."""

    tenant: str | None
    queue: str
    payload: dict[str, Any]
    result: Any = None
    watch_token: str
    watch_token_expires_at: int


class GenerationList(BaseModel):
    generations: list[Generation] = Field(description="Newest first (by creation)")
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null after the last one"
    )


def events_url(job_id: str) -> str:
    return f"/v1/generations/{job_id}/events"


def position(job: Job) -> str:
    """The job's place in a listing as a cursor, ``"<created ms>:<id>"``: a page that ends
    with ``job`` continues after it (the index scores jobs by their creation millisecond)."""
    return f"{round(job.created_at * 1000)}:{job.id}"


def newest_first(job: Job) -> tuple[int, bytes]:
    """Sort key (reversed) of the listing order: creation millisecond, then id bytes."""
    return round(job.created_at * 1000), job.id.encode()


def to_generation(job: Job, now: float | None = None) -> Generation:
    """``now`` (the Redis clock) fills ``retry_in`` for a scheduled generation."""
    payload = payload_fields(job.payload)
    tenant = payload.get("tenant")
    result = read_result(job.result)  # a field that does not validate shows as null
    usage = usage_json(job.usage)
    if usage is None and result.usage is not None:
        usage = result.usage.model_dump()
    key = job.idempotency_key
    if key and tenant and key.startswith(f"{tenant}:"):
        key = key[len(tenant) + 1 :]
    return Generation(
        id=job.id,
        status=job.status.value,
        model=_str_or_none(payload.get("model")),
        text=result.text,
        reasoning=result.reasoning,
        tool_calls=result.tool_calls,
        finish_reason=result.finish_reason,
        usage=usage,
        answered_by=result.model,
        error=job.error,
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        progress=job.progress,
        priority=job.priority,
        cancel_requested=job.cancel_requested,
        idempotency_key=key,
        key_id=_key_id(payload),
        metadata=_dict_or_empty(payload.get("metadata")),
        created_at=job.created_at,
        updated_at=job.updated_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        run_at=job.run_at if job.status is JobStatus.SCHEDULED else None,
        retry_in=_retry_in(job, now),
        events_url=events_url(job.id),
        attempts=[
            AttemptOut(
                attempt=a.attempt,
                started_at=a.started_at,
                ended_at=a.ended_at,
                outcome=a.outcome,
                error=a.error,
                model=a.label,
                usage=usage_json(a.usage),
            )
            for a in job.history
        ],
    )


def usage_json(counts: dict[str, Any] | None) -> dict[str, Any] | None:
    """Metered counts (a record's, an attempt's, a terminal event's) as the API shows them."""
    return None if counts is None else Usage.from_counts(counts).as_json()


def _str_or_none(value: Any) -> str | None:
    # A job enqueued directly on a genq.Queue may hold anything: it still shows.
    return value if isinstance(value, str) else None


def _dict_or_empty(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _key_id(payload: dict[str, Any]) -> str | None:
    """The key the generation runs as (the payload's ``key_id``); None when it has none."""
    key_id = payload.get("key_id")
    return key_id if isinstance(key_id, str) and key_id else None


def _retry_in(job: Job, now: float | None) -> float | None:
    if job.status is not JobStatus.SCHEDULED or job.run_at is None or now is None:
        return None
    return round(max(0.0, job.run_at - now), 3)
