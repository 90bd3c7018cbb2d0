"""No process logs a prompt (issue 17, finding 5): the gateway and a worker run as real
processes at their most talkative log levels, fed a secret-bearing prompt every way we know
to make one of them log it, and then their logs are searched for it."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.e2e.browser import DEV_KEY, fake_openai_env, running_stack
from tests.fakes.openai_server import FakeOpenAI, Reply

SECRET = "zebra-7731-never-log-me"
MODEL = "openai/gpt-4o-mini"


def test_logs_never_carry_the_prompt(redis_url: str, request: pytest.FixtureRequest) -> None:
    with FakeOpenAI() as fake:
        # The provider quotes the prompt back: terminally (400), then retryably (500).
        fake.plan(Reply.error(400, f"Invalid 'messages[0].content': '{SECRET}' is refused"))
        fake.plan(Reply.error(500, f"upstream choked on '{SECRET}'"))
        env = {
            **fake_openai_env(fake.base_url, "sk-e2e-fake-key-0123"),
            "GENQ_LOG_LEVEL": "DEBUG",
            "GENQ_BACKOFF": "0.05",
            "GENQ_MAX_BACKOFF": "0.1",
        }
        with running_stack(redis_url, request.node.name, gateway_log_level="debug", **env) as stack:
            refused = stack.submit({"model": MODEL, "prompt": f"tell me {SECRET}"})
            failed = stack.result(refused["id"])  # before the next job: the plan is in order
            assert failed["status"] == "failed"
            assert SECRET in failed["error"]  # the tenant sees what the provider said
            retried = stack.submit(
                {"model": MODEL, "prompt": f"again {SECRET}", "params": {"user": SECRET}}
            )
            assert stack.result(retried["id"])["status"] == "completed"
            assert stack.record(retried["id"])["attempt"] == 2

            with httpx.Client(
                base_url=stack.base_url, headers={"Authorization": f"Bearer {DEV_KEY}"}
            ) as client:
                # Text no store can hold (a lone surrogate): once a 500 whose message uvicorn
                # logged; and a body that fails validation.
                message = {"role": "user", "content": f"{SECRET} LONE"}
                unstorable = json.dumps({"model": MODEL, "messages": [message]})
                unstorable = unstorable.replace("LONE", "\\udfff")
                answer = client.post(
                    "/v1/generations",
                    content=unstorable,
                    headers={"Content-Type": "application/json"},
                )
                assert answer.status_code == 422
                invalid = client.post(
                    "/v1/generations", json={"model": MODEL, "prompt": SECRET, "priority": SECRET}
                )
                assert invalid.status_code == 422
                assert SECRET not in invalid.text
            logs = {p.name: p.log_path.read_text() for p in [stack.gateway, *stack.workers] if p}

    assert f"job {refused['id']} attempt 1 failed: TerminalJobError" in logs["worker1"]
    assert "(HTTP 400)" in logs["worker1"]
    assert "POST /v1/generations" in logs["gateway"], "the access log was not written"
    for name, text in logs.items():
        assert SECRET not in text, f"the {name} log holds the prompt"
