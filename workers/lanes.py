"""One provider's concurrency shared by its interactive queue and its batch lane.

The provider's two queues (``genq_contract.lanes``) each have a ``genq.Worker`` in this
process, and both limits move as generations start and end:

- interactive work may use every slot batch lines leave: ``concurrency - batch running``;
- batch lines get what interactive work leaves, and never more than their share:
  ``min(batch_slots, concurrency - interactive running)``.

So a batch never holds more than ``GENQ_BATCH_SHARE`` of the provider (the rest is always
ready for interactive work, picked at once), an idle provider runs batch lines in that share,
and a provider busy with interactive work runs none until a slot frees. Running lines are
never stopped for an interactive job: it takes the next slot that frees. Limits are counted
per worker process, as ``GENQ_PROVIDER_CONCURRENCY`` is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from genq import ActiveJob, Worker

Handler = Callable[[ActiveJob], Awaitable[Any]]


class Lanes:
    """The limits of one provider's interactive and batch workers (:meth:`wrap` their
    handlers, then :meth:`attach` the workers)."""

    def __init__(self, concurrency: int, batch_slots: int) -> None:
        self.concurrency = concurrency
        self.batch_slots = min(batch_slots, concurrency)
        self.running = {"interactive": 0, "batch": 0}
        self._workers: dict[str, Worker] = {}

    def wrap(self, lane: str, handler: Handler) -> Handler:
        """``handler``, counting the generations of ``lane`` it runs (a provider call is
        made only inside a handler: that is what the provider's concurrency bounds)."""

        async def run(job: ActiveJob) -> Any:
            self.running[lane] += 1
            self.rebalance()
            try:
                return await handler(job)
            finally:
                self.running[lane] -= 1
                self.rebalance()

        return run

    def attach(self, interactive: Worker, batch: Worker) -> None:
        self._workers = {"interactive": interactive, "batch": batch}
        self.rebalance()

    def limits(self) -> tuple[int, int]:
        """(interactive limit, batch limit) for what runs now."""
        interactive = self.concurrency - self.running["batch"]
        batch = min(self.batch_slots, self.concurrency - self.running["interactive"])
        return max(interactive, 0), max(batch, 0)

    def rebalance(self) -> None:
        if not self._workers:
            return
        interactive, batch = self.limits()
        if self._workers["interactive"].concurrency != interactive:
            self._workers["interactive"].resize(interactive)
        if self._workers["batch"].concurrency != batch:
            self._workers["batch"].resize(batch)
