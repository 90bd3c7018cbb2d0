"""What a generation may carry beyond text, in the Chat Completions format, and its limits.

Params: ``tools`` (function tools only, ``{"type": "function", "function": {name, description,
parameters, strict}}``), ``tool_choice``, ``parallel_tool_calls``, ``response_format``
(``text``, ``json_object``, ``json_schema``) and ``reasoning_effort``. Messages: assistant
messages with ``tool_calls``, ``role: "tool"`` messages answering one by ``tool_call_id``, and
content given as a list of parts (``text``, ``image_url``, ``file``, ...). All of it goes to the
provider unchanged (LiteLLM translates it for each); these checks only refuse, naming the
field, what no provider would run, so a bad request fails before it is queued.

Limits: at most :data:`MAX_TOOLS` tools, function names matching :data:`TOOL_NAME`, parameters
(and a JSON schema) a JSON object, an ``image_url`` an ``https:`` or ``data:`` URL, and the images
of one request in ``data:`` URLs at most a cap of bytes (:func:`check_image_bytes`: each process
that accepts requests sets its own, the gateway ``GENQ_MAX_IMAGE_BYTES``). Hosted tools
(``web_search``, ``file_search``, ``code_interpreter``, MCP ...) are refused by name: genq runs
no tools, the caller does.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

MAX_TOOLS = 128
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
TOOL_CHOICES = frozenset({"none", "auto", "required"})
RESPONSE_FORMATS = frozenset({"text", "json_object", "json_schema"})
REASONING_EFFORT = re.compile(r"[a-z]{1,16}")
PARAMS = frozenset(
    {"tools", "tool_choice", "parallel_tool_calls", "response_format", "reasoning_effort"}
)
"""The params checked here (the routing lets them through to every provider)."""
IMAGE_URL_SCHEMES = ("https:", "data:")
"""How an ``image_url`` part may give its image: a link the provider fetches, or the bytes."""


class ChatFormatError(ValueError):
    """A param or message that does not fit the format; ``field`` is its dotted path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


def check_params(params: Mapping[str, Any]) -> None:
    """Raises :class:`ChatFormatError` for a tool, structured-output or reasoning param that
    does not fit (the other params are the routing's to check)."""
    if "tools" in params:
        _check_tools(params["tools"])
    if "tool_choice" in params:
        _check_tool_choice(params["tool_choice"])
    if "parallel_tool_calls" in params and not isinstance(params["parallel_tool_calls"], bool):
        raise ChatFormatError("params.parallel_tool_calls", "must be true or false")
    if "response_format" in params:
        _check_response_format(params["response_format"])
    effort = params.get("reasoning_effort")
    if "reasoning_effort" in params and not (
        isinstance(effort, str) and REASONING_EFFORT.fullmatch(effort)
    ):
        raise ChatFormatError("params.reasoning_effort", "must be a word such as low or high")


def check_messages(messages: list[dict[str, Any]]) -> None:
    """Raises :class:`ChatFormatError` for a tool call, tool answer or content part that does
    not fit."""
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        role = message.get("role")
        if role == "tool" and not _text(message.get("tool_call_id")):
            raise ChatFormatError(f"{where}.tool_call_id", "a tool message must name its call")
        if "tool_calls" in message and message["tool_calls"] is not None:
            if role != "assistant":
                raise ChatFormatError(f"{where}.tool_calls", "only assistant messages call tools")
            _check_history_calls(message["tool_calls"], f"{where}.tool_calls")
        content = message.get("content")
        if content is None and not (role == "assistant" and message.get("tool_calls")):
            raise ChatFormatError(f"{where}.content", "only an assistant calling tools may omit it")
        if isinstance(content, list):
            for j, part in enumerate(content):
                _check_part(part, f"{where}.content.{j}")


def check_image_bytes(messages: list[dict[str, Any]], limit: int) -> None:
    """Raises :class:`ChatFormatError`, naming the part that crosses it, when the images given
    as ``data:`` URLs in ``messages`` add up to more than ``limit`` bytes (decoded: what the
    provider receives). Linked (``https:``) images are not counted: the provider fetches them."""
    total = 0
    for where, url in _image_urls(messages):
        if not url.startswith("data:"):
            continue
        total += _decoded_size(url, where)
        if total > limit:
            raise ChatFormatError(where, f"images in data: URLs over {limit} bytes in all")


