"""Fallback models: a generation its model cannot finish continues on the next one.

When an attempt fails in a way that retrying the same model will not fix soon (see
:func:`fallback_reason`), the generation (the *parent*) hands its request to the next model of
its chain as a new generation (the *child*) on that model's own provider queue, so the child
waits for that provider's concurrency, fair share and 429 cooldowns like any other job. The
parent's attempt then relays the child: a ``restarted`` event (data ``{"model", "reason"}``),
the child's text and other parts (reasoning, tool calls) as they come, and the child's result
(whose ``model`` says who answered) or its error. The relaying attempt meters the child's usage
uncounted: the child's own settle counted it.

- The child's idempotency key is ``<parent id>:fallback``: a later attempt of the parent (its
  worker died mid-relay) finds the same child and relays it again from its start.
- The child's ``fallbacks`` are the rest of the chain, so a chain continues and never loops.
- Stop of the parent cancels the child; a parent handed back (drain, lost lease) leaves it
  running for the next attempt to relay.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from genq import ActiveJob, Event, Job, Queue, RetryJobError, TerminalJobError
from genq_contract.events import CHUNK, COMPLETED, FAILED, RESTARTED
from genq_contract.parts import PART_TYPES
from genq_contract.payload import GenerationPayload
from genq_contract.routing import Routing, RoutingError, new_job_id
from providers.errors import RateLimitedError
from workers.coalesce import JobEmitter
from workers.telemetry import current_traceparent, note_fallback

log = logging.getLogger("workers.fallback")

DEFAULT_MAX_WAIT = 30.0
MAX_REASON_CHARS = 200
CANCEL_TIMEOUT = 5.0

OpenEmitter = Callable[[ActiveJob], JobEmitter]


def fallback_key(job_id: str) -> str:
    """The idempotency key of the child that continues ``job_id``."""
    return f"{job_id}:fallback"


def fallback_reason(exc: BaseException, job: ActiveJob, max_wait: float) -> str | None:
    """Why the failure ``exc`` of ``job``'s attempt sends it to its next model, or None.

    A retryable failure on the job's last attempt (its model had every attempt meant for it),
    or a 429 asking to wait longer than ``max_wait`` seconds on any attempt. Never a terminal
    one (a bad request or a refused key fails the same way on any model)."""
    if not isinstance(exc, RetryJobError):
        return None
    long_wait = (
        isinstance(exc, RateLimitedError)
        and exc.retry_after is not None
        and exc.retry_after > max_wait
    )
    if not long_wait and job.attempt < job.max_attempts:
        return None
    reason = str(exc) or type(exc).__name__
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 3] + "..."
    return reason


@dataclass
class Fallbacks:
    """The fallback side of a provider queue's generation handler."""

    routing: Routing
    queues: Mapping[str, Queue]
    """Every provider's queue, by provider name (the children go there)."""
    max_wait: float = DEFAULT_MAX_WAIT

    @classmethod
    def beside(cls, queue: Queue, routing: Routing, max_wait: float) -> Fallbacks:
        """Fallbacks for the handler of ``queue``: every other provider's queue on the same
        Redis, with ``queue``'s options (attempts, retention) for the children."""
        queues = {
            name: queue
            if provider.queue_prefix == queue.prefix
            else queue.sibling(provider.queue_prefix)
            for name, provider in routing.providers.items()
        }
        return cls(routing, queues, max_wait)

    def chain(self, request: GenerationPayload) -> list[str]:
        """The request's fallback models that can still run it (allowed, params accepted)."""
        usable = []
        for model in self.routing.fallbacks_of(request.model, request.fallbacks):
            try:
                self.routing.check_params(model, request.params)
            except RoutingError as exc:
                log.warning("fallback %s skipped: %s", model, exc)
                continue
            if model != request.model and model not in usable:
                usable.append(model)
        return usable

    async def run(
        self,
        job: ActiveJob,
        request: GenerationPayload,
        generate: Callable[[], Awaitable[dict[str, Any]]],
        open_emitter: OpenEmitter,
    ) -> dict[str, Any]:
        """Runs ``generate`` (the attempt on the request's own model) and, when it fails in a
        way that calls for it, relays the request's next model instead."""
        chain = self.chain(request)
        if not chain:
            return await generate()
        model, rest = chain[0], chain[1:]
        queue = self._queue_of(model)
        earlier = await queue.find(fallback_key(job.id))
        if earlier is not None:
            reason = "an earlier attempt handed this generation to its fallback"
            return await self._relay(job, queue, earlier.id, model, reason, open_emitter)
        try:
            return await generate()
        except RetryJobError as exc:
            reason_or_none = fallback_reason(exc, job, self.max_wait)
            if reason_or_none is None:
                raise
            reason = reason_or_none
        child_id = await self._enqueue(job, request, queue, model, rest)
        note_fallback(model, child_id)
        log.info(
            "job %s: %s -> fallback %s (%s): %s", job.id, request.model, model, child_id, reason
        )
        return await self._relay(job, queue, child_id, model, reason, open_emitter)

    def _queue_of(self, model: str) -> Queue:
        return self.queues[self.routing.provider_of(model).name]

    async def _enqueue(
        self,
        job: ActiveJob,
        request: GenerationPayload,
        queue: Queue,
        model: str,
        rest: list[str],
    ) -> str:
        update = {"model": model, "fallbacks": rest, "traceparent": current_traceparent()}
        payload = request.model_copy(update=update)
        enqueued = await queue.enqueue(
            payload.model_dump(),
            idempotency_key=fallback_key(job.id),
            priority=job.priority,
            job_id=new_job_id(self.routing.provider_of(model).name),
            tenant=request.tenant or "",
        )
        return enqueued.id

    async def _relay(
        self,
        job: ActiveJob,
        queue: Queue,
        child_id: str,
        model: str,
        reason: str,
        open_emitter: OpenEmitter,
    ) -> dict[str, Any]:
        """Copies the child's output into the parent's stream; returns the child's result."""
        await job.restart({"model": model, "reason": reason})
        emitter = open_emitter(job)
        fresh = True  # nothing written since the parent's last restart
        try:
            async for event in queue.watch(child_id):
                if event.type == CHUNK:
                    await emitter.write(event.data)
                    fresh = False
                elif event.type in PART_TYPES:
                    await emitter.write_event(event.type, event.data)
                    fresh = False
                elif event.type == RESTARTED:
                    # The child moved on to its own fallback (data names the model), or its
                    # attempt started over: the parent's watchers start over with it.
                    data = event.data if isinstance(event.data, dict) else {}
                    if isinstance(data.get("model"), str):
                        model = data["model"]
                    elif fresh:
                        continue
                    else:
                        data = {"model": model, "reason": "the fallback's attempt started over"}
                    await emitter.aclose()
                    await job.restart(data)
                    emitter = open_emitter(job)
                    fresh = True
                elif event.terminal:
                    await emitter.aclose()
                    return await self._outcome(job, queue, child_id, model, event)
        except asyncio.CancelledError:
            await asyncio.shield(self._cancel_if_stopped(job, queue, child_id))
            raise
        finally:
            emitter.abort()
        raise RetryJobError(f"the fallback generation {child_id} is gone")

    async def _outcome(
        self, job: ActiveJob, queue: Queue, child_id: str, model: str, event: Event
    ) -> dict[str, Any]:
        child = await queue.get(child_id)  # its usage, settled with the terminal event
        if event.type == COMPLETED:
            result = event.data
            if not isinstance(result, dict):
                raise TerminalJobError(f"the fallback generation {child_id} has no result")
            _meter(job, str(result.get("model") or model), child)
            return result
        _meter(job, model, child)
        if event.type == FAILED:
            raise TerminalJobError(str(event.data or f"the fallback on {model} failed"))
        raise TerminalJobError(f"the fallback generation {child_id} on {model} was cancelled")

    async def _cancel_if_stopped(self, job: ActiveJob, queue: Queue, child_id: str) -> None:
        """Cancels the child when the parent's cancel was requested (Stop); a parent that was
        only handed back leaves the child to its next attempt."""
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT):
                if await job.queue.cancel_requested(job.id):
                    await queue.cancel(child_id)
        except Exception:
            log.exception("job %s: could not cancel its fallback %s", job.id, child_id)


_RESERVED = frozenset({"estimated", "attempts", "estimated_attempts"})


def _meter(job: ActiveJob, model: str, child: Job | None) -> None:
    """Shows the child's usage on the relaying attempt, uncounted (the child counted it).

    Not when this attempt already metered its own model's usage counted (text it streamed
    before failing): one attempt carries one meter, and money spent must stay counted."""
    usage = child.usage if child is not None else None
    if not usage or _counted_spend(job.metered):
        return
    counts = {
        name: value
        for name, value in usage.items()
        if name not in _RESERVED and isinstance(value, int) and not isinstance(value, bool)
    }
    job.meter(model, counts, estimated=bool(usage.get("estimated")), counted=False)


def _counted_spend(metered: str) -> bool:
    if not metered:
        return False
    meter = json.loads(metered)
    return bool(meter.get("counted")) and any(meter.get("counts", {}).values())
