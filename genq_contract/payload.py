"""The generation payload: what the gateway enqueues and the worker runs.

The gateway builds a :class:`GenerationPayload` from a validated request and enqueues its
``model_dump()``; the worker reads a job's payload back with :meth:`GenerationPayload.parse`.
Jobs enqueued by other means (tests, benchmarks, ``genq.Queue`` users) may give a ``prompt``
instead of ``messages`` and leave out what only the gateway needs (tenant, key id,
metadata, fingerprint). Tools, tool calls in the history, content parts, structured output and
reasoning effort are checked as :mod:`genq_contract.chat` says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from genq import TerminalJobError

from .chat import ChatFormatError, check_messages, check_params


class GenerationPayload(BaseModel):
    """One generation request, as it sits in a job."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(min_length=1)
    """LiteLLM's name of the model, ``<provider>/<model>`` (see ``genq_contract.routing``)."""
    messages: list[dict[str, Any]] = Field(min_length=1)
    """The conversation in the Chat Completions format: ``{"role": ..., "content": ...}``
    objects, assistant ``tool_calls`` and ``tool`` answers included."""
    params: dict[str, Any] = {}
    """Generation params (temperature, max_tokens, tools, response_format, ...), checked
    against the routing."""
    fallbacks: list[str] | None = None
    """The models that continue this generation when ``model`` fails, in order (see
    ``workers.fallback``); None: the ones ``GENQ_FALLBACKS`` gives ``model``; []: none."""
    tenant: str | None = None
    """The tenant that asked (the gateway answers other tenants 404)."""
    key_id: str | None = None
    """The id of the API key that asked (first 8 hex digits of its digest): with ``tenant``,
    who the generation runs as. Workers refuse it once the key is revoked or the tenant
    disabled (``genq_services.access``); None: a job enqueued without a key."""
    metadata: dict[str, Any] = {}
    """The request's metadata, returned as is."""
    fingerprint: str | None = None
    """Hash of the request's meaning: a replayed Idempotency-Key must bring the same one."""
    traceparent: str | None = None
    """The W3C trace context (``00-<trace id>-<span id>-<flags>``) of the span that enqueued
    it, written by the gateway when tracing is on: the workers' spans join that trace, across
    processes and restarts (docs/OBSERVABILITY.md). None: not traced."""

    @model_validator(mode="before")
    @classmethod
    def _prompt_shorthand(cls, data: Any) -> Any:
        """``{"prompt": "..."}`` stands for one user message."""
        if not isinstance(data, Mapping):
            raise ValueError("the payload must be an object with model and messages")
        if data.get("messages") is not None:
            return data
        prompt = data.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("the payload needs messages (a non-empty list) or a prompt")
        return {**data, "messages": [{"role": "user", "content": prompt}]}

    @field_validator("messages")
    @classmethod
    def _roles(cls, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not all("role" in m for m in messages):
            raise ValueError("each message must be an object with a role")
        return messages

    @field_validator("params", "metadata", mode="before")
    @classmethod
    def _absent_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _chat_format(self) -> GenerationPayload:
        """Tools and the rest beyond text: the error names the field (``params.tools.3``)."""
        try:
            check_params(self.params)
            check_messages(self.messages)
        except ChatFormatError as exc:
            raise ValueError(str(exc)) from None
        return self

    @classmethod
    def parse(cls, payload: Any) -> GenerationPayload:
        """Reads a job's payload; a malformed one can never succeed, so it is a
        :class:`genq.TerminalJobError` naming what is wrong."""
        try:
            return cls.model_validate(payload)
        except ValidationError as exc:
            raise TerminalJobError(f"invalid generation payload: {_describe(exc)}") from None


def payload_fields(payload: Any) -> dict[str, Any]:
    """A job payload's fields, or none when it is not an object. For the gateway's readers
    (tenant, model, metadata), which show any job without failing on a foreign payload."""
    return payload if isinstance(payload, dict) else {}


def _describe(error: ValidationError) -> str:
    """``messages.0: each message must ...; model: ...``: short, without pydantic's URLs."""
    parts = []
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
