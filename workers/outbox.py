"""Reading the provider queues' dead-letter outboxes through one consumer group.

The script that dead-letters a job appends its notice to the queue's outbox stream (read
through :meth:`genq.Queue.outbox`). Every worker process reads every provider queue's outbox
in the consumer group ``alerts`` (created at the stream's start, so notices written before any
worker ever ran are read too), each under a consumer name of its own: an entry goes to ONE
process. The process hands the entry to its handler, then XACKs it. An entry read but never
acked (the process was killed in between, or its handler failed) stays pending; any process
takes it over with XAUTOCLAIM once it has been pending ``claim_after`` seconds, so nothing is
lost. Handlers must be idempotent: a taken-over entry may have been handled already.

Consumers that left (nothing pending, idle over ``PRUNE_IDLE``) are deleted from the group now
and then, so restarts do not pile them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from genq import OutboxEntry, OutboxGroup, Queue, as_text, cancel_and_wait, raise_if_cancelled

log = logging.getLogger("workers.outbox")

GROUP = "alerts"
"""The consumer group every worker process reads the outboxes in."""
PRUNE_EVERY = 300.0
PRUNE_IDLE = 3600.0
"""Seconds a consumer with nothing pending must have been idle before it is deleted."""
CLAIM_PAGES = 10
"""XAUTOCLAIM pages (of ``batch`` entries) taken over per pass; the rest wait for the next."""


@dataclass(frozen=True, order=True)
class Source:
    """A provider queue whose outbox is read: its name (provider) and its genq prefix;
    ``stream``: another stream in that queue's slot to read instead of its dead-letter outbox
    (the webhook events, ``workers.webhook_delivery``)."""

    name: str
    prefix: str
    stream: str | None = None


class StreamGroup(OutboxGroup):
    """A consumer group on ``stream``, a stream of the queue's slot other than its outbox."""

    def __init__(self, queue: Queue, group: str, stream: str) -> None:
        super().__init__(queue, group)
        self.stream = stream


def group_of(redis: Any, source: Source, group: str) -> OutboxGroup:
    queue = Queue(redis, source.prefix)
    return (
        queue.outbox(group) if source.stream is None else StreamGroup(queue, group, source.stream)
    )


Handler = Callable[[Source, str, dict[str, Any]], Awaitable[None]]
"""Called with the source, the outbox entry id and the decoded notice; raising leaves the
entry pending (another pass takes it over)."""


