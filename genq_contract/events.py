"""The events of a job's stream, as every reader names them, and the text a viewer shows.

Defined once in the queue core (``genq._status``, ``genq._events``) and re-exported here for the
gateway, the workers and the CLI; the pages hold the same vocabulary and rule in ``web/api.js``
(a test keeps the two equal).

In order on a job's stream: ``chunk`` (data: a piece of text), ``progress`` (data: 0..1),
``restarted`` (an attempt ended early; the next one starts the text again), then exactly one
terminal event: ``completed`` (data: the result), ``failed`` (data: the error message) or
``cancelled``.
"""

from __future__ import annotations

from genq import CHUNK, PROGRESS, RESTARTED, TERMINAL_EVENTS, Event, JobStatus, visible_text

COMPLETED = JobStatus.COMPLETED.value
FAILED = JobStatus.FAILED.value
CANCELLED = JobStatus.CANCELLED.value

EVENT_TYPES = (CHUNK, PROGRESS, RESTARTED, COMPLETED, FAILED, CANCELLED)
"""Every event type a job's stream carries."""

__all__ = [
    "CANCELLED",
    "CHUNK",
    "COMPLETED",
    "EVENT_TYPES",
    "FAILED",
    "PROGRESS",
    "RESTARTED",
    "TERMINAL_EVENTS",
    "Event",
    "visible_text",
]
