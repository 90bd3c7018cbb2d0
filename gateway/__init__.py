"""The genq gateway: HTTP API, resumable SSE, tenants, and the shared tail (see ``app``)."""
