"""What an attempt cost: prices from LiteLLM's offline cost map, and token counts when the
provider reported none.

- :class:`PriceBook`: a model's :class:`~genq_contract.spend.Price`. Demo models
  (``demo/...``) cost :data:`~genq_contract.spend.DEMO_PRICE`; any other model what LiteLLM's
  cost map (the copy bundled with the pinned release, never a download: see
  :mod:`providers._litellm`) says per input, output and cached input token. A model the map does
  not know costs nothing, and the worker says so once per model in its log.
- :func:`served_models`: the models whose prices a worker publishes for the gateway.
- :func:`estimate_usage`: the usage of an attempt whose provider sent no report (a cancel, a
  dropped stream, the demo provider), counted with LiteLLM's token counter and marked
  ``estimated``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from genq_contract.routing import Routing, litellm_provider
from genq_contract.spend import DEMO_PRICE, Price, Usage
from providers import demo
from providers._litellm import litellm

log = logging.getLogger("providers")

# The token counter would otherwise download a HuggingFace tokenizer for some models (llama,
# cohere, ...): a network fetch, retried at length when offline. Offline, it counts with
# tiktoken, as for OpenAI models: an estimate either way.
litellm.disable_hf_tokenizer_download = True

FREE = Price(input_per_token=0.0, output_per_token=0.0)
"""What a model with no known price costs."""


def cost_map_price(model: str) -> Price | None:
    """``model``'s price in LiteLLM's cost map (``openai/gpt-4o-mini``, ...), or None."""
    if litellm_provider(model) == demo.PROVIDER:
        return DEMO_PRICE
    try:
        info: Mapping[str, Any] = litellm.get_model_info(model)
    except Exception:  # LiteLLM raises several kinds for a model it does not map
        return None
    prompt, completion = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if prompt is None and completion is None:
        return None
    cached = info.get("cache_read_input_token_cost")
    return Price(
        input_per_token=float(prompt or 0.0),
        output_per_token=float(completion or 0.0),
        cached_input_per_token=None if cached is None else float(cached),
    )


@dataclass
class PriceBook:
    """The prices of the models a worker runs, looked up once per model."""

    _known: dict[str, Price | None] = field(default_factory=dict, repr=False)
    _unpriced: set[str] = field(default_factory=set, repr=False)

    def lookup(self, model: str) -> Price | None:
        """``model``'s price, or None when it has none."""
        if model not in self._known:
            self._known[model] = cost_map_price(model)
        return self._known[model]

    def price(self, model: str) -> Price:
        """The price to charge ``model``'s usage at: :data:`FREE` when it has none (logged
        once per model)."""
        price = self.lookup(model)
        if price is None:
            if model not in self._unpriced:
                self._unpriced.add(model)
                log.warning("no price known for model %s: its usage costs 0", model)
            return FREE
        return price

    def prices(self, models: Iterable[str]) -> dict[str, Price]:
        """The known prices of ``models`` (the ones without a price are left out)."""
        found = {model: self.lookup(model) for model in models}
        return {model: price for model, price in found.items() if price is not None}


def served_models(routing: Routing, providers: Iterable[str]) -> list[str]:
    """The models ``routing`` sends to ``providers``. A pattern (``openai/*``) stands for every
    model of its LiteLLM provider in the cost map, and ``demo/*`` for the demo's named models
    (``demo/fast``, ``demo/slow``, ``demo/instant``)."""
    wanted = set(providers)
    models: list[str] = []
    for model, provider in routing.models.items():
        if provider not in wanted:
            continue
        if not model.endswith("/*"):
            models.append(model)
            continue
        stem, vendor = model[:-1], litellm_provider(model)
        if vendor == demo.PROVIDER:
            names: Iterable[str] = demo.MODEL_DELAYS_MS
        else:
            names = litellm.models_by_provider.get(vendor, ())
        models.extend(f"{stem}{name}" for name in sorted(names))
    return list(dict.fromkeys(models))


def with_cost(usage: Usage, price: Price) -> Usage:
    """``usage`` with its cost at ``price``."""
    cost = price.cost_nanos(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
    return replace(usage, cost_nanos=cost)


def reported_usage(counts: Mapping[str, int]) -> Usage:
    """The provider's report (the adapter's ``Delta.usage``) as a :class:`Usage`; its
    ``reasoning_tokens`` are part of its completion tokens, so they are priced with them."""
    return Usage(
        prompt_tokens=int(counts.get("prompt_tokens", 0)),
        completion_tokens=int(counts.get("completion_tokens", 0)),
        cached_tokens=int(counts.get("cached_tokens", 0)),
        reasoning_tokens=int(counts.get("reasoning_tokens", 0)),
    )


def estimate_usage(
    model: str,
    messages: list[dict[str, Any]],
    streamed_text: str,
    *,
    count_prompt: bool = True,
) -> Usage:
    """The usage of an attempt as LiteLLM's token counter counts it: the prompt (``messages``,
    unless ``count_prompt`` is false: the provider refused the request) and the text streamed.

    It runs the tokenizer in the caller's thread: some milliseconds for a long conversation."""
    prompt = litellm.token_counter(model=model, messages=messages) if count_prompt else 0
    completion = (
        litellm.token_counter(model=model, text=streamed_text, count_response_tokens=True)
        if streamed_text
        else 0
    )
    return Usage(prompt_tokens=int(prompt), completion_tokens=int(completion), estimated=True)


def warm_up(models: Iterable[str] = ()) -> None:
    """Loads the token counter's tokenizers for ``models`` (a second or two each the first
    time, holding the interpreter), so no estimate stalls a worker's streams later."""
    for model in ("demo/warm-up", *models):
        estimate_usage(model, [{"role": "user", "content": "warm up"}], "ok")
