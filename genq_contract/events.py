"""The events of a job's stream, as every reader names them, and the text a viewer shows.

Defined once in the queue core (``genq._status``, ``genq._events``) and re-exported here for the
gateway, the workers and the CLI; the pages hold the same vocabulary and rule in ``web/api.js``
(a test keeps the two equal).

In order on a job's stream: ``chunk`` (data: a piece of text), the generation's other parts
(``reasoning``, ``tool_call``, ``tool_args``, ``tool_done``: :mod:`genq_contract.parts`),
``progress`` (data: 0..1), ``restarted`` (an attempt ended early; the next one starts the text,
and every part, again), then exactly one terminal event: ``completed`` (data: the result),
``failed`` (data: the error message) or ``cancelled``. :class:`genq_contract.transcript.Transcript`
folds them into what the generation returned.
"""

from __future__ import annotations

from genq import CHUNK, PROGRESS, RESTARTED, TERMINAL_EVENTS, Event, JobStatus, visible_text

from .parts import PART_TYPES, REASONING, TOOL_ARGS, TOOL_CALL, TOOL_DONE

COMPLETED = JobStatus.COMPLETED.value
FAILED = JobStatus.FAILED.value
CANCELLED = JobStatus.CANCELLED.value

EVENT_TYPES = (CHUNK, *PART_TYPES, PROGRESS, RESTARTED, COMPLETED, FAILED, CANCELLED)
"""Every event type a job's stream carries."""

__all__ = [
    "CANCELLED",
    "CHUNK",
    "COMPLETED",
    "EVENT_TYPES",
    "FAILED",
    "PROGRESS",
    "REASONING",
    "RESTARTED",
    "TERMINAL_EVENTS",
    "TOOL_ARGS",
    "TOOL_CALL",
    "TOOL_DONE",
    "Event",
    "visible_text",
]
