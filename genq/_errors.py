"""Every exception genq raises.

GenqError
├── JobNotFoundError      the id is unknown, or its record has expired
├── JobExistsError        a custom id is still live
├── JobNotFinishedError   delete(): the job has not finished (cancel it first)
├── JobFailedError        wait(): the job dead-lettered (``.error`` says why)
├── JobCancelledError     wait(): the job was cancelled
├── JobLeaseLostError     emit/progress/heartbeat/settle by a holder whose lease is gone
├── EventTypeError        emit(type=...): a type a handler may not write (also a ValueError)
├── EnqueueManyError      enqueue_many(): some items failed (``.results``: one per item)
├── ReplicationTimeoutError  durable acceptance: too few replicas confirmed the write in time
└── JobError              raised by handlers to steer the retry decision
    ├── RetryJobError     retry, no sooner than ``retry_after`` seconds
    └── TerminalJobError  dead-letter now; a retry would fail the same way
"""

from __future__ import annotations

from typing import Any


class GenqError(Exception):
    """Root of every genq exception."""


class JobNotFoundError(GenqError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} not found")
        self.job_id = job_id


class JobExistsError(GenqError):
    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"job {job_id!r} is still live; a custom id can be reused once it finished"
        )
        self.job_id = job_id


class JobNotFinishedError(GenqError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} has not finished; cancel it before deleting it")
        self.job_id = job_id


class JobFailedError(GenqError):
    def __init__(self, job_id: str, error: str | None) -> None:
        super().__init__(f"job {job_id!r} failed: {error}")
        self.job_id = job_id
        self.error = error


class JobCancelledError(GenqError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} was cancelled")
        self.job_id = job_id


class JobLeaseLostError(GenqError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"lease on job {job_id!r} is no longer held by this worker")
        self.job_id = job_id


class EventTypeError(GenqError, ValueError):
    """An event type a handler may not emit: not a short lowercase name, or one of the
    queue's own (``progress``, ``restarted``, the terminal ones)."""

    def __init__(self, kind: object) -> None:
        super().__init__(
            f"event type {str(kind)[:40]!r} is not allowed: a name matching "
            "[a-z][a-z0-9_]{0,31} other than progress, restarted, completed, failed, cancelled"
        )
        self.type = kind


class JobError(GenqError):
    """Raised by a handler to say how its failure should be treated."""


class RetryJobError(JobError):
    """Retry the job; ``retry_after`` (seconds) is a floor under the backoff."""

    def __init__(self, message: str = "retry requested", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TerminalJobError(JobError):
    """Dead-letter the job at once: retrying would reproduce the failure."""


class EnqueueManyError(GenqError):
    """Some items of ``enqueue_many`` failed; every other item was enqueued.

    ``results`` has one entry per item, in order: its ``Enqueued``, or the exception it got
    (``ValueError`` for a bad option, :class:`JobExistsError` for a live custom id).
    ``errors`` maps the index of each failed item to its exception.
    """

    def __init__(self, results: list[Any]) -> None:
        self.results = results
        self.errors = {i: r for i, r in enumerate(results) if isinstance(r, Exception)}
        first = next(iter(self.errors.items()))
        super().__init__(
            f"{len(self.errors)} of {len(results)} items failed (item {first[0]}: {first[1]})"
        )


class ReplicationTimeoutError(GenqError):
    """Durable acceptance (``Queue(durable_replicas=N)``): fewer than N replicas confirmed the
    write within ``durable_timeout``.

    The write DID happen on the primary: the jobs exist there and may well survive. They may
    also be lost if the primary fails before its replicas catch up, so the caller cannot count
    them as accepted. Resending with the same idempotency key (or job id) finds the job
    instead of making a second one. ``replicas`` is how many were asked for,
    ``acknowledged`` how many confirmed, ``job_ids`` the jobs the write made or found.
    """

    def __init__(self, replicas: int, acknowledged: int, job_ids: list[str]) -> None:
        shown = ", ".join(repr(job_id) for job_id in job_ids[:3])
        more = f" and {len(job_ids) - 3} more" if len(job_ids) > 3 else ""
        super().__init__(
            f"{acknowledged} of {replicas} replicas confirmed the write of job {shown}{more} in "
            "time: it is on the primary but could be lost if the primary fails now; resend "
            "with the same idempotency key (or job id) to confirm it without a duplicate"
        )
        self.replicas = replicas
        self.acknowledged = acknowledged
        self.job_ids = job_ids
