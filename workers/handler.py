"""The generation handler: a job's request -> the provider's stream -> the job's chunks.

Job payload (written by the gateway)::

    {"model": "demo/fast", "messages": [{"role": "user", "content": "..."}],  # or "prompt"
     "params": {"temperature": 0.2, ...}}                                      # optional

Result: ``{"text", "model", "finish_reason", "usage"}``. Each chunk event's data is a piece of
text; the chunks of the attempt that completed concatenate to ``text`` exactly.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from genq import ActiveJob, Queue, RetryJobError, TerminalJobError
from providers.limits import note_rate_limit
from providers.litellm_adapter import stream_chat
from providers.routing import ProviderConfig, Routing, RoutingError, litellm_provider
from workers.coalesce import (
    DEFAULT_MAX_CHARS,
    DirectEmitter,
    EmitBatcher,
    EmitStats,
    JobEmitter,
)


@dataclass(frozen=True)
class GenerationRequest:
    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]

    @classmethod
    def from_payload(cls, payload: Any) -> GenerationRequest:
        """Validates a job payload; a malformed one can never succeed, so it is terminal."""
        if not isinstance(payload, Mapping):
            raise TerminalJobError("payload must be an object with model and messages")
        model = payload.get("model")
        messages = payload.get("messages")
        if messages is None and isinstance(payload.get("prompt"), str):
            messages = [{"role": "user", "content": payload["prompt"]}]
        params = payload.get("params") or {}
        if not isinstance(model, str) or not model:
            raise TerminalJobError("payload.model must be a non-empty string")
        if not isinstance(messages, list) or not messages:
            raise TerminalJobError("payload needs messages (a non-empty list) or a prompt")
        if not all(isinstance(m, Mapping) and "role" in m for m in messages):
            raise TerminalJobError("each message must be an object with a role")
        if not isinstance(params, Mapping):
            raise TerminalJobError("payload.params must be an object")
        return cls(model, [dict(m) for m in messages], dict(params))


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
    batcher: EmitBatcher | None = field(default=None, init=False)

    def __post_init__(self) -> None:
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
        request = GenerationRequest.from_payload(job.payload)
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

        emitter = self._emitter(job)
        parts: list[str] = []
        finish_reason: str | None = None
        usage: dict[str, int] | None = None
        stream = stream_chat(
            request.model,
            request.messages,
            params,
            silence_timeout=self.silence_timeout,
            api_base=provider.api_base,
            api_key=self._api_key(provider),
        )
        try:
            # aclosing: a cancel that lands while we await Redis still closes the upstream now.
            async with contextlib.aclosing(stream):
                async for delta in stream:
                    if delta.text:
                        parts.append(delta.text)
                        await emitter.write(delta.text)
                    finish_reason = delta.finish_reason or finish_reason
                    usage = delta.usage or usage
            await emitter.aclose()
        except Exception as exc:
            await self._after_failure(emitter, exc)
            raise
        finally:
            emitter.abort()
        if not parts and usage is None:
            # A 200 that was not an event stream (an HTML error page from a proxy, say):
            # LiteLLM still reports finish_reason "stop". A real empty answer carries usage.
            raise RetryJobError("the provider's answer had no content and no usage report")
        return {
            "text": "".join(parts),
            "model": request.model,
            "finish_reason": finish_reason,
            "usage": usage,
        }

    async def _after_failure(self, emitter: JobEmitter, exc: Exception) -> None:
        """Pauses the provider after a 429, and shows watchers the text that did arrive."""
        await note_rate_limit(self.queue, exc)
        with contextlib.suppress(Exception):
            await emitter.aclose()

    @staticmethod
    def _api_key(provider: ProviderConfig) -> str | None:
        if not provider.api_key_env:
            return None
        return os.environ.get(provider.api_key_env) or None
