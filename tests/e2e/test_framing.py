"""Clickjacking in Chromium (issue 37, item 5): a page of another origin cannot frame the
gateway's pages, and the docs pages still render under their Content-Security-Policy."""

from __future__ import annotations

import html
import http.server
import threading
from collections.abc import Iterator
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from playwright.sync_api import Frame, Page, expect

from tests.e2e.browser import Stack, running_stack
from tests.ports import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"

# Every Content-Security-Policy violation the page reports, kept for the test to read.
VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


@pytest.fixture
def gateway_only(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Stack]:
    """The gateway alone: nothing here runs a generation."""
    with running_stack(redis_url, request.node.name, workers=0) as stack:
        yield stack


@pytest.fixture
def attacker() -> Iterator[str]:
    """A page of another origin (another port on loopback): its ``?frame=<url>`` frames that
    url. A real server: Chromium refuses a loopback frame in a page it holds for public."""

    class AttackerPage(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            victim = html.escape(parse_qs(urlparse(self.path).query)["frame"][0])
            body = (
                "<h1>win a prize</h1>"
                f'<iframe id="victim" src="{victim}" onload="window.__framed = true"></iframe>'
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), AttackerPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def framed(page: Page, attacker: str, url: str) -> Frame:
    """Opens the attacker's page framing ``url``; returns that frame once it loaded (a frame's
    ``load`` fires for a refused page too)."""
    page.goto(f"{attacker}?{urlencode({'frame': url})}")
    page.wait_for_function("window.__framed === true")
    handle = page.locator("#victim").element_handle()
    frame = handle.content_frame() if handle else None
    assert frame is not None
    return frame


@pytest.mark.parametrize("path", ["/web/admin.html", "/admin", "/web/index.html", "/docs"])
def test_framing_another_origin_cannot_load_a_page(
    gateway_only: Stack, attacker: str, page: Page, path: str
) -> None:
    frame = framed(page, attacker, f"{gateway_only.base_url}{path}")
    expect(page.locator("h1")).to_have_text("win a prize")
    # Chromium shows its error page in a frame it refused to load; the page never ran.
    assert frame.url == "chrome-error://chromewebdata/", frame.url
    assert frame.locator("#queues, #prompt, #swagger-ui").count() == 0


@pytest.mark.parametrize(
    ("path", "rendered"),
    [("/docs", ".opblock"), ("/redoc", "[data-section-id]")],
)
def test_framing_docs_render_under_their_policy(
    gateway_only: Stack, page: Page, path: str, rendered: str
) -> None:
    page.add_init_script(VIOLATIONS)
    page.goto(f"{gateway_only.base_url}{path}")
    expect(page.locator(rendered).first).to_be_visible()
    # ReDoc's footer asks its CDN for a logo: the policy blocks it, as it blocks any CDN.
    assert set(page.evaluate("window.__violations")) <= {f"img-src {REDOC_LOGO}"}
