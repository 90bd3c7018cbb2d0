"""Revoking an API key (admin role): the key stops working, and so does everything it
holds: its watch tokens at once, its waiting, scheduled and running generations now."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from ..access import revocation
from ..access.schemas import AccessChange, KeyRevoked
from ..deps import AdminDep, GatewayDep
from ..errors import ERRORS, BadRequest
from .tenants import access_of

router = APIRouter(tags=["access"], responses=ERRORS)

DigestPrefix = Annotated[
    str,
    Path(
        min_length=8,
        max_length=71,
        description="8 to 64 hex digits of the key's SHA-256 digest (`genq keys list`), "
        "optionally tagged `sha256:`",
    ),
]


@router.post("/v1/keys/{digest_prefix}/revoke", response_model=KeyRevoked)
async def revoke_key(
    digest_prefix: DigestPrefix,
    gateway: GatewayDep,
    principal: AdminDep,
    body: AccessChange | None = None,
) -> KeyRevoked:
    """Revokes the key(s) whose digest starts with ``digest_prefix``: removed from the key
    store, and their key id refused for good (how a key of GENQ_API_KEYS is revoked: remove
    it from the settings too). Other gateway processes refuse it within
    GENQ_KEY_CACHE_SECONDS; its watch tokens fail at once; its waiting, scheduled and running
    generations are cancelled now (``jobs_stopped``)."""
    try:
        revoked = await revocation.revoke_key(
            gateway.api_key_store,
            access_of(gateway),
            gateway.queues,
            digest_prefix,
            configured=gateway.settings.grants(),
        )
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    gateway.auth.forget()
    reason = body.reason if body else None
    await revocation.record(
        gateway.audit, principal.actor, "revoke_key", revoked.key_id, revoked.stopped, reason
    )
    return KeyRevoked(
        key_id=revoked.key_id,
        removed=len(revoked.removed),
        configured=revoked.configured,
        jobs_stopped=revoked.stopped.count,
        stopped=revoked.stopped.jobs,
    )
