"""The one place LiteLLM is imported, configured for a worker process.

Importing it costs seconds and ~200 MB, so only worker-side modules import this one. It turns
off LiteLLM's download of the model cost map (offline, no surprise outbound connection) and its
debug banner on every exception, and the stream work that only LiteLLM's Router, cost tracking,
cache and logging callbacks read (:mod:`providers._lean_streams`), and builds each chunk's
objects without re-validating them (:mod:`providers._lean_chunks`): a worker streams every
chunk through LiteLLM, so LiteLLM's own CPU is what bounds a worker process
(``bench/workers.py``).
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import version
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The variable above must be set before these imports.
import litellm
import litellm.exceptions

from providers import _lean_streams
from providers._lean_chunks import LeanChunks
from providers._lean_streams import provider_reported_usage
from providers.redact import withhold_text

PINNED_VERSION = "1.110.2"
"""The LiteLLM release the stream switches were written against (pyproject.toml pins it); on
any other release they stay off, since they replace private methods."""

log = logging.getLogger("providers")

litellm.suppress_debug_info = True
litellm.telemetry = False
# LiteLLM logs request params, and at DEBUG whole request bodies: keep its records, not its text.
withhold_text("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def _switches() -> list[tuple[type, str, Any, Any]]:
    """(class, method name, LiteLLM's method, its replacement) for every switch."""
    if version("litellm") != PINNED_VERSION:
        log.warning(
            "LiteLLM %s is not %s: its per-chunk bookkeeping stays on (slower streams)",
            version("litellm"),
            PINNED_VERSION,
        )
        return []
    replaced = _lean_streams.replacements() + LeanChunks.build().replacements()
    return [
        (owner, name, owner.__dict__.get(name, _INHERITED), new) for owner, name, new in replaced
    ]


_INHERITED = object()
"""The class had no method of its own by that name (it inherits pydantic's): off, none again."""


_SWITCHES = _switches()

LEAN_STREAMS = bool(_SWITCHES)
"""True when the stream switches are available (tests assert it on the pinned release)."""


def set_lean_streams(on: bool) -> bool:
    """Turns the stream switches on (as importing this module does) or off (LiteLLM's own
    methods, e.g. for a benchmark's reference run), for the whole process; returns whether
    they are on now (never on another release than the pinned one)."""
    for owner, name, original, replacement in _SWITCHES:
        if on:
            setattr(owner, name, replacement)
        elif original is _INHERITED:
            if name in owner.__dict__:
                delattr(owner, name)
        else:
            setattr(owner, name, original)
    return on and LEAN_STREAMS


set_lean_streams(True)

__all__ = [
    "LEAN_STREAMS",
    "PINNED_VERSION",
    "litellm",
    "provider_reported_usage",
    "set_lean_streams",
]
