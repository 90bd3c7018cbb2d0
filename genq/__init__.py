"""genq: durable background jobs with a per-job output stream, on Redis."""

from ._dead_letters import DeadEntry, DeadPage
from ._job_index import IdPage, JobPage
from .active_job import ActiveJob, emit_many
from .codecs import Codec, JsonCodec, PydanticCodec
from .connection import RedisClient, RedisPipeline, connect
from .errors import (
    EnqueueManyError,
    GenqError,
    JobCancelledError,
    JobError,
    JobExistsError,
    JobFailedError,
    JobLeaseLostError,
    JobNotFinishedError,
    JobNotFoundError,
    ReplicationTimeoutError,
    RetryJobError,
    TerminalJobError,
)
from .events import Event, decode_entry, visible_text
from .job import Attempt, Job
from .keys import Keys
from .pull import PulledJob
from .queue import Enqueued, EnqueueItem, Queue, QueueStats
from .status import TERMINAL, JobStatus
from .usage import UsageRow
from .worker import Worker

__all__ = [
    "TERMINAL",
    "ActiveJob",
    "Attempt",
    "Codec",
    "DeadEntry",
    "DeadPage",
    "EnqueueItem",
    "EnqueueManyError",
    "Enqueued",
    "Event",
    "GenqError",
    "IdPage",
    "Job",
    "JobCancelledError",
    "JobError",
    "JobExistsError",
    "JobFailedError",
    "JobLeaseLostError",
    "JobNotFinishedError",
    "JobNotFoundError",
    "JobPage",
    "JobStatus",
    "JsonCodec",
    "Keys",
    "PulledJob",
    "PydanticCodec",
    "Queue",
    "QueueStats",
    "RedisClient",
    "RedisPipeline",
    "ReplicationTimeoutError",
    "RetryJobError",
    "TerminalJobError",
    "UsageRow",
    "Worker",
    "connect",
    "decode_entry",
    "emit_many",
    "visible_text",
]
