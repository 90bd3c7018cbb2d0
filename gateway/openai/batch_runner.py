"""Drives batches: validation, admission of their lines, progress, the end.

Every gateway process runs one :class:`BatchRunner`. It looks after the batches not yet
final (``GatewayKeys.active_batches``), each under a lease it renews (``batch_runner``): one
runner drives a batch at a time, and when its gateway dies another runner takes the batch
over from what Redis holds. A step of a batch:

- ``validating``: reads the input file (:func:`.batch_lines.parse`); a malformed file fails
  the batch with its ``errors``; otherwise ``in_progress``, with ``request_counts.total``.
- ``in_progress``: admits the next lines (:func:`.batch_lines.admit`, a chunk per step, each
  line's record written before its generation is enqueued: a runner that takes over admits
  again only the lines whose generation does not exist), then reads the states of the
  unfinished lines and writes ``request_counts``. Once every line finished: ``finalizing``,
  the output and error files, ``completed``.
- ``cancelling`` (``POST /v1/batches/{id}/cancel``) or past ``expires_at``: no more
  admission; every unfinished line is cancelled as Stop cancels a generation
  (:func:`gateway.admission.cancel.cancel`: a waiting one at once, a running one on its
  worker's next step); once they all ended, ``cancelled`` or ``expired``, with the files of
  what finished.

Each final state publishes its webhook event (``batch.completed``, ``batch.failed``,
``batch.cancelled``, ``batch.expired``: ``genq_services.webhook_events``). Workers know
nothing of batches: a line is a generation on its provider's batch lane.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from genq import TERMINAL, JobStatus, cancel_and_wait, job_states, raise_if_cancelled
from genq_contract.keys import GatewayKeys
from genq_services import webhook_events

from ..access.auth import Principal
from ..access.owned_jobs import OwnedJob
from ..admission.cancel import cancel
from ..state import Gateway
from . import batch_lines
from .batch_output import file_sizes
from .batch_store import (
    CANCELLED,
    CANCELLING,
    COMPLETED,
    EXPIRED,
    FAILED,
    FINAL,
    FINALIZING,
    IN_PROGRESS,
    VALIDATING,
    BatchStore,
    error_list,
)
from .file_store import FileStore

log = logging.getLogger("gateway.batches")

ADMIT_CHUNK = 500
"""Lines admitted per step (a runner looks after its other batches between chunks)."""
CHECK_AT_ONCE = 1_000
"""Unfinished lines whose state one step reads, the oldest first: lines finish in about the
order they were admitted, so reading further would mostly find lines still waiting (and
cost Redis what the workers need)."""
ACTIVE_AT_ONCE = 200
"""Batches one pass of a runner looks at."""
EVENTS = {
    COMPLETED: webhook_events.BATCH_COMPLETED,
    FAILED: webhook_events.BATCH_FAILED,
    CANCELLED: webhook_events.BATCH_CANCELLED,
    EXPIRED: webhook_events.BATCH_EXPIRED,
}


class LeaseLost(Exception):
    """This runner's lease on a batch lapsed: another runner drives it now."""


@dataclass
class Tracker:
    """What a runner knows of a batch it drives (rebuilt from Redis when it takes one over)."""

    input: list[batch_lines.Line]
    records: dict[int, dict[str, Any]]
    unfinished: list[str] = field(default_factory=list)
    completed: int = 0
    failed: int = 0
    cancels_sent: bool = False


