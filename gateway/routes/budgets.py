"""Budgets: operators read and set every tenant's (admin role); a tenant reads its own.

Limits set here are stored in the tenant's budget account and win over
``GENQ_TENANT_BUDGETS``; deleting them brings the settings' back. Changes are audited.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Query

from genq_contract.api_keys import TENANT_PATTERN
from genq_contract.budget_limits import Limits, configured_limits
from genq_contract.money import nanos_to_usd
from genq_services import budget

from ..access.schemas import MAX_REASON
from ..admission.tenant_warnings import unknown_tenant
from ..deps import AdminDep, GatewayDep, PrincipalDep
from ..errors import ERRORS, NotFound
from ..state import Gateway
from .usage_schemas import BudgetLimits, BudgetList, BudgetOut, BudgetSet, Source

router = APIRouter(tags=["budgets"], responses=ERRORS)

Tenant = Annotated[str, Path(pattern=TENANT_PATTERN, description="A tenant")]
AUDIT_QUEUE = "budgets"
"""The audit log's ``queue`` of budget changes (they belong to no queue)."""


async def budget_of(gateway: Gateway, tenant: str) -> BudgetOut:
    now = time.time()
    namespace = gateway.settings.queue_namespace
    account = await budget.read_account(gateway.redis, namespace, tenant, now)
    periods = budget.Periods.at(now)
    limits = account.stored_limits or configured_limits(gateway.settings, tenant)
    source: Source = "admin" if account.stored_limits else "settings" if limits else "none"
    return BudgetOut(
        tenant=tenant,
        daily_usd=limits.daily_usd if limits else None,
        monthly_usd=limits.monthly_usd if limits else None,
        source=source,
        spent_today_usd=nanos_to_usd(account.spent_day_nanos),
        spent_month_usd=nanos_to_usd(account.spent_month_nanos),
        reserved_usd=nanos_to_usd(account.reserved_nanos),
        reservations=account.reservations,
        day_resets_at=periods.day_ends,
        month_resets_at=periods.month_ends,
    )


@router.get("/v1/budgets", response_model=BudgetList)
async def list_budgets(gateway: GatewayDep, _: AdminDep) -> BudgetList:
    """Every tenant with a budget (settings or admin API), by name: limits, spend, reserved."""
    tenants = set(gateway.settings.tenant_budgets) | await budget.known_tenants(
        gateway.redis, gateway.settings.queue_namespace
    )
    return BudgetList(budgets=[await budget_of(gateway, t) for t in sorted(tenants)])


@router.get("/v1/budgets/{tenant}", response_model=BudgetOut)
async def get_budget(tenant: Tenant, gateway: GatewayDep, _: AdminDep) -> BudgetOut:
    """One tenant's budget (``source: none`` when it has none)."""
    return await budget_of(gateway, tenant)


@router.put("/v1/budgets/{tenant}", response_model=BudgetSet)
async def set_budget(
    tenant: Tenant, body: BudgetLimits, gateway: GatewayDep, principal: AdminDep
) -> BudgetSet:
    """Sets the tenant's limits (null: no limit of that kind), over the settings'. Takes
    effect on the next request; generations already accepted keep their reservations.
    ``warnings`` says when no API key acts as the tenant (set all the same)."""
    limits = Limits.from_usd(body.daily_usd, body.monthly_usd)
    await budget.set_limits(gateway.redis, gateway.settings.queue_namespace, tenant, limits)
    await gateway.audit.record(principal.actor, "set_budget", AUDIT_QUEUE, 1, [tenant], body.reason)
    now = await budget_of(gateway, tenant)
    return BudgetSet(**now.model_dump(), warnings=await unknown_tenant(gateway, tenant))


@router.delete("/v1/budgets/{tenant}", response_model=BudgetOut)
async def clear_budget(
    tenant: Tenant,
    gateway: GatewayDep,
    principal: AdminDep,
    reason: Annotated[str | None, Query(max_length=MAX_REASON, description="Why (audit)")] = None,
) -> BudgetOut:
    """Drops the limits set here: the tenant's ``GENQ_TENANT_BUDGETS`` entry applies again
    (or none). 404 when none were set. Spend and reservations are kept."""
    namespace = gateway.settings.queue_namespace
    if not await budget.clear_limits(gateway.redis, namespace, tenant):
        raise NotFound("no budget was set for this tenant through the API")
    await gateway.audit.record(principal.actor, "clear_budget", AUDIT_QUEUE, 1, [tenant], reason)
    return await budget_of(gateway, tenant)


@router.get("/v1/budget", response_model=BudgetOut)
async def own_budget(gateway: GatewayDep, principal: PrincipalDep) -> BudgetOut:
    """The caller's tenant's budget: limits, spend today and this month, reserved."""
    return await budget_of(gateway, principal.tenant)
