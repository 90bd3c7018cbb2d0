"""The one place LiteLLM is imported, configured for a worker process.

Importing it costs seconds and ~200 MB, so only worker-side modules import this one. It turns
off LiteLLM's download of the model cost map (offline, no surprise outbound connection) and its
debug banner on every exception.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The variable above must be set before this import.
import litellm
import litellm.exceptions

from providers.redact import withhold_text

litellm.suppress_debug_info = True
litellm.telemetry = False
# LiteLLM logs request params, and at DEBUG whole request bodies: keep its records, not its text.
withhold_text("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")

__all__ = ["litellm"]
