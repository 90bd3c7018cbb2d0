"""The one place LiteLLM is imported, configured for a worker process.

Importing it is slow and heavy (docs/KNOWN_LIMITS.md), so only worker-side modules import this
one. It turns off LiteLLM's download of the model cost map (offline, no surprise outbound
connection) and its debug banner on every exception, and turns on genq's patches of LiteLLM
(:mod:`providers._litellm_patches`: the stream work only LiteLLM's Router, cost tracking, cache
and logging callbacks read, and each chunk's objects built without re-validating them) on the
LiteLLM release they were tested on: a worker streams every chunk through LiteLLM, so LiteLLM's
own CPU is what bounds a worker process (``bench/workers.py``).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The variable above must be set before these imports.
import litellm
import litellm.exceptions

from providers import _litellm_patches
from providers._lean_streams import provider_reported_usage
from providers.redact import withhold_text

litellm.suppress_debug_info = True
litellm.telemetry = False
# LiteLLM logs request params, and at DEBUG whole request bodies: keep its records, not its text.
withhold_text("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


_litellm_patches.check()

__all__ = [
    "litellm",
    "provider_reported_usage",
]
