"""Every LiteLLM exception maps to a queue decision, with Retry-After and redaction."""

from __future__ import annotations

import inspect
from typing import Any

import httpx
import pytest

from genq import RetryJobError, TerminalJobError
from providers._litellm import litellm
from providers.errors import (
    ProviderSilenceError,
    RateLimitedError,
    classify,
    to_job_error,
)

E = litellm.exceptions
SECRET = "sk-proj-Zx9Zx9Zx9Zx9Zx9Zx9Zx9"

# What each LiteLLM exception must become. A LiteLLM upgrade that adds a class fails
# test_every_litellm_exception_class_is_mapped until someone decides here.
EXPECTED: dict[str, type[Exception]] = {
    "APIConnectionError": RetryJobError,
    "APIError": RetryJobError,  # status 500 when built below
    "APIResponseValidationError": RetryJobError,
    "AuthenticationError": TerminalJobError,
    "BadGatewayError": RetryJobError,
    "BadRequestError": TerminalJobError,
    "BlockedPiiEntityError": TerminalJobError,
    "BudgetExceededError": TerminalJobError,
    "CallerCredentialAuthenticationError": TerminalJobError,
    "CallerCredentialRateLimitError": RateLimitedError,
    "ContentPolicyViolationError": TerminalJobError,
    "ContextWindowExceededError": TerminalJobError,
    "EndpointNotSupportedByModelError": TerminalJobError,
    "GuardrailRaisedException": TerminalJobError,
    "ImageFetchError": TerminalJobError,
    "InternalServerError": RetryJobError,
    "InvalidRequestError": TerminalJobError,
    "JSONSchemaValidationError": RetryJobError,
    "LiteLLMUnknownProvider": TerminalJobError,
    "MalformedRequestFieldError": TerminalJobError,
    "MidStreamFallbackError": RetryJobError,
    "MockException": RetryJobError,
    "ModelNotMappedError": TerminalJobError,
    "ModifyResponseException": TerminalJobError,
    "NotFoundError": TerminalJobError,
    "OpenAIError": RetryJobError,
    "PaymentRequiredError": TerminalJobError,
    "PermissionDeniedError": TerminalJobError,
    "RateLimitError": RateLimitedError,
    "RejectedRequestError": TerminalJobError,
    "SensitiveDataRouteException": TerminalJobError,
    "ServiceUnavailableError": RetryJobError,
    "Timeout": RetryJobError,
    "UnprocessableEntityError": TerminalJobError,
    "UnsupportedEndpointError": TerminalJobError,
    "UnsupportedParamsError": TerminalJobError,
    "VectorStoreSearchError": TerminalJobError,
}


def litellm_exception_classes() -> list[type[BaseException]]:
    return [
        obj
        for _, obj in inspect.getmembers(E, inspect.isclass)
        if issubclass(obj, BaseException) and obj.__module__ == E.__name__
    ]


