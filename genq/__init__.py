"""genq: durable background jobs with a per-job output stream, on Redis."""

from ._active_job import ActiveJob, EmitItem, emit_many
from ._cancellation import cancel_and_wait, raise_if_cancelled
from ._channel import CursorRefused, ViewerLagged
from ._codecs import Codec, JsonCodec, PydanticCodec
from ._dead_letter_watch import DeadLetterWatch
from ._dead_letters import DeadEntry, DeadPage
from ._doorbell import Doorbell
from ._enqueue import Enqueued, EnqueueItem
from ._errors import (
    EnqueueManyError,
    EventTypeError,
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
from ._events import (
    Event,
    StreamEntry,
    as_text,
    check_cursor,
    check_event_type,
    decode_entry,
    entry_order,
    visible_text,
)
from ._guarded import AdmittedEnqueue, ScriptCall, enqueue_admitted
from ._job import Attempt, Job
from ._job_index import IdPage, JobPage
from ._keys import Keys
from ._lookups import JobState, bound_jobs, job_states
from ._outbox import ConsumerInfo, OutboxEntry, OutboxGroup
from ._patch_guard import PatchGuard, pinned
from ._pull import Pulled, PulledJob
from ._queue import Queue
from ._queue_lost import LostAttempt
from ._queue_stats import QueueStats
from ._reader_link import ReaderLink, reader_links
from ._retrying import TRANSIENT
from ._status import CHUNK, PROGRESS, RESTARTED, TERMINAL, TERMINAL_EVENTS, JobStatus
from ._streamed import run_streamed
from ._tail import Tail
from ._usage import UsageRow
from ._worker import HELD_CONNECTIONS, PRESENCE_SECONDS, Worker
from .connection import RedisClient, RedisPipeline, connect

__all__ = [
    "CHUNK",
    "HELD_CONNECTIONS",
    "PRESENCE_SECONDS",
    "PROGRESS",
    "RESTARTED",
    "TERMINAL",
    "TERMINAL_EVENTS",
    "TRANSIENT",
    "ActiveJob",
    "AdmittedEnqueue",
    "Attempt",
    "Codec",
    "ConsumerInfo",
    "CursorRefused",
    "DeadEntry",
    "DeadLetterWatch",
    "DeadPage",
    "Doorbell",
    "EmitItem",
    "EnqueueItem",
    "EnqueueManyError",
    "Enqueued",
    "Event",
    "EventTypeError",
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
    "LostAttempt",
    "OutboxEntry",
    "OutboxGroup",
    "PatchGuard",
    "Pulled",
    "PulledJob",
    "PydanticCodec",
    "Queue",
    "QueueStats",
    "ReaderLink",
    "RedisClient",
    "RedisPipeline",
    "ReplicationTimeoutError",
    "RetryJobError",
    "ScriptCall",
    "StreamEntry",
    "Tail",
    "TerminalJobError",
    "UsageRow",
    "ViewerLagged",
    "Worker",
    "as_text",
    "bound_jobs",
    "cancel_and_wait",
    "check_cursor",
    "check_event_type",
    "connect",
    "decode_entry",
    "emit_many",
    "enqueue_admitted",
    "entry_order",
    "job_states",
    "pinned",
    "raise_if_cancelled",
    "reader_links",
    "run_streamed",
    "visible_text",
]
