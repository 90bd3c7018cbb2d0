"""The published capability table: what each model can take besides text, as LiteLLM's
capability map knows it. Each worker writes the capabilities of the models it serves (beside
their prices, ``genq_services.prices``); the gateway reads them to refuse, before anything is
queued, a request the model cannot run (the gateway never loads LiteLLM). A Redis hash, model ->
:class:`Capabilities` as JSON, under :func:`capabilities_key`.

Unknown is not "no": a capability LiteLLM does not know for a model, or a model no worker has
published, never refuses a request (the provider answers for itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from genq import RedisClient
from genq_contract.chat import image_parts

from ._model_table import publish, read

FUNCTION_CALLING = "function_calling"
VISION = "vision"
RESPONSE_SCHEMA = "response_schema"
REASONING = "reasoning"

_SAID = {
    FUNCTION_CALLING: "function calling (tools)",
    VISION: "images",
    RESPONSE_SCHEMA: "structured output (json_schema)",
}


@dataclass(frozen=True)
class Capabilities:
    """True: the model takes it; False: it does not; None: unknown."""

    function_calling: bool | None = None
    vision: bool | None = None
    response_schema: bool | None = None
    reasoning: bool | None = None

    def as_json(self) -> dict[str, bool | None]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Capabilities:
        """A published entry; a field that is not a boolean reads as unknown."""
        fields = data if isinstance(data, dict) else {}
        known = {k: v for k, v in fields.items() if k in _FIELDS and isinstance(v, bool)}
        return cls(**known)


_FIELDS = frozenset(Capabilities.__dataclass_fields__)


def capabilities_key(namespace: str) -> str:
    """hash: model -> :class:`Capabilities` JSON, written by workers, read by the gateway."""
    return f"{namespace}:capabilities"


def needed(params: Mapping[str, Any], messages: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The capabilities a request needs, each with the field that needs it: ``params.tools``
    (function calling), the first image part (vision), a ``json_schema`` response format
    (structured output). Reasoning effort is left to the provider (LiteLLM drops it for a
    model without reasoning)."""
    found: dict[str, str] = {}
    if params.get("tools"):
        found[FUNCTION_CALLING] = "params.tools"
    response_format = params.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        found[RESPONSE_SCHEMA] = "params.response_format"
    image = next((where for where, _ in image_parts(messages)), None)
    if image is not None:
        found[VISION] = image
    return found


def refusal(model: str, capabilities: Capabilities, needs: Mapping[str, str]) -> str | None:
    """Why ``model`` cannot run a request that ``needs`` these capabilities, naming the field;
    None when it is not known to lack any."""
    for capability, where in needs.items():
        if getattr(capabilities, capability) is False:
            return f"{where}: model {model!r} does not support {_SAID[capability]}"
    return None


async def publish_capabilities(
    redis: RedisClient, namespace: str, capabilities: Mapping[str, Capabilities]
) -> None:
    entries = {model: c.as_json() for model, c in capabilities.items()}
    await publish(redis, capabilities_key(namespace), entries)


async def read_capabilities(
    redis: RedisClient, namespace: str, models: Iterable[str]
) -> dict[str, Capabilities]:
    """The published capabilities of ``models`` (a model no worker has published is absent)."""
    entries = await read(redis, capabilities_key(namespace), models)
    return {model: Capabilities.from_json(entry) for model, entry in entries.items()}
