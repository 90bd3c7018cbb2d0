"""Schemathesis over the OpenAPI schema of a live gateway: no input makes it answer 5xx."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from gateway.app import create_app
from tests.gateway.conftest import KEY_ADMIN, LiveGateway, make_settings

# The schema needs no server: the app describes itself. Calls go to a live gateway.
schema = schemathesis.openapi.from_dict(
    create_app(make_settings("redis://127.0.0.1:1", "schema")).openapi()
)


@pytest.fixture(scope="module")
def schema_gateway(redis_url: str) -> Iterator[LiveGateway]:
    namespace = f"t-schema-{uuid.uuid4().hex[:8]}"
    with LiveGateway(make_settings(redis_url, namespace, max_wait=0.5)) as live:
        yield live


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_schema_no_input_causes_a_server_error(
    case: schemathesis.Case, schema_gateway: LiveGateway
) -> None:
    case.call_and_validate(
        base_url=schema_gateway.url,
        headers={"Authorization": f"Bearer {KEY_ADMIN}"},
        checks=[schemathesis.checks.not_a_server_error],
        timeout=10,
    )
