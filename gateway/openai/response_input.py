"""What a Responses request carries beyond text, in the Chat Completions format a generation
holds (:mod:`genq_contract.chat` checks the result): one translation per Responses shape.

- Input items: messages (``input_text``, ``output_text``, ``input_image``, ``input_file``
  parts), ``function_call`` (an assistant's call: consecutive calls and the assistant text
  before them make one assistant message, as Chat holds them) and ``function_call_output`` (a
  ``tool`` message). ``reasoning`` items are left out: Chat has no place for them, and a
  provider that takes reasoning back gets it through its own encrypted state, which genq does
  not keep. A message of text parts only becomes plain text.
- ``tools`` (``{"type": "function", name, description, parameters, strict}``), ``tool_choice``
  (``"auto"``, ``"none"``, ``"required"``, ``{"type": "function", "name"}``), ``text.format``
  (``json_object``, ``json_schema``) and ``reasoning.effort``.

What genq cannot run is refused by name (:class:`~.errors.OpenAIError`, 400 with ``param``):
hosted tools (``web_search``, ``file_search``, ``code_interpreter``, ``mcp`` ...), files given
by ``file_id`` or ``file_url`` (genq keeps no files), item references.
"""

from __future__ import annotations

from typing import Any

from .errors import OpenAIError

TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
ROLES = frozenset({"system", "developer", "user", "assistant"})


def _refuse(param: str, message: str) -> OpenAIError:
    return OpenAIError(400, message, param=param)


def _object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _refuse(param, f"{param} must be an object")
    return value


def _text(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise _refuse(param, f"{param} must be text")
    return value


def input_messages(items: str | list[Any]) -> list[dict[str, Any]]:
    """The Chat messages of a Responses ``input``."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    for i, raw in enumerate(items):
        where = f"input.{i}"
        item = _object(raw, where)
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, where))
        elif kind == "function_call":
            _add_call(messages, item, where)
        elif kind == "function_call_output":
            messages.append(_call_output(item, where))
        elif kind != "reasoning":
            raise _refuse(f"{where}.type", f"genq does not take {str(kind)[:40]!r} input items")
    return messages


def _message(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in ROLES:
        raise _refuse(f"{where}.role", f"{where}.role must be one of {sorted(ROLES)}")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise _refuse(f"{where}.content", f"{where}.content must be text or a list of parts")
    parts = [_part(part, f"{where}.content.{j}") for j, part in enumerate(content)]
    if all(part["type"] == "text" for part in parts):
        return {"role": role, "content": "".join(part["text"] for part in parts)}
    return {"role": role, "content": parts}


def _part(raw: Any, where: str) -> dict[str, Any]:
    part = _object(raw, where)
    kind = part.get("type")
    if kind in TEXT_PARTS:
        return {"type": "text", "text": _text(part.get("text"), f"{where}.text")}
    if kind == "input_image":
        if part.get("file_id") is not None:
            raise _refuse(f"{where}.file_id", "genq keeps no files: give the image's image_url")
        image: dict[str, Any] = {"url": _text(part.get("image_url"), f"{where}.image_url")}
        if part.get("detail") is not None:
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        for by in ("file_id", "file_url"):
            if part.get(by) is not None:
                raise _refuse(f"{where}.{by}", "genq keeps no files: give the file's file_data")
        file = {"file_data": _text(part.get("file_data"), f"{where}.file_data")}
        if part.get("filename") is not None:
            file["filename"] = _text(part["filename"], f"{where}.filename")
        return {"type": "file", "file": file}
    raise _refuse(f"{where}.type", f"genq does not take {str(kind)[:40]!r} content parts")


def _add_call(messages: list[dict[str, Any]], item: dict[str, Any], where: str) -> None:
    call = {
        "id": _text(item.get("call_id"), f"{where}.call_id"),
        "type": "function",
        "function": {
            "name": _text(item.get("name"), f"{where}.name"),
            "arguments": _text(item.get("arguments"), f"{where}.arguments"),
        },
    }
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
        if not last.get("content"):
            last["content"] = None
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _call_output(item: dict[str, Any], where: str) -> dict[str, Any]:
    output = item.get("output")
    if isinstance(output, list):
        parts = [_part(part, f"{where}.output.{j}") for j, part in enumerate(output)]
        output = (
            parts if any(p["type"] != "text" for p in parts) else "".join(p["text"] for p in parts)
        )
    elif not isinstance(output, str):
        raise _refuse(f"{where}.output", f"{where}.output must be text or a list of parts")
    call_id = _text(item.get("call_id"), f"{where}.call_id")
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def chat_tools(tools: list[Any]) -> list[dict[str, Any]]:
    """Responses function tools as Chat's; any other tool is refused by its type."""
    translated = []
    for i, raw in enumerate(tools):
        tool = _object(raw, f"tools.{i}")
        kind = tool.get("type")
        if kind != "function":
            raise _refuse(
                f"tools.{i}.type",
                f"genq runs no hosted tools, only passes function tools: not {str(kind)[:40]!r}",
            )
        function = {
            k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool
        }
        translated.append({"type": "function", "function": function})
    return translated


def chat_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice  # none, auto, required: the same words (genq_contract.chat checks them)
    if choice.get("type") != "function":
        raise _refuse(
            "tool_choice",
            f"genq can only force a function tool, not {str(choice.get('type'))[:40]!r}",
        )
    return {"type": "function", "function": {"name": choice.get("name")}}


def response_format(text: dict[str, Any]) -> dict[str, Any] | None:
    """``text.format`` as Chat's ``response_format``; None for plain text."""
    shape = text.get("format")
    if shape is None:
        return None
    shape = _object(shape, "text.format")
    kind = shape.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = {k: shape[k] for k in ("name", "schema", "strict", "description") if k in shape}
        return {"type": "json_schema", "json_schema": schema}
    raise _refuse("text.format.type", "text.format.type must be text, json_object or json_schema")
