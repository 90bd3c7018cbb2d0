"""Gateway errors and the one place that turns any error into an HTTP answer.

    GatewayError                 every error the gateway raises on purpose
    ├── BadRequest          400  malformed cursor, bad header
    ├── Unauthorized        401  missing or invalid API key or watch token
    ├── PaymentRequired     402  the tenant's budget cannot cover the generation's most cost
    ├── Forbidden           403  the key lacks the admin role
    ├── NotFound            404  unknown job, or another tenant's
    ├── Conflict            409  another request with the same Idempotency-Key is under way
    ├── PayloadTooLarge     413  request body over the limit
    ├── Unprocessable       422  model not allowed, Idempotency-Key reused with another body
    ├── RateLimited         429  enqueue rate or jobs in flight over the tenant's limit
    └── Unavailable         503  Redis unreachable, or full (maxmemory)

genq's errors and Redis connection failures are mapped here too; nothing reaches the client as
a bare 500 with a traceback. A :class:`genq.ReplicationTimeoutError` (durable acceptance,
GENQ_DURABLE_REPLICAS: too few replicas confirmed the enqueue in time) is a 503 whose detail
says how many confirmed and that a retry with the same Idempotency-Key returns the same
generation. Text that cannot be stored (JSON may escape a lone surrogate,
``"\ud800"``, which has no UTF-8 form) is a 422. Anything else is a 500, logged by type and
stack frames only: an exception's message can quote request data (a prompt), so it is never
logged. The last resort is :class:`gateway.middleware.CatchAll`, not an ``Exception`` handler:
Starlette re-raises after such a handler, and uvicorn then logs the message and drops the
connection.
"""

from __future__ import annotations

import logging
import math
import traceback
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException

from genq import GenqError, JobExistsError, JobNotFoundError, ReplicationTimeoutError

log = logging.getLogger("gateway.errors")


class GatewayError(Exception):
    status = 500
    headers: dict[str, str] = {}

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def body(self) -> Any:
        """What the answer's ``detail`` holds: the message, unless the error says more."""
        return self.detail


class BadRequest(GatewayError):
    status = 400


class Unauthorized(GatewayError):
    status = 401
    headers = {"WWW-Authenticate": "Bearer"}


class PaymentRequired(GatewayError):
    """A budget refusal: ``detail`` is ``{message, limit, remaining_usd, resets_at}``."""

    status = 402

    def __init__(self, message: str, limit: str, remaining_usd: float, resets_at: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.remaining_usd = remaining_usd
        self.resets_at = resets_at

    def body(self) -> Any:
        return {
            "message": self.detail,
            "limit": self.limit,
            "remaining_usd": self.remaining_usd,
            "resets_at": self.resets_at,
        }


class Forbidden(GatewayError):
    status = 403


class NotFound(GatewayError):
    status = 404


class Conflict(GatewayError):
    status = 409


class PayloadTooLarge(GatewayError):
    status = 413


class Unprocessable(GatewayError):
    status = 422


class RateLimited(GatewayError):
    status = 429

    def __init__(self, detail: str, retry_after: float) -> None:
        super().__init__(detail)
        self.retry_after = retry_after
        self.headers = {"Retry-After": str(max(1, math.ceil(retry_after)))}


class Unavailable(GatewayError):
    status = 503


def error_response(exc: Exception) -> JSONResponse:
    """The HTTP answer for any exception: ``{"detail": ...}`` with the right status."""
    if isinstance(exc, GatewayError):
        return JSONResponse({"detail": exc.body()}, exc.status, headers=exc.headers)
    if isinstance(exc, RequestValidationError):
        # Where and what only: echoing the input back could repeat a prompt, or fail to
        # encode at all (a NaN is valid Python JSON input but not JSON output).
        problems = [
            {"type": e.get("type"), "loc": list(e.get("loc", ())), "msg": e.get("msg")}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": problems}, 422)
    if isinstance(exc, HTTPException):
        return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)
    if isinstance(exc, JobNotFoundError):
        return JSONResponse({"detail": "generation not found"}, 404)
    if isinstance(exc, JobExistsError):
        return JSONResponse({"detail": "a generation with this id is still running"}, 409)
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | ConnectionError):
        log.warning("storage unavailable: %s", type(exc).__name__)
        return JSONResponse(
            {"detail": "storage unavailable, retry shortly"}, 503, headers={"Retry-After": "1"}
        )
    if isinstance(exc, OutOfMemoryError):
        log.warning("storage full: Redis refused a write (maxmemory)")
        return JSONResponse(
            {"detail": "storage is full (Redis maxmemory reached): writes refused, retry later"},
            503,
            headers={"Retry-After": "5"},
        )
    if isinstance(exc, ReplicationTimeoutError):
        log.warning(
            "durable acceptance: %d of %d replicas confirmed in time", exc.acknowledged,
            exc.replicas,
        )  # fmt: skip
        return JSONResponse({"detail": replication_detail(exc)}, 503, headers={"Retry-After": "1"})
    if isinstance(exc, UnicodeEncodeError):
        detail = "text must be valid Unicode: lone surrogates (\\ud800-\\udfff) are refused"
        return JSONResponse({"detail": detail}, 422)
    if isinstance(exc, GenqError):
        log.error("queue error: %s", type(exc).__name__)
    else:
        # Type and traceback only: messages may quote request data (prompts).
        frames = "".join(traceback.format_tb(exc.__traceback__))
        log.error("unhandled %s\n%s", type(exc).__name__, frames)
    return JSONResponse({"detail": "internal error"}, 500)


def replication_detail(exc: ReplicationTimeoutError) -> str:
    return (
        f"not accepted durably: {exc.acknowledged} of {exc.replicas} Redis replicas confirmed "
        "the generation in time. It may exist on the primary but could be lost if the primary "
        "fails now. Retry the request with the same Idempotency-Key: it returns this same "
        "generation, never a second one (without a key, a retry makes a new one)"
    )


def install_error_handlers(app: FastAPI) -> None:
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        return error_response(exc)

    for kind in (
        GatewayError,
        RequestValidationError,
        HTTPException,
        GenqError,
        RedisConnectionError,
        RedisTimeoutError,
        OutOfMemoryError,
        ConnectionError,
        UnicodeEncodeError,
    ):
        app.add_exception_handler(kind, handle)


class ErrorDetail(BaseModel):
    # No docstring: it would become the schema's description, and every error answer's body
    # is documented by the statuses of ERRORS.
    detail: str | list[Any]


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorDetail} for code in (400, 401, 403, 404, 413, 422, 429, 503)
}
"""The error answers a route documents (its router's ``responses``)."""
