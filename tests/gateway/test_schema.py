"""Schemathesis over the OpenAPI schema of a live gateway: no input makes it answer 5xx.

One pytest item per API operation, each with its own node id (``[POST /v1/generations]``):
schemathesis' own ``parametrize()`` gives every operation the same node id, and pytest-xdist
then runs one of them and drops the rest without a word.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.schemas import APIOperation

from gateway.app import create_app
from tests.gateway.conftest import KEY_ADMIN, LiveGateway, make_settings

# The schema needs no server: the app describes itself. Calls go to a live gateway.
schema = schemathesis.openapi.from_dict(
    create_app(make_settings("redis://127.0.0.1:1", "schema")).openapi()
)
OPERATIONS = [result.ok() for result in schema.get_all_operations()]


@pytest.fixture(scope="module")
def schema_gateway(redis_url: str) -> Iterator[LiveGateway]:
    namespace = f"t-schema-{uuid.uuid4().hex[:8]}"
    # No worker runs here: a valid POST /v1/ui/chat (or any stream) would stay open until the
    # call's timeout; streams end after a second instead, their whole answer checked.
    settings = make_settings(redis_url, namespace, max_wait=0.5, sse_max_duration=1.0)
    with LiveGateway(settings) as live:
        yield live


def test_schema_every_operation_is_fuzzed() -> None:
    """The items below cover the whole schema (a route added later is fuzzed too)."""
    paths = create_app(make_settings("redis://127.0.0.1:1", "schema")).openapi()["paths"]
    expected = {f"{method.upper()} {path}" for path, item in paths.items() for method in item}
    assert {operation.label for operation in OPERATIONS} == expected


@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_schema_no_input_causes_a_server_error(
    operation: APIOperation, schema_gateway: LiveGateway
) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    def fuzz(case: schemathesis.Case) -> None:
        case.call_and_validate(
            base_url=schema_gateway.url,
            headers={"Authorization": f"Bearer {KEY_ADMIN}"},
            checks=[schemathesis.checks.not_a_server_error],
            timeout=10,
        )

    fuzz()
