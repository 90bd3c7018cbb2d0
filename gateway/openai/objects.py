"""OpenAI's objects built from a genq job: a Response, a chat completion, usage, ids.

Ids: a response is ``resp_<generation id>``, its one output message ``msg_<hex of the id>``,
its reasoning item ``rs_<hex>``, its function calls ``fc_<hex>_<n>``, a chat completion
``chatcmpl-<generation id>``; the generation id is the native one (``GET /v1/generations/{id}``
shows the same job).

Usage is the provider's report when the worker got one. Without it (a cancelled or failed
generation, or a provider that reports none) it is estimated: a token per four characters of
the prompt and of the text generated, the rule of thumb OpenAI gives for English.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from genq import Event, Job, JobStatus, StreamEntry, visible_text
from genq_contract.parts import ToolCall
from genq_contract.result import read_result

from .schemas import BACKGROUND_KEY, INSTRUCTIONS_KEY, PREVIOUS_KEY

RESPONSE_PREFIX = "resp_"
CHAT_PREFIX = "chatcmpl-"
RESPONSE_STATUS = {
    JobStatus.WAITING: "queued",
    JobStatus.SCHEDULED: "queued",
    JobStatus.ACTIVE: "in_progress",
    JobStatus.COMPLETED: "completed",
    JobStatus.FAILED: "failed",
    JobStatus.CANCELLED: "cancelled",
}
INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}
GENQ_METADATA = frozenset({BACKGROUND_KEY, INSTRUCTIONS_KEY, PREVIOUS_KEY})
"""Metadata genq keeps with a response for itself: not shown in its ``metadata``."""
_RATE_LIMITED = re.compile(r"rate.?limit|\b429\b", re.IGNORECASE)


def list_page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """OpenAI's cursor page (files, batches, webhook endpoints): ``data`` in order, the ids
    that bound it, whether more follow."""
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


def response_id(job_id: str) -> str:
    return RESPONSE_PREFIX + job_id


def job_id_of(public_id: str) -> str:
    """The generation id behind ``resp_...`` or ``chatcmpl-...`` (a bare id is taken as is)."""
    for prefix in (RESPONSE_PREFIX, CHAT_PREFIX):
        if public_id.startswith(prefix):
            return public_id[len(prefix) :]
    return public_id


def item_id(job_id: str) -> str:
    return "msg_" + job_id.rpartition(".")[2]


def payload_of(job: Job) -> dict[str, Any]:
    return job.payload if isinstance(job.payload, dict) else {}


def text_of(entries: Iterable[StreamEntry]) -> str:
    """What a viewer shows: the chunks of the current attempt (genq's one rule). A chunk
    whose data is not text (pushed before events were checked) shows nothing."""
    events = (Event(e.id, e.type, json.loads(e.data)) for e in entries)
    return visible_text(e for e in events if e.type != "chunk" or isinstance(e.data, str))


def result_of(job: Job) -> dict[str, Any]:
    """The result's ``text``, ``model``, ``finish_reason`` and ``usage``; one that does not
    validate is None (``genq_contract.result.read_result``)."""
    return read_result(job.result).model_dump()


def _object(value: Any) -> dict[str, Any]:
    # A job enqueued directly on a genq.Queue may hold anything in its payload: it still shows.
    return value if isinstance(value, dict) else {}


def _messages(job: Job) -> list[dict[str, Any]]:
    messages = payload_of(job).get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def token_counts(job: Job, text: str) -> tuple[int, int]:
    """(prompt, completion) tokens: the provider's report, or an estimate."""
    usage = result_of(job)["usage"]
    if usage is not None:
        return usage["prompt_tokens"], usage["completion_tokens"]
    prompt = "".join(str(m.get("content", "")) for m in _messages(job))
    return estimate_tokens(prompt), estimate_tokens(text)


def response_usage(job: Job, text: str) -> dict[str, Any]:
    prompt, completion = token_counts(job, text)
    reasoning_tokens = (result_of(job)["usage"] or {}).get("reasoning_tokens")
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens or 0},
        "total_tokens": prompt + completion,
    }


def chat_usage(job: Job, text: str) -> dict[str, Any]:
    """Chat's usage; ``completion_tokens_details.reasoning_tokens`` when the provider said."""
    prompt, completion = token_counts(job, text)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    reasoning_tokens = (result_of(job)["usage"] or {}).get("reasoning_tokens")
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


def response_status(job: Job) -> str:
    if (
        job.status is JobStatus.COMPLETED
        and result_of(job).get("finish_reason") in INCOMPLETE_REASONS
    ):
        return "incomplete"
    return RESPONSE_STATUS[job.status]


def output_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(job: Job, text: str, status: str, content: bool = True) -> dict[str, Any]:
    return {
        "id": item_id(job.id),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [output_text_part(text)] if content else [],
    }


def item_status(status: str) -> str:
    return {"completed": "completed", "queued": "in_progress", "in_progress": "in_progress"}.get(
        status, "incomplete"
    )


def error_code(message: str) -> str:
    return "rate_limit_exceeded" if _RATE_LIMITED.search(message) else "server_error"


@dataclass(frozen=True)
class ResponseOutput:
    """What a response returned so far: its text, its reasoning, its function calls."""

    text: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


def reasoning_item_id(job_id: str) -> str:
    return "rs_" + job_id.rpartition(".")[2]


def call_item_id(job_id: str, index: int) -> str:
    """The ``function_call`` item of the response's call number ``index`` (in call order)."""
    return f"fc_{job_id.rpartition('.')[2]}_{index}"


