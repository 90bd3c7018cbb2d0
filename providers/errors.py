"""Provider failures translated into queue decisions, in one function: :func:`to_job_error`.

    genq.RetryJobError                      retry, no sooner than ``retry_after``
    ├── RateLimitedError                    a 429; ``provider_wide`` -> cool the provider down
    └── (plain)                             5xx, timeouts, connection errors, mid-stream drops,
                                            silence (:class:`ProviderSilenceError`)
    genq.TerminalJobError                   400/401/403/404/422, context window, content policy,
                                            budget and guardrail refusals

Every class LiteLLM exports is classified explicitly (a test walks ``litellm.exceptions``), so
a new LiteLLM release with a new class fails that test instead of being guessed at. Messages are
redacted of credentials and cut to a readable length before they become a job's error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

import httpx
import openai

from genq import JobError, RetryJobError, TerminalJobError
from providers._litellm import litellm
from providers.redact import redact
from providers.retry_after import retry_after_from_headers

MAX_MESSAGE_CHARS = 500

_E = litellm.exceptions


class Decision(StrEnum):
    RATE_LIMITED = "rate_limited"  # retry after the provider's wait; cool the provider down
    CALLER_RATE_LIMITED = "caller_rate_limited"  # retry after the wait; this caller only
    RETRY = "retry"
    TERMINAL = "terminal"
    BY_STATUS = "by_status"  # a generic error: decide from its HTTP status
    UNWRAP = "unwrap"  # a wrapper: decide from the exception it carries


class RateLimitedError(RetryJobError):
    """The provider answered 429. ``provider_wide`` is False when only the caller's own
    credential is limited, so the provider as a whole must not be paused."""

    def __init__(self, message: str, retry_after: float | None, provider_wide: bool) -> None:
        super().__init__(message, retry_after=retry_after)
        self.provider_wide = provider_wide


class ProviderSilenceError(TimeoutError):
    """The stream yielded nothing for ``seconds``: the provider hangs."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"provider sent nothing for {seconds:g}s (silence timeout)")
        self.seconds = seconds


# Most specific first: several classes subclass others (ContextWindowExceededError is a
# BadRequestError, MidStreamFallbackError a ServiceUnavailableError, Timeout an
# APIConnectionError).
_RULES: tuple[tuple[type[BaseException], Decision], ...] = (
    (_E.MidStreamFallbackError, Decision.UNWRAP),
    (_E.CallerCredentialRateLimitError, Decision.CALLER_RATE_LIMITED),
    (_E.RateLimitError, Decision.RATE_LIMITED),
    (_E.ContextWindowExceededError, Decision.TERMINAL),
    (_E.ContentPolicyViolationError, Decision.TERMINAL),
    (_E.BadRequestError, Decision.TERMINAL),  # includes every LiteLLM 400 subclass
    (_E.InvalidRequestError, Decision.TERMINAL),
    (_E.AuthenticationError, Decision.TERMINAL),
    (_E.PermissionDeniedError, Decision.TERMINAL),
    (_E.NotFoundError, Decision.TERMINAL),
    (_E.UnprocessableEntityError, Decision.TERMINAL),
    (_E.Timeout, Decision.RETRY),
    (_E.APIConnectionError, Decision.RETRY),
    (_E.ServiceUnavailableError, Decision.RETRY),
    (_E.BadGatewayError, Decision.RETRY),
    (_E.InternalServerError, Decision.RETRY),
    (_E.APIResponseValidationError, Decision.RETRY),  # a malformed reply; the next may parse
    (_E.BudgetExceededError, Decision.TERMINAL),
    (_E.GuardrailRaisedException, Decision.TERMINAL),
    (_E.BlockedPiiEntityError, Decision.TERMINAL),
    (_E.ModifyResponseException, Decision.TERMINAL),
    (_E.SensitiveDataRouteException, Decision.TERMINAL),
    (_E.ModelNotMappedError, Decision.TERMINAL),
    (_E.APIError, Decision.BY_STATUS),  # also MockException
    (_E.OpenAIError, Decision.BY_STATUS),
    (openai.OpenAIError, Decision.BY_STATUS),  # the SDK's own (MockException derives from it)
    (ProviderSilenceError, Decision.RETRY),
    (TimeoutError, Decision.RETRY),
    (httpx.TransportError, Decision.RETRY),
    (ConnectionError, Decision.RETRY),
    (OSError, Decision.RETRY),
    (asyncio.IncompleteReadError, Decision.RETRY),
)

