"""The worker: reserves jobs, runs the handler, keeps leases alive and settles outcomes."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import random
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from ._active_job import ActiveJob
from ._calls import presence_call, settle_call
from ._cancellation import cancel_and_wait, raise_if_cancelled
from ._cluster import Call, open_pubsub, run_durably
from ._errors import JobError, JobLeaseLostError, RetryJobError, TerminalJobError
from ._events import as_text
from ._queue_base import QueueBase, ms, safe_block
from ._reserve import HandOff, activate, make_offer, pick_hinted, reclaim
from ._retrying import TRANSIENT, with_retry
from ._scripts import Code
from ._streamed import run_streamed
from .connection import RedisClient

log = logging.getLogger("genq.worker")

PRESENCE_SECONDS = 1.2
"""How long a worker's presence lasts unless renewed: a worker gone this long (killed, cut off,
paused) loses its jobs to the others, whatever their leases say. Renewed 6 times as often."""

READ_AHEAD_BELOW = 0.01
"""Jobs whose handlers run shorter than this (seconds, a running average) are read ahead while
a backlog waits: a reserve's round trips then take as long as the job itself, and a worker that
waits for them leaves the server idle while it runs jobs and itself idle while the server
works. Longer jobs are never read ahead: one would wait out a whole job in the worker instead
of starting at once on another."""
READ_AHEAD_HOLD = 1.0
"""How long (seconds) a job read ahead may wait in its worker for a slot before it is handed
back to the queue untouched (its attempt not counted): jobs turned long since it was read."""

MAX_ERROR_CHARS = 2000
HELD_CONNECTIONS = 3
"""Connections a worker holds for as long as it runs: its doorbell wait, its presence renewal
and its cancel channel (pub/sub). Its jobs' calls share the rest of the pool."""


def dedicated_client(redis: RedisClient) -> RedisClient:
    """A client holding one connection of ``redis``'s pool: for the blocking doorbell wait, and
    for the presence renewal.

    Borrowing a pool connection for each BLPOP would starve running jobs' emits on a bounded
    pool; and running jobs must not starve the presence: with every connection taken by emits,
    a renewal that fails for longer than the presence hands this worker's jobs to the others.
    A cluster client routes by key and has no single connection to hold: it is used as is.
    """
    if isinstance(redis, RedisCluster):
        return redis
    return Redis(connection_pool=redis.connection_pool, single_connection_client=True)


@dataclass
class _Slot:
    job: ActiveJob
    handler_task: asyncio.Task[Any] | None = None
    task: asyncio.Task[None] | None = None
    finished: bool = False
    cancel_seen: bool = False
    lost: bool = False
    aborted: bool = False
    poke: asyncio.Event = field(default_factory=asyncio.Event)
    keep_alive: asyncio.Task[None] | None = None
    """The heartbeat's task, made once the job has run for a heartbeat or is poked (a cancel
    published for it): a short job ends before and costs its worker a timer, not a task."""
    keep_alive_timer: asyncio.TimerHandle | None = None


def _end(ended: asyncio.Future[None], _: object) -> None:
    """Marks a handler's end (a done callback of its task) for the task awaiting ``ended``."""
    if not ended.done():  # that task was cancelled, and the future with it
        ended.set_result(None)


@dataclass(frozen=True)
class _Outcome:
    kind: str  # complete | retry | fail | cancel | release
    data: str = ""
    delay: float = 0.0
    reason: str = "error"


