# The genq image: one image for the gateway (`genq serve`) and the workers (`genq worker`).
# The first stage builds the wheel; the image installs exactly that wheel, `genq[all]`, so it
# runs what `pip install genq[all]` runs (the pages and Lua scripts come inside the wheel).
FROM python:3.11-slim AS wheel

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . .
RUN pip wheel --no-deps --wheel-dir /dist .

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY --from=wheel /dist /dist
RUN pip install "$(ls /dist/genq-*.whl)[all]" \
    && rm -rf /dist \
    && useradd --system --uid 10001 --no-create-home genq
USER genq
WORKDIR /tmp

EXPOSE 8000
CMD ["genq", "serve", "--host", "0.0.0.0", "--port", "8000"]
