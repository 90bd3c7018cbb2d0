"""Request and response bodies of accepting generations: ``POST /v1/generations`` (one, or a
batch), and the body every route that enqueues shares (the admin and OpenAI routes' too).
They are also the OpenAPI schema."""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Header
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from genq_contract.routing import MAX_FALLBACKS

MAX_PRIORITY = 9
MAX_JSON_DEPTH = 8
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,200}$"
MAX_BATCH = 100


_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


def idempotency_key_header(description: str) -> Any:
    """The ``Idempotency-Key`` header of a route that enqueues, as that route describes it."""
    return Header(alias="Idempotency-Key", pattern=IDEMPOTENCY_KEY_PATTERN, description=description)


def well_formed_idempotency_key(value: str | None) -> bool:
    """Whether the header's pattern lets ``value`` through (None: no key): a fast path's check
    before it takes a request FastAPI would otherwise refuse."""
    return value is None or _IDEMPOTENCY_KEY.fullmatch(value) is not None


def enqueue_answers(model: type[BaseModel]) -> dict[str, Any]:
    """The answers of a route that enqueues one generation: 202 with ``model``, or 200 with it
    for an Idempotency-Key replay (the route decorator's arguments)."""
    return {
        "status_code": 202,
        "response_model": model,
        "responses": {200: {"model": model, "description": "An Idempotency-Key replay"}},
    }


INSTANT_SCHEMA = {
    "anyOf": [
        {"type": "string", "format": "date-time"},
        {"type": "number", "minimum": 0},
        {"type": "null"},
    ]
}


def _check_json(value: Any, depth: int = 0) -> Any:
    """Plain JSON only: no NaN or infinity (they are not JSON), bounded nesting."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("numbers must be finite")
    if isinstance(value, dict):
        for item in value.values():
            _check_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_json(item, depth + 1)
    return value


def _epoch_seconds(value: Any) -> float:
    """An instant given as RFC 3339 text (with its UTC offset) or epoch seconds, in seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("run_at must be an RFC 3339 date-time or epoch seconds")
    if isinstance(value, str):
        try:
            instant = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("run_at is not an RFC 3339 date-time") from None
        if instant.tzinfo is None:
            raise ValueError("run_at needs a UTC offset (Z or +hh:mm)")
        return instant.timestamp()
    if not math.isfinite(value) or value < 0:
        raise ValueError("run_at must be finite, non-negative epoch seconds")
    return float(value)


