"""What a model can take besides text, as LiteLLM's capability map (the copy bundled with the
pinned release) knows it: function calling, images, a JSON schema response format, reasoning.
Workers publish it for the gateway (``genq_services.capabilities``). The demo models declare
their own (:data:`providers.demo.CAPABILITIES`); a model the map does not know, or a capability
it does not list for one, is unknown (None), which refuses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from genq_contract.routing import litellm_provider
from genq_services.capabilities import Capabilities
from providers import demo
from providers._litellm import litellm

_MAP_FIELDS = {
    "function_calling": "supports_function_calling",
    "vision": "supports_vision",
    "response_schema": "supports_response_schema",
    "reasoning": "supports_reasoning",
}
"""Each capability and the key of LiteLLM's model info that says it (what
``litellm.supports_function_calling`` and its kin read)."""


def model_capabilities(model: str) -> Capabilities | None:
    """``model``'s capabilities, or None when LiteLLM's map does not know the model."""
    if litellm_provider(model) == demo.PROVIDER:
        return demo.CAPABILITIES
    try:
        info: Mapping[str, Any] = litellm.get_model_info(model)
    except Exception:  # LiteLLM raises several kinds for a model it does not map
        return None
    known = {
        name: value for name, key in _MAP_FIELDS.items() if isinstance(value := info.get(key), bool)
    }
    return Capabilities(**known)


def capabilities_of(models: Iterable[str]) -> dict[str, Capabilities]:
    """The known capabilities of ``models`` (a model the map does not know is left out)."""
    found = {model: model_capabilities(model) for model in models}
    return {model: caps for model, caps in found.items() if caps is not None}
