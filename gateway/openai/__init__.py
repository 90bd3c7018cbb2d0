"""The OpenAI-compatible face of the gateway: Responses, Chat Completions and the model list.

These routes are another view of the same generations (same API keys, tenants, limits,
idempotency and shared tail), shaped like OpenAI's API so its SDKs work unmodified. See
docs/OPENAI.md for the decisions behind ids, ``sequence_number`` and restarts.
"""
