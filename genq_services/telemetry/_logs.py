"""JSON log lines (``GENQ_LOG_FORMAT=json``) that carry the current span's ids, so a log
backend joins them to the trace. Off or outside a span, the ids are simply absent."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

LOG_FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts``, ``level``, ``logger``, ``message``, and
    ``trace_id`` / ``span_id`` (hex, as OTLP backends show them) inside a span; ``exc_type``
    and the traceback when an exception is logged."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"] = format(span.trace_id, "032x")
            line["span_id"] = format(span.span_id, "016x")
        if record.exc_info:
            line["exc_type"] = record.exc_info[0].__name__ if record.exc_info[0] else None
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def use_json_logs(*loggers: str) -> None:
    """Formats every handler of the root logger and of ``loggers`` (uvicorn's own, say) as
    :class:`JsonFormatter`; gives the root logger a stderr handler if it has none."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    formatter = JsonFormatter()
    for logger in [root, *(logging.getLogger(name) for name in loggers)]:
        for handler in logger.handlers:
            handler.setFormatter(formatter)
