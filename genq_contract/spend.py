"""What usage means and what it costs: the counts workers meter, and the prices of models.

A worker meters each attempt (:meth:`genq.ActiveJob.meter`) with the model as its label and the
counts of a :class:`Usage`; the queue adds them to the job's record and to its counters per
tenant, model and UTC day. Costs are integers of nano-USD (``cost_nanos``: 1 USD is
1,000,000,000), so sums are exact. The gateway shows usage as :meth:`Usage.as_json`.

Prices come from LiteLLM's offline cost map, which only the workers load (the gateway never
imports LiteLLM): each worker publishes the prices of the models it serves under
:func:`prices_key` and the gateway reads them (``genq_services.prices``) to reserve a
generation's most it can cost against a budget (:func:`max_cost_nanos`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .money import NANOS_PER_USD
from .payload import GenerationPayload

DEFAULT_MAX_TOKENS = 4096
"""The completion tokens a request without ``max_tokens`` reserves against a budget."""

COUNT_NAMES = (
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cost_nanos",
    "reasoning_tokens",
)


@dataclass(frozen=True)
class Usage:
    """One attempt's (or a sum of attempts') tokens and cost. ``estimated``: counted by genq
    (LiteLLM's token counter over what was sent and streamed) because the provider reported
    none: a cancel, a dropped stream, a timeout, or a provider that never reports usage.
    ``reasoning_tokens``: of the completion tokens, those the model spent reasoning, as the
    provider reported them (they are in ``completion_tokens`` and cost what those cost: it is a
    breakdown, not more tokens); 0 when it reported none."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_nanos: int = 0
    estimated: bool = False
    reasoning_tokens: int = 0

    def counts(self) -> dict[str, int]:
        """The counts to meter (``ActiveJob.meter(model, usage.counts(), ...)``); a zero
        ``reasoning_tokens`` is left out, so a model that does not reason meters what it did
        before reasoning was counted."""
        counts = {name: int(getattr(self, name)) for name in COUNT_NAMES}
        if not counts["reasoning_tokens"]:
            del counts["reasoning_tokens"]
        return counts

    @classmethod
    def from_counts(cls, counts: Mapping[str, Any]) -> Usage:
        """A record's or a counter's counts (unknown names ignored) -> Usage."""
        return cls(
            **{name: int(counts.get(name) or 0) for name in COUNT_NAMES},
            estimated=bool(counts.get("estimated", False)),
        )

    @property
    def cost_usd(self) -> float:
        return self.cost_nanos / NANOS_PER_USD

    def as_json(self) -> dict[str, Any]:
        """The one shape gateway, client, CLI and pages show; ``reasoning_tokens`` only when
        the provider reported some."""
        shown: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "cost_usd": self.cost_usd,
            "estimated": self.estimated,
        }
        if self.reasoning_tokens:
            shown["reasoning_tokens"] = self.reasoning_tokens
        return shown


@dataclass(frozen=True)
class Price:
    """USD per token. ``cached_input_per_token``: the price of a prompt token read from the
    provider's cache, when the model has one (else cached tokens cost the input price)."""

    input_per_token: float
    output_per_token: float
    cached_input_per_token: float | None = None

    def cost_nanos(self, prompt: int, completion: int, cached: int = 0) -> int:
        """The cost of these tokens in nano-USD, rounded up (``cached`` is part of ``prompt``)."""
        cached = min(cached, prompt)
        cached_price = (
            self.input_per_token
            if self.cached_input_per_token is None
            else self.cached_input_per_token
        )
        usd = (
            (prompt - cached) * self.input_per_token
            + cached * cached_price
            + completion * self.output_per_token
        )
        return math.ceil(round(usd * NANOS_PER_USD, 6))

    def as_json(self) -> dict[str, float | None]:
        return {
            "input_per_token": self.input_per_token,
            "output_per_token": self.output_per_token,
            "cached_input_per_token": self.cached_input_per_token,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Price:
        cached = data.get("cached_input_per_token")
        return cls(
            float(data["input_per_token"]),
            float(data["output_per_token"]),
            None if cached is None else float(cached),
        )


DEMO_PRICE = Price(input_per_token=0.5e-6, output_per_token=1.5e-6)
"""The demo provider's nominal price: $0.50 per million prompt tokens, $1.50 per million
completion tokens (it bills nobody; the price lets the whole spend path run with no key)."""


def prompt_token_bound(messages: Iterable[Mapping[str, Any]]) -> int:
    """An upper bound on a conversation's prompt tokens, without a tokenizer: a token is at
    least one byte of the message's JSON, plus 8 tokens of framing per message and 8 more."""
    return 8 + sum(8 + len(json.dumps(m, ensure_ascii=False).encode()) for m in messages)


def max_tokens_of(params: Mapping[str, Any]) -> int:
    """The completion tokens a request may produce: its ``max_tokens`` (or
    ``max_completion_tokens``), else :data:`DEFAULT_MAX_TOKENS`."""
    for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = params.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_MAX_TOKENS


def max_cost_nanos(payload: GenerationPayload, price: Price) -> int:
    """The most one attempt of ``payload`` can cost at ``price`` (what a budget reserves)."""
    return price.cost_nanos(prompt_token_bound(payload.messages), max_tokens_of(payload.params))


def prices_key(namespace: str) -> str:
    """hash: model -> :class:`Price` JSON, written by workers, read by the gateway."""
    return f"{namespace}:prices"
