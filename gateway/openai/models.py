"""``GET /v1/models``: the model allow-list in OpenAI's list format.

One list for every reader (the SDKs, the web pages, ``genq_client``): ``{"object": "list",
"data": [{"id", "object": "model", "created", "owned_by"}]}``; ``owned_by`` is the provider
that serves the model, ``created`` is 0 (genq does not know when a model was made). A
``<provider>/*`` entry allows any model of that provider and is listed as it is. No API key
is needed: the generate page lists the models before it has one.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..deps import GatewayDep
from .errors import OpenAIRoute

router = APIRouter(tags=["models"], route_class=OpenAIRoute)


@router.get("/v1/models")
async def list_models(gateway: GatewayDep) -> dict[str, Any]:
    """The models this gateway serves."""
    routing = gateway.queues.routing
    return {
        "object": "list",
        "data": [
            {
                "id": model,
                "object": "model",
                "created": 0,
                "owned_by": provider,
            }
            for model, provider in sorted(routing.models.items())
        ],
    }
