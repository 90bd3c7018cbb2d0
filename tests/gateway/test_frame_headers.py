"""Clickjacking (issue 37, item 5): every page the gateway serves, under any path, forbids
framing; the docs pages keep a policy that lets them render (tests/e2e/test_framing.py renders
them in Chromium)."""

from __future__ import annotations

import base64
import hashlib
import re

import httpx
import pytest

from gateway.middleware import PAGE_CSP

PAGES = ["/", "/admin", "/web/index.html", "/web/admin.html"]
DOCS = ["/docs", "/redoc"]


@pytest.mark.parametrize("path", PAGES + DOCS)
async def test_security_headers_every_page_forbids_framing(
    anon: httpx.AsyncClient, path: str
) -> None:
    response = await anon.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    if path in PAGES:
        assert response.headers["content-security-policy"] == PAGE_CSP


@pytest.mark.parametrize("path", DOCS)
async def test_security_headers_docs_allow_only_their_own_inline_script(
    anon: httpx.AsyncClient, path: str
) -> None:
    response = await anon.get(path)
    policy = dict(
        directive.strip().split(" ", 1)
        for directive in response.headers["content-security-policy"].split(";")
    )
    inline = re.findall(r"<script>(.*?)</script>", response.text, re.DOTALL)
    hashes = {
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
        for s in inline
    }
    assert set(policy["script-src"].split()) == {"'self'", *hashes}
    assert policy["connect-src"] == "'self'"
    assert policy["object-src"] == "'none'"


async def test_security_headers_api_answers_deny_framing_too(anon: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/openapi.json", "/web/app.js", "/web/missing.html"):
        headers = (await anon.get(path)).headers
        assert headers["x-frame-options"] == "DENY", path
        assert headers["x-content-type-options"] == "nosniff", path