def consumer_name() -> str:
    """Unique per process start: ``<host>-<pid>-<random>``."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class OutboxReader:
    """Reads ``sources``' outboxes (one task each) and hands every entry to ``handle``."""

    def __init__(
        self,
        redis: Any,
        sources: Iterable[Source],
        handle: Handler,
        *,
        consumer: str | None = None,
        claim_after: float = 30.0,
        claim_every: float | None = None,
        block: float = 1.0,
        batch: int = 100,
        group: str = GROUP,
    ) -> None:
        """``group``: the consumer group's name; ``claim_after``: seconds an entry stays
        pending (read, not acked) before another reader takes it over; ``claim_every``: how
        often to look for such entries (default a fifth of ``claim_after``, between 0.1 and
        30 s); ``block``: seconds one read waits (keep it under the client's socket timeout)."""
        self.redis = redis
        self.sources = list(sources)
        self._groups = {source: group_of(redis, source, group) for source in self.sources}
        self.handle = handle
        self.consumer = consumer or consumer_name()
        self.claim_after = claim_after
        self.claim_every = (
            claim_every if claim_every is not None else min(30.0, max(0.1, claim_after / 5))
        )
        # a read never outwaits the next look for entries to take over
        self.block_ms = max(1, int(min(block, self.claim_every) * 1000))
        self.batch = batch
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = asyncio.Event()
        self._groups_made = 0

    async def start(self) -> None:
        """Starts one reader per source; returns once every group exists (or after 10 s)."""
        self._tasks = [
            asyncio.create_task(self._run(source), name=f"genq-outbox-{source.name}")
            for source in self.sources
        ]
        if self.sources:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), 10)

    async def stop(self) -> None:
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []

    # -- one source ----------------------------------------------------------------------------

    async def _run(self, source: Source) -> None:
        failures = 0
        grouped = False
        next_claim = next_prune = 0.0
        while True:
            try:
                if not grouped:
                    await self.ensure_group(source)
                    grouped = True
                now = time.monotonic()
                if now >= next_claim:
                    await self.claim(source)
                    next_claim = now + self.claim_every
                if now >= next_prune:
                    await self.prune(source)
                    next_prune = now + PRUNE_EVERY
                await self.read(source)
                raise_if_cancelled()
                failures = 0
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):  # the stream was deleted: make the group again
                    failures += 1
                    log.error("reading the outbox of %s failed: %s", source.name, exc)
                    await asyncio.sleep(min(5.0, 0.1 * 2**failures))
                grouped = False
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                failures += 1
                log.warning("outbox of %s unreachable (%s); retrying", source.name, exc)
                await asyncio.sleep(min(5.0, 0.1 * 2**failures))
            except Exception:  # a bug must not end alerting for good: log, back off, go on
                failures += 1
                log.exception("reading the outbox of %s failed", source.name)
                await asyncio.sleep(min(5.0, 0.1 * 2**failures))

    async def ensure_group(self, source: Source) -> None:
        """Creates the group at the stream's start (id 0): notices written before any reader
        existed are read too. An existing group is left as it is."""
        await self._groups[source].create()
        self._groups_made += 1
        if self._groups_made >= len(self.sources):
            self._ready.set()

    async def read(self, source: Source) -> None:
        """Reads new entries (waiting up to ``block``) and processes them."""
        entries = await self._groups[source].read(self.consumer, self.batch, self.block_ms)
        if entries:
            await self.process(source, entries)

    async def claim(self, source: Source) -> None:
        """Takes over entries pending longer than ``claim_after`` (their reader died or
        failed) and processes them."""
        start = "0-0"
        for _ in range(CLAIM_PAGES):
            start, entries = await self._groups[source].claim(
                self.consumer, int(self.claim_after * 1000), start, self.batch
            )
            if entries:
                log.warning(
                    "taking over %d outbox entries of %s left pending",
                    len(entries),
                    source.name,
                )
                await self.process(source, entries)
            if start == "0-0":
                return

    async def process(self, source: Source, entries: list[OutboxEntry]) -> None:
        """Hands each entry to the handler, then acks the ones it took (all, unless one
        failed: that one and those after it stay pending)."""
        done = []
        for entry_id, fields in entries:
            if fields is None:  # trimmed while pending (Redis 6.2 reports it so)
                done.append(entry_id)
                continue
            notice = _notice(fields)
            if notice is None:
                log.error("unreadable outbox entry %s in %s: %r", entry_id, source, fields)
            else:
                try:
                    await self.handle(source, entry_id, notice)
                except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                    log.error("outbox entry %s deferred (%s)", entry_id, exc)
                    break
            done.append(entry_id)
        if done:
            await self.ack(source, done)

    async def ack(self, source: Source, entry_ids: list[str]) -> None:
        await self._groups[source].ack(entry_ids)

    async def prune(self, source: Source) -> None:
        """Deletes consumers that hold nothing and have been idle over ``PRUNE_IDLE``."""
        group: OutboxGroup = self._groups[source]
        for consumer in await group.consumers():
            if (
                consumer.name != self.consumer
                and not consumer.pending
                and consumer.idle_ms > PRUNE_IDLE * 1000
            ):
                await group.remove_consumer(consumer.name)


def _notice(fields: dict[Any, Any]) -> dict[str, Any] | None:
    raw = {as_text(k): v for k, v in fields.items()}.get("notice")
    if raw is None:
        return None
    try:
        notice = json.loads(raw)
    except ValueError:
        return None
    return notice if isinstance(notice, dict) else None
