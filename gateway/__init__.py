"""The genq gateway: HTTP API, resumable SSE, tenants, and workers anywhere (see ``app``).

Its rooms, each a subpackage that says what it holds:

- ``routes/``: the native HTTP API, one module per area (bodies beside the routes that only
  they use: ``ops_schemas``, ``usage_schemas``); ``openai/``: the OpenAI-compatible routes.
- ``streaming/``: every event stream and the rule it keeps (``sse``), SSE framing, the
  sse-starlette patch, the quiet gate for stream endings, waits bounded by the connection.
- ``admission/``: accepting generations (one or a batch), the tenant limits (rate, daily
  quota, in flight), budgets (reserve, release, sweep), the per-tenant caps on open streams
  and waits, and the bodies of a request that enqueues.
- ``access/``: API keys to tenants, the admin role and watch tokens, revocation, the audit
  log, jobs as their tenant may reach them.
- ``pull/``: workers anywhere: the long poll's doorbell listener, signed receipts, the bodies
  of the pull routes.

The process state is in one place, ``state.Gateway``; ``deps`` holds the FastAPI dependencies
the routes take (the state, the caller's identity). ``app``, ``settings``, ``errors``,
``middleware``, ``metrics``, ``history``, ``queues``, ``records`` and the uvicorn options
(``server_options``, ``connection_guard``) serve every room.
"""
