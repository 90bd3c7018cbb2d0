"""Request and response bodies of the access routes (admin role): revoking API keys and
disabling tenants (``routes/api_keys.py``, ``routes/tenants.py``); and the operator's
``reason``, which the audit log keeps for every route that acts for an operator."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MAX_REASON = 500
Reason = Annotated[
    str | None,
    Field(max_length=MAX_REASON, description="Why: kept in the audit log (GET /v1/audit)"),
]
"""An operator's note on an action: every route that acts for an operator takes one."""


class AccessChange(BaseModel):
    """The optional body of a revocation or a tenant switch."""

    model_config = ConfigDict(extra="forbid")

    reason: Reason = None


class StoppedJobs(BaseModel):
    jobs_stopped: int = Field(
        description="Waiting, scheduled and running generations cancelled by this call"
    )
    stopped: dict[str, list[str]] = Field(
        default={}, description="The cancelled generations' ids, per queue"
    )


class KeyRevoked(StoppedJobs):
    key_id: str = Field(description="The revoked key id (first 8 hex digits of its digest)")
    removed: int = Field(description="Keys removed from the key store (genq keys)")
    configured: bool = Field(
        description="A key of GENQ_API_KEYS matched: refused by its id from now on; remove it "
        "from the settings too"
    )


class TenantChanged(StoppedJobs):
    tenant: str
    disabled: bool
    changed: bool = Field(description="False when the tenant already was in that state")


class TenantOut(BaseModel):
    tenant: str
    disabled: bool
    keys: int = Field(description="API keys of the tenant (key store and GENQ_API_KEYS)")


class TenantList(BaseModel):
    tenants: list[TenantOut] = Field(
        description="Every tenant with an API key or disabled, by name"
    )
