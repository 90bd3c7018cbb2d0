"""A chat's UIMessages as the Chat Completions messages a generation carries: the one place they
are translated.

- ``system`` and ``user`` messages: their ``text`` parts, and ``file`` parts: an image
  (``mediaType`` ``image/...``) becomes an ``image_url`` part with its ``https:`` or ``data:``
  URL, any other file a ``file`` part with its ``data:`` URL (``file_data``) and ``filename``.
  One text part alone is sent as plain text.
- ``assistant`` messages, one step (what comes between two ``step-start`` parts) at a time: its
  text, and its tool parts (``tool-<name>`` and ``dynamic-tool``) whose ``state`` is
  ``output-available`` or ``output-error``, become one assistant message with ``tool_calls``
  (``arguments``: the ``input`` as JSON text) followed by a ``role: "tool"`` message per call
  (``tool_call_id``; content: the ``output``, JSON text unless it is text, or the
  ``errorText``). A tool part still waiting for its output is not sent (a provider refuses a
  call without its answer).
- Not sent: reasoning, ``step-start``, ``data-*``, sources and any other part.

Every refusal names the field as the request spelled it (``messages.2.parts.0.url``), also for
what :mod:`genq_contract.chat` and the admission checks find in the translated messages
(:meth:`Conversation.ui_field`): the image cap (``GENQ_MAX_IMAGE_BYTES``) and a model's
published capabilities (a model that takes no tools or images) included.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from genq_contract import chat
from genq_contract.chat import ChatFormatError

from .schemas import UIMessage

TOOL_PART = "tool-"
DYNAMIC_TOOL = "dynamic-tool"
ANSWERED = frozenset({"output-available", "output-error"})
"""The states of a tool part whose call goes back to the model, with its answer."""
_CHAT_FIELD = re.compile(r"(?:messages|params)(?:\.[A-Za-z0-9_]+)*")


@dataclass
class Conversation:
    """The translated messages, and where in the request each of them (and each of their
    parts and calls) came from."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    """``messages.<i>`` (and ``...content.<j>``, ``...tool_calls.<k>``) -> the request's field."""

    def add(self, message: dict[str, Any], origin: str) -> str:
        where = f"messages.{len(self.messages)}"
        self.messages.append(message)
        self.origins[where] = origin
        return where

    def ui_field(self, problem: str) -> str:
        """``problem`` (``<field>: <what>``, as :mod:`genq_contract.chat` and the admission
        checks say it) with a translated message's field replaced by the request's."""
        found = _CHAT_FIELD.match(problem)
        if found is None:
            return problem
        path = found.group().split(".")
        if path[0] == "params" and path[1:2] in (["tools"], ["tool_choice"]):
            return ".".join(path[1:]) + problem[found.end() :]  # the body's own fields
        for cut in range(len(path), 1, -1):
            origin = self.origins.get(".".join(path[:cut]))
            if origin is not None:
                return origin + problem[found.end() :]
        return problem

    def renamed(self, exc: ChatFormatError) -> ChatFormatError:
        """``exc`` naming the request's field instead of a translated message's."""
        field, _, problem = self.ui_field(str(exc)).partition(": ")
        return ChatFormatError(field, problem)


def conversation(messages: list[UIMessage], system: str | None) -> Conversation:
    """The Chat messages of ``messages`` (after ``system``); raises :class:`ChatFormatError`
    naming the request's field for a part that cannot be sent."""
    out = Conversation()
    if system is not None:
        out.add({"role": "system", "content": system}, "system")
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if message.role == "assistant":
            _assistant(message.parts, where, out)
        else:
            _say(message.role, message.parts, where, out)
    if not out.messages:
        raise ChatFormatError("messages", "no message has a part a model can read")
    try:
        chat.check_messages(out.messages)
    except ChatFormatError as exc:
        raise out.renamed(exc) from None
    return out


def check_images(out: Conversation, max_image_bytes: int) -> None:
    """:func:`genq_contract.chat.check_image_bytes`, naming the request's part."""
    try:
        chat.check_image_bytes(out.messages, max_image_bytes)
    except ChatFormatError as exc:
        raise out.renamed(exc) from None


