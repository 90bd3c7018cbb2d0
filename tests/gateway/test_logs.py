"""Prompts, API keys and watch tokens never reach the logs, even on error paths."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from tests.gateway.conftest import KEY_ALPHA, LiveGateway, Script, client_for, make_settings

PROMPT = "my-secret-prompt-4d7c"


CLIENT_SIDE = ("httpx", "httpcore")
"""The test's own HTTP client logs the URLs it requests; only the server's logs count."""


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(CLIENT_SIDE):
            self.lines.append(self.format(record))


@contextlib.contextmanager
def logged() -> Iterator[Collect]:
    """Collects every record; enter it after uvicorn configured its loggers (it replaces
    their handlers)."""
    handler = Collect()
    handler.setFormatter(logging.Formatter("%(name)s %(message)s %(exc_info)s"))
    names = ["", "uvicorn", "uvicorn.access", "uvicorn.error", "gateway", "genq", "fastapi"]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)


async def test_logs_hold_no_prompt_key_or_token(
    redis_url: str, prefix: str, script: Script
) -> None:
    settings = make_settings(redis_url, prefix, tenant_rate=0.001, tenant_burst=1)
    live = LiveGateway(settings, log_level="debug", access_log=True)
    with live, logged() as collected:
        async with client_for(live, KEY_ALPHA) as alpha, client_for(live, None) as anon:
            body = {"model": "demo/fast", "prompt": PROMPT}
            created = (await alpha.post("/v1/generations", json=body)).json()
            token = created["watch_token"]
            job = created["id"]
            await anon.get(f"/v1/generations/{job}/events", params={"token": token})
            await anon.post(f"/v1/generations/{job}/cancel", params={"token": token})
            await anon.get(f"/v1/generations/{job}/events", params={"token": token + "x"})
            await alpha.post("/v1/generations", json=body)  # refused: rate limit
            await alpha.post("/v1/generations", json={**body, "priority": "high"})  # 422
            await anon.get("/v1/generations", headers={"Authorization": f"Bearer {KEY_ALPHA}x"})

    text = "\n".join(collected.lines)
    assert "/v1/generations" in text, "the access log was not captured"
    for secret in (PROMPT, KEY_ALPHA, token, token.split(".")[1]):
        assert secret not in text
