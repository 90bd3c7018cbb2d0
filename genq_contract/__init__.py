"""What the gateway, the workers and the CLI must agree on, defined once.

Routing (which models run, on which provider queue), the common settings, the generation
payload the gateway writes and the worker reads, the result a worker completes it with, the
event vocabulary, the shared Redis key names and the redaction of errors tenants see. It
imports only the queue core and pydantic; never FastAPI, never LiteLLM.
"""
