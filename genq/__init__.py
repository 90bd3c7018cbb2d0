"""genq: durable background jobs with a per-job output stream, on Redis."""

from ._channel import CursorRefused, ViewerLagged
from ._dead_letter_watch import DeadLetterWatch
from ._dead_letters import DeadEntry, DeadPage
from ._doorbell import Doorbell
from ._job_index import IdPage, JobPage
from ._lookups import JobState, bound_jobs, job_states
from ._outbox import ConsumerInfo, OutboxEntry, OutboxGroup
from ._reader_link import ReaderLink, reader_links
from ._tail import Tail
from ._versions import untested_version
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
from .events import Event, StreamEntry, decode_entry, entry_order, visible_text
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
    "ConsumerInfo",
    "CursorRefused",
    "DeadEntry",
    "DeadLetterWatch",
    "DeadPage",
    "Doorbell",
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
    "JobState",
    "JobStatus",
    "JsonCodec",
    "Keys",
    "OutboxEntry",
    "OutboxGroup",
    "PulledJob",
    "PydanticCodec",
    "Queue",
    "QueueStats",
    "ReaderLink",
    "RedisClient",
    "RedisPipeline",
    "ReplicationTimeoutError",
    "RetryJobError",
    "StreamEntry",
    "Tail",
    "TerminalJobError",
    "UsageRow",
    "ViewerLagged",
    "Worker",
    "bound_jobs",
    "connect",
    "decode_entry",
    "emit_many",
    "entry_order",
    "job_states",
    "reader_links",
    "untested_version",
    "visible_text",
]
