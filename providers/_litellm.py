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

litellm.suppress_debug_info = True
litellm.telemetry = False

__all__ = ["litellm"]
