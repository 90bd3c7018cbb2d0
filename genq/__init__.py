"""genq: durable background jobs with a per-job output stream, on Redis."""

from .active_job import ActiveJob, emit_many
from .codecs import Codec, JsonCodec, PydanticCodec
from .connection import connect
from .errors import (
    GenqError,
    JobCancelledError,
    JobError,
    JobExistsError,
    JobFailedError,
    JobLeaseLostError,
    JobNotFoundError,
    RetryJobError,
    TerminalJobError,
)
from .events import Event, decode_entry, visible_text
from .job import Job
from .keys import Keys
from .queue import DeadEntry, Enqueued, Queue, QueueStats
from .status import TERMINAL, JobStatus
from .worker import Worker

__all__ = [
    "TERMINAL",
    "ActiveJob",
    "Codec",
    "DeadEntry",
    "Enqueued",
    "Event",
    "GenqError",
    "Job",
    "JobCancelledError",
    "JobError",
    "JobExistsError",
    "JobFailedError",
    "JobLeaseLostError",
    "JobNotFoundError",
    "JobStatus",
    "JsonCodec",
    "Keys",
    "PydanticCodec",
    "Queue",
    "QueueStats",
    "RetryJobError",
    "TerminalJobError",
    "Worker",
    "connect",
    "decode_entry",
    "emit_many",
    "visible_text",
]
