"""What a lost attempt cost: its usage estimated from what it streamed, metered and charged.

A worker killed mid-generation reports no usage, yet the provider billed what it streamed. The
reclaim that takes its attempt back (a lapsed lease or presence, a pull whose visibility
passed) files that attempt's stream output before the next attempt's restart marker drops it
(:meth:`genq.Queue.lost_attempts`). Every worker process meters the lost attempts of the queues
it serves, every :data:`POLL_SECONDS`:

- The usage is estimated as for any attempt whose provider sent no report
  (:func:`providers.costs.estimate_usage`): prompt tokens from the request, completion tokens
  from the text, reasoning and tool-call arguments it streamed (folded by
  :class:`genq_contract.transcript.Transcript`), marked ``estimated``. An attempt killed before
  its first chunk costs its prompt only.
- For a tenant with a budget, the cost is charged first (``budget.charge(lost_attempt=n)``:
  added to the spend, the job's reservation left to its next attempt), then the usage is metered
  on the job (:meth:`genq.Queue.meter_lost`: record, history entry, usage counters), which
  removes the filed attempt.
- Once: the metering script removes the filed attempt, so processes racing on it meter it once.
  A process killed between the two steps leaves it filed: the next pass (of any process)
  meters it, and the budget remembers the charge while the job's reservation is open.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from genq import (
    TRANSIENT,
    LostAttempt,
    Queue,
    TerminalJobError,
    cancel_and_wait,
    raise_if_cancelled,
)
from genq_contract.money import nanos_to_usd
from genq_contract.payload import GenerationPayload
from genq_contract.spend import Usage
from genq_contract.transcript import Transcript
from genq_services import budget
from providers.costs import estimate_usage, with_cost
from workers.metering import Metering
from workers.telemetry import trace_lost_attempt

log = logging.getLogger("workers")

POLL_SECONDS = 1.0
"""How often a worker process looks for lost attempts to meter (one ``HSCAN`` per queue)."""

UNREADABLE = "unreadable"
"""The label of a lost attempt whose payload is not a generation's: metered with no counts."""


def streamed(lost: LostAttempt) -> str:
    """Everything the attempt streamed as the token count takes it: the text, the reasoning
    and the tool calls' arguments (as :attr:`workers.metering.AttemptMeter.streamed`)."""
    transcript = Transcript()
    for kind, data in lost.output:
        transcript.add(kind, data)
    calls = "".join(call.arguments for call in transcript.tool_calls)
    return transcript.text + (transcript.reasoning or "") + calls


@dataclass
class LostAttemptMeter:
    """Meters the lost attempts of a worker process's queues (see the module docstring)."""

    queues: Iterable[Queue]
    metering: Metering
    poll: float = POLL_SECONDS
    metered: int = 0
    """Lost attempts this process metered."""
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="genq-lost-attempts")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _loop(self) -> None:
        while True:
            raise_if_cancelled()
            try:
                for queue in self.queues:
                    await self.meter_queue(queue)
            except TRANSIENT as exc:
                log.warning("lost attempts not metered yet (%s); retrying", exc)
            except Exception:  # the loop must outlive any single failure
                log.exception("lost attempts not metered; retrying")
            await asyncio.sleep(self.poll)

    async def meter_queue(self, queue: Queue) -> int:
        """Meters the lost attempts filed on ``queue`` now; returns how many this call metered."""
        done = 0
        for lost in await queue.lost_attempts():
            done += await self.meter_one(queue, lost)
        return done

    async def meter_one(self, queue: Queue, lost: LostAttempt) -> bool:
        try:
            request = GenerationPayload.parse(lost.payload)
        except TerminalJobError:  # not a generation (or its record is gone): nothing to estimate
            return await queue.meter_lost(lost.job_id, lost.attempt, UNREADABLE, {})
        model = request.model
        usage = with_cost(
            estimate_usage(model, request.messages, streamed(lost)),
            self.metering.prices.price(model),
        )
        await self._charge(queue, lost, usage)
        if not await queue.meter_lost(lost.job_id, lost.attempt, model, usage.counts()):
            return False
        self.metered += 1
        await trace_lost_attempt(queue, lost, model, usage)
        log.warning(
            "job %s: attempt %d was lost with its worker; metered %d prompt + %d completion "
            "tokens (estimated), $%.6f",
            lost.job_id, lost.attempt, usage.prompt_tokens, usage.completion_tokens,
            nanos_to_usd(usage.cost_nanos),
        )  # fmt: skip
        return True

    async def _charge(self, queue: Queue, lost: LostAttempt, usage: Usage) -> None:
        settings = self.metering.budgets
        if settings is None or not lost.tenant:
            return
        if await budget.limits_for(queue.redis, settings, lost.tenant) is None:
            return
        await budget.charge(
            queue.redis,
            settings.queue_namespace,
            lost.tenant,
            lost.job_id,
            usage.cost_nanos,
            lost_attempt=lost.attempt,
        )
