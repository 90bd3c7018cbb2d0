"""The default codec: json.dumps's text (compact separators, non-ASCII kept) from an encoder made
once, and json's own errors for what JSON cannot hold."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from genq._codecs import JsonCodec

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too: json writes NaN, Infinity, -Infinity
    | st.text(),
    lambda inner: st.lists(inner) | st.tuples(inner, inner) | st.dictionaries(st.text(), inner),
    max_leaves=30,
)


@given(values)
def test_the_text_is_what_json_dumps_writes(value: object) -> None:
    text = JsonCodec().encode(value)
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_keys_that_are_not_text_are_written_as_json_writes_them() -> None:
    value = {1: "a", 2.5: "b", None: "d"}
    assert JsonCodec().encode(value) == '{"1":"a","2.5":"b","null":"d"}'
    assert JsonCodec().encode({False: 0}) == '{"false":0}'
    assert JsonCodec().decode(JsonCodec().encode([math.inf, "é"])) == [math.inf, "é"]


def test_a_circular_value_is_jsons_value_error() -> None:
    circular: list[object] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        JsonCodec().encode(circular)
    assert JsonCodec().encode(["after"]) == '["after"]'  # the encoder is still usable


def test_what_json_cannot_hold_is_jsons_type_error() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        JsonCodec().encode({"when": object()})
    with pytest.raises(TypeError):
        JsonCodec().encode({("a", "tuple"): "key"})