def image_parts(
    messages: Iterable[Mapping[str, Any]],
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every ``image_url`` content part of ``messages``, in order, with its path
    (``messages.<i>.content.<j>``)."""
    for i, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "image_url":
                yield f"messages.{i}.content.{j}", part


def _image_urls(messages: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    for where, part in image_parts(messages):
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else None
        if isinstance(url, str):
            yield f"{where}.image_url.url", url


def _decoded_size(url: str, where: str) -> int:
    header, comma, data = url.partition(",")
    if not comma:
        raise ChatFormatError(where, "a data: URL needs a comma before its data")
    if not header.endswith(";base64"):
        return len(data.encode())
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        raise ChatFormatError(where, "the data is not base64") from None


def _check_part(part: Any, where: str) -> None:
    if not isinstance(part, dict) or not _text(part.get("type")):
        raise ChatFormatError(where, "a part needs a type")
    kind = part["type"]
    if kind == "text" and not isinstance(part.get("text"), str):
        raise ChatFormatError(f"{where}.text", "a text part needs its text")
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else None
        if not isinstance(url, str) or not url.startswith(IMAGE_URL_SCHEMES):
            raise ChatFormatError(f"{where}.image_url.url", "must be an https: or data: URL")
    if kind == "file" and not isinstance(part.get("file"), dict):
        raise ChatFormatError(f"{where}.file", "must be an object")


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _check_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise ChatFormatError("params.tools", "must be a list")
    if len(tools) > MAX_TOOLS:
        raise ChatFormatError("params.tools", f"at most {MAX_TOOLS} tools, not {len(tools)}")
    for i, tool in enumerate(tools):
        where = f"params.tools.{i}"
        if not isinstance(tool, dict):
            raise ChatFormatError(where, "must be an object")
        kind = tool.get("type")
        if kind != "function":
            raise ChatFormatError(
                f"{where}.type", f"genq passes function tools only, not {str(kind)[:40]!r}"
            )
        function = tool.get("function")
        if not isinstance(function, dict):
            raise ChatFormatError(f"{where}.function", "must be an object")
        _check_name(function.get("name"), f"{where}.function.name")
        if "parameters" in function and not isinstance(function["parameters"], dict):
            raise ChatFormatError(f"{where}.function.parameters", "must be a JSON object")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise ChatFormatError(f"{where}.function.description", "must be text")
        strict = function.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise ChatFormatError(f"{where}.function.strict", "must be true or false")


def _check_name(name: Any, where: str) -> None:
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise ChatFormatError(where, f"must match ^{TOOL_NAME.pattern}$")


def _check_tool_choice(choice: Any) -> None:
    if isinstance(choice, str):
        if choice not in TOOL_CHOICES:
            raise ChatFormatError("params.tool_choice", f"must be one of {sorted(TOOL_CHOICES)}")
        return
    if not isinstance(choice, dict) or choice.get("type") != "function":
        raise ChatFormatError(
            "params.tool_choice", 'must be none, auto, required or {"type": "function", ...}'
        )
    function = choice.get("function")
    if not isinstance(function, dict):
        raise ChatFormatError("params.tool_choice.function", "must be an object")
    _check_name(function.get("name"), "params.tool_choice.function.name")


def _check_response_format(value: Any) -> None:
    if not isinstance(value, dict) or value.get("type") not in RESPONSE_FORMATS:
        raise ChatFormatError(
            "params.response_format.type", f"must be one of {sorted(RESPONSE_FORMATS)}"
        )
    if value["type"] != "json_schema":
        return
    schema = value.get("json_schema")
    if not isinstance(schema, dict):
        raise ChatFormatError("params.response_format.json_schema", "must be an object")
    _check_name(schema.get("name"), "params.response_format.json_schema.name")
    if "schema" in schema and not isinstance(schema["schema"], dict):
        raise ChatFormatError("params.response_format.json_schema.schema", "must be a JSON object")


def _check_history_calls(calls: Any, where: str) -> None:
    if not isinstance(calls, list):
        raise ChatFormatError(where, "must be a list")
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or not _text(call.get("id")):
            raise ChatFormatError(f"{where}.{i}.id", "a tool call needs its id")
        function = call.get("function")
        if not isinstance(function, dict):
            raise ChatFormatError(f"{where}.{i}.function", "must be an object")
        _check_name(function.get("name"), f"{where}.{i}.function.name")
        if not isinstance(function.get("arguments"), str):
            raise ChatFormatError(f"{where}.{i}.function.arguments", "must be JSON text")
