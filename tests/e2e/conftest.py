"""Fixtures of the browser tests (defined in ``tests/e2e/browser.py``)."""

from tests.e2e.browser import browser, page, screenshot, stack

__all__ = ["browser", "page", "screenshot", "stack"]
