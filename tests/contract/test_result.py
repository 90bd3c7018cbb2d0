"""The generation result: one typed definition, written strictly, read tolerantly."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from genq_contract.redact import REDACTED, redact
from genq_contract.result import GenerationResult, ResultUsage, read_result
from genq_contract.spend import Usage


def test_result_usage_is_the_shape_usage_shows() -> None:
    usage = Usage(
        prompt_tokens=7, completion_tokens=5, cached_tokens=2, cost_nanos=40, estimated=True
    )
    result = GenerationResult(text="hi", model="demo/fast", usage=ResultUsage.of(usage))
    assert result.as_json() == {
        "text": "hi",
        "model": "demo/fast",
        "finish_reason": None,
        "usage": usage.as_json(),
    }


@pytest.mark.parametrize(
    "bad",
    [
        {"text": 5},
        {"text": "x", "finish_reason": 1},
        {"text": "x", "usage": {"completion_tokens": "3"}},
        {"text": "x", "usage": {"cost_usd": float("nan")}},
        {"finish_reason": "stop"},
    ],
)
def test_result_refuses_a_mistyped_field(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        GenerationResult.model_validate(bad)


def test_result_read_drops_only_the_fields_that_do_not_validate() -> None:
    stored = {"text": "ok", "model": 7, "finish_reason": "stop", "usage": {"prompt_tokens": "x"}}
    shown = read_result(stored)
    assert (shown.text, shown.model, shown.finish_reason, shown.usage) == ("ok", None, "stop", None)
    assert read_result({"text": {"a": 1}, "extra": 1}).text is None
    assert read_result("bare").text == "bare"
    assert read_result([1, 2]).model_dump() == read_result(None).model_dump()


def test_redact_is_one_definition_the_providers_use() -> None:
    from providers import redact as providers_redact

    assert providers_redact.redact is redact and providers_redact.REDACTED == REDACTED
    key = "gq_" + "A1b2C3d4" * 5
    assert redact(f"the worker key {key} was sent") == f"the worker key gq_{REDACTED} was sent"
