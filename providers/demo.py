"""The built-in ``demo`` provider: deterministic text, on demand failures, no API key.

It is a LiteLLM custom provider, so a ``demo/...`` generation takes exactly the path a real one
takes (LiteLLM's stream wrapper, error mapping, cancellation). Models: ``demo/<anything>``;
``demo/fast`` streams a token every 20 ms, ``demo/slow`` every 200 ms, ``demo/instant`` as fast
as it can, any other name every 30 ms.

The text is ``Echo: <prompt>`` followed by a fixed passage, cut to ``demo_tokens`` tokens (48 by
default); a token is a word and its trailing space. Like a hosted model, it stops at
``max_tokens`` (finish reason ``length``) when that comes first. Params (all optional):

- ``demo_tokens``: how many tokens; ``demo_delay_ms``: the gap between tokens.
- ``demo_fault``: ``"429"`` (with ``retry-after: demo_retry_after``, default 2 s), ``"500"``,
  ``"400"``, ``"hang"`` (stops sending after ``demo_after`` tokens, default 3), ``"drop"``
  (the connection "breaks" after ``demo_after`` tokens, default 5) or ``"overrun"`` (ignores
  ``max_tokens``, as a provider that bills past it would: what the worker's budget overrun
  stop is for).
- ``demo_fault_attempts``: the fault happens on attempts 1..n only (default 1, so a retry
  succeeds); ``demo_attempt``: the current attempt (the worker passes ``job.attempt``).

Usage and price: like a provider that ignores ``stream_options.include_usage``, the demo
reports no usage, so its generations take the worker's estimated path (LiteLLM's token counter
over the prompt and the text streamed, marked ``estimated``; ``workers.metering``). Its nominal
price is :data:`genq_contract.spend.DEMO_PRICE` ($0.50 per million prompt tokens, $1.50 per
million completion tokens): it bills nobody, but the whole cost and budget path runs with no key.

The same faults can be asked for in the prompt, for the web page: ``[demo:429]``,
``[demo:429:5]`` (retry after 5 s), ``[demo:500]``, ``[demo:400]``, ``[demo:hang]``,
``[demo:drop]``, ``[demo:drop:10]`` (after 10 tokens), ``[demo:overrun]``. Params win over
markers.

What it can take besides text (:data:`CAPABILITIES`, published for the gateway): nothing. It
writes text only, so a request with tools, images (it reads only the text parts) or a JSON schema
is refused before it is queued; the gateway answers 400 naming the field.

Faults happen only where they were asked for: the worker turns them on with the param
:data:`FAULTS_ENABLED` (``GENQ_DEMO_FAULTS``, on in dev mode), which no request can set (it is
not among the params the gateway accepts). Otherwise the fault params are ignored and a marker
is plain prompt text: a 429 with a Retry-After pauses the provider's whole queue, so a tenant
must never be able to pick one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from genq_contract.spend import max_tokens_of
from genq_services.capabilities import Capabilities
from providers._litellm import litellm

PROVIDER = "demo"
FAULTS = frozenset({"429", "500", "400", "hang", "drop", "overrun"})
DEFAULT_TOKENS = 48
MAX_TOKENS = 20_000
MODEL_DELAYS_MS = {"fast": 20.0, "slow": 200.0, "instant": 0.0}
DEFAULT_DELAY_MS = 30.0
DEFAULT_AFTER = {"hang": 3, "drop": 5}
DEFAULT_RETRY_AFTER = 2.0
CAPABILITIES = Capabilities(
    function_calling=False, vision=False, response_schema=False, reasoning=False
)
FAULTS_ENABLED = "demo_faults_enabled"
"""The param the worker sets (True) where faults are allowed; see the module docstring."""

_PASSAGE_TEXT = (
    "This answer comes from the genq demo provider. It streams one word at a time through "
    "LiteLLM, exactly like a hosted model would, so you can refresh the page, press Stop, or "
    "kill a worker and watch the generation survive. Every token travels from the worker to a "
    "Redis stream and from there to every open page. Ask for a fault in the prompt to see "
    "retries: [demo:429] waits for Retry-After, [demo:500] retries at once, [demo:drop] breaks "
    "the stream half way and [demo:hang] goes silent until the silence timeout."
)
PASSAGE = tuple(_PASSAGE_TEXT.split())

_MARKER = re.compile(r"\[demo:(429|500|400|hang|drop|overrun)(?::(\d+(?:\.\d+)?))?\]")


@dataclass(frozen=True)
class DemoScript:
    """What one demo request will do; pure, so it is easy to test and reason about."""

    tokens: tuple[str, ...]
    delay: float
    fault: str | None = None
    fault_after: int = 0
    retry_after: float = DEFAULT_RETRY_AFTER
    finish_reason: str = "stop"
    """``length`` when ``max_tokens`` cut the text."""

    @classmethod
    def from_request(
        cls, model: str, messages: list[dict[str, Any]], params: Mapping[str, Any]
    ) -> DemoScript:
        prompt = _last_user_text(messages)
        faults_enabled = params.get(FAULTS_ENABLED) is True
        marker = _MARKER.search(prompt) if faults_enabled else None
        echo = (_MARKER.sub("", prompt) if faults_enabled else prompt).split()
        count = int(params.get("demo_tokens", DEFAULT_TOKENS))
        if not 1 <= count <= MAX_TOKENS:
            raise ValueError(f"demo_tokens must be from 1 to {MAX_TOKENS}")
        name = model.split("/", 1)[-1]
        delay_ms = float(params.get("demo_delay_ms", MODEL_DELAYS_MS.get(name, DEFAULT_DELAY_MS)))

        fault = params.get("demo_fault")
        number = params.get("demo_after") if fault else None
        if fault is None and marker:
            fault, number = marker.group(1), marker.group(2)
        fault = str(fault) if fault is not None else None
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown demo_fault {fault!r}; one of {sorted(FAULTS)}")
        if not faults_enabled:
            fault = None
        attempt = int(params.get("demo_attempt", 1))
        if fault is not None and attempt > int(params.get("demo_fault_attempts", 1)):
            fault = None
        retry_after = float(params.get("demo_retry_after", DEFAULT_RETRY_AFTER))
        after = DEFAULT_AFTER.get(fault or "", 0)
        if fault == "429" and number is not None and "demo_retry_after" not in params:
            retry_after = float(number)
        elif number is not None:
            after = int(float(number))
        finish_reason = "stop"
        if fault != "overrun" and max_tokens_of(params) < count:
            count, finish_reason = max_tokens_of(params), "length"
        words = ["Echo:", *echo, *(PASSAGE * (1 + count // len(PASSAGE)))][:count]
        return cls(
            tokens=(*(w + " " for w in words[:-1]), words[-1]),
            delay=max(0.0, delay_ms / 1000),
            fault=fault,
            fault_after=after,
            retry_after=retry_after,
            finish_reason=finish_reason,
        )

    @property
    def text(self) -> str:
        return "".join(self.tokens)


class DemoLLM(litellm.CustomLLM):
    """Serves ``demo/...`` models inside LiteLLM (streaming only: genq always streams)."""

    async def astreaming(  # type: ignore[override]  # an async generator, as LiteLLM expects
        self,
        model: str,
        messages: list[dict[str, Any]],
        api_base: str | None,
        custom_prompt_dict: dict[str, Any],
        model_response: Any,
        print_verbose: Any,
        encoding: Any,
        api_key: str | None,
        logging_obj: Any,
        optional_params: dict[str, Any],
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        try:
            script = DemoScript.from_request(model, messages, optional_params)
        except (TypeError, ValueError) as exc:  # a bad demo_* param: retrying cannot help
            raise litellm.BadRequestError(
                message=f"demo provider: {exc}", model=model, llm_provider=PROVIDER
            ) from exc
        if script.fault in ("429", "500", "400"):
            raise _http_fault(script, model)
        for sent, token in enumerate(script.tokens):
            if script.fault in ("hang", "drop") and sent == script.fault_after:
                if script.fault == "hang":
                    await asyncio.Event().wait()  # silent until the caller gives up
                raise litellm.APIConnectionError(
                    message="demo provider: connection dropped mid-stream (simulated)",
                    llm_provider=PROVIDER,
                    model=model,
                )
            await asyncio.sleep(script.delay)  # 0 still yields, so streams interleave
            yield {"text": token, "is_finished": False, "finish_reason": "", "usage": None}
        # No usage: the demo stands for a provider that reports none (see the docstring).
        yield {
            "text": "",
            "is_finished": True,
            "finish_reason": script.finish_reason,
            "usage": None,
        }


def _http_fault(script: DemoScript, model: str) -> Exception:
    request = httpx.Request("POST", "http://demo.invalid/v1/chat/completions")
    if script.fault == "429":
        response = httpx.Response(
            429, headers={"retry-after": f"{script.retry_after:g}"}, request=request
        )
        return litellm.RateLimitError(
            message="demo provider: rate limit reached (simulated)",
            llm_provider=PROVIDER,
            model=model,
            response=response,
        )
    if script.fault == "400":
        return litellm.BadRequestError(
            message="demo provider: invalid request (simulated)", model=model, llm_provider=PROVIDER
        )
    return litellm.InternalServerError(
        message="demo provider: internal error (simulated)", llm_provider=PROVIDER, model=model
    )


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def register() -> None:
    """Makes ``demo/...`` models available to LiteLLM (idempotent)."""
    if not any(entry.get("provider") == PROVIDER for entry in litellm.custom_provider_map):
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": PROVIDER, "custom_handler": DemoLLM()},
        ]
