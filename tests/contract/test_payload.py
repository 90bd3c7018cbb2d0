"""The generation payload: the gateway builds it, the worker parses it back."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.admission.schemas import GenerationRequest
from genq import TerminalJobError
from genq_contract.payload import GenerationPayload, payload_fields


def _gateway_payload(body: dict[str, Any], tenant: str = "acme") -> dict[str, Any]:
    """What gateway.admission.submit enqueues for ``body``."""
    request = GenerationRequest.model_validate(body)
    return GenerationPayload(
        tenant=tenant,
        model=request.model,
        messages=request.conversation(),
        params=request.params,
        metadata=request.metadata,
        fingerprint=request.fingerprint(),
    ).model_dump()


def test_payload_built_by_the_gateway_round_trips_through_the_worker() -> None:
    body = {
        "model": "demo/fast",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hi ✓"},
        ],
        "params": {"temperature": 0.2, "stop": ["\n"]},
        "metadata": {"ticket": 42, "urgent": True},
    }
    enqueued = _gateway_payload(body)
    parsed = GenerationPayload.parse(enqueued)
    assert parsed.model == "demo/fast"
    assert parsed.messages == body["messages"]
    assert parsed.params == {"temperature": 0.2, "stop": ["\n"]}
    assert parsed.metadata == {"ticket": 42, "urgent": True}
    assert parsed.tenant == "acme"
    assert parsed.fingerprint == GenerationRequest.model_validate(body).fingerprint()
    assert parsed.model_dump() == enqueued


def test_payload_from_a_prompt_is_one_user_message() -> None:
    from_gateway = GenerationPayload.parse(_gateway_payload({"model": "demo/fast", "prompt": "hi"}))
    direct = GenerationPayload.parse({"model": "demo/fast", "prompt": "hi", "params": None})
    for parsed in (from_gateway, direct):
        assert parsed.messages == [{"role": "user", "content": "hi"}]
        assert parsed.params == {}
    assert direct.tenant is None and direct.fingerprint is None


@pytest.mark.parametrize(
    ("payload", "complaint"),
    [
        ("just a string", "must be an object"),
        (None, "must be an object"),
        ({"model": "demo/fast"}, "needs messages (a non-empty list) or a prompt"),
        ({"model": "demo/fast", "messages": []}, "messages: List should have at least 1 item"),
        ({"model": "", "prompt": "hi"}, "model: String should have at least 1 character"),
        ({"prompt": "hi"}, "model: Field required"),
        ({"model": "demo/fast", "messages": [{"content": "x"}]}, "each message must be an"),
        ({"model": "demo/fast", "messages": ["hello"]}, "messages.0: Input should be a valid"),
        ({"model": "demo/fast", "prompt": "hi", "params": [1]}, "params: Input should be a valid"),
    ],
)
def test_payload_malformed_is_terminal_with_a_clear_message(payload: Any, complaint: str) -> None:
    with pytest.raises(TerminalJobError, match=r"^invalid generation payload: ") as raised:
        GenerationPayload.parse(payload)
    assert complaint in str(raised.value)
    assert "pydantic" not in str(raised.value)


def test_payload_fields_of_any_job_never_fail() -> None:
    assert payload_fields({"tenant": "acme", "model": "demo/fast"})["tenant"] == "acme"
    assert payload_fields("enqueued by hand") == {}
    assert payload_fields(None) == {}