_RETRYABLE_4XX = frozenset({408, 409, 425, 429})


def classify(exc_type: type[BaseException]) -> Decision | None:
    """The rule for an exception class, or None if no rule names it (or a base of it)."""
    for cls, decision in _RULES:
        if issubclass(exc_type, cls):
            return decision
    return None


def to_job_error(exc: BaseException, secrets: Iterable[str] = ()) -> JobError:
    """The queue's verdict on a provider failure: a ``RetryJobError`` or a ``TerminalJobError``.

    A ``JobError`` passes through unchanged. Anything unrecognised is retried: the queue's
    ``max_attempts`` bounds the cost of being wrong.
    """
    if isinstance(exc, JobError):
        return exc
    decision = classify(type(exc))
    if decision is Decision.UNWRAP:
        inner = getattr(exc, "original_exception", None)
        if isinstance(inner, BaseException) and inner is not exc:
            return to_job_error(inner, secrets)
        decision = Decision.RETRY  # a stream that ended early with no error inside
    if decision is Decision.BY_STATUS:
        decision = _by_status(getattr(exc, "status_code", None))
    message = describe(exc, secrets)
    if decision is Decision.TERMINAL:
        return TerminalJobError(message)
    retry_after = retry_after_from_headers(_headers_of(exc))
    if decision in (Decision.RATE_LIMITED, Decision.CALLER_RATE_LIMITED):
        wait = f" (retry after {retry_after:g}s)" if retry_after else ""
        return RateLimitedError(
            f"rate limited{wait}: {message}",
            retry_after,
            provider_wide=decision is Decision.RATE_LIMITED,
        )
    return RetryJobError(message, retry_after=retry_after)


def describe(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """A one-line, redacted, bounded description of a provider failure."""
    raw = getattr(exc, "message", None)
    if not isinstance(raw, str) or not raw:
        try:
            raw = str(exc)
        except Exception:  # some LiteLLM classes' __str__ reads attributes that may be unset
            raw = ""
    text = _first_part(raw) or type(exc).__name__
    if type(exc).__name__ not in text:
        text = f"{type(exc).__name__}: {text}"
    text = redact(text, secrets)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 3] + "..."
    return text


def _first_part(text: str) -> str:
    """Drops what LiteLLM appends: tracebacks, bug-report links, the wrapped exception again."""
    for marker in ("\nTraceback", "Traceback (most recent call last)", "This looks like a bug"):
        text = text.split(marker, 1)[0]
    return " ".join(text.split())


def _by_status(status: Any) -> Decision:
    try:
        code = int(status)
    except (TypeError, ValueError):
        return Decision.RETRY
    if code == 429:
        return Decision.RATE_LIMITED
    if 400 <= code < 500 and code not in _RETRYABLE_4XX:
        return Decision.TERMINAL
    return Decision.RETRY


def _headers_of(exc: BaseException) -> Mapping[str, Any]:
    """Response headers from wherever LiteLLM put them (they differ by code path)."""
    merged: dict[str, Any] = {}
    response = getattr(exc, "response", None)
    if isinstance(response, httpx.Response):
        merged.update(response.headers)
    for attr in ("litellm_response_headers", "headers"):
        value = getattr(exc, attr, None)
        if isinstance(value, (Mapping, httpx.Headers)):
            merged.update({str(k).lower(): v for k, v in value.items()})
    return merged
