"""Liveness, readiness, Prometheus metrics, and the public bits the web pages need."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ..deps import BearerDep, GatewayDep, admin_principal, current_principal
from ..metrics import refresh

router = APIRouter()

READY_TIMEOUT = 2.0


class Status(BaseModel):
    status: str


class PublicConfig(BaseModel):
    dev: bool
    dev_key: str | None = None
    dev_admin_key: str | None = None


@router.get("/healthz", response_model=Status, tags=["health"])
async def healthz() -> Status:
    """The process is up."""
    return Status(status="ok")


@router.get(
    "/readyz",
    response_model=Status,
    tags=["health"],
    responses={503: {"description": "Redis is unreachable"}},
)
async def readyz(gateway: GatewayDep) -> Response:
    """Ready to serve: Redis answers."""
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            await gateway.redis.ping()
    except Exception:
        return JSONResponse({"detail": "redis unreachable"}, status_code=503)
    return JSONResponse({"status": "ready"})


@router.get("/metrics", tags=["health"], response_class=Response)
async def metrics(gateway: GatewayDep, credentials: BearerDep) -> Response:
    """Prometheus text format. Takes an admin key (Bearer) unless ``GENQ_METRICS_PUBLIC=1``:
    it tells queue depths and counts, and each scrape reads Redis."""
    if not gateway.settings.metrics_public:
        await admin_principal(await current_principal(gateway, credentials))
    await refresh(gateway.metrics, gateway.queues, gateway.tails)
    return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4")


@router.get("/v1/config", response_model=PublicConfig, tags=["models"])
async def public_config(gateway: GatewayDep) -> PublicConfig:
    """What the web pages need to know; in dev mode, the well-known dev keys."""
    settings = gateway.settings
    if not settings.dev:
        return PublicConfig(dev=False)
    return PublicConfig(dev=True, dev_key=settings.dev_key, dev_admin_key=settings.dev_admin_key)
