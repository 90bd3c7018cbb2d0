"""Request bodies of the OpenAI routes, and their translation into a genq generation.

Only text is supported: message contents are strings or lists of text parts. OpenAI params
genq understands (``temperature``, ``top_p``, ``max_tokens`` ...) and, for ``demo/...``
models, the demo provider's ``demo_*`` params go into the generation's ``params``; the
routing rules then refuse what the provider would not take (400). Fields that only matter to
OpenAI's storage (``store``, ``service_tier`` ...) are accepted and ignored; tools, several
choices and non-text input are refused (400), never silently dropped.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..admission.schemas import GenerationRequest
from .errors import OpenAIError

BACKGROUND_KEY = "genq:background"
"""Kept in a generation's metadata when it was created with ``background: true``."""

IGNORED = frozenset(
    {
        "store",
        "service_tier",
        "parallel_tool_calls",
        "include",
        "include_obfuscation",
        "truncation",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "text",
        "modalities",
        "logprobs",
        "top_logprobs",
    }
)
REFUSED = frozenset(
    {
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "previous_response_id",
        "prompt",
        "conversation",
        "reasoning",
        "audio",
        "prediction",
    }
)


class TextPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text", "input_text", "output_text"]
    text: str


class InputMessage(BaseModel):
    """A chat message or a Responses input message (``type: "message"``)."""

    model_config = ConfigDict(extra="allow")

    type: Literal["message"] | None = None
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]

    def as_genq(self) -> dict[str, str]:
        content = self.content
        text = content if isinstance(content, str) else "".join(p.text for p in content)
        return {"role": self.role, "content": text}


class _OpenAIRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200)
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    metadata: dict[str, str] | None = Field(default=None, max_length=16)

    def _extra_params(self) -> dict[str, Any]:
        extra = dict(self.model_extra or {})
        refused = sorted(set(extra) & REFUSED)
        if refused:
            raise OpenAIError(400, f"genq does not support {refused[0]!r}", param=refused[0])
        params = {k: v for k, v in extra.items() if k not in IGNORED and v is not None}
        for name in ("temperature", "top_p"):
            if getattr(self, name) is not None:
                params[name] = getattr(self, name)
        return params

    def _generation(
        self, messages: list[dict[str, str]], params: dict[str, Any], metadata: dict[str, Any]
    ) -> GenerationRequest:
        try:
            return GenerationRequest.model_validate(
                {"model": self.model, "messages": messages, "params": params, "metadata": metadata}
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            param = ".".join(str(p) for p in first.get("loc", ())) or None
            raise OpenAIError(400, str(first.get("msg")), param=param) from exc


class ResponseCreate(_OpenAIRequest):
    """``POST /v1/responses``."""

    input: str | list[InputMessage]
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    background: bool = False

    def generation(self) -> GenerationRequest:
        messages = (
            [{"role": "user", "content": self.input}]
            if isinstance(self.input, str)
            else [m.as_genq() for m in self.input]
        )
        if not messages:
            raise OpenAIError(400, "input must not be empty", param="input")
        if self.instructions:
            messages.insert(0, {"role": "system", "content": self.instructions})
        params = self._extra_params()
        if self.max_output_tokens is not None:
            params["max_tokens"] = self.max_output_tokens
        metadata: dict[str, Any] = dict(self.metadata or {})
        if self.background:
            metadata[BACKGROUND_KEY] = True
        return self._generation(messages, params, metadata)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionCreate(_OpenAIRequest):
    """``POST /v1/chat/completions``."""

    messages: list[InputMessage] = Field(min_length=1)
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="genq makes one choice")

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def generation(self) -> GenerationRequest:
        return self._generation(
            [m.as_genq() for m in self.messages], self._extra_params(), dict(self.metadata or {})
        )
