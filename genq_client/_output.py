"""What a pull handler may emit and return: a generation's parts and its result, checked here.

The gateway checks the same on its events and ack routes (``genq_contract.parts`` and
``genq_contract.result.GenerationResult``) and answers 422 to anything else. A 422 on an events
call costs the job (the puller abandons it), so a bad part is refused in ``emit`` itself, and a
bad result before the ack, each with an :class:`OutputError` naming the field. The client stands
alone (httpx and anyio, none of genq's packages), so these checks are its copy of those models;
``tests/contract/test_client_output.py`` feeds both the same cases and holds them equal. A
result's ``usage`` is passed on as it is: the gateway checks it (a refusal fails the job).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._generation import ToolCall

CHUNK = "chunk"
REASONING = "reasoning"
TOOL_CALL = "tool_call"
TOOL_ARGS = "tool_args"
TOOL_DONE = "tool_done"
EMIT_TYPES = (CHUNK, REASONING, TOOL_CALL, TOOL_ARGS, TOOL_DONE)
"""The event types a handler emits: the text and the generation's parts."""
MAX_TOOL_INDEX = 1023
MAX_TOOL_CALLS = 1024
RESULT_KEYS = ("text", "model", "finish_reason", "usage", "reasoning", "tool_calls")
"""A generation's result, as the built-in workers ack it."""

_PART_FIELDS: dict[str, tuple[str, ...]] = {
    TOOL_CALL: ("index", "id", "name"),
    TOOL_ARGS: ("index", "delta"),
    TOOL_DONE: ("index", "id", "name", "arguments"),
}
_CALL_FIELDS = ("id", "name", "arguments")


class OutputError(TypeError, ValueError):
    """What a handler emitted or returned is not a generation's output; the message names the
    field. Both a TypeError and a ValueError: a wrong type and a wrong value are refused alike."""


def _kind(value: object) -> str:
    return type(value).__name__


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise OutputError(f"{where} is a str, not {_kind(value)}")
    return value


def _index(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OutputError(f"{where} is an int, not {_kind(value)}")
    if not 0 <= value <= MAX_TOOL_INDEX:
        raise OutputError(f"{where} is from 0 to {MAX_TOOL_INDEX}, not {value}")
    return value


def _fields(value: object, names: tuple[str, ...], what: str) -> dict[str, Any]:
    """``value``'s ``names`` (other keys are dropped, as the gateway drops them), each checked:
    ``index`` an int in range, the rest strings."""
    if not isinstance(value, Mapping):
        raise OutputError(f"{what} is a dict of {', '.join(names)}, not {_kind(value)}")
    checked: dict[str, Any] = {}
    for name in names:
        if name not in value:
            raise OutputError(f"{what} has no {name}")
        check = _index if name == "index" else _string
        checked[name] = check(value[name], f"{what}'s {name}")
    return checked


def check_part(kind: str, data: object) -> Any:
    """``data`` of an event of ``kind`` as the stream will hold it: text for ``chunk`` and
    ``reasoning``, a dict of the part's fields for the tool parts. Raises :class:`OutputError`."""
    if kind in (CHUNK, REASONING):
        return _string(data, f"a {kind}")
    names = _PART_FIELDS.get(kind) if isinstance(kind, str) else None
    if names is None:
        raise OutputError(f"emit takes a type of {', '.join(EMIT_TYPES)}, not {kind!r}")
    return _fields(data, names, f"a {kind} part")


def tool_call_of(value: object, where: str) -> dict[str, str]:
    """A result's tool call, ``{id, name, arguments}``, from a dict or a :class:`ToolCall`."""
    if isinstance(value, ToolCall):
        value = vars(value)
    return _fields(value, _CALL_FIELDS, where)


def check_result(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a handler's result gives, checked (``tool_calls`` as a list of dicts); the
    defaults are the caller's. Raises :class:`OutputError`."""
    unknown = sorted(set(fields) - set(RESULT_KEYS))
    if unknown:
        raise OutputError(f"a handler's result has only {list(RESULT_KEYS)}; not {unknown}")
    checked = dict(fields)
    if "text" in fields:
        _string(fields["text"], "a result's text")
    for name in ("model", "finish_reason", "reasoning"):
        if fields.get(name) is not None:
            _string(fields[name], f"a result's {name}")
    usage = fields.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        raise OutputError(f"a result's usage is a dict or None, not {_kind(usage)}")
    if "tool_calls" in fields:
        calls = fields["tool_calls"]
        if not isinstance(calls, list | tuple):
            raise OutputError(f"a result's tool_calls is a list, not {_kind(calls)}")
        if len(calls) > MAX_TOOL_CALLS:
            raise OutputError(f"a result has at most {MAX_TOOL_CALLS} tool_calls, not {len(calls)}")
        checked["tool_calls"] = [
            tool_call_of(call, f"a result's tool_calls[{n}]") for n, call in enumerate(calls)
        ]
    return checked
