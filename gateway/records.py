"""A job as the API shows it: the caller's own view, no other tenant's data, no prompt echo.

It names the API key the job runs as (``key_id``); the operators' views add the tenant.
"""

from __future__ import annotations

from typing import Any

from genq import Job, JobStatus
from genq_contract.payload import payload_fields
from genq_contract.result import read_result
from genq_contract.spend import Usage

from .schemas import AttemptOut, Generation


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