class Message(BaseModel):
    """One message in the Chat Completions format; what its parts and tool calls must hold is
    :mod:`genq_contract.chat`'s to say (checked with the params, before anything is queued)."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = Field(
        default=None,
        description="Text, or a list of parts (`text`, `image_url` with an https: or data: "
        "URL, `file`, ...); null only for an assistant message with tool_calls",
    )
    tool_calls: list[dict[str, Any]] | None = Field(
        default=None,
        description="An assistant's calls: `{id, type: function, function: {name, arguments}}`",
    )
    tool_call_id: str | None = Field(
        default=None, description="A tool message's answer to the call with this id"
    )

    @field_validator("content", "tool_calls")
    @classmethod
    def _plain_json(cls, value: Any) -> Any:
        return _check_json(value)


class GenerationRequest(BaseModel):
    """Exactly one of ``messages`` or ``prompt`` (a prompt is one user message)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"model": "demo/fast", "prompt": "Say hello"}]},
    )

    model: str = Field(min_length=1, max_length=200, description="One of GET /v1/models")
    messages: list[Message] | None = Field(default=None, min_length=1, max_length=1000)
    prompt: str | None = Field(default=None, min_length=1)
    params: dict[str, Any] = Field(
        default_factory=dict,
        max_length=32,
        description="Generation params (temperature, max_tokens, ...) the provider accepts",
    )
    priority: int = Field(default=0, ge=0, le=MAX_PRIORITY, description="9 runs before 0")
    delay_ms: int = Field(
        default=0,
        ge=0,
        description="Start no sooner than this many ms from now: at most the gateway's "
        "GENQ_MAX_DELAY_MS (30 days by default)",
    )
    run_at: Annotated[float | None, WithJsonSchema(INSTANT_SCHEMA)] = Field(
        default=None,
        description="Start no sooner than this instant: RFC 3339 with an offset, or epoch "
        "seconds, at most GENQ_MAX_DELAY_MS ahead; not with delay_ms; a past instant starts now",
        examples=["2030-01-01T09:00:00Z", 1893488400],
    )
    max_attempts: int | None = Field(
        default=None,
        ge=1,
        description="Attempts of this job, 1 to the gateway's GENQ_MAX_ATTEMPTS_CEILING; "
        "default GENQ_MAX_ATTEMPTS",
    )
    metadata: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, max_length=32, description="Kept with the job, returned as is"
    )
    fallbacks: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None,
        max_length=MAX_FALLBACKS,
        description="Models of GET /v1/models that continue the generation, in order, when "
        "`model` fails in a way retrying it will not fix soon; default: the gateway's "
        "GENQ_FALLBACKS for `model`; [] for none",
    )

    @field_validator("params", "metadata")
    @classmethod
    def _plain_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        checked: dict[str, Any] = _check_json(value)
        return checked

    @field_validator("run_at", mode="before")
    @classmethod
    def _instant(cls, value: Any) -> float | None:
        return None if value is None else _epoch_seconds(value)

    @model_validator(mode="after")
    def _one_input(self) -> GenerationRequest:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("give exactly one of 'messages' or 'prompt'")
        if self.run_at is not None and "delay_ms" in self.model_fields_set:
            raise ValueError("give either 'run_at' or 'delay_ms', not both")
        return self

    def conversation(self) -> list[dict[str, Any]]:
        """The messages as the provider gets them (a field left out stays out)."""
        if self.prompt is not None:
            return [{"role": "user", "content": self.prompt}]
        return [m.model_dump(exclude_unset=True) for m in self.messages or []]

    def fingerprint(self) -> str:
        """Hash of the request's meaning: equal for bodies that differ only in form."""
        canonical = {
            "model": self.model,
            "messages": self.conversation(),
            "params": self.params,
            "priority": self.priority,
            "delay_ms": self.delay_ms,
            "metadata": self.metadata,
        }
        # Absent when unset, so that keys bound before these fields existed stay valid.
        if self.max_attempts is not None:
            canonical["max_attempts"] = self.max_attempts
        if self.run_at is not None:  # the instant, whichever form it came in
            canonical["run_at"] = self.run_at
        if self.fallbacks is not None:
            canonical["fallbacks"] = self.fallbacks
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()


class GenerationCreated(BaseModel):
    id: str
    status: str
    deduplicated: bool
    events_url: str = Field(description="SSE; pass watch_token as ?token= from a browser")
    result_url: str
    watch_token: str
    watch_token_expires_at: int


class BatchItem(GenerationRequest):
    """One item of ``POST /v1/generations:batch``: a generation body and its own key."""

    idempotency_key: str | None = Field(
        default=None,
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description="As the Idempotency-Key header of a single POST, for this item alone",
    )


class BatchRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"items": [{"model": "demo/fast", "prompt": "Hi", "idempotency_key": "a"}]}
            ]
        },
    )

    items: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description="Each one a BatchItem (the body of POST /v1/generations plus "
        "idempotency_key); an invalid item fails alone, with its own 422",
    )


class BatchItemError(BaseModel):
    status: int
    detail: str | list[Any] | dict[str, Any] = Field(
        description="As a single POST's: a message, validation problems, or a budget refusal"
    )


class BatchItemFailed(BaseModel):
    error: BatchItemError


class BatchCreated(BaseModel):
    items: list[GenerationCreated | BatchItemFailed] = Field(description="In request order")
