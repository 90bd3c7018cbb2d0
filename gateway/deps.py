"""What routes depend on: the gateway's process state and the caller's identity.

Identity comes from ``Authorization: Bearer <api key>``; on the events and cancel routes a
watch token (``?token=``) works too, since EventSource cannot send headers.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import APIKeyQuery, HTTPAuthorizationCredentials, HTTPBearer

from .access.auth import Principal
from .errors import Forbidden, Unauthorized
from .state import Gateway


async def get_gateway(request: Request) -> Gateway:
    # async: FastAPI runs a plain function dependency in its thread pool, a thread hop per
    # request for an attribute read
    gateway: Gateway = request.app.state.gateway
    return gateway


GatewayDep = Annotated[Gateway, Depends(get_gateway)]

_bearer = HTTPBearer(auto_error=False, description="An API key")
_watch_token = APIKeyQuery(
    name="token",
    auto_error=False,
    description="A watch_token from POST /v1/generations (for EventSource, which cannot send "
    "headers); bound to one generation and short-lived",
)
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
JobId = Annotated[str, Path(min_length=1, max_length=200, description="A generation id")]


async def any_principal(gateway: GatewayDep, credentials: BearerDep) -> Principal:
    """The caller, worker keys included: only the pull routes (``queue_puller``) take it."""
    if credentials is None:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    return await gateway.auth.principal(credentials.credentials)


def refuse_worker(principal: Principal) -> Principal:
    """Worker keys pull and settle jobs of their queues (``/v1/queues/{name}/pull`` and the
    job routes under it) and nothing else: no generations, no OpenAI routes, no operations."""
    if principal.worker:
        raise Forbidden("a worker key may only pull and settle jobs of its queues")
    return principal


async def current_principal(gateway: GatewayDep, credentials: BearerDep) -> Principal:
    return refuse_worker(await any_principal(gateway, credentials))


async def queue_puller(
    name: Annotated[str, Path(min_length=1, max_length=100, description="A queue name")],
    principal: Annotated[Principal, Depends(any_principal)],
) -> Principal:
    """A caller that may pull from queue ``name``: an admin key, or a worker key naming it."""
    if principal.admin or (principal.queues is not None and name in principal.queues):
        return principal
    if principal.worker:
        raise Forbidden(f"this worker key may not pull from queue {name!r}")
    raise Forbidden("pulling jobs takes a worker key for this queue (or an admin key)")


async def admin_principal(
    principal: Annotated[Principal, Depends(current_principal)],
) -> Principal:
    if not principal.admin:
        raise Forbidden("this API key lacks the admin role")
    return principal


async def job_tenant(
    gateway: GatewayDep,
    credentials: BearerDep,
    job_id: JobId,
    token: Annotated[str | None, Depends(_watch_token)] = None,
) -> str:
    """The caller's tenant on a route that also takes a watch token for the job in the path."""
    if credentials is not None:
        return refuse_worker(await gateway.auth.principal(credentials.credentials)).tenant
    if token:
        return await gateway.tokens.verify_allowed(token, job_id)
    raise Unauthorized("missing credentials: send 'Authorization: Bearer <key>' or ?token=")


async def gateway_and_caller(request: Request) -> tuple[Gateway, Principal]:
    """``GatewayDep`` and ``PrincipalDep`` of ``request``, found as FastAPI would, for a
    handler it does not solve (``gateway._fast_path``)."""
    gateway = await get_gateway(request)
    return gateway, await current_principal(gateway, await _bearer(request))


PrincipalDep = Annotated[Principal, Depends(current_principal)]
AdminDep = Annotated[Principal, Depends(admin_principal)]
PullerDep = Annotated[Principal, Depends(queue_puller)]
JobTenantDep = Annotated[str, Depends(job_tenant)]
