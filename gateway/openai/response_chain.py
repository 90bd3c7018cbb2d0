"""``previous_response_id``: an earlier response of the same tenant supplies the history of a
new one, as the Chat messages its generation holds.

The history is the earlier response's own messages (its chained history and its input; not its
``instructions``, which OpenAI does not carry over either), then what it returned as one
assistant message: its text and its function calls. Its reasoning is not carried: Chat
messages have no place for it. The earlier response must have completed; one of another
tenant, one that does not exist or no longer exists (past the retention of finished
generations) is a 404 naming ``previous_response_id``.
"""

from __future__ import annotations

from typing import Any

from genq import JobStatus

from ..access.owned_jobs import load_owned_job
from ..errors import NotFound
from ..state import Gateway
from .errors import OpenAIError
from .objects import chat_tool_calls, job_id_of, payload_of, result_of
from .schemas import INSTRUCTIONS_KEY


async def previous_history(gateway: Gateway, tenant: str, response_id: str) -> list[dict[str, Any]]:
    """The messages a response chained to ``response_id`` starts with."""
    try:
        owned = await load_owned_job(gateway, job_id_of(response_id), tenant)
    except NotFound:
        raise OpenAIError(
            404,
            f"Previous response with id '{response_id}' not found.",
            code="previous_response_not_found",
            param="previous_response_id",
        ) from None
    job = owned.job
    if job.status is not JobStatus.COMPLETED:
        raise OpenAIError(
            400,
            f"Previous response with id '{response_id}' is {job.status.value}: only a "
            "completed response can be continued",
            param="previous_response_id",
        )
    payload = payload_of(job)
    messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
    metadata = payload.get("metadata")
    if isinstance(metadata, dict) and metadata.get(INSTRUCTIONS_KEY) and messages:
        messages = messages[1:]
    return [*messages, _answer(result_of(job))]


def _answer(result: dict[str, Any]) -> dict[str, Any]:
    text = str(result.get("text") or "")
    calls = result.get("tool_calls") or []
    answer: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        answer["tool_calls"] = chat_tool_calls(calls)
    return answer
