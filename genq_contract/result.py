"""A generation's result: what a worker completes a generation with, and what readers show.

The built-in worker (``workers/handler.py``) builds its result as a :class:`GenerationResult`
and an HTTP worker's ``ack`` is validated against the same model (422 naming the field), so
every new record holds ``{text, model, finish_reason, usage}`` with these types, and
``reasoning`` and ``tool_calls`` when the model returned any (a text-only result has neither
key). A record may
still hold something else (written before results were checked, or by a ``genq.Queue`` user):
readers go through :func:`read_result`, which drops what does not validate instead of failing.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from .parts import ToolCall
from .spend import Usage


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class ResultUsage(BaseModel):
    """The tokens and cost of the attempt that answered, in the shape every reader shows
    (:meth:`genq_contract.spend.Usage.as_json`). Counts left out are 0; ``total_tokens``
    left out is prompt + completion. Other keys (a provider's ``prompt_tokens_details``, say)
    are dropped: a usage copied from a provider's answer is taken as it is."""

    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cached_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)
    estimated: bool = False
    reasoning_tokens: int | None = Field(default=None, ge=0)
    """Of the completion tokens, those the model spent reasoning, when the provider said."""

    @model_validator(mode="before")
    @classmethod
    def _total(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("total_tokens") is not None:
            return data
        prompt, completion = data.get("prompt_tokens", 0), data.get("completion_tokens", 0)
        if _count(prompt) and _count(completion):
            return {**data, "total_tokens": prompt + completion}
        return data  # the bad count fails validation, named

    @classmethod
    def of(cls, usage: Usage, reasoning_tokens: int | None = None) -> ResultUsage:
        shown = usage.as_json()
        if reasoning_tokens is not None:
            shown["reasoning_tokens"] = reasoning_tokens
        return cls.model_validate(shown)

    @model_serializer(mode="wrap")
    def _known_only(self, dump: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leaves ``reasoning_tokens`` out when unknown: the shape stays what
        :meth:`genq_contract.spend.Usage.as_json` gives."""
        shown: dict[str, Any] = dump(self)
        if shown.get("reasoning_tokens") is None:
            shown.pop("reasoning_tokens", None)
        return shown

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class _Described(BaseModel):
    """The fields a result has besides its text."""

    model: str | None = Field(
        default=None, description="The model that answered (a fallback's, if it took over)"
    )
    finish_reason: str | None = Field(
        default=None, description="Why the text ended, as the provider said: stop, length, ..."
    )
    usage: ResultUsage | None = Field(
        default=None,
        description="The answering attempt's prompt_tokens, completion_tokens, cached_tokens, "
        "total_tokens, cost_usd and estimated (and reasoning_tokens, when the provider "
        "reported them)",
    )
    reasoning: str | None = Field(
        default=None, description="The model's reasoning text, when it streamed any"
    )


class GenerationResult(_Described):
    """A completed generation's result. The chunks of the attempt that completed concatenate
    to ``text``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(description="The generated text")
    tool_calls: list[ToolCall] = Field(
        default_factory=list, max_length=1024, description="The tool calls the model made"
    )

    def as_json(self) -> dict[str, Any]:
        """What a job's record holds: ``{text, model, finish_reason, usage}``, then
        ``reasoning`` and ``tool_calls`` when there are any."""
        shown: dict[str, Any] = {
            "text": self.text,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "usage": None if self.usage is None else self.usage.as_json(),
        }
        if self.reasoning is not None:
            shown["reasoning"] = self.reasoning
        if self.tool_calls:
            shown["tool_calls"] = [call.model_dump() for call in self.tool_calls]
        return shown


class StoredResult(_Described):
    """A record's result as readers take it (:func:`read_result`): a field that did not
    validate is None, keys of no meaning here are ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)

    text: str | None = None
    tool_calls: list[ToolCall] = []


def read_result(raw: Any) -> StoredResult:
    """The fields of a stored result that validate, each on its own (a tool call that does not
    validate is left out); never raises. A bare string (a result a ``genq.Queue`` user stored)
    is the text."""
    if isinstance(raw, str):
        return StoredResult(text=raw)
    if not isinstance(raw, dict):
        return StoredResult()
    fields: dict[str, Any] = {}
    for name in StoredResult.model_fields:
        if name == "tool_calls":
            fields[name] = _tool_calls(raw.get(name))
            continue
        try:
            fields[name] = getattr(StoredResult.model_validate({name: raw.get(name)}), name)
        except ValidationError:
            continue
    return StoredResult.model_construct(**fields)


def _tool_calls(raw: Any) -> list[ToolCall]:
    calls = []
    for item in raw if isinstance(raw, list) else ():
        try:
            calls.append(ToolCall.model_validate(item))
        except ValidationError:
            continue
    return calls
