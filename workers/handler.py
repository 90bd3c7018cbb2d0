"""The generation handler: a job's request -> the provider's stream -> the job's chunks.

Job payload: a :class:`genq_contract.payload.GenerationPayload` (written by the gateway)::

    {"model": "demo/fast", "messages": [{"role": "user", "content": "..."}],  # or "prompt"
     "params": {"temperature": 0.2, ...}}                                      # optional

Result: a :class:`genq_contract.result.GenerationResult`, ``{"text", "model", "finish_reason",
"usage"}``, ``usage`` as :meth:`genq_contract.spend.Usage.as_json` gives it (the model an HTTP
worker's ack is checked against), plus ``reasoning`` and ``tool_calls`` when the model returned
any. Each chunk event's data is a piece of text; reasoning and tool calls stream as their own
events (:mod:`workers.delta_writer`). The events of the attempt that completed fold
(:class:`genq_contract.transcript.Transcript`) to the result exactly. Every attempt meters
its usage and cost, and holds a budget, through :mod:`workers.metering` (the hold runs beside
the provider call, and must be granted before the first delta is passed on). A failure that
retrying the model will not fix soon continues on a fallback model (:mod:`workers.fallback`).

A generation runs as the tenant and API key that asked (``tenant``, ``key_id``). Each attempt
checks first that neither was revoked or disabled (:mod:`genq_services.access`, a snapshot at
most ``GENQ_ACCESS_CACHE_SECONDS`` old): a refused one fails terminally, without calling the
provider. While it streams, the check is repeated every ``access_recheck`` seconds; a refusal
then closes the provider stream and fails the generation with the reason (failed, not
cancelled: the record says why, which a cancel cannot).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from dataclasses import dataclass, field
from typing import Any

from genq import ActiveJob, Queue, RetryJobError, TerminalJobError
from genq_contract.payload import GenerationPayload
from genq_contract.result import GenerationResult, ResultUsage
from genq_contract.routing import ProviderConfig, Routing, RoutingError, litellm_provider
from genq_services.access import DEFAULT_CACHE_SECONDS, Access, CachedAccess
from providers import demo
from providers.limits import DEFAULT_MAX_COOLDOWN, note_rate_limit
from providers.litellm_adapter import stream_chat
from workers.access_watch import AccessWatch
from workers.coalesce import (
    DEFAULT_MAX_CHARS,
    DirectEmitter,
    EmitBatcher,
    EmitStats,
    JobEmitter,
)
from workers.delta_writer import DeltaWriter
from workers.fallback import DEFAULT_MAX_WAIT, Fallbacks
from workers.metering import Metering

TURN = 0.005
"""Longest a stream runs before it lets the event loop's other work in (seconds): chunks that
arrived together are read without a wait, and 64 such streams, or one long one, would
otherwise hold the loop for seconds (presence, heartbeats and the other jobs with it)."""


@dataclass
class GenerationHandler:
    """Runs generations for one provider's queue (``queue.worker(handler, ...)``)."""

    queue: Queue
    routing: Routing
    provider: ProviderConfig
    silence_timeout: float = 30.0
    coalesce_window: float = 0.010
    coalesce_max_chars: int = DEFAULT_MAX_CHARS
    stats: EmitStats = field(default_factory=EmitStats)
    demo_faults: bool = False
    """The demo provider fails on request (``GENQ_DEMO_FAULTS``); never a request's choice."""
    max_cooldown: float = DEFAULT_MAX_COOLDOWN
    metering: Metering = field(default_factory=Metering)
    fallback_max_wait: float = DEFAULT_MAX_WAIT
    access_cache_seconds: float | None = DEFAULT_CACHE_SECONDS
    """How old the snapshot of revoked keys and disabled tenants may be
    (``GENQ_ACCESS_CACHE_SECONDS``); None: run every generation without checking."""
    access_recheck: float = 1.0
    """Seconds between the checks of a streaming generation (answered from the snapshot)."""
    batch_lane: Queue | None = None
    """The provider's batch lane, when this handler serves its interactive queue: a 429 here
    pauses the lane first and longer (``providers.limits.note_rate_limit``)."""
    batcher: EmitBatcher | None = field(default=None, init=False)
    fallbacks: Fallbacks = field(init=False)
    access: CachedAccess | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.fallbacks = Fallbacks.beside(self.queue, self.routing, self.fallback_max_wait)
        if self.access_cache_seconds is not None:
            access = Access(self.queue.redis, self.routing.namespace)
            self.access = CachedAccess(access, self.access_cache_seconds)
        if self.coalesce_window > 0:
            self.batcher = EmitBatcher(
                window=self.coalesce_window, max_chars=self.coalesce_max_chars, stats=self.stats
            )

    async def aclose(self) -> None:
        """Stops the emit batcher; call once the worker stopped."""
        if self.batcher is not None:
            await self.batcher.aclose()

    def _emitter(self, job: ActiveJob) -> JobEmitter:
        if self.batcher is None:
            return DirectEmitter(job, self.stats)
        return self.batcher.open(job)

    async def __call__(self, job: ActiveJob) -> dict[str, Any]:
        request = GenerationPayload.parse(job.payload)
        generate = functools.partial(self._generate, job, request)
        if self.access is None:
            return await self.fallbacks.run(job, request, generate, self._emitter)
        refusal = await self.access.refusal(request.key_id, request.tenant)
        if refusal is not None:
            raise TerminalJobError(f"{refusal}; the generation was not run")
        watch = AccessWatch(self.access, request.key_id, request.tenant, self.access_recheck)
        return await watch.run(self.fallbacks.run(job, request, generate, self._emitter))

    async def _generate(self, job: ActiveJob, request: GenerationPayload) -> dict[str, Any]:
        """One attempt on the request's own model."""
        try:
            self.routing.check_params(request.model, request.params)
            provider = self.routing.provider_of(request.model)
        except RoutingError as exc:
            raise TerminalJobError(str(exc)) from exc
        if provider.name != self.provider.name:
            raise TerminalJobError(
                f"model {request.model!r} belongs to provider {provider.name!r}, "
                f"not to this queue's {self.provider.name!r}"
            )
        params = dict(request.params)
        if litellm_provider(request.model) == "demo":
            params["demo_attempt"] = job.attempt  # lets demo faults hit chosen attempts only
            params[demo.FAULTS_ENABLED] = self.demo_faults

        finish_reason: str | None = None
        async with self.metering.attempt(job, request) as meter:
            emitter = self._emitter(job)
            writer = DeltaWriter(emitter)
            stream = stream_chat(
                request.model,
                request.messages,
                params,
                silence_timeout=self.silence_timeout,
                api_base=provider.api_base,
                api_key=self._api_key(provider),
            )
            try:
                # aclosing: a cancel that lands while we await Redis still closes the upstream.
                async with contextlib.aclosing(stream):
                    meter.sending()
                    meter.start_hold()  # its Redis reads beside the request, not before it
                    clock = asyncio.get_running_loop().time
                    turn_ends = clock() + TURN
                    async for delta in stream:
                        if meter.holding:  # the first delta: nothing passes a refused hold
                            await meter.held(answered=True)
                        meter.observe(delta)
                        if delta.reasoning or delta.tool_calls or delta.finish_reason:
                            await writer.write(delta)
                        elif delta.text:  # the common case, without a call more per token
                            await emitter.write(delta.text)
                        meter.check_spend()  # past its budget hold + margin: stop, failed
                        finish_reason = delta.finish_reason or finish_reason
                        if clock() > turn_ends:
                            await asyncio.sleep(0)
                            turn_ends = clock() + TURN
                    await meter.held()  # a stream that ended without a delta
                await writer.finish()
                await emitter.aclose()
            except Exception as exc:
                await self._after_failure(emitter, exc)
                await meter.held()  # a refused hold fails the attempt, whatever the provider did
                raise
            finally:
                emitter.abort()
        text, calls = meter.text, writer.tool_calls
        if not text and not calls and writer.reasoning is None and meter.reported is None:
            # A 200 that was not an event stream (an HTML error page from a proxy, say):
            # LiteLLM still reports finish_reason "stop". A real empty answer carries usage.
            raise RetryJobError("the provider's answer had no content and no usage report")
        reasoning_tokens = (meter.reported or {}).get("reasoning_tokens")
        return GenerationResult(
            text=text,
            model=request.model,
            finish_reason=finish_reason,
            usage=None if meter.usage is None else ResultUsage.of(meter.usage, reasoning_tokens),
            reasoning=writer.reasoning,
            tool_calls=calls,
        ).as_json()

    async def _after_failure(self, emitter: JobEmitter, exc: Exception) -> None:
        """Pauses the provider after a 429, and shows watchers the text that did arrive."""
        await note_rate_limit(self.queue, exc, self.max_cooldown, lane=self.batch_lane)
        with contextlib.suppress(Exception):
            await emitter.aclose()

    @staticmethod
    def _api_key(provider: ProviderConfig) -> str | None:
        if not provider.api_key_env:
            return None
        return os.environ.get(provider.api_key_env) or None