def response(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    request = httpx.Request("POST", "https://api.example.test/v1/chat/completions")
    return httpx.Response(status, headers=headers or {}, request=request)


def build(cls: type[BaseException]) -> BaseException:
    """An instance of a LiteLLM exception, filling its required constructor arguments."""
    values: dict[str, Any] = {
        "message": f"upstream said no (key {SECRET})",
        "model": "openai/gpt-4o-mini",
        "llm_provider": "openai",
        "response": response(500),
        "failures": [{"vector_store_id": "vs1", "custom_llm_provider": None, "error": "x"}],
        "current_cost": 2.0,
        "max_budget": 1.0,
        "request_data": {},
        "route_to_model": "local/model",
        "session_id": "s1",
        "raw_response": "{}",
        "schema": "{}",
        "entity_type": "email",
        "guardrail_name": "pii",
    }
    kwargs = {}
    for name, param in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.default is param.empty:
            kwargs[name] = values.get(name, "x")
    return cls(**kwargs)


def test_every_litellm_exception_class_is_mapped() -> None:
    classes = litellm_exception_classes()
    assert len(classes) >= 30  # the walk found LiteLLM's classes, not an empty module
    unmapped = [c.__name__ for c in classes if classify(c) is None]
    assert unmapped == []
    assert sorted(c.__name__ for c in classes) == sorted(EXPECTED)


@pytest.mark.parametrize("cls", litellm_exception_classes(), ids=lambda c: c.__name__)
def test_litellm_exception_becomes_the_expected_job_error(cls: type[BaseException]) -> None:
    error = to_job_error(build(cls))
    assert type(error) is EXPECTED[cls.__name__]
    assert SECRET not in str(error)
    assert str(error)  # a readable reason, even for classes with no message


def test_rate_limit_carries_retry_after_and_is_provider_wide() -> None:
    exc = E.RateLimitError(
        "slow down", "openai", "gpt-4o-mini", response=response(429, {"retry-after": "3"})
    )
    error = to_job_error(exc)
    assert isinstance(error, RateLimitedError)
    assert error.retry_after == 3.0
    assert error.provider_wide is True
    assert "retry after 3s" in str(error)


def test_caller_rate_limit_does_not_pause_the_provider() -> None:
    exc = E.CallerCredentialRateLimitError("slow down", "github", "m", response=response(429))
    error = to_job_error(exc)
    assert isinstance(error, RateLimitedError)
    assert error.provider_wide is False


def test_rate_limit_reset_header_is_used_without_retry_after() -> None:
    headers = {"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-remaining-requests": "0"}
    exc = E.RateLimitError("slow down", "openai", "m", response=response(429, headers))
    assert to_job_error(exc).retry_after == 360.0


def test_service_unavailable_honours_retry_after_ms() -> None:
    exc = E.ServiceUnavailableError(
        "busy", "openai", "m", response=response(503, {"retry-after-ms": "1500"})
    )
    error = to_job_error(exc)
    assert type(error) is RetryJobError
    assert error.retry_after == 1.5


def test_mid_stream_wrapper_is_decided_by_what_it_wraps() -> None:
    inner = E.RateLimitError("slow", "demo", "m", response=response(429, {"retry-after": "2"}))
    wrapped = E.MidStreamFallbackError("stream failed", "m", "demo", original_exception=inner)
    error = to_job_error(wrapped)
    assert isinstance(error, RateLimitedError)
    assert error.retry_after == 2.0
    bad = E.MidStreamFallbackError(
        "x", "m", "demo", original_exception=E.BadRequestError("no", "m", "demo")
    )
    assert isinstance(to_job_error(bad), TerminalJobError)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, TerminalJobError),
        (404, TerminalJobError),
        (408, RetryJobError),
        (429, RateLimitedError),
        (502, RetryJobError),
        (None, RetryJobError),
    ],
)
def test_generic_api_error_is_decided_by_status(status: int | None, expected: type) -> None:
    exc = E.APIError(500, "generic", "openai", "m")
    exc.status_code = status  # type: ignore[assignment]
    assert type(to_job_error(exc)) is expected


def test_non_litellm_failures() -> None:
    assert type(to_job_error(ProviderSilenceError(5))) is RetryJobError
    assert type(to_job_error(httpx.ReadError("reset"))) is RetryJobError
    assert type(to_job_error(ConnectionResetError())) is RetryJobError
    terminal = TerminalJobError("already decided")
    assert to_job_error(terminal) is terminal


def test_message_is_short_and_free_of_litellm_noise() -> None:
    noisy = (
        "litellm.APIConnectionError: boom\nTraceback (most recent call last):\n  File x\n"
        "This looks like a bug in LiteLLM https://github.com/...\n" + "y" * 5000
    )
    error = to_job_error(E.APIConnectionError(noisy, "openai", "m"))
    assert "Traceback" not in str(error)
    assert "looks like a bug" not in str(error)
    assert len(str(error)) <= 500


def test_configured_secret_is_redacted_even_in_an_odd_shape() -> None:
    exc = E.AuthenticationError("key zzTOPSECRETzz rejected", "custom", "m")
    assert "zzTOPSECRETzz" not in str(to_job_error(exc, secrets=["zzTOPSECRETzz"]))
