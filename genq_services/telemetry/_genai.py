"""The names genq's spans and metrics use, in one place.

GenAI names follow OpenTelemetry's semantic conventions v1.44.0 (``opentelemetry-semantic-
conventions`` 0.66b2; the GenAI part is still "development", so the version is pinned here
and in docs/OBSERVABILITY.md). genq's own names start with ``genq.``.
"""

from __future__ import annotations

SEMCONV_SCHEMA = "https://opentelemetry.io/schemas/1.44.0"
TRACER = "genq"

# GenAI client spans and metrics (semantic conventions v1.44.0).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"
CHAT = "chat"

TOKEN_USAGE = "gen_ai.client.token.usage"
OPERATION_DURATION = "gen_ai.client.operation.duration"
TIME_TO_FIRST_CHUNK_METRIC = "gen_ai.client.operation.time_to_first_chunk"

# genq's own.
JOB_ID = "genq.job.id"
QUEUE = "genq.queue"
ATTEMPT = "genq.attempt"
MAX_ATTEMPTS = "genq.max_attempts"
TENANT = "genq.tenant"
OUTCOME = "genq.outcome"
QUEUE_WAIT = "genq.queue.wait"
PREVIOUS_OUTCOME = "genq.previous_attempt.outcome"
PREVIOUS_ERROR = "genq.previous_attempt.error"
LOST_ATTEMPTS = "genq.lost_attempts"
QUEUE_WAIT_METRIC = "genq.queue.wait"
ATTEMPTS_METRIC = "genq.attempts"
RESTARTS_METRIC = "genq.restarts"

# Span events.
CANCEL_EVENT = "genq.cancel"
COOLDOWN_EVENT = "genq.provider.cooldown"
FALLBACK_EVENT = "genq.fallback"