def reasoning_item(job: Job, text: str | None, status: str) -> dict[str, Any]:
    """A ``reasoning`` item: the provider's reasoning as its one ``summary_text``."""
    summary = [] if text is None else [{"type": "summary_text", "text": text}]
    return {
        "id": reasoning_item_id(job.id),
        "type": "reasoning",
        "summary": summary,
        "status": status,
    }


def call_item(job: Job, index: int, call: ToolCall, status: str) -> dict[str, Any]:
    return {
        "id": call_item_id(job.id, index),
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "status": status,
    }


def output_items(job: Job, output: ResponseOutput, status: str) -> list[dict[str, Any]]:
    """The output as OpenAI lists it: the reasoning, the message (left out when the model only
    called functions, or has said nothing yet), the function calls."""
    shown = item_status(status)
    items = [] if output.reasoning is None else [reasoning_item(job, output.reasoning, shown)]
    if output.text or (status in ("completed", "incomplete") and not output.tool_calls):
        items.append(message_item(job, output.text, shown))
    items += [call_item(job, n, call, shown) for n, call in enumerate(output.tool_calls)]
    return items


def _responses_tools(params: dict[str, Any]) -> list[dict[str, Any]]:
    tools = params.get("tools")
    functions = (
        [t.get("function") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    )
    return [{"type": "function", **f} for f in functions if isinstance(f, dict)]


def _responses_tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "function", "name": choice["function"].get("name")}
    return choice if isinstance(choice, str) else "auto"


def _text_format(params: dict[str, Any]) -> dict[str, Any]:
    shape = _object(params.get("response_format"))
    if shape.get("type") == "json_schema":
        return {"type": "json_schema", **_object(shape.get("json_schema"))}
    return {"type": "json_object"} if shape.get("type") == "json_object" else {"type": "text"}


def response_object(
    job: Job, output: ResponseOutput, *, status: str | None = None, with_output: bool = True
) -> dict[str, Any]:
    """The Response OpenAI would show for this job; ``status`` overrides the job's (the
    lifecycle events of a stream show the states the job went through)."""
    payload = payload_of(job)
    params = _object(payload.get("params"))
    messages = _messages(job)
    given = _object(payload.get("metadata"))
    metadata = {k: v for k, v in given.items() if k not in GENQ_METADATA}
    status = status or response_status(job)
    finish_reason = result_of(job).get("finish_reason")
    finished = status in ("completed", "incomplete", "failed", "cancelled")
    instructions = (
        messages[0].get("content") if messages and messages[0].get("role") == "system" else None
    )
    effort = params.get("reasoning_effort")
    return {
        "id": response_id(job.id),
        "object": "response",
        "created_at": int(job.created_at),
        "status": status,
        "background": bool(given.get(BACKGROUND_KEY)),
        "model": payload.get("model"),
        "output": output_items(job, output, status) if with_output else [],
        "usage": response_usage(job, output.text) if finished else None,
        "error": (
            {"code": error_code(job.error or ""), "message": job.error or "the generation failed"}
            if status == "failed"
            else None
        ),
        "incomplete_details": (
            {"reason": INCOMPLETE_REASONS.get(finish_reason or "", "max_output_tokens")}
            if status == "incomplete"
            else None
        ),
        "completed_at": int(job.finished_at) if status == "completed" and job.finished_at else None,
        "instructions": instructions,
        "max_output_tokens": params.get("max_tokens"),
        "temperature": params.get("temperature"),
        "top_p": params.get("top_p"),
        "metadata": metadata,
        "previous_response_id": given.get(PREVIOUS_KEY),
        "parallel_tool_calls": params.get("parallel_tool_calls", True),
        "tool_choice": _responses_tool_choice(params.get("tool_choice")),
        "tools": _responses_tools(params),
        "text": {"format": _text_format(params)},
        "reasoning": {"effort": effort, "summary": None} if effort is not None else None,
    }


def chat_id(job_id: str) -> str:
    return CHAT_PREFIX + job_id


def chat_message(result: dict[str, Any]) -> dict[str, Any]:
    """The completion's message: ``content`` null when the model only called tools,
    ``tool_calls`` and ``reasoning_content`` when it returned any."""
    text = str(result.get("text") or "")
    calls = result.get("tool_calls") or []
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if calls and not text else text,
        "refusal": None,
    }
    if calls:
        message["tool_calls"] = chat_tool_calls(calls)
    if result.get("reasoning") is not None:
        message["reasoning_content"] = result["reasoning"]
    return message


def chat_completion(job: Job) -> dict[str, Any]:
    result = result_of(job)
    text = str(result.get("text") or "")
    return {
        "id": chat_id(job.id),
        "object": "chat.completion",
        "created": int(job.created_at),
        "model": payload_of(job).get("model"),
        "choices": [
            {
                "index": 0,
                "message": chat_message(result),
                "finish_reason": result.get("finish_reason") or "stop",
                "logprobs": None,
            }
        ],
        "usage": chat_usage(job, text),
        "system_fingerprint": None,
    }


def chat_chunk(
    job: Job, delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``delta=None`` makes the usage chunk (no choices)."""
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
    )
    return {
        "id": chat_id(job.id),
        "object": "chat.completion.chunk",
        "created": int(job.created_at),
        "model": payload_of(job).get("model"),
        "choices": choices,
        "system_fingerprint": None,
        **extra,
    }


def chat_tool_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A result's tool calls as a Chat assistant message carries them."""
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call["arguments"]},
        }
        for call in calls
    ]