def _say(role: str, parts: list[dict[str, Any]], where: str, out: Conversation) -> None:
    content: list[dict[str, Any]] = []
    origins: list[str] = []
    for j, part in enumerate(parts):
        at = f"{where}.parts.{j}"
        kind = _kind(part, at)
        if kind == "text":
            content.append({"type": "text", "text": _text(part, "text", at)})
        elif kind == "file" and role == "user":
            content.append(_file(part, at))
        else:
            continue
        origins.append(at)
    if not content:
        raise ChatFormatError(f"{where}.parts", f"a {role} message needs a text or file part")
    plain = len(content) == 1 and content[0]["type"] == "text"
    said = out.add({"role": role, "content": content[0]["text"] if plain else content}, where)
    for j, origin in enumerate(origins):
        out.origins[f"{said}.content.{j}"] = origin


def _file(part: dict[str, Any], at: str) -> dict[str, Any]:
    media_type = _text(part, "mediaType", at)
    url = _text(part, "url", at)
    if media_type.startswith("image/"):
        if not url.startswith(chat.IMAGE_URL_SCHEMES):
            raise ChatFormatError(f"{at}.url", "an image must be an https: or data: URL")
        return {"type": "image_url", "image_url": {"url": url}}
    if not url.startswith("data:"):
        raise ChatFormatError(f"{at}.url", "a file other than an image must be a data: URL")
    file: dict[str, Any] = {"file_data": url}
    if isinstance(part.get("filename"), str):
        file["filename"] = part["filename"]
    return {"type": "file", "file": file}


@dataclass
class _Step:
    """One step of an assistant message: its text and its answered tool calls."""

    text: list[str] = field(default_factory=list)
    calls: list[tuple[dict[str, Any], dict[str, Any], str]] = field(default_factory=list)
    """(the call, its tool message, the part it came from)."""

    def flush(self, where: str, out: Conversation) -> None:
        if not self.text and not self.calls:
            return
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if message["content"] is None and not self.calls:
            return
        if self.calls:
            message["tool_calls"] = [call for call, _, _ in self.calls]
        said = out.add(message, where)
        for k, (_, answer, origin) in enumerate(self.calls):
            out.origins[f"{said}.tool_calls.{k}"] = origin
            out.add(answer, origin)
        self.text.clear()
        self.calls.clear()


def _assistant(parts: list[dict[str, Any]], where: str, out: Conversation) -> None:
    step = _Step()
    for j, part in enumerate(parts):
        at = f"{where}.parts.{j}"
        kind = _kind(part, at)
        if kind == "step-start":
            step.flush(where, out)
        elif kind == "text":
            step.text.append(_text(part, "text", at))
        elif kind == DYNAMIC_TOOL or kind.startswith(TOOL_PART):
            answered = _answered_call(part, kind, at)
            if answered is not None:
                step.calls.append((*answered, at))
    step.flush(where, out)


def _answered_call(
    part: dict[str, Any], kind: str, at: str
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A tool part's call and its answer; None while it has none."""
    if part.get("state") not in ANSWERED:
        return None
    name = _text(part, "toolName", at) if kind == DYNAMIC_TOOL else kind[len(TOOL_PART) :]
    if not chat.TOOL_NAME.fullmatch(name):
        named = "toolName" if kind == DYNAMIC_TOOL else "type"
        raise ChatFormatError(
            f"{at}.{named}", f"a tool's name must match ^{chat.TOOL_NAME.pattern}$"
        )
    call_id = _text(part, "toolCallId", at)
    arguments = json.dumps(part.get("input") if part.get("input") is not None else {})
    if part["state"] == "output-available":
        output = part.get("output")
        answer = output if isinstance(output, str) else json.dumps(output)
    else:
        answer = _text(part, "errorText", at)
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return call, {"role": "tool", "tool_call_id": call_id, "content": answer}


def _kind(part: Any, at: str) -> str:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str) or not part["type"]:
        raise ChatFormatError(f"{at}.type", "a part needs a type")
    kind: str = part["type"]
    return kind


def _text(part: dict[str, Any], name: str, at: str) -> str:
    value = part.get(name)
    if not isinstance(value, str) or (name != "text" and not value):
        raise ChatFormatError(f"{at}.{name}", "must be text" if name == "text" else "is needed")
    return value
