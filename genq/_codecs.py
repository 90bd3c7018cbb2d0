"""Codecs turn payloads and results into text stored in Redis, and back.

pydantic is imported only by ``PydanticCodec``: ``pip install genq`` (redis and tenacity
alone) must import.
"""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from pydantic import TypeAdapter

T = TypeVar("T")


class Codec(Protocol[T]):
    def encode(self, value: T) -> str: ...

    def decode(self, data: str) -> T: ...


class JsonCodec:
    """Plain JSON (the default): ``json.dumps``'s text with compact separators, non-ASCII kept."""

    # One encoder for every call: ``json.dumps`` with options builds a new one each time, a
    # large part of the encoding's cost.
    _encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    # And json's C encoder, made once: ``JSONEncoder.encode`` makes one per call (with the dict
    # its circular-reference check fills), work an enqueue pays with cold caches right after a
    # reply (docs/KNOWN_LIMITS.md).
    # Without that check a circular value recurses until RecursionError; ``encode`` then hands
    # the value to the encoder above, which raises json's own error.
    _made_once = (
        c_make_encoder(
            None, _encoder.default, encode_basestring, None, ":", ",", False, False, True
        )
        if c_make_encoder is not None
        else None
    )

    def encode(self, value: Any) -> str:
        if self._made_once is not None:
            try:
                return "".join(self._made_once(value, 0))
            except RecursionError:
                pass
        return self._encoder.encode(value)

    def decode(self, data: str) -> Any:
        return json.loads(data)


class PydanticCodec(Generic[T]):
    """Validates on the way in and out: ``PydanticCodec(MyModel)`` or any type pydantic knows."""

    def __init__(self, type_: type[T]) -> None:
        from pydantic import TypeAdapter  # the one user of pydantic in genq

        self._adapter: TypeAdapter[T] = TypeAdapter(type_)

    def encode(self, value: T) -> str:
        return self._adapter.dump_json(self._adapter.validate_python(value)).decode()

    def decode(self, data: str) -> T:
        return self._adapter.validate_json(data)


json_codec = JsonCodec()
