"""Request bodies of the OpenAI routes, and their translation into a genq generation.

OpenAI params genq understands (``temperature``, ``top_p``, ``max_tokens`` ...) and, for
``demo/...`` models, the demo provider's ``demo_*`` params go into the generation's ``params``;
the routing rules then refuse what the provider would not take (400). Fields that only matter
to OpenAI's storage (``store``, ``service_tier`` ...) are accepted and ignored; what genq cannot
run (hosted tools, several choices, audio ...) is refused by name (400), never silently dropped.
A route relays the fields of its :attr:`_OpenAIRequest.relayed`: Chat Completions passes its
messages (tool calls, tool answers, content parts) and its function tools, structured output
and reasoning effort to the generation unchanged, checked by :mod:`genq_contract.chat`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from genq_contract.chat import PARAMS as CHAT_PARAMS
from genq_contract.chat import ChatFormatError, check_image_bytes, check_messages, check_params

from ..admission.schemas import GenerationRequest
from . import response_input
from .errors import OpenAIError

BACKGROUND_KEY = "genq:background"
"""Kept in a generation's metadata when it was created with ``background: true``."""
INSTRUCTIONS_KEY = "genq:instructions"
"""Kept in a response's metadata when its first message is its ``instructions`` (a response
chained to it with ``previous_response_id`` does not carry them over, as OpenAI's does not)."""
PREVIOUS_KEY = "genq:previous_response_id"
"""Kept in a response's metadata: the ``previous_response_id`` it was created with."""

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
        "web_search_options",
    }
)


CARRIED = frozenset({"role", "content", "tool_calls", "tool_call_id"})
"""The fields of a chat message a generation carries."""


class ChatMessage(BaseModel):
    """A Chat Completions message, relayed to the generation as it came: an assistant's
    ``tool_calls``, a ``tool`` answer's ``tool_call_id`` and content parts (``text``,
    ``image_url``, ``file`` ...) included; other fields (a participant's ``name``) are not
    carried."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def as_genq(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True, include=set(CARRIED))


def _chat_format_error(exc: ChatFormatError) -> OpenAIError:
    """The 400 for a param or message :mod:`genq_contract.chat` refused, naming the field as
    the request spelled it (``tools.3.function.name``, ``messages.2.tool_call_id``)."""
    param = exc.field.removeprefix("params.")
    return OpenAIError(400, str(exc).removeprefix("params."), param=param)


class _OpenAIRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    relayed: ClassVar[frozenset[str]] = frozenset()
    """Fields of :data:`REFUSED` or :data:`IGNORED` this route passes on in the params."""

    model: str = Field(min_length=1, max_length=200)
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    metadata: dict[str, str] | None = Field(default=None, max_length=16)

    def _extra_params(self) -> dict[str, Any]:
        extra = dict(self.model_extra or {})
        refused = sorted(set(extra) & (REFUSED - self.relayed))
        if refused:
            raise OpenAIError(400, f"genq does not support {refused[0]!r}", param=refused[0])
        ignored = IGNORED - self.relayed
        params = {k: v for k, v in extra.items() if k not in ignored and v is not None}
        for name in ("temperature", "top_p"):
            if getattr(self, name) is not None:
                params[name] = getattr(self, name)
        return params

    def _generation(
        self, messages: list[dict[str, Any]], params: dict[str, Any], metadata: dict[str, Any]
    ) -> GenerationRequest:
        try:
            return GenerationRequest.model_validate(
                {"model": self.model, "messages": messages, "params": params, "metadata": metadata}
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            param = ".".join(str(p) for p in first.get("loc", ())) or None
            raise OpenAIError(400, str(first.get("msg")), param=param) from exc


class ResponseReasoning(BaseModel):
    """``reasoning``: ``effort`` goes to the provider as ``reasoning_effort``; ``summary`` is
    accepted and changes nothing: the reasoning the provider streams is relayed whole, as the
    reasoning item's summary."""

    model_config = ConfigDict(extra="allow")

    effort: str | None = None
    summary: str | None = None


class ResponseCreate(_OpenAIRequest):
    """``POST /v1/responses``: its input items, function tools, ``text.format`` and
    ``reasoning`` translated by :mod:`.response_input`; ``previous_response_id`` names the
    response whose history comes first (the route loads it: :mod:`.response_chain`)."""

    input: str | list[dict[str, Any]]
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    background: bool = False
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: dict[str, Any] | None = None
    reasoning: ResponseReasoning | None = None
    previous_response_id: str | None = Field(default=None, min_length=1, max_length=200)
    store: bool | None = None

    def generation(
        self, max_image_bytes: int, history: list[dict[str, Any]] | None = None
    ) -> GenerationRequest:
        """The generation: the instructions, then ``history`` (a previous response's, see
        :mod:`.response_chain`), then the input. A param or message :mod:`genq_contract.chat`
        refuses, or images in the input's ``data:`` URLs over ``max_image_bytes``, is a 400
        naming the field."""
        messages = response_input.input_messages(self.input)
        if not messages:
            raise OpenAIError(400, "input must not be empty", param="input")
        try:
            check_image_bytes(messages, max_image_bytes)
        except ChatFormatError as exc:
            raise _chat_format_error(exc) from None
        metadata: dict[str, Any] = dict(self.metadata or {})
        messages = [*(history or []), *messages]
        if self.instructions:
            messages.insert(0, {"role": "system", "content": self.instructions})
            metadata[INSTRUCTIONS_KEY] = True
        if self.previous_response_id is not None:
            metadata[PREVIOUS_KEY] = self.previous_response_id
        params = {**self._extra_params(), **self._relayed_params()}
        if self.max_output_tokens is not None:
            params["max_tokens"] = self.max_output_tokens
        if self.background:
            metadata[BACKGROUND_KEY] = True
        try:
            check_params(params)
            check_messages(messages)
        except ChatFormatError as exc:
            raise _chat_format_error(exc) from None
        return self._generation(messages, params, metadata)

    def _relayed_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.tools:
            params["tools"] = response_input.chat_tools(self.tools)
        if self.tool_choice is not None:
            params["tool_choice"] = response_input.chat_tool_choice(self.tool_choice)
        if self.parallel_tool_calls is not None:
            params["parallel_tool_calls"] = self.parallel_tool_calls
        response_format = response_input.response_format(self.text or {})
        if response_format is not None:
            params["response_format"] = response_format
        if self.reasoning is not None and self.reasoning.effort is not None:
            params["reasoning_effort"] = self.reasoning.effort
        return params


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionCreate(_OpenAIRequest):
    """``POST /v1/chat/completions``."""

    relayed = CHAT_PARAMS

    messages: list[ChatMessage] = Field(min_length=1)
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="genq makes one choice")

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def generation(self, max_image_bytes: int) -> GenerationRequest:
        """The generation; a param or message :mod:`genq_contract.chat` refuses, or images in
        ``data:`` URLs over ``max_image_bytes``, is a 400 naming the field."""
        messages = [m.as_genq() for m in self.messages]
        params = self._extra_params()
        try:
            check_params(params)
            check_messages(messages)
            check_image_bytes(messages, max_image_bytes)
        except ChatFormatError as exc:
            raise _chat_format_error(exc) from None
        return self._generation(messages, params, dict(self.metadata or {}))
