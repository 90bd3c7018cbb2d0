"""The job record, as ``Queue.get`` returns it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._codecs import Codec
from ._events import as_text
from ._status import JobStatus


def _seconds(ms: str | None) -> float | None:
    return int(ms) / 1000 if ms else None


def _progress(value: str | None) -> float | None:
    """None until the handler reports progress: 0 would claim it reported nothing done."""
    return float(value) if value else None


@dataclass(frozen=True)
class Attempt:
    """One attempt that ended: when it ran and how it ended (``completed``, ``retry``,
    ``failed``, ``cancelled``, ``lease_expired``: its worker went silent, or ``released``: handed
    back by a shutdown after reporting usage), and the usage it reported
    (:meth:`genq.ActiveJob.meter`: ``label`` and ``usage``, its counts plus ``estimated``)."""

    attempt: int
    started_at: float | None
    ended_at: float
    outcome: str
    error: str | None = None
    label: str | None = None
    usage: dict[str, Any] | None = None


def _history(raw: str | None) -> tuple[Attempt, ...]:
    """The record's ``history`` field (JSON, written by the scripts), oldest attempt first."""
    if not raw:
        return ()
    return tuple(
        Attempt(
            attempt=int(entry.get("attempt") or 0),
            started_at=entry["started_at"] / 1000 if entry.get("started_at") else None,
            ended_at=entry["ended_at"] / 1000,
            outcome=str(entry["outcome"]),
            error=entry.get("error"),
            label=entry.get("label"),
            usage=entry.get("usage"),
        )
        for entry in json.loads(raw)
    )


@dataclass(frozen=True)
class Job:
    """A snapshot of a job. ``result`` is set only when ``status`` is ``completed``;
    ``progress`` is None until the handler first calls ``job.progress(x)`` (1.0 once completed).
    """

    id: str
    status: JobStatus
    payload: Any
    result: Any
    attempt: int
    max_attempts: int
    progress: float | None
    error: str | None
    priority: int
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    run_at: float | None
    idempotency_key: str | None
    cancel_requested: bool
    dead_reason: str | None
    tenant: str = ""
    history: tuple[Attempt, ...] = ()
    """Every attempt that ended (the newest 50), oldest first."""
    usage: dict[str, Any] | None = None
    """The usage its attempts reported, summed (``estimated``: any of them was estimated);
    None when none reported any."""

    @classmethod
    def from_hash(
        cls, raw: dict[Any, Any], codec: Codec[Any], result_codec: Codec[Any], now: float
    ) -> Job:
        f = {as_text(k): as_text(v) for k, v in raw.items()}
        status = JobStatus(f["status"])
        # enqueue.lua leaves out the fields that hold their defaults (see its header): a job
        # not yet updated or delayed was updated and runs at its creation.
        created_at = _seconds(f.get("created_at")) or 0.0
        run_at = _seconds(f.get("run_at")) or created_at
        # A scheduled job whose time has come is runnable: it is waiting, whether or not a
        # worker has moved it to the ready set yet.
        if status is JobStatus.SCHEDULED and run_at is not None and run_at <= now:
            status = JobStatus.WAITING
        completed = status is JobStatus.COMPLETED and "result" in f
        return cls(
            id=f["id"],
            status=status,
            payload=codec.decode(f["payload"]),
            result=result_codec.decode(f["result"]) if completed else None,
            attempt=int(f.get("attempt", 0)),
            max_attempts=int(f.get("max_attempts", 0)),
            progress=_progress(f.get("progress")),
            error=f.get("error") or None,
            priority=int(f.get("priority", 0)),
            created_at=created_at,
            updated_at=_seconds(f.get("updated_at")) or created_at,
            started_at=_seconds(f.get("started_at")),
            finished_at=_seconds(f.get("finished_at")),
            run_at=run_at,
            idempotency_key=f.get("idempotency_key") or None,
            cancel_requested=f.get("cancel_requested") == "1",
            dead_reason=f.get("dead_reason") or None,
            tenant=f.get("tenant", ""),
            history=_history(f.get("history")),
            usage=json.loads(f["usage"]) if f.get("usage") else None,
        )
