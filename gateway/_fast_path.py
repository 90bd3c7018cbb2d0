"""Routes whose ordinary requests skip FastAPI's request handling.

FastAPI's handler solves the dependency tree level by level, parses the body with ``json.loads``
and validates the result, then validates the endpoint's answer again against its
``response_model`` before serializing it: on the hottest route (``POST /v1/generations``) that
machinery costs more CPU than the admission itself, and a chat stream's first token waits for it
(docs/KNOWN_LIMITS.md). A fast path does the same work once, directly, for a request that needs
nothing else; any other request is declined and gets FastAPI's own handling, so every refusal
(422 with its list of problems, 401, ...) is FastAPI's, word for word. The route's declaration
(parameters, ``response_model``, answers) is unchanged, and so is the OpenAPI schema drawn
from it. The native routes and the OpenAI routes (which may not import one another) both have
one, hence its place beside ``deps``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

from fastapi import Request, Response
from fastapi.routing import APIRoute
from fastapi.telemetry import get_telemetry_data
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

FastPath = Callable[[Request], Awaitable[Response | None]]
"""Answers a request, or declines it (``None``) having done nothing: no read but the body's,
no write."""
Body = TypeVar("Body", bound=BaseModel)
JSON = "application/json"


def fast_path_route(fast_path: FastPath, around: type[APIRoute] = APIRoute) -> type[APIRoute]:
    """An ``APIRoute`` class whose requests go to ``fast_path`` first (pass it as the
    ``route_class_override`` of one route). ``around``: the route class the route would have
    had (``OpenAIRoute``), whose own wrapping of the handler it gets from ``super()`` (the
    errors' shape) then covers the fast path's answers and errors too."""

    class FastPathRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            standard = super().get_route_handler()

            async def handler(request: Request) -> Response:
                # FastAPI's own telemetry (spans per dependency, serialization...) and
                # overrides of the dependencies need its handler.
                overridden = getattr(request.app, "dependency_overrides", None)
                if not overridden and get_telemetry_data() is None:
                    answer = await fast_path(request)
                    if answer is not None:
                        return answer
                return await standard(request)

            return handler

    if around is APIRoute:
        return FastPathRoute
    # around's handler wraps FastPathRoute's (the next class in the MRO), fast path included
    return cast(type[APIRoute], type(f"FastPath{around.__name__}", (around, FastPathRoute), {}))


async def json_body(request: Request, model: type[Body]) -> Body | None:
    """``request``'s body as a ``model``, if FastAPI would take it as it is: a JSON content
    type and a valid body; else ``None``, for a fast path to decline (nothing read but the
    body)."""
    content_type = request.headers.get("content-type")
    if content_type is None or content_type.partition(";")[0].strip().lower() != JSON:
        return None
    try:
        raw = await request.body()
    except ClientDisconnect:  # FastAPI's answer to it (reading again sees it again)
        return None
    try:
        return model.model_validate_json(raw)
    except ValidationError:
        return None
