"""OpenAI's error shape and status codes for the gateway's own errors (gateway.openai.errors)."""

from __future__ import annotations

import json
from typing import Any

from fastapi.exceptions import RequestValidationError
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.errors import NotFound, RateLimited, Unauthorized, Unprocessable
from gateway.openai.errors import model_not_found, openai_error_response


def answer(exc: Exception) -> tuple[int, dict[str, Any], dict[str, str]]:
    response = openai_error_response(exc)
    return response.status_code, json.loads(bytes(response.body)), dict(response.headers)


def test_errors_keep_status_and_retry_after_in_openais_shape() -> None:
    status, body, headers = answer(RateLimited("too many generations in flight", 2.2))
    assert status == 429 and headers["retry-after"] == "3"
    assert body == {
        "error": {
            "message": "too many generations in flight",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    status, body, _ = answer(Unauthorized("invalid API key"))
    assert (status, body["error"]["code"]) == (401, "invalid_api_key")
    assert answer(NotFound("generation not found"))[0] == 404
    status, _, headers = answer(RedisConnectionError("down"))
    assert (status, headers["retry-after"]) == (503, "1")


def test_errors_turn_422_into_openais_400_with_the_param() -> None:
    status, body, _ = answer(Unprocessable("this Idempotency-Key was already used"))
    assert (status, body["error"]["type"]) == (400, "invalid_request_error")
    invalid = RequestValidationError(
        [{"type": "missing", "loc": ("body", "model"), "msg": "Field required"}]
    )
    status, body, _ = answer(invalid)
    assert (status, body["error"]["param"]) == (400, "model")
    status, body, _ = answer(model_not_found("x/y"))
    assert (status, body["error"]["code"], body["error"]["param"]) == (
        404,
        "model_not_found",
        "model",
    )
