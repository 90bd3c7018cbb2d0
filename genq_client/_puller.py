"""A pull client: work a gateway queue from anywhere HTTP reaches (``AsyncPuller``, ``Puller``).

    async def handle(job: PulledJob) -> str:
        for word in job.payload["messages"][-1]["content"].split():
            job.emit(word + " ")           # streamed to the viewers, numbered with seq
            if job.cancelled:              # the generation was cancelled: stop
                break
        return job.text                    # acked as {text, model, finish_reason, usage}

    async with AsyncPuller("https://genq.example", worker_key) as puller:
        await puller.consume("demo", handle, concurrency=4)   # until puller.stop()

A handler streams a model's other parts with ``job.emit(data, type=...)`` (``reasoning``,
``tool_call``, ``tool_args``, ``tool_done``) and may return ``reasoning`` and ``tool_calls``.

``consume`` long-polls ``POST /v1/queues/{queue}/pull`` for as many jobs as it has free slots
and runs up to ``concurrency`` handlers at once. While a handler runs, its job's visibility is
extended every third of it. What the handler returns is acked; an exception nacks (``RetryJob``
chooses the delay, ``TerminalJob`` dead-letters). A job whose receipt went stale (409) or was
refused (403) is abandoned: logged, never settled, the loop goes on. An unreachable gateway, a
5xx or a 429 is retried with bounded exponential backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import httpx

from ._client import _backoff
from ._common import OnPortal, raise_for
from ._output import OutputError
from ._pulled_job import PulledJob, result_of

log = logging.getLogger("genq_client.puller")

MAX_PULL = 100
"""Jobs one pull may take (the gateway's limit)."""
MAX_WAIT = 20.0
MIN_VISIBILITY, MAX_VISIBILITY = 1.0, 3600.0
MAX_ERROR = 2000
MAX_RETRY_AFTER = 86_400.0

AsyncHandler = Callable[[PulledJob], Awaitable[object]]
Handler = Callable[[PulledJob], object]


class RetryJob(Exception):
    """Raised by a handler: this attempt failed; retry it after ``retry_after`` seconds (the
    queue's backoff when None) while attempts remain."""

    def __init__(self, message: str = "retry requested", *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class TerminalJob(Exception):
    """Raised by a handler: the job fails now, without a retry (it would fail the same way)."""


class _JobLost(Exception):
    """The job is no longer this worker's: a stale receipt (``quiet``) or a refusal."""

    def __init__(self, reason: str, *, quiet: bool = False, status: int | None = None) -> None:
        super().__init__(reason)
        self.quiet = quiet
        self.status = status


class _Unavailable(Exception):
    """The gateway did not answer the pull: retry after ``retry_after`` (backoff when None)."""

    def __init__(self, problem: str, retry_after: float | None = None) -> None:
        super().__init__(problem)
        self.retry_after = retry_after


def _transient(status: int) -> bool:
    return status == 429 or status >= 500


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        return min(float(value), 60.0)
    except ValueError:
        return None


def _detail(response: httpx.Response) -> Any:
    try:
        return response.json().get("detail")
    except (ValueError, AttributeError):
        return response.text[:200]


def _nack_body(error: Exception) -> dict[str, Any]:
    body: dict[str, Any] = {"error": (str(error) or type(error).__name__)[:MAX_ERROR]}
    if isinstance(error, TerminalJob):
        body["terminal"] = True
    elif isinstance(error, RetryJob) and error.retry_after is not None:
        body["retry_after"] = min(max(0.0, float(error.retry_after)), MAX_RETRY_AFTER)
    return body


def _check(concurrency: int, visibility: float, wait: float) -> None:
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if not MIN_VISIBILITY <= visibility <= MAX_VISIBILITY:
        raise ValueError(f"visibility must be from {MIN_VISIBILITY} to {MAX_VISIBILITY} seconds")
    if not 0 <= wait <= MAX_WAIT:
        raise ValueError(f"wait must be from 0 to {MAX_WAIT} seconds")


class AsyncPuller:
    """Works queues of a gateway with a worker key (or an admin key): see :meth:`consume`."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            transport=transport,
        )
        self._stop_requested = False
        self._stops: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    async def __aenter__(self) -> AsyncPuller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def stop(self) -> None:
        """Ends every ``consume`` of this puller once its current long poll (at most ``wait``
        seconds) and its running handlers finish. Safe from any thread or a signal handler; a
        stop before ``consume`` makes it return at once."""
        self._stop_requested = True
        for loop, event in list(self._stops):
            with contextlib.suppress(RuntimeError):  # that loop is closed
                loop.call_soon_threadsafe(event.set)

    async def consume(
        self,
        queue: str,
        handler: AsyncHandler,
        *,
        concurrency: int = 1,
        visibility: float = 60.0,
        wait: float = 20.0,
    ) -> None:
        """Works ``queue`` until :meth:`stop`: pulls up to the free slots, holding each job
        ``visibility`` seconds (extended while its handler runs), waiting up to ``wait``
        seconds per pull. Raises :class:`APIError` for a refused pull (401, 403, 404, 422)
        once the running handlers finished; cancelled, it cancels them (their jobs come back
        after their visibility)."""
        _check(concurrency, visibility, wait)
        stopping = asyncio.Event()
        registration = (asyncio.get_running_loop(), stopping)
        self._stops.add(registration)
        if self._stop_requested:
            stopping.set()
        running: set[asyncio.Task[None]] = set()
        failures = 0
        try:
            while not stopping.is_set():
                free = concurrency - len(running)
                if free <= 0:
                    await _first_of(running, stopping)
                    continue
                try:
                    jobs = await self._pull(queue, min(free, MAX_PULL), visibility, wait)
                except _Unavailable as down:
                    delay = down.retry_after or _backoff(None, failures)
                    failures += 1
                    log.warning("pull from %r failed (%s); again in %.1f s", queue, down, delay)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stopping.wait(), delay)
                    continue
                if failures:
                    log.info("pull from %r works again", queue)
                failures = 0
                for body in jobs:
                    job = PulledJob(queue, body, visibility)
                    task = asyncio.create_task(self._work(job, handler), name=f"genq-{job.id}")
                    running.add(task)
                    task.add_done_callback(running.discard)
        except (asyncio.CancelledError, KeyboardInterrupt):
            for task in running:
                task.cancel()
            raise
        finally:
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            self._stops.discard(registration)
            if not self._stops:
                self._stop_requested = False

    async def _pull(
        self, queue: str, count: int, visibility: float, wait: float
    ) -> list[dict[str, Any]]:
        try:
            response = await self._http.post(
                f"/v1/queues/{quote(queue, safe='')}/pull",
                json={"max": count, "visibility": visibility, "wait": wait},
                timeout=httpx.Timeout(self._timeout, read=wait + self._timeout),
            )
        except httpx.TransportError as exc:
            raise _Unavailable(f"{type(exc).__name__}: {exc}") from None
        if _transient(response.status_code):
            raise _Unavailable(f"HTTP {response.status_code}", _retry_after(response))
        raise_for(response)
        return list(response.json()["jobs"])

    async def _work(self, job: PulledJob, handler: AsyncHandler) -> None:
        flusher = asyncio.create_task(self._holding(job, self._flush(job)))
        extender = asyncio.create_task(self._holding(job, self._extend(job)))
        try:
            action, body = await _run(job, handler)
            job._close()
            await flusher
            extender.cancel()
            if job.abandoned:
                return
            reply = await self._settle(job, action, body)
            log.info("job %s attempt %d: %s", job.id, job.attempt, reply.get("status"))
        except _JobLost as lost:
            _abandon(job, lost)
        except Exception:  # a bug (an answer not as documented): drop the job, keep the loop
            if job._abandon("failed"):
                log.exception("job %s attempt %d abandoned", job.id, job.attempt)
        finally:
            for task in (flusher, extender):
                task.cancel()
            await asyncio.gather(flusher, extender, return_exceptions=True)

    async def _settle(self, job: PulledJob, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """Acks or nacks. A result the gateway refuses (422: not a generation's result) fails
        the job now: every attempt would return it the same way."""
        try:
            return await self._call(job, action, body)
        except _JobLost as lost:
            if action != "ack" or lost.status != 422:
                raise
            log.error("job %s attempt %d: the result was refused (%s)", job.id, job.attempt, lost)
            error = TerminalJob(f"the worker's result was refused: {lost}")
            return await self._call(job, "nack", _nack_body(error))

    async def _holding(self, job: PulledJob, work: Awaitable[None]) -> None:
        try:
            await work
        except _JobLost as lost:
            _abandon(job, lost)

    async def _flush(self, job: PulledJob) -> None:
        """Posts what the handler emits, in order, one call at a time: each call's ``seq``
        numbers its first event, so a call resent after a lost answer appends nothing twice."""
        while True:
            await job._wake.wait()
            job._wake.clear()
            while not job.abandoned:
                seq, batch = job._take_batch()
                if not batch:
                    break
                reply = await self._call(job, "events", {"events": batch, "seq": seq})
                job._posted(len(batch))
                if reply.get("cancel_requested"):
                    job._cancel()
            if job._closed or job.abandoned:
                return

    async def _extend(self, job: PulledJob) -> None:
        """Holds the job while its handler runs: an extend once a third of the visibility
        passed since the last call that renewed it (an events call renews it too)."""
        while True:
            due = job.held_at + job.visibility / 3
            if time.monotonic() < due:
                await asyncio.sleep(due - time.monotonic())
                continue
            reply = await self._call(job, "extend", {"visibility": job.visibility})
            if reply.get("cancel_requested"):
                job._cancel()

    async def _call(self, job: PulledJob, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """POSTs to the job's ``action`` route, resending after a dropped connection, a 5xx or
        a 429 until the visibility held when it was first sent runs out (the receipt is dead
        then, and the job goes back in line by itself); the same body is resent, which
        ``seq`` and the gateway's settle make harmless. ``_JobLost`` for a 409, a 403 or
        another refusal."""
        path = f"/v1/queues/{quote(job.queue, safe='')}/jobs/{quote(job.id, safe='')}/{action}"
        payload = {"receipt": job.receipt, **body}
        give_up_at = job.deadline  # fixed: an extend that works must not keep a failing call going
        failures = 0
        while True:
            sent_at = time.monotonic()
            timeout = min(self._timeout, max(1.0, job.deadline - sent_at))
            retry_after = None
            try:
                response = await self._http.post(path, json=payload, timeout=timeout)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    if action in ("events", "extend"):
                        job.held_at = max(job.held_at, sent_at)
                    return dict(response.json())
                status = response.status_code
                if status == 409:
                    raise _JobLost(f"{action}: {_detail(response)}", quiet=True)
                if not _transient(status):
                    detail = _detail(response)
                    raise _JobLost(f"{action}: HTTP {status}: {detail}", status=status)
                problem, retry_after = f"HTTP {status}", _retry_after(response)
            delay = retry_after or _backoff(None, failures)
            failures += 1
            if time.monotonic() + delay >= give_up_at:
                raise _JobLost(f"{action}: no answer before the visibility ran out ({problem})")
            log.debug("job %s: %s failed (%s); again in %.1f s", job.id, action, problem, delay)
            await asyncio.sleep(delay)


async def _run(job: PulledJob, handler: AsyncHandler) -> tuple[str, dict[str, Any]]:
    """The handler's outcome as the settle call to make: ``ack`` or ``nack`` and its body."""
    try:
        returned = await handler(job)
    except TerminalJob as error:
        log.info("job %s attempt %d fails for good: %s", job.id, job.attempt, error)
        return "nack", _nack_body(error)
    except RetryJob as error:
        log.info("job %s attempt %d asks for a retry: %s", job.id, job.attempt, error)
        return "nack", _nack_body(error)
    except OutputError as error:  # a part every attempt would emit the same wrong way
        log.error("job %s attempt %d: %s", job.id, job.attempt, error)
        return "nack", _nack_body(TerminalJob(str(error)))
    except Exception as error:
        if not job.abandoned:
            log.warning("job %s attempt %d failed", job.id, job.attempt, exc_info=True)
        return "nack", _nack_body(error)
    try:
        return "ack", {"result": result_of(job, returned)}
    except OutputError as error:  # every attempt would shape its result the same wrong way
        log.error("job %s attempt %d: %s", job.id, job.attempt, error)
        return "nack", _nack_body(TerminalJob(str(error)))


def _abandon(job: PulledJob, lost: _JobLost) -> None:
    if job._abandon(str(lost)):
        level = logging.INFO if lost.quiet else logging.WARNING
        log.log(level, "job %s attempt %d abandoned: %s", job.id, job.attempt, lost)


async def _first_of(running: set[asyncio.Task[None]], stopping: asyncio.Event) -> None:
    """Waits for a handler to finish or a stop."""
    stop = asyncio.create_task(stopping.wait())
    try:
        await asyncio.wait({*running, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()


class Puller(OnPortal):
    """The blocking twin of :class:`AsyncPuller`: ``consume`` blocks, and runs each (blocking)
    handler in a thread of its own, up to ``concurrency`` at once; the HTTP side runs on an
    event loop in a background thread (anyio's blocking portal), exactly as the async one.
    ``stop()`` may be called from any thread (or a signal handler)."""

    _async: AsyncPuller

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._open(lambda: AsyncPuller(base_url, api_key, timeout=timeout, transport=transport))

    def stop(self) -> None:
        """See :meth:`AsyncPuller.stop`."""
        self._async.stop()

    def consume(
        self,
        queue: str,
        handler: Handler,
        *,
        concurrency: int = 1,
        visibility: float = 60.0,
        wait: float = 20.0,
    ) -> None:
        """See :meth:`AsyncPuller.consume`; ``handler`` is a plain function, run in a thread.
        Interrupted (Ctrl-C), it stops at once: the jobs it held come back after their
        visibility."""
        _check(concurrency, visibility, wait)

        async def in_threads() -> None:
            limiter = anyio.CapacityLimiter(concurrency)

            async def run(job: PulledJob) -> object:
                return await anyio.to_thread.run_sync(handler, job, limiter=limiter)

            await self._async.consume(
                queue, run, concurrency=concurrency, visibility=visibility, wait=wait
            )

        future = self._portal.start_task_soon(in_threads)
        try:
            future.result()
        except BaseException:
            future.cancel()
            raise
