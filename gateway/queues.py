"""One genq Queue per provider, and the job ids that lead back to them.

A generation's id is ``<provider>.<32 hex>``, so any route can find the queue holding it
without a lookup. An id that does not parse, or names a provider this gateway does not serve,
is simply not found.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

from genq import Queue, RedisClient
from genq_contract.lanes import batch_lane
from genq_contract.routing import Routing

from .errors import NotFound

_JOB_ID = re.compile(r"^(?P<provider>[^{}\s/]{1,80})\.(?P<token>[0-9a-f]{32})$")


class Queues:
    """Every provider's queue and its batch lane (``<provider>.batch``,
    :mod:`genq_contract.lanes`), by name: iterating gives both, so sweeps, listings and the
    admin routes see batch lines too."""

    def __init__(
        self,
        redis: RedisClient,
        routing: Routing,
        lane_options: dict[str, Any] | None = None,
        **queue_options: Any,
    ) -> None:
        self.routing = routing
        self._queues: dict[str, Queue] = {}
        for name, config in routing.providers.items():
            self._queues[name] = Queue(redis, prefix=config.queue_prefix, **queue_options)
            self._queues[batch_lane(name)] = Queue(
                redis, prefix=batch_lane(config.queue_prefix), **(lane_options or queue_options)
            )

    def __iter__(self) -> Iterator[tuple[str, Queue]]:
        return iter(self._queues.items())

    def __len__(self) -> int:
        return len(self._queues)

    def by_provider(self, provider: str) -> Queue:
        queue = self._queues.get(provider)
        if queue is None:
            raise NotFound(f"no queue named {provider!r}")
        return queue

    def for_model(self, model: str) -> tuple[str, Queue]:
        """The provider and queue a model's generations go to (raises ModelNotAllowedError)."""
        provider = self.routing.provider_of(model).name
        return provider, self._queues[provider]

    def lane_for_model(self, model: str) -> tuple[str, Queue]:
        """The batch lane a line for ``model`` goes to (raises ModelNotAllowedError)."""
        name = batch_lane(self.routing.provider_of(model).name)
        return name, self._queues[name]

    @staticmethod
    def new_job_id(provider: str) -> str:
        return f"{provider}.{uuid.uuid4().hex}"

    def locate(self, job_id: str) -> tuple[str, Queue]:
        """The provider and queue of a job id; :class:`NotFound` when it cannot be ours."""
        match = _JOB_ID.match(job_id)
        queue = self._queues.get(match["provider"]) if match else None
        if match is None or queue is None:
            raise NotFound("generation not found")
        return match["provider"], queue
