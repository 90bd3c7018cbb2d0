"""Keeps credentials out of job errors and request text out of logs.

A job's error is shown to the tenant and on the dashboard: provider messages go through
:func:`redact` (:mod:`genq_contract.redact`, the one definition the gateway's pull route uses
too) before they become one. A message can also quote the prompt, which no pattern
recognises: logs get no provider text at all (see :class:`WithholdText` and ``workers.logs``).
"""

from __future__ import annotations

import logging

from genq_contract.redact import REDACTED, redact

__all__ = ["REDACTED", "WithholdText", "redact", "withhold_text"]


class WithholdText(logging.Filter):
    """Keeps a log record's level, logger and place, and drops its text and traceback.

    For loggers of code that logs request data (LiteLLM logs request params, and at DEBUG whole
    request bodies): no redaction pattern can recognise a prompt, so none of it is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = f" ({record.exc_info[0].__name__})" if record.exc_info and record.exc_info[0] else ""
        record.msg = f"[text withheld] at {record.module}:{record.lineno}{kind}"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def withhold_text(*logger_names: str) -> None:
    """Installs :class:`WithholdText` on these loggers (once each)."""
    for name in logger_names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, WithholdText) for f in logger.filters):
            logger.addFilter(WithholdText())
