"""A generation's result: what a worker completes a generation with, and what readers show.

The built-in worker (``workers/handler.py``) builds its result as a :class:`GenerationResult`
and an HTTP worker's ``ack`` is validated against the same model (422 naming the field), so
every new record holds ``{text, model, finish_reason, usage}`` with these types. A record may
still hold something else (written before results were checked, or by a ``genq.Queue`` user):
readers go through :func:`read_result`, which drops what does not validate instead of failing.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

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
    def of(cls, usage: Usage) -> ResultUsage:
        return cls.model_validate(usage.as_json())


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
        "total_tokens, cost_usd and estimated",
    )


class GenerationResult(_Described):
    """A completed generation's result. The chunks of the attempt that completed concatenate
    to ``text``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(description="The generated text")

    def as_json(self) -> dict[str, Any]:
        """What a job's record holds: ``{text, model, finish_reason, usage}``."""
        return {"text": self.text, **self.model_dump(mode="json", exclude={"text"})}


class StoredResult(_Described):
    """A record's result as readers take it (:func:`read_result`): a field that did not
    validate is None, keys of no meaning here are ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)

    text: str | None = None


def read_result(raw: Any) -> StoredResult:
    """The fields of a stored result that validate, each on its own; never raises. A bare
    string (a result a ``genq.Queue`` user stored) is the text."""
    if isinstance(raw, str):
        return StoredResult(text=raw)
    if not isinstance(raw, dict):
        return StoredResult()
    fields: dict[str, Any] = {}
    for name in StoredResult.model_fields:
        try:
            fields[name] = getattr(StoredResult.model_validate({name: raw.get(name)}), name)
        except ValidationError:
            continue
    return StoredResult.model_construct(**fields)
