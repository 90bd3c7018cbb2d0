"""Errors in OpenAI's shape, on the OpenAI routes only.

``{"error": {"message", "type", "param", "code"}}`` with the status OpenAI uses for the same
cause: a validation failure is 400 (FastAPI would say 422), an unknown model 404
``model_not_found``, a limit 429 with ``Retry-After``, a budget refusal 402
``insufficient_quota`` / ``budget_exceeded``. Every other error is first mapped by the
gateway's own :func:`gateway.errors.error_response` (so Redis outages and the like keep their
status and headers) and then reshaped. Native routes keep ``{"detail": ...}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from ..errors import GatewayError, PaymentRequired, error_response

TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    402: "insufficient_quota",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "requests",
    500: "server_error",
    503: "server_error",
}
CODES = {401: "invalid_api_key", 402: "budget_exceeded", 429: "rate_limit_exceeded"}
KEPT_HEADERS = ("retry-after", "www-authenticate")


class OpenAIError(GatewayError):
    """An error with OpenAI's ``code`` and ``param`` (raised by the OpenAI routes only)."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param
        self.headers = headers or {}


def model_not_found(model: str) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.",
        code="model_not_found",
        param="model",
    )


def error_body(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": code if code is not None else CODES.get(status),
        }
    }


def openai_error_response(exc: Exception) -> JSONResponse:
    """The OpenAI-shaped answer for any exception raised by an OpenAI route."""
    if isinstance(exc, OpenAIError):
        return JSONResponse(
            error_body(exc.status, exc.detail, exc.code, exc.param), exc.status, headers=exc.headers
        )
    if isinstance(exc, RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(part) for part in first.get("loc", ()) if part != "body"]
        param = ".".join(loc) or None
        message = f"{first.get('msg', 'invalid request')}" + (f" ({param})" if param else "")
        return JSONResponse(error_body(400, message, param=param), 400)
    if isinstance(exc, PaymentRequired):  # OpenAI's field set: the message says the rest
        return JSONResponse(error_body(402, exc.detail), 402)
    native = error_response(exc)
    detail = json.loads(bytes(native.body)).get("detail")
    message = detail if isinstance(detail, str) else "invalid request"
    status = 400 if native.status_code == 422 else native.status_code
    headers = {k: v for k, v in native.headers.items() if k.lower() in KEPT_HEADERS}
    return JSONResponse(error_body(status, message), status, headers=headers)


class OpenAIRoute(APIRoute):
    """A route whose errors, its dependencies' (auth) and its validation's included, come out
    in OpenAI's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                return openai_error_response(exc)

        return route
