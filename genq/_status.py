"""Job statuses."""

from __future__ import annotations

from enum import Enum


class JobStatus(str, Enum):
    WAITING = "waiting"
    SCHEDULED = "scheduled"
    ACTIVE = "active"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})

# Event types written to a job's stream.
CHUNK = "chunk"
PROGRESS = "progress"
RESTARTED = "restarted"
TERMINAL_EVENTS = frozenset(
    {JobStatus.COMPLETED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value}
)
RESERVED_EVENTS = frozenset({PROGRESS, RESTARTED, *TERMINAL_EVENTS})
"""Event types only the queue itself writes: a handler's own types (``emit(type=...)``) are
any other short name."""
