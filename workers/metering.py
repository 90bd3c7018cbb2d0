"""Usage, cost and budget holds of one generation attempt, for the generation handler.

Every attempt that reaches the provider call meters its usage exactly once, whatever its
outcome (:meth:`genq.ActiveJob.meter`; the settle of the attempt delivers it)::

    async with metering.attempt(job, request) as meter:
        await meter.hold()          # a tenant with a budget: its most this attempt can cost
        ...                         # the provider call
        meter.sending()
        async for delta in stream:
            meter.observe(delta)

- The usage is the provider's report when it sent one (with cached prompt tokens where
  LiteLLM reports them), else LiteLLM's token count of the prompt and of the text streamed,
  marked ``estimated``: a cancel (Stop cancels the handler's task: the meter runs in its
  cancel path, before the task ends), a dropped or silent stream, the demo provider.
- The prompt counts once the request went out, unless the provider refused it: an error
  before any output (a 429, a 5xx, a 400, a refused connection) is not billed by providers.
- The cost is the usage at the model's price (:mod:`providers.costs`).
- Budgets (:mod:`genq_contract.budget`): for a tenant with one, :meth:`AttemptMeter.hold`
  reserves the attempt's maximum cost before the provider call (adopting the reservation the
  gateway made at enqueue); a refused hold fails the job terminally without a provider call.
  After the attempt, completed or not, its cost is charged in place of the reservation.
"""

from __future__ import annotations

import asyncio
import logging
import types
from dataclasses import dataclass, field

from genq import ActiveJob, TerminalJobError
from genq_contract import budget
from genq_contract.payload import GenerationPayload
from genq_contract.settings import CommonSettings
from genq_contract.spend import Price, Usage, max_cost_nanos
from providers.costs import PriceBook, estimate_usage, reported_usage, with_cost
from providers.litellm_adapter import Delta

log = logging.getLogger("workers")


@dataclass
class Metering:
    """Prices and budgets, shared by the generation handlers of a worker process."""

    prices: PriceBook = field(default_factory=PriceBook)
    budgets: CommonSettings | None = None
    """The settings that give tenants' budgets (``GENQ_TENANT_BUDGETS``, and the namespace
    where operators' limits live); None: no budget is held or charged."""

    def attempt(self, job: ActiveJob, request: GenerationPayload) -> AttemptMeter:
        """The meter of ``job``'s current attempt at ``request``; use it as a context manager."""
        return AttemptMeter(job, request, self.prices.price(request.model), self.budgets)


@dataclass
class AttemptMeter:
    """One attempt's usage as it streams; meters it (and charges it) on leaving its block."""

    job: ActiveJob
    request: GenerationPayload
    price: Price
    budgets: CommonSettings | None = None
    sent: bool = False
    """The request went to the provider."""
    answered: bool = False
    """The provider's stream yielded something."""
    reported: dict[str, int] | None = None
    """The provider's own usage report, if it sent one."""
    usage: Usage | None = None
    """What was metered (set on leaving the block)."""
    _parts: list[str] = field(default_factory=list, repr=False)
    _held: bool = False

    @property
    def text(self) -> str:
        """The text streamed so far."""
        return "".join(self._parts)

    async def hold(self) -> None:
        """Holds the attempt's most it can cost when the job's tenant has a budget; a refused
        hold is a :class:`genq.TerminalJobError` (a budget does not grow by retrying soon)."""
        tenant = self.job.tenant
        if self.budgets is None or not tenant:
            return
        redis = self.job.queue.redis
        limits = await budget.limits_for(redis, self.budgets, tenant)
        if limits is None:
            return
        amount = max_cost_nanos(self.request, self.price)
        namespace = self.budgets.queue_namespace
        try:
            await budget.hold(redis, namespace, tenant, self.job.id, amount, limits)
        except budget.BudgetExceeded as exc:
            raise TerminalJobError(f"budget exceeded: {exc}") from exc
        self._held = True

    def sending(self) -> None:
        """Call right before the provider call."""
        self.sent = True

    def observe(self, delta: Delta) -> None:
        """Call with each delta of the provider's stream."""
        self.answered = True
        if delta.text:
            self._parts.append(delta.text)
        if delta.usage is not None:
            self.reported = delta.usage

    def meter(self, refused: bool = False) -> Usage:
        """Meters the attempt on the job, once (a later call returns the same usage).
        ``refused``: the attempt failed before the provider answered anything."""
        if self.usage is not None:
            return self.usage
        model = self.request.model
        if self.reported is not None:
            usage = reported_usage(self.reported)
        elif not self.sent or (refused and not self.answered):
            usage = Usage()
        else:
            usage = estimate_usage(model, self.request.messages, self.text)
        self.usage = with_cost(usage, self.price)
        self.job.meter(model, self.usage.counts(), estimated=self.usage.estimated)
        return self.usage

    async def __aenter__(self) -> AttemptMeter:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        # Synchronous up to here: a cancelled attempt is metered before its task ends.
        usage = self.meter(refused=isinstance(exc, Exception))
        if self._held:
            self._held = False
            # Shielded: a second cancel must not lose the charge (the reservation would stay
            # until the gateway's sweep releases it, uncharged).
            await asyncio.shield(self._charge(usage.cost_nanos))

    async def _charge(self, cost_nanos: int) -> None:
        assert self.budgets is not None
        try:
            await budget.charge(
                self.job.queue.redis,
                self.budgets.queue_namespace,
                self.job.tenant,
                self.job.id,
                cost_nanos,
            )
        except Exception:
            log.exception(
                "job %s: could not charge %d nano-USD to tenant %r's budget",
                self.job.id,
                cost_nanos,
                self.job.tenant,
            )
