"""The batch lane: where a batch's lines wait, apart from interactive work.

Each provider has two queues: its own (``<namespace>:<provider>``, interactive work) and its
batch lane (``<namespace>:<provider>.batch``), a queue of its own with the core's per-tenant
fair share inside it. The workers serving a provider run the lane only in what interactive
work leaves free, and never in more than ``GENQ_BATCH_SHARE`` of the provider's concurrency
(``workers.lanes``); the gateway enqueues a batch's lines there (``gateway.openai.batches``).
A line's generation id is ``<provider>.batch.<hex>``, so routes find its queue as any other's.
"""

from __future__ import annotations

import math

BATCH_SUFFIX = ".batch"


def batch_lane(name: str) -> str:
    """The batch lane's name (a queue prefix or a provider name) beside ``name``'s."""
    return f"{name}{BATCH_SUFFIX}"


def is_batch_lane(name: str) -> bool:
    return name.endswith(BATCH_SUFFIX)


def batch_slots(concurrency: int, share: float) -> int:
    """The most batch lines a provider of ``concurrency`` runs at once: ``share`` of it,
    rounded down, at least one (a provider of concurrency 1 still runs batches, one at a time
    and only while no interactive job runs)."""
    return max(1, min(concurrency, math.floor(concurrency * share)))