async def _handlers_first_steps() -> None:
    """Two turns of the event loop for the handlers just started, before the worker writes its
    next offer (whose Python would otherwise run first): in the first each handler runs to its
    first wait (a generation's provider request made), in the second what that wait left
    scheduled runs (aiohttp writes a request from a task of its own, started then)."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


class Worker:
    """Runs a handler over a queue's jobs with bounded concurrency: at most ``concurrency``
    handlers at once (a job whose handler ended takes no slot while its settle is on its way).

    ``async with queue.worker(handler) as worker:`` starts it in the background; leaving the
    block is a graceful stop. ``stop()`` never kills a running job unless a ``deadline`` is
    given, after which the jobs still running are aborted and handed back to the queue.
    """

    def __init__(
        self,
        queue: QueueBase,
        handler: Callable[[ActiveJob], Awaitable[Any]],
        *,
        concurrency: int = 8,
        lease: float | None = None,
        heartbeat: float | None = None,
        poll: float | None = None,
        is_retryable: Callable[[BaseException], bool] | None = None,
        on_error: Callable[[ActiveJob, BaseException], Any] | None = None,
        presence: float = PRESENCE_SECONDS,
        read_ahead: int | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if read_ahead is not None and read_ahead < 0:
            raise ValueError("read_ahead must be >= 0")
        if not 0.2 <= presence <= 60:
            raise ValueError("presence must be 0.2 to 60 seconds")
        pool = None if isinstance(queue.redis, RedisCluster) else queue.redis.connection_pool
        if pool is not None and pool.max_connections <= HELD_CONNECTIONS:
            raise ValueError(
                f"a worker needs a pool of more than {HELD_CONNECTIONS} connections (its "
                "doorbell, presence and cancel channel hold one each; its jobs share the rest); "
                f"this client's holds {pool.max_connections}"
            )
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.lease = lease or queue.lease
        self.settles = SettleBatches(queue, self.lease)
        """How this worker's settles went out (``settled``, ``round_trips``)."""
        self.heartbeat = heartbeat or self.lease / 4
        if self.heartbeat >= self.lease:
            raise ValueError("heartbeat must be shorter than the lease")
        self.poll = safe_block(queue.redis, poll or 1.0)
        self.is_retryable = is_retryable
        self.on_error = on_error
        self.presence = presence
        self.holder = uuid.uuid4().hex
        """This worker's presence id: its claims and leases are filed under it."""
        self._slots: dict[str, _Slot] = {}  # by lease token: one job id can come back here
        self._slot_freed = asyncio.Event()
        self.read_ahead = 2 * concurrency if read_ahead is None else read_ahead
        """How many jobs beyond the running ones the worker may hold started while a backlog
        of short jobs waits (:data:`READ_AHEAD_BELOW`; 0: never). Twice the slots: the next
        slotful is on hand while the one after it is being reserved."""
        self._ahead: deque[tuple[str, dict[str, str], float]] = deque()
        """Jobs read ahead: (lease token, record, when read), started, waiting for a slot."""
        self._refill: asyncio.Task[None] | None = None
        self._backlog = False  # the last reserve took every job it asked for
        self._run_time = math.inf  # handlers' running time (s), a running average
        self._hold = min(READ_AHEAD_HOLD, self.heartbeat)
        self._stopping = False
        self._blocking = False
        self._fetcher: asyncio.Task[None] | None = None
        self._doorbell: RedisClient = queue.redis
        self._presence_client: RedisClient = queue.redis
        self._listener: asyncio.Task[None] | None = None
        self._presence_task: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def running(self) -> list[str]:
        """Ids of the jobs this worker is running."""
        return [slot.job.id for slot in self._slots.values()]

    def resize(self, concurrency: int) -> None:
        """From now on, run at most ``concurrency`` jobs at once (0: take none for now).
        Running jobs are never stopped; a worker below its new limit picks again at once.
        Lets two workers share one capacity (a provider's interactive queue and its batch
        lane), each moving its limit as the other's jobs come and go."""
        if concurrency < 0:
            raise ValueError("concurrency must be >= 0")
        self.concurrency = concurrency
        self._slot_freed.set()

    async def start(self) -> Worker:
        if self._fetcher is None:
            # The connections it holds are taken now, before running jobs can take every other.
            self._doorbell = dedicated_client(self.queue.redis)
            self._presence_client = dedicated_client(self.queue.redis)
            try:
                await self._doorbell.initialize()
                await self._announce()  # before the first claim is filed under this worker
            except (*TRANSIENT, RedisError) as exc:
                log.warning("presence not announced yet (%s); the loop retries", exc)
            self._presence_task = asyncio.create_task(self._keep_presence(), name="genq-presence")
            self._fetcher = asyncio.create_task(self._fetch_loop(), name="genq-fetch")
            self._listener = asyncio.create_task(self._listen_cancels(), name="genq-cancels")
        return self

    async def run(self) -> None:
        """Starts and runs until :meth:`stop` is called (for worker processes)."""
        await self.start()
        await self._stopped.wait()

    async def stop(self, deadline: float | None = None) -> None:
        """Stops taking jobs and waits for running ones.

        With ``deadline`` (seconds), jobs still running when it passes are aborted and handed
        back to the queue at once, their attempt not counted.
        """
        self._stopping = True
        if self._fetcher is not None:
            if self._blocking:
                await self._end_wait()
            self._slot_freed.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._fetcher
        if self._refill is not None:
            await asyncio.wait([self._refill])
        if self._ahead:
            held = [(token, fields) for token, fields, _ in self._ahead]
            self._ahead.clear()
            await self._release(held)
        tasks = [s.task for s in self._slots.values() if s.task]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=deadline)
            for slot in list(self._slots.values()):
                if slot.task in pending:
                    slot.aborted = True
                    self._interrupt(slot)
            if pending:
                await asyncio.wait(pending)
        await self.settles.close()
        if self._listener is not None:
            self._listener.cancel()
            if self._doorbell is not self.queue.redis:
                await self._doorbell.aclose()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        if self._presence_task is not None:
            await cancel_and_wait(self._presence_task)
            with contextlib.suppress(*TRANSIENT, RedisError):
                await self._announce(withdraw=True)
            if self._presence_client is not self.queue.redis:
                await self._presence_client.aclose()
        self._stopped.set()

    async def __aenter__(self) -> Worker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- reserving -------------------------------------------------------------------------------

    async def _fetch_loop(self) -> None:
        errors = 0
        hint: str | None = None  # the job id the last doorbell ring named, if any
        # This worker's offer of a free slot while it may still be listed (a pick withdraws
        # it), and the job it last took under another worker's offer ('' for none).
        offer: str | None = None
        adopted = ""
        try:
            while not self._stopping:
                free = self.concurrency - self._occupied()
                if self._ahead:
                    await self._run_ahead(free)
                    free = self.concurrency - self._occupied()
                self._refill_ahead()
                # A refill under way brings the next jobs: the loop waits for it as for a slot.
                if free <= 0 or self._refill is not None:
                    # Cleared first: a slot freed or a refill landed while the offer is being
                    # withdrawn ends the wait below at once.
                    self._slot_freed.clear()
                    if offer is not None or adopted:  # a full worker offers nothing
                        try:
                            await self._withdraw(offer or "", adopted)
                            offer, adopted = None, ""
                        except (*TRANSIENT, RedisError) as exc:
                            log.warning("redis unavailable while withdrawing an offer (%s)", exc)
                    await self._wait_for_slot()
                    continue
                try:
                    started, claimed, expired, wait_ms = await pick_hinted(
                        self.queue, free, self.holder, hint, self.lease, offer or "", adopted
                    )
                    hint, offer, adopted = None, None, ""
                    for token, fields in started:
                        self._spawn(fields, token)
                    taken = len(started)
                    if expired:
                        await self._reclaim(expired)
                    if claimed:
                        await self._activate(claimed)
                    taken += len(claimed)
                    self._backlog = taken >= free
                    if taken >= free or expired:  # more may be ready: pick again at once
                        continue
                    if taken:
                        await _handlers_first_steps()
                    # Fewer than asked: nothing else could be claimed now, and another pick at
                    # once would only hold the server while the jobs just taken start. A job
                    # enqueued meanwhile rang the doorbell or was handed off under the offer
                    # made here, so the wait below ends at once for it. A job handed off under
                    # this worker's own offer needs no pick: while a slot is free the worker
                    # offers it again and waits on, until the next scheduled job or lease
                    # expiry (or the poll) is due.
                    timeout = self.poll if wait_ms < 0 else min(self.poll, wait_ms / 1000)
                    wake_by = time.monotonic() + timeout
                    while not self._stopping:
                        offer = make_offer(self.queue, self.holder, self.lease)
                        self._blocking = True
                        try:
                            rung = await self._wait(offer, max(wake_by - time.monotonic(), 0.01))
                        finally:
                            self._blocking = False
                        if rung is None:
                            break
                        if as_text(rung[0]) != self.queue.keys.handoffs:
                            if as_text(rung[1]) != "1":
                                hint = as_text(rung[1])
                            break
                        handed = HandOff.parse(rung[1])
                        await self._take(handed.fields, handed.token)
                        await _handlers_first_steps()
                        if not handed.offered_by(offer):  # the pick files it under this worker
                            adopted = f"{handed.holder}\0{handed.fields['id']}"
                            break
                        offer = None
                        if self._occupied() >= self.concurrency or time.monotonic() >= wake_by:
                            break
                    errors = 0
                except Exception as exc:  # the loop must outlive any single failure
                    errors += 1
                    delay = min(5.0, 0.05 * 2**errors) * random.uniform(0.5, 1.0)
                    if isinstance(exc, TRANSIENT):
                        log.warning(
                            "redis unavailable while reserving (%s); retry in %.2fs", exc, delay
                        )
                    else:
                        log.exception("reserving failed; retrying in %.2fs", delay)
                    await asyncio.sleep(delay)
        finally:
            if offer is not None or adopted:
                with contextlib.suppress(*TRANSIENT, RedisError):
                    await self._withdraw(offer or "", adopted)

    async def _wait(self, offer: str, timeout: float) -> Any:
        """Offers a free slot and waits for a hand-off or a doorbell ring, up to ``timeout``
        seconds, in one round trip: BLPOP's reply, or None."""
        k = self.queue.keys
        lists = (k.handoffs, k.signal, k.wake(self.holder))
        conn = getattr(self._doorbell, "connection", None)  # the one a dedicated client holds
        if conn is None:  # a cluster client (or one not connected yet): one command each
            await self._doorbell.rpush(k.idle, offer)
            return await self._doorbell.blpop(list(lists), timeout)
        # Both in one write on the held connection (a pipeline would take another from the
        # pool for the whole wait). Cut off half-way (a stop that cannot reach Redis), the
        # connection would hold an unread reply: it is dropped, and the next command connects
        # afresh.
        commands = [("RPUSH", k.idle, offer), ("BLPOP", *lists, timeout)]
        try:
            await conn.send_packed_command(conn.pack_commands(commands))
            await conn.read_response()
            return await conn.read_response()
        except BaseException:
            await conn.disconnect(nowait=True)
            raise

    async def _end_wait(self) -> None:
        """Ends the fetch loop's wait with a push to this worker's own wake list: cut off
        instead, a wait whose reply was a hand-off would lose that job until its lease expired.
        When Redis cannot take the push, the wait is cut off all the same."""
        key = self.queue.keys.wake(self.holder)
        try:
            async with asyncio.timeout(self.lease / 4):
                async with self.queue.redis.pipeline(transaction=False) as pipe:
                    pipe.lpush(key, "1")
                    pipe.pexpire(key, ms(self.poll) + 5000)
                    await pipe.execute()
        except (*TRANSIENT, RedisError, TimeoutError) as exc:
            log.warning("could not end the wait for work (%s): cutting it off", exc)
            if self._fetcher is not None:
                self._fetcher.cancel()

    async def _withdraw(self, offer: str, adopted: str = "") -> None:
        """Withdraws this worker's offer (and files a job it took under another's as its own),
        taking the job handed off under the offer meanwhile, if any."""
        started, _, _, _ = await pick_hinted(
            self.queue, 0, self.holder, None, self.lease, offer, adopted
        )
        for token, fields in started:
            await self._take(fields, token)

    async def _take(self, fields: dict[str, str], token: str) -> None:
        """Runs a job handed off to this worker, or hands it back untouched (as a stop's
        deadline does: ready again, its attempt not counted) when the worker takes no new job:
        it is stopping, or was resized below what it runs since it offered the slot."""
        if not self._stopping and self._occupied() < self.concurrency:
            self._spawn(fields, token)
            return
        await self._release([(token, fields)])

    # -- reading ahead ---------------------------------------------------------------------------

    def _refill_ahead(self) -> None:
        """Starts a reserve of the jobs read ahead, in a task of its own so the loop runs what
        it holds meanwhile: only while a backlog of short jobs waits and none is under way."""
        want = self.read_ahead - len(self._ahead)
        if (
            want > 0
            and self._backlog
            and self._run_time < READ_AHEAD_BELOW
            and self._refill is None
            and not self._stopping
        ):
            self._refill = asyncio.create_task(self._read_ahead(want), name="genq-read-ahead")

    async def _read_ahead(self, want: int) -> None:
        try:
            started, claimed, expired, _ = await pick_hinted(
                self.queue, want, self.holder, None, self.lease
            )
            if claimed:
                started += await activate(self.queue, claimed, self.lease)
            now = time.monotonic()
            self._ahead.extend((token, fields, now) for token, fields in started)
            self._backlog = len(started) >= want
            if expired:
                await self._reclaim(expired)
        except Exception as exc:  # the fetch loop reserves as usual meanwhile
            self._backlog = False
            log.warning("reading jobs ahead failed (%s)", exc)
        finally:
            self._refill = None
            self._slot_freed.set()

    async def _run_ahead(self, free: int) -> None:
        """Runs the jobs read ahead in the ``free`` slots, oldest first; one that waited longer
        than its hold goes back to the queue untouched, as do all of them when jobs turned long
        (no more are read then, and they would wait out whole jobs here)."""
        stale = []
        now = time.monotonic()
        while self._ahead and (
            now - self._ahead[0][2] > self._hold or self._run_time >= READ_AHEAD_BELOW
        ):
            stale.append(self._ahead.popleft())
        while free > 0 and self._ahead:
            token, fields, _ = self._ahead.popleft()
            self._spawn(fields, token)
            free -= 1
        if stale:
            # Jobs ran long meanwhile: no more are read until a pick fills every slot again.
            self._backlog = False
            await self._release([(token, fields) for token, fields, _ in stale])

    async def _wait_for_slot(self) -> None:
        """Waits until a slot frees or a refill lands, or until the oldest job read ahead has
        waited its hold (the loop then hands it back)."""
        if not self._ahead:
            await self._slot_freed.wait()
            return
        hold_ends = self._ahead[0][2] + self._hold - time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(hold_ends, 0.0) + 0.001):
                await self._slot_freed.wait()

    async def _cancel_ahead(self, job_id: str) -> None:
        """Settles a job read ahead whose cancel was published: cancelled, never run."""
        for held in self._ahead:
            if held[1].get("id") == job_id:
                self._ahead.remove(held)
                await self._release([held[:2]], "cancel")
                return

    async def _release(self, jobs: list[tuple[str, dict[str, str]]], kind: str = "release") -> None:
        """Settles started jobs that did not run: handed back untouched (``release``: ready
        again, their attempt not counted) or ``cancel``. One that cannot be settled is left to
        its lease's expiry, as a dead worker's."""

        async def settle(token: str, fields: dict[str, str]) -> None:
            job = ActiveJob(self.queue, fields, token, self.lease, lambda: None)
            with contextlib.suppress(JobLeaseLostError):
                await self._settle(job, _Outcome(kind))

        results = await asyncio.gather(*(settle(t, f) for t, f in jobs), return_exceptions=True)
        for (_, fields), result in zip(jobs, results, strict=True):
            if isinstance(result, Exception):
                log.warning(
                    "job %s: could not settle it (%s, %s); its lease will expire",
                    fields.get("id"),
                    kind,
                    result,
                )

    async def _activate(self, ids: list[str]) -> None:
        for token, fields in await activate(self.queue, ids, self.lease):
            self._spawn(fields, token)

    async def _reclaim(self, ids: list[str], why: str = "lease expired") -> None:
        for job_id, status in await reclaim(self.queue, ids):
            log.warning("reclaimed job %s (%s) -> %s", job_id, why, status)

    # -- running ---------------------------------------------------------------------------------

    def _spawn(self, fields: dict[str, str], token: str) -> None:
        slot: _Slot
        job = ActiveJob(self.queue, fields, token, self.lease, lambda: self._on_cancel(slot))
        slot = _Slot(job=job)
        self._slots[token] = slot
        # The handler's task is made here, first, so the handler starts in the loop's next turn
        # (a task making it would start it a turn later, on every job's first-token path).
        handler_task = slot.handler_task = asyncio.create_task(self._call_handler(job))
        slot.task = asyncio.create_task(
            self._execute(slot, handler_task), name=f"genq-job-{job.id}"
        )

    def _on_cancel(self, slot: _Slot) -> None:
        if not slot.cancel_seen:
            slot.cancel_seen = True
            self._interrupt(slot)

    def _interrupt(self, slot: _Slot) -> None:
        slot.job.signal.set()
        if slot.handler_task is not None and not slot.handler_task.done():
            slot.handler_task.cancel()

    async def _execute(self, slot: _Slot, handler_task: asyncio.Task[Any]) -> None:
        """Keeps the lease of the slot's running handler, then settles its outcome."""
        job = slot.job
        loop = asyncio.get_running_loop()
        slot.keep_alive_timer = loop.call_later(self.heartbeat, self._start_keep_alive, slot)
        try:
            # The handler's end, however it ended (awaiting its task would raise its error or
            # its cancellation here); a future is cheaper than asyncio.wait's.
            ended: asyncio.Future[None] = loop.create_future()
            handler_task.add_done_callback(partial(_end, ended))
            began = loop.time()
            await ended
            self._ran(loop.time() - began)
            outcome = await self._outcome(slot, handler_task)
            slot.finished = True
            # The handler is done: its slot takes the next job while the settle is on its way,
            # so the next pick's round trip runs beside the settle's instead of after it.
            self._slot_freed.set()
            await self._stop_keep_alive(slot)
            if outcome is not None and not slot.lost:
                await self._settle(job, outcome)
        except JobLeaseLostError:
            log.warning("job %s: lease lost before settling; another attempt owns it", job.id)
        except Exception:
            log.exception(
                "job %s: could not settle; its lease will expire and be reclaimed", job.id
            )
        finally:
            slot.finished = True
            self._cancel_keep_alive(slot)
            del self._slots[job.token]
            self._slot_freed.set()

    def _ran(self, seconds: float) -> None:
        """Folds a handler's running time into the running average (the last few count most)."""
        if self._run_time == math.inf:
            self._run_time = seconds
        else:
            self._run_time = 0.75 * self._run_time + 0.25 * seconds

    def _occupied(self) -> int:
        """Slots whose handler has not finished (a finished one may still be settling)."""
        return sum(1 for slot in self._slots.values() if not slot.finished)

    async def _call_handler(self, job: ActiveJob) -> Any:
        return await self.handler(job)

    async def _outcome(self, slot: _Slot, task: asyncio.Task[Any]) -> _Outcome | None:
        if task.cancelled():
            if slot.aborted:
                return _Outcome("release")
            if slot.cancel_seen:
                return _Outcome("cancel")
            return None if slot.lost else _Outcome("release")
        exc = task.exception()
        if exc is None:
            try:
                return _Outcome("complete", self.queue.result_codec.encode(task.result()))
            except Exception as encode_error:  # a result the codec cannot store
                exc = TerminalJobError(f"result could not be encoded: {encode_error}")
        if isinstance(exc, JobLeaseLostError):
            slot.lost = True
            return None
        await self._report(slot.job, exc)
        if slot.cancel_seen:
            return _Outcome("cancel")
        return self._classify(slot.job, exc)

    def _classify(self, job: ActiveJob, exc: BaseException) -> _Outcome:
        message = str(exc) if isinstance(exc, JobError) else f"{type(exc).__name__}: {exc}"
        message = message[:MAX_ERROR_CHARS]
        if self.is_retryable is not None:
            retryable = self.is_retryable(exc)
        else:
            retryable = not isinstance(exc, TerminalJobError)
        if not retryable:
            return _Outcome("fail", message, reason="terminal")
        q = self.queue
        delay = random.uniform(0, min(q.max_backoff, q.backoff * 2 ** (job.attempt - 1)))
        if isinstance(exc, RetryJobError) and exc.retry_after:
            delay = max(delay, exc.retry_after)
        return _Outcome("retry", message, delay=delay)

    async def _report(self, job: ActiveJob, exc: BaseException) -> None:
        if self.on_error is None:
            log.warning("job %s attempt %d failed: %r", job.id, job.attempt, exc)
            return
        try:
            reply = self.on_error(job, exc)
            if inspect.isawaitable(reply):
                await reply
        except Exception:
            log.exception("on_error raised for job %s", job.id)

    async def _settle(self, job: ActiveJob, outcome: _Outcome) -> None:
        q = self.queue
        call = settle_call(
            q, job.id, job.token, job.idempotency_key or "", outcome.kind, outcome.data,
            outcome.delay, outcome.reason, job.metered,
        )  # fmt: skip
        if not q.durable_replicas:
            reply = await self.settles.run(call)
        else:
            # Durable: WAIT on the settle's own connection. Not confirmed in time, the settle
            # still happened on the primary, so it is not undone or retried; if the primary
            # fails before a replica has it, the promoted replica still shows the job running
            # and its lease expiry reruns the attempt (at least once, as after a worker death).
            wait = (q.durable_replicas, ms(q.durable_timeout))
            replies, acknowledged = await with_retry(
                lambda: run_durably(q.redis, q.scripts.settle, [call], *wait), within=self.lease
            )
            reply = replies[0]
            if acknowledged < q.durable_replicas:
                log.warning(
                    "job %s: settle (%s) confirmed by %d of %d replicas in %gs; a failover now "
                    "could lose it and rerun the attempt",
                    job.id, outcome.kind, acknowledged, q.durable_replicas, q.durable_timeout,
                )  # fmt: skip
        if int(reply[0]) == Code.LEASE_LOST:
            raise JobLeaseLostError(job.id)

    # -- presence --------------------------------------------------------------------------------

    async def _announce(self, withdraw: bool = False) -> list[str]:
        """Renews (or withdraws) this worker's presence; returns the jobs of workers whose
        presence lapsed, their leases now expired for the taking."""
        keys, args = presence_call(self.queue, self.holder, 0 if withdraw else self.presence)
        taken = await self.queue.scripts.presence(
            keys=keys, args=args, client=self._presence_client
        )
        return [as_text(i) for i in taken]

    async def _keep_presence(self) -> None:
        """The worker's own sign of life, renewed from its loop (not by jobs, which can be silent
        for long), and the takeover of the jobs of workers that gave none: reclaimed at once
        through reclaim.lua, the same script and fencing as a lease expiry."""
        while True:
            raise_if_cancelled()  # a cancel redis-py swallowed (see genq._cancellation)
            await asyncio.sleep(self.presence / 6)
            try:
                taken = await self._announce()
                if taken:  # each goes back to ready and rings the doorbell
                    await self._reclaim(taken, why="its worker vanished")
            except (*TRANSIENT, RedisError) as exc:
                log.warning("presence not renewed (%s); retrying", exc)
            except Exception:  # the loop must outlive any single failure, or our jobs go
                log.exception("presence not renewed; retrying")

    # -- keeping leases --------------------------------------------------------------------------

    def _start_keep_alive(self, slot: _Slot) -> None:
        if slot.keep_alive is None and not slot.finished:
            if slot.keep_alive_timer is not None:
                slot.keep_alive_timer.cancel()
            slot.keep_alive = asyncio.create_task(self._keep_alive(slot))

    def _poke(self, slot: _Slot) -> None:
        """Has the slot's heartbeat renew the lease now (which reads the job's cancel flag)."""
        slot.poke.set()
        self._start_keep_alive(slot)

    def _cancel_keep_alive(self, slot: _Slot) -> None:
        if slot.keep_alive_timer is not None:
            slot.keep_alive_timer.cancel()
        if slot.keep_alive is not None:
            slot.keep_alive.cancel()

    async def _stop_keep_alive(self, slot: _Slot) -> None:
        self._cancel_keep_alive(slot)
        if slot.keep_alive is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await slot.keep_alive

    async def _keep_alive(self, slot: _Slot) -> None:
        """The automatic heartbeat: renews the lease whenever the handler has been quiet."""
        job = slot.job
        while not slot.finished:
            quiet_for = time.monotonic() - job.renewed_at
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the cancel that ends
            # this loop when the poke arrives at the same moment.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, self.heartbeat - quiet_for)):
                    await slot.poke.wait()
            raise_if_cancelled()
            poked = slot.poke.is_set()
            slot.poke.clear()
            if not poked and time.monotonic() - job.renewed_at < self.heartbeat * 0.9:
                continue
            try:
                await job.heartbeat()
            except JobLeaseLostError:
                log.warning("job %s: lease lost (paused past the lease?); stopping it", job.id)
                slot.lost = True
                self._interrupt(slot)
                return
            except (*TRANSIENT, RedisError) as exc:
                # Any Redis error (a blip, OOM, READONLY during a failover) only delays the
                # next renewal: this task must live on, or its job's settle would be skipped.
                log.warning("job %s: heartbeat failed (%s); retrying", job.id, exc)
                raise_if_cancelled()
                await asyncio.sleep(min(1.0, self.heartbeat / 4))

    async def _listen_cancels(self) -> None:
        """Wakes the heartbeat of a running job the moment its cancel is published."""
        while not self._stopping:
            pubsub = None
            try:
                pubsub = await open_pubsub(self.queue.redis)
                await pubsub.subscribe(self.queue.keys.cancels)
                # A cancel published while the channel was down reached nobody: every running
                # job's heartbeat looks now instead of at its next turn.
                for slot in self._slots.values():
                    self._poke(slot)
                while not self._stopping:
                    # Polled, not listen(): a stop must end this loop even when redis-py
                    # swallows the cancel of the read in flight.
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    raise_if_cancelled()
                    if message is None or message.get("type") != "message":
                        continue
                    job_id = as_text(message["data"])
                    for slot in self._slots.values():
                        if slot.job.id == job_id:
                            self._poke(slot)
                    await self._cancel_ahead(job_id)
            except TRANSIENT as exc:
                log.warning("cancel channel unavailable (%s); relying on heartbeats", exc)
                await asyncio.sleep(1.0)
            except (AttributeError, NotImplementedError):
                return  # a client without pub/sub: heartbeats still carry cancels
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py


