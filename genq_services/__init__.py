"""Services the gateway and the workers both run against Redis.

Not contracts: code with state and I/O (budget accounts and their Lua scripts, the access
check and its cache, the alert delivery log). What both sides must agree on (limits, amounts,
refusal reasons, record shapes, key names) stays in ``genq_contract``, which these import.
Never FastAPI, never LiteLLM: both processes run them.
"""
