"""Routes whose ordinary requests skip FastAPI's request handling.

FastAPI's handler solves the dependency tree level by level, parses the body with ``json.loads``
and validates the result, then validates the endpoint's answer again against its
``response_model`` before serializing it: on the hottest route (``POST /v1/generations``) that
machinery costs more CPU than the admission itself (docs/KNOWN_LIMITS.md). A fast path does the
same work once, directly, for a request that needs nothing else; any other request is declined
and gets FastAPI's own handling, so every refusal (422 with its list of problems, 401, ...) is
FastAPI's, word for word. The route's declaration (parameters, ``response_model``, answers)
is unchanged, and so is the OpenAPI schema drawn from it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from fastapi.telemetry import get_telemetry_data

FastPath = Callable[[Request], Awaitable[Response | None]]
"""Answers a request, or declines it (``None``) having done nothing: no read but the body's,
no write."""


def fast_path_route(fast_path: FastPath) -> type[APIRoute]:
    """An ``APIRoute`` class whose requests go to ``fast_path`` first (pass it as the
    ``route_class_override`` of one route)."""

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

    return FastPathRoute
