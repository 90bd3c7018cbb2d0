"""The ASGI app: ``create_app()`` reads ``Settings`` from the environment (``GENQ_*``).

The lifespan opens one Redis connection pool and one shared tail per provider queue. Nothing
here imports LiteLLM (a test checks), so the gateway starts fast.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from .errors import install_error_handlers
from .middleware import BodyLimit, CatchAll, GatewayApp, SecurityHeaders, redact_access_logs
from .openai import batches, chat, files, models, responses, webhooks
from .openai.batch_runner import BatchRunner
from .routes import (
    alerts,
    api_keys,
    budgets,
    events,
    generations,
    health,
    job_actions,
    jobs,
    queues,
    tenants,
    usage,
)
from .routes import pull as pull_routes
from .routes.docs import mount_docs
from .routes.web import mount_web
from .settings import Settings
from .state import Gateway
from .telemetry import install as install_telemetry
from .ui_chat import routes as ui_chat

API_DESCRIPTION = """\
Durable AI generations: enqueue, stream over resumable SSE, cancel, wait for the result.

Authenticate with `Authorization: Bearer <API key>`. The events and cancel routes also take the
`watch_token` returned at enqueue as `?token=` (EventSource cannot send headers). Another
tenant's generation answers 404. Errors are `{"detail": ...}`.
"""


GC_THRESHOLD = (50_000, 20, 100)
UPLOAD_FRAMING = 64 * 1024
"""Bytes of multipart framing (boundaries, the purpose field) allowed beyond a file's cap."""


def tune_gc() -> None:
    """Fewer, cheaper garbage collections for a process holding thousands of streams.

    Every viewer keeps a few dozen long-lived objects (connection, task, generator frames), and
    with the default thresholds the collector walks them all again and again, which costs CPU
    and puts pauses in the delivery delay (what that cost in ``bench/fanout.py``:
    docs/KNOWN_LIMITS.md). The startup heap is frozen (never scanned again) and young
    collections run far less often (``GC_THRESHOLD``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The gateway app; raises at once when the settings are incomplete (no secret...)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.gc_tuning:
            tune_gc()
        gateway = await Gateway.open(settings)
        app.state.gateway = gateway
        runner = BatchRunner(gateway)
        runner.start()
        app.state.batch_runner = runner
        try:
            yield
        finally:
            await runner.stop()
            await gateway.close()

    app = GatewayApp(
        title="genq gateway",
        version="0.1.0",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load their scripts from a CDN: see routes/docs.py
        redoc_url=None,
    )
    install_error_handlers(app)
    # The routes a generation's first token waits on come first: a request is matched against
    # the routes in the order they were included, at a few microseconds each.
    app.include_router(generations.router)
    app.include_router(events.router)
    app.include_router(chat.router)
    app.include_router(responses.router)
    app.include_router(queues.router)
    app.include_router(jobs.router)
    app.include_router(job_actions.router)
    app.include_router(budgets.router)
    app.include_router(tenants.router)
    app.include_router(api_keys.router)
    app.include_router(usage.router)
    app.include_router(alerts.router)
    app.include_router(health.router)
    app.include_router(models.router)
    app.include_router(files.router)
    app.include_router(batches.router)
    app.include_router(batches.admin_router)
    app.include_router(webhooks.router)
    app.include_router(webhooks.admin_router)
    app.include_router(ui_chat.router)
    app.include_router(pull_routes.router)
    mount_web(app, settings.resolved_web_dir())
    if settings.docs:
        mount_docs(app)
    app.add_middleware(
        BodyLimit,
        limit=settings.max_body_bytes,
        # the multipart framing around the file: the route checks the file itself
        uploads={"/v1/files": settings.max_file_bytes + UPLOAD_FRAMING},
    )
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
            expose_headers=["Retry-After", "Location"],
            max_age=600,
        )
    app.add_middleware(SecurityHeaders)
    app.add_middleware(CatchAll)  # outermost: also catches what the middleware above raise
    redact_access_logs()
    install_telemetry(app, settings.log_format)
    return app
