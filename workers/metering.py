"""Usage, cost and budget holds of one generation attempt, for the generation handler.

Every attempt that reaches the provider call meters its usage exactly once, whatever its
outcome (:meth:`genq.ActiveJob.meter`; the settle of the attempt delivers it)::

    async with metering.attempt(job, request) as meter:
        meter.sending()
        meter.start_hold()          # a tenant with a budget: its most this attempt can cost
        async for delta in stream:  # the provider call, beside the hold
            if meter.holding:
                await meter.held(answered=True)  # a refused hold: TerminalJobError
            meter.observe(delta)
            ...                     # pass the delta on
            meter.check_spend()     # past the hold plus the margin: BudgetOverrun
        await meter.held()          # a stream without a delta

- The usage is the provider's report when it sent one (with cached prompt tokens where
  LiteLLM reports them), else LiteLLM's token count of the prompt and of the text streamed,
  marked ``estimated``: a cancel (Stop cancels the handler's task: the meter runs in its
  cancel path, before the task ends), a dropped or silent stream, the demo provider.
- The prompt counts once the request went out, unless the provider refused it: an error
  before any output (a 429, a 5xx, a 400, a refused connection) is not billed by providers.
- The cost is the usage at the model's price (:mod:`providers.costs`).
- Budgets (:mod:`genq_services.budget`): for a tenant with one, :meth:`AttemptMeter.start_hold`
  reserves the attempt's maximum cost (adopting the reservation the gateway made at enqueue)
  while the provider call goes out: the Redis reads of the hold are off the first token's
  path. :meth:`AttemptMeter.held` must pass before the first delta is passed on, so a refused
  hold fails the job terminally with nothing of the stream passed on, the provider request
  already sent (and closed with the stream). After the attempt, completed or not, its cost is
  charged in place of the reservation; a hold still under way when the attempt ends (a cancel,
  a provider error) is waited for first, shielded, so what it reserved is charged too.
- Overrun: the hold assumes the provider stops at ``max_tokens``. One that goes on would spend
  past it, so while a held attempt streams, :meth:`AttemptMeter.check_spend` (after each
  delta) raises :class:`BudgetOverrun` once its spend so far passes the hold plus a margin
  (``GENQ_BUDGET_OVERRUN``, 10%): the handler's stream closes (the provider connection with
  it) and the job fails, charged what it spent. An attempt without a hold (no budget) has no
  ceiling. The spend is the provider's report when one came, else the estimate above; the
  tokenizer runs only once the streamed bytes could have reached the ceiling (a token is at
  least one byte), not on every delta.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import types
from dataclasses import dataclass, field

from genq import ActiveJob, TerminalJobError
from genq_contract.budget_limits import BudgetExceeded
from genq_contract.money import NANOS_PER_USD, nanos_to_usd
from genq_contract.payload import GenerationPayload
from genq_contract.settings import CommonSettings
from genq_contract.spend import Price, Usage, max_cost_nanos
from genq_services import budget
from providers.costs import PriceBook, estimate_usage, reported_usage, with_cost
from providers.litellm_adapter import Delta

log = logging.getLogger("workers")

DEFAULT_OVERRUN = 0.10
"""How far past its hold a running attempt may spend (a fraction), ``GENQ_BUDGET_OVERRUN``."""


class BudgetOverrun(TerminalJobError):
    """A running attempt spent past its budget hold plus the margin, and was stopped. Terminal:
    another attempt would overrun the same way."""


@dataclass
class Metering:
    """Prices and budgets, shared by the generation handlers of a worker process."""

    prices: PriceBook = field(default_factory=PriceBook)
    budgets: CommonSettings | None = None
    """The settings that give tenants' budgets (``GENQ_TENANT_BUDGETS``, and the namespace
    where operators' limits live); None: no budget is held or charged."""
    overrun: float = DEFAULT_OVERRUN
    """``GENQ_BUDGET_OVERRUN``: a held attempt is stopped once it spent its hold times
    ``1 + overrun``."""

    def attempt(self, job: ActiveJob, request: GenerationPayload) -> AttemptMeter:
        """The meter of ``job``'s current attempt at ``request``; use it as a context manager."""
        price = self.prices.price(request.model)
        return AttemptMeter(job, request, price, self.budgets, overrun=self.overrun)


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
    overrun: float = DEFAULT_OVERRUN
    held_nanos: int | None = None
    """What the budget holds for this attempt (None: no hold, no ceiling)."""
    _parts: list[str] = field(default_factory=list, repr=False)
    _beside_text: list[str] = field(default_factory=list, repr=False)
    """Reasoning and tool-call arguments streamed: completion tokens too, not text."""
    _held: bool = False
    _ceiling: int | None = field(default=None, repr=False)
    _streamed_bytes: int = field(default=0, repr=False)
    _check_at: float = field(default=0, repr=False)
    """The streamed bytes at which :meth:`check_spend` counts again."""
    _prompt_tokens: int | None = field(default=None, repr=False)
    _finished: bool = field(default=False, repr=False)
    _holding: asyncio.Task[None] | None = field(default=None, repr=False)
    """The hold under way, until :meth:`held` (or leaving the block) saw its outcome."""

    @property
    def text(self) -> str:
        """The text streamed so far."""
        return "".join(self._parts)

    @property
    def streamed(self) -> str:
        """Everything the completion streamed so far, as the token count takes it: the text,
        the reasoning and the tool calls' arguments."""
        return self.text + "".join(self._beside_text)

    @property
    def holding(self) -> bool:
        """A hold was started and :meth:`held` has not given its outcome yet."""
        return self._holding is not None

    def start_hold(self) -> None:
        """Starts holding the attempt's most it can cost when the job's tenant has a budget, in
        a task of its own, so the provider call goes out meanwhile; :meth:`held` gives the
        outcome."""
        if self.budgets is None or not self.job.tenant:
            return
        self._holding = asyncio.create_task(self._hold(), name=f"genq-hold-{self.job.id}")

    async def held(self, answered: bool = False) -> None:
        """Waits for the hold :meth:`start_hold` started (at once when none is under way); a
        refused hold is a :class:`genq.TerminalJobError` (a budget does not grow by retrying
        soon), raised once. ``answered``: the provider's answer has begun, so a refused
        attempt costs its prompt (providers bill an answer they began)."""
        task = self._holding
        if task is None:
            return
        self.answered = self.answered or answered
        try:
            # Shielded: a cancel of the attempt leaves the hold running, for leaving the block
            # to wait for and charge (a reservation made must not stay uncharged).
            await asyncio.shield(task)
        finally:
            if task.done():
                self._holding = None

    async def _hold(self) -> None:
        assert self.budgets is not None
        tenant = self.job.tenant
        redis = self.job.queue.redis
        limits = await budget.limits_for(redis, self.budgets, tenant)
        if limits is None:
            return
        amount = max_cost_nanos(self.request, self.price)
        namespace = self.budgets.queue_namespace
        try:
            held = await budget.hold(redis, namespace, tenant, self.job.id, amount, limits)
        except BudgetExceeded as exc:
            raise TerminalJobError(f"budget exceeded: {exc}") from exc
        self._held = True
        self.held_nanos = held.amount_nanos
        self._ceiling = math.floor(held.amount_nanos * (1 + self.overrun))

    def sending(self) -> None:
        """Call right before the provider call."""
        self.sent = True

    def observe(self, delta: Delta) -> None:
        """Call with each delta of the provider's stream."""
        self.answered = True
        if delta.text:
            self._parts.append(delta.text)
            if self._ceiling is not None:
                self._streamed_bytes += len(delta.text.encode())
        if delta.reasoning or delta.tool_calls:
            self._observe_beside_text(delta)
        if delta.usage is not None:
            self.reported = delta.usage
            self._check_at = 0
        if delta.finish_reason:
            self._finished = True

    def _observe_beside_text(self, delta: Delta) -> None:
        added = [delta.reasoning, *(piece.arguments for piece in delta.tool_calls)]
        self._beside_text.extend(added)
        if self._ceiling is not None:
            self._streamed_bytes += sum(len(piece.encode()) for piece in added)

    def check_spend(self) -> None:
        """Call after each delta was passed on: raises :class:`BudgetOverrun` once a held
        attempt, still running, spent more than its hold plus the margin."""
        if self._ceiling is None or self._finished or self._streamed_bytes < self._check_at:
            return
        spent = self._spent_nanos()
        if spent > self._ceiling:
            assert self.held_nanos is not None
            raise BudgetOverrun(
                f"budget overrun: stopped after spending ${nanos_to_usd(spent):.6f}, "
                f"past the ${nanos_to_usd(self.held_nanos):.6f} the tenant's budget "
                f"holds for it plus {self.overrun * 100:g}% (GENQ_BUDGET_OVERRUN): the provider "
                "went on past max_tokens; charged what it spent"
            )
        per_token = self.price.output_per_token * NANOS_PER_USD
        if per_token <= 0:  # streamed text costs nothing: only a provider's report adds
            self._check_at = math.inf
            return
        # The text must grow by this many bytes before the spend can pass the ceiling (a
        # token is at least one byte): the tokenizer is not run again before.
        room = math.floor((self._ceiling - spent) / per_token)
        self._check_at = self._streamed_bytes + max(1, room)

    def _spent_nanos(self) -> int:
        """What the attempt has cost so far, as :meth:`meter` would meter it now."""
        model = self.request.model
        if self.reported is not None:
            usage = reported_usage(self.reported)
        else:
            if self._prompt_tokens is None:
                self._prompt_tokens = estimate_usage(model, self.request.messages, "").prompt_tokens
            streamed = estimate_usage(model, [], self.streamed, count_prompt=False)
            usage = Usage(self._prompt_tokens, streamed.completion_tokens)
        return with_cost(usage, self.price).cost_nanos

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
            usage = estimate_usage(model, self.request.messages, self.streamed)
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
        if self._holding is not None or self._held:
            # Shielded: a second cancel must not lose the charge (the reservation would stay
            # until the gateway's sweep releases it, uncharged).
            await asyncio.shield(self._settle_hold(usage.cost_nanos))

    async def _settle_hold(self, cost_nanos: int) -> None:
        """Waits for a hold still under way (the attempt ended before :meth:`held` saw it),
        then charges ``cost_nanos`` in place of what was held."""
        if self._holding is not None:
            task, self._holding = self._holding, None
            with contextlib.suppress(Exception):  # refused or failed: nothing to charge
                await task
        if self._held:
            self._held = False
            await self._charge(cost_nanos)

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
