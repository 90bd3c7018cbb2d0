"""The worker process's log: job ids, error types and status codes, never request text.

A provider's error message can quote the request (a 400 that repeats the prompt), and LiteLLM's
own records carry request params (see ``providers._litellm``, which withholds their text). The
job's error, redacted of credentials, stays in its record for the tenant and the dashboard;
the log says which job failed how, so the two can be matched by id.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("workers.jobs")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str) -> None:
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)


def log_failure(job: Any, exc: BaseException) -> None:
    """A failed attempt (``on_error`` of the queue's workers), without the error's text."""
    cause = exc.__cause__ or exc.__context__
    kinds = [type(exc).__name__]
    if cause is not None and cause is not exc:
        kinds.append(type(cause).__name__)
    status = getattr(cause, "status_code", None) or getattr(exc, "status_code", None)
    retry_after = getattr(exc, "retry_after", None)
    log.warning(
        "job %s attempt %s failed: %s%s%s",
        getattr(job, "id", "?"),
        getattr(job, "attempt", "?"),
        " from ".join(kinds),
        f" (HTTP {status})" if isinstance(status, int) else "",
        f", retry after {retry_after:g}s" if isinstance(retry_after, int | float) else "",
    )