class BatchRunner:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        settings = gateway.settings
        keys = GatewayKeys(settings.queue_namespace)
        self.batches = BatchStore(gateway.redis, keys)
        self.files = FileStore(gateway.redis, keys, settings.file_ttl)
        self.poll = settings.batch_poll
        self.lease_ms = int(max(5.0, settings.batch_poll * 10) * 1000)
        self.owner = uuid.uuid4().hex
        self.trackers: dict[str, Tracker] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run_forever(), name="batch runner")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
        with contextlib.suppress(Exception):
            for batch_id in list(self.trackers):
                await self.batches.release(batch_id, self.owner)

    def wake(self) -> None:
        """A batch was created or cancelled in this process: look now, not at the next poll."""
        self._wake.set()

    async def _run_forever(self) -> None:
        while True:
            busy = False
            try:
                busy = await self.run_once()
            except (RedisError, OSError) as exc:
                log.warning("batch runner: storage unavailable (%s)", type(exc).__name__)
            except Exception:
                log.exception("batch runner step failed")
            raise_if_cancelled()
            if not busy:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll)

    async def run_once(self) -> bool:
        """One pass over the active batches; True when one has work left right now."""
        busy = False
        active = await self.batches.active(ACTIVE_AT_ONCE)
        for batch_id in list(self.trackers):
            if batch_id not in active:
                del self.trackers[batch_id]
        for batch_id in active:
            if not await self.batches.claim(batch_id, self.owner, self.lease_ms):
                self.trackers.pop(batch_id, None)  # another runner drives it now
                continue
            try:
                busy |= await self.step(batch_id)
            except LeaseLost:
                log.warning("batch %s: another runner took it over", batch_id)
                self.trackers.pop(batch_id, None)
        return busy

    async def step(self, batch_id: str) -> bool:
        batch = await self.batches.read(batch_id)
        if batch is None or batch["status"] in FINAL:
            await self.batches.finish(batch_id, None)
            self.trackers.pop(batch_id, None)
            return False
        if batch["status"] == VALIDATING:
            await self._validate(batch)
            return True
        tracker = self.trackers.get(batch_id) or await self._load(batch)
        if tracker is None:
            return False
        status = batch["status"]
        ending = (
            status
            if status in (CANCELLING, FINALIZING)
            else EXPIRED
            if time.time() >= int(batch["expires_at"])
            else None
        )
        if ending is None and int(batch["admitted"]) < int(batch["total"]):
            await self._admit(batch, tracker)
            await self._refresh(batch, tracker)
            return True
        if ending in (CANCELLING, EXPIRED) and not tracker.cancels_sent:
            await self._cancel_lines(tracker)
        await self._refresh(batch, tracker)
        if tracker.unfinished:
            return False
        final = {CANCELLING: CANCELLED, EXPIRED: EXPIRED}.get(ending or "", COMPLETED)
        await self._finalize(batch, tracker, final)
        return False

    # -- the steps ---------------------------------------------------------------------------

    async def _input(self, batch: dict[str, str]) -> list[batch_lines.Line] | None:
        content = await self.files.content(batch["input_file_id"])
        if content is None:
            return None
        lines, errors = batch_lines.parse(content, batch["endpoint"])
        return None if errors else lines

    async def _validate(self, batch: dict[str, str]) -> None:
        batch_id = batch["id"]
        content = await self.files.content(batch["input_file_id"])
        if content is None:
            errors = [
                {
                    "code": "file_not_found",
                    "message": "the input file no longer exists",
                    "param": "input_file_id",
                    "line": None,
                }
            ]
            lines: list[batch_lines.Line] = []
        else:
            lines, errors = batch_lines.parse(content, batch["endpoint"])
        if errors:
            await self.batches.update(batch_id, errors=error_list(errors))
            if await self.batches.move(batch_id, frozenset({VALIDATING}), FAILED):
                await self._ended(batch, FAILED)
            return
        await self.batches.update(batch_id, total=len(lines))
        if await self.batches.move(batch_id, frozenset({VALIDATING}), IN_PROGRESS):
            self.trackers[batch_id] = Tracker(input=lines, records={})
        # A batch cancelled while validating: the next step finds it cancelling.

    async def _load(self, batch: dict[str, str]) -> Tracker | None:
        """The tracker of a batch this runner did not drive until now."""
        lines = await self._input(batch) if int(batch["admitted"]) < int(batch["total"]) else []
        if lines is None:
            lines = []
            await self.batches.update(batch["id"], admitted=batch["total"])
        records = await self.batches.lines(batch["id"])
        tracker = Tracker(input=lines, records=records)
        tracker.unfinished = [r["job"] for _, r in sorted(records.items()) if "job" in r]
        tracker.failed = sum(1 for r in records.values() if "job" not in r)
        self.trackers[batch["id"]] = tracker
        return tracker

    async def _admit(self, batch: dict[str, str], tracker: Tracker) -> None:
        batch_id = batch["id"]
        start = int(batch["admitted"])
        chunk = tracker.input[start : start + ADMIT_CHUNK]
        todo = [line for line in chunk if not await self._admitted(tracker, line.number)]
        principal = Principal(tenant=batch["tenant"], key_id=batch.get("key_id", ""))

        async def keep(records: dict[int, dict[str, Any]]) -> None:
            # Renewed right before the records and the enqueue that follows them: a runner
            # that lost its lease (a step slower than the lease) must not enqueue lines the
            # runner that took over admits too.
            if not await self.batches.claim(batch_id, self.owner, self.lease_ms):
                raise LeaseLost(batch_id)
            await self.batches.write_lines(batch_id, records)

        admitted = await batch_lines.admit(
            self.gateway, principal, batch["endpoint"], todo, keep, batch.get("traceparent")
        )
        for number, record in admitted.records.items():
            old = tracker.records.get(number)
            if old is not None and "job" in old and old["job"] in tracker.unfinished:
                tracker.unfinished.remove(old["job"])
            tracker.records[number] = record
            if "job" in record:
                tracker.unfinished.append(record["job"])
            else:
                tracker.failed += 1
        await self.batches.update(batch_id, admitted=start + len(chunk))
        if start + len(chunk) >= len(tracker.input):
            tracker.input = []  # every line admitted: the bodies are no longer needed

    async def _admitted(self, tracker: Tracker, number: int) -> bool:
        """Whether line ``number`` was admitted by an earlier runner (its record names a
        generation that exists, or records its refusal)."""
        record = tracker.records.get(number)
        if record is None:
            return False
        if "job" not in record:
            return True
        _, queue = self.gateway.queues.locate(record["job"])
        (state,) = await job_states([(queue, record["job"])])
        return state is not None

    async def _refresh(self, batch: dict[str, str], tracker: Tracker) -> None:
        """Reads the states of the oldest unfinished lines; writes the counts."""
        looked = tracker.unfinished[:CHECK_AT_ONCE]
        if looked:
            pairs = [(self.gateway.queues.locate(job_id)[1], job_id) for job_id in looked]
            done: set[str] = set()
            for job_id, state in zip(looked, await job_states(pairs), strict=True):
                if state is None or state.status in TERMINAL:
                    done.add(job_id)
                    if state is not None and state.status is JobStatus.COMPLETED:
                        tracker.completed += 1
                    else:
                        tracker.failed += 1
            if done:
                tracker.unfinished = [j for j in tracker.unfinished if j not in done]
        await self.batches.update(batch["id"], completed=tracker.completed, failed=tracker.failed)

    async def _cancel_lines(self, tracker: Tracker) -> None:
        for start in range(0, len(tracker.unfinished), 100):
            await asyncio.gather(
                *(self._cancel_one(job_id) for job_id in tracker.unfinished[start : start + 100])
            )
        tracker.cancels_sent = True

    async def _cancel_one(self, job_id: str) -> None:
        provider, queue = self.gateway.queues.locate(job_id)
        job = await queue.get(job_id)
        if job is not None and job.status not in TERMINAL:
            await cancel(self.gateway, OwnedJob(provider, queue, job))

    async def _finalize(self, batch: dict[str, str], tracker: Tracker, final: str) -> None:
        batch_id = batch["id"]
        if final == COMPLETED:
            await self.batches.move(batch_id, frozenset({IN_PROGRESS}), FINALIZING)
        view = {**batch, "status": final}
        keep = self.gateway.settings.batch_result_ttl or None
        files: dict[str, str] = {}
        sizes = await file_sizes(self.gateway, view, tracker.records)
        for kind, size in sizes.items():
            if size:
                record = await self.files.put_generated(batch["tenant"], batch_id, kind, size, keep)
                files[f"{kind}_file_id"] = record.id
        if files:
            await self.batches.update(batch_id, **files)
        expected = frozenset({IN_PROGRESS, FINALIZING, CANCELLING})
        if await self.batches.move(batch_id, expected, final):
            await self._ended(batch, final)

    async def _ended(self, batch: dict[str, str], final: str) -> None:
        await self.batches.finish(batch["id"], self.gateway.settings.file_ttl)
        self.trackers.pop(batch["id"], None)
        log.info("batch %s %s", batch["id"], final)
        try:
            await webhook_events.publish(
                self.gateway.redis,
                tenant=batch["tenant"],
                type=EVENTS[final],
                object_id=batch["id"],
                namespace=self.gateway.settings.queue_namespace,
            )
        except (RedisError, OSError) as exc:
            log.warning("batch %s: its %s event was not published (%s)", batch["id"], final, exc)
