"""Codecs turn payloads and results into text stored in Redis, and back.

pydantic is imported only by ``PydanticCodec``: ``pip install genq`` (redis and tenacity
alone) must import.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from pydantic import TypeAdapter

T = TypeVar("T")


class Codec(Protocol[T]):
    def encode(self, value: T) -> str: ...

    def decode(self, data: str) -> T: ...


class JsonCodec:
    """Plain JSON (the default)."""

    # One encoder for every call: ``json.dumps`` with options builds a new one each time,
    # which was half of the encoding's cost.
    _encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)

    def encode(self, value: Any) -> str:
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
