"""What the commands that talk to Redis directly share (``genq keys``, ``genq tenants``).

They need only Redis, the namespace and the routing (to find the provider queues), so they
read the common settings rather than the full gateway settings (which demand a secret). Any URL
the servers take works here too, ``redis+cluster://`` included (``genq.connect``). What they
change is audited like the admin API's actions, with the operating system user as the actor.
"""

from __future__ import annotations

import getpass
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from gateway.access.audit import Audit
from gateway.access.auth import ApiKeyStore
from gateway.queues import Queues
from genq import connect
from genq_contract.keys import GatewayKeys
from genq_contract.settings import CommonSettings
from genq_services.access import Access


@dataclass(frozen=True)
class Direct:
    redis: Any
    store: ApiKeyStore
    access: Access
    queues: Queues
    audit: Audit

    @property
    def actor(self) -> str:
        """Who the audit log names: the CLI, and the operating system user running it."""
        try:
            return f"genq CLI ({getpass.getuser()})"
        except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
            return "genq CLI"


@asynccontextmanager
async def direct() -> AsyncIterator[Direct]:
    settings = CommonSettings()
    redis = connect(settings.redis_url)
    keys = GatewayKeys(settings.queue_namespace)
    try:
        yield Direct(
            redis=redis,
            store=ApiKeyStore(redis, keys.api_keys),
            access=Access(redis, settings.queue_namespace),
            queues=Queues(
                redis,
                settings.routing(),
                lane_options=settings.lane_options(),
                **settings.queue_options(),
            ),
            audit=Audit(redis, keys.audit),
        )
    finally:
        await redis.aclose()
