"""The AI SDK's face of the gateway: the UI message stream ``useChat`` reads, with resume and Stop.

``POST /v1/ui/chat`` takes what the AI SDK's ``DefaultChatTransport`` sends and answers the UI
message stream; ``GET /v1/ui/chat/{chatId}/stream`` resumes the chat's running generation (a
replay from its start); ``POST /v1/ui/chat/{chatId}/stop`` stops it. Another view of the same
generations (same API keys, tenants, limits, budgets, idempotency and shared tail); a chat id
is its tenant's. Decisions and limits: docs/GATEWAY.md, "The AI SDK's routes (useChat)".
"""
