# The genq image: one image for the gateway (`genq serve`) and the workers (`genq worker`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GENQ_WEB_DIR=/app/web

WORKDIR /app
COPY pyproject.toml README.md ./
COPY genq ./genq
COPY gateway ./gateway
COPY workers ./workers
COPY providers ./providers
COPY web ./web
RUN pip install . \
    && useradd --system --uid 10001 --no-create-home genq
USER genq

EXPOSE 8000
CMD ["genq", "serve", "--host", "0.0.0.0", "--port", "8000"]