class SettleBatches:
    """A worker's settles, sent in batches that form by themselves: a settle goes out at once
    when none is in flight; those that arrive while one is in flight go together next, in one
    pipeline, each still its own ``settle.lua`` call. An idle worker's settle goes out alone and
    at once; a busy one pays one round trip, and redis-py's per-call work once, for many jobs
    (``bench/queue.py --only drain``; docs/KNOWN_LIMITS.md). Transient errors retry the whole
    batch (``settle.lua`` is safe to run twice); an error reply sends that batch's settles
    again one by one, so only the settle it belongs to fails."""

    def __init__(self, queue: QueueBase, within: float) -> None:
        self.queue = queue
        self.within = within
        self._waiting: list[tuple[Call, asyncio.Future[Any]]] = []
        self._sender: asyncio.Task[None] | None = None
        self.settled = 0
        """Settles sent (a batch that failed and went again one by one counts once)."""
        self.round_trips = 0
        """Batches sent: ``settled / round_trips`` is the mean batch."""

    async def run(self, call: Call) -> Any:
        """Settles one job (``settle_call``'s keys and arguments); returns the script's reply."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append((call, future))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send(), name="genq-settles")
        return await future

    async def close(self) -> None:
        """Waits for the batch in flight, if any (its jobs' tasks may have been cancelled)."""
        if self._sender is not None:
            with contextlib.suppress(Exception):
                await self._sender

    async def _send(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            self.settled += len(batch)
            self.round_trips += 1
            try:
                replies = await self._settle([call for call, _ in batch])
            except ResponseError:
                replies = [await self._one(call) for call, _ in batch]
            except Exception as exc:
                replies = [exc] * len(batch)
            except BaseException:  # cancelled: these settles may not have happened
                for _, future in batch:
                    future.cancel()
                raise
            for (_, future), reply in zip(batch, replies, strict=True):
                if future.done():  # its job's task was cancelled meanwhile
                    continue
                if isinstance(reply, Exception):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)

    async def _settle(self, calls: list[Call]) -> list[Any]:
        script = self.queue.scripts.settle
        return await with_retry(
            lambda: run_streamed(self.queue.redis, script, calls), within=self.within
        )

    async def _one(self, call: Call) -> Any:
        try:
            return (await self._settle([call]))[0]
        except Exception as exc:
            return exc
