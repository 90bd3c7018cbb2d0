"""Model providers: routing (light), LiteLLM adapter, error mapping, limits, demo provider.

Import submodules directly; this package imports nothing so that ``genq_contract.routing`` stays
free of LiteLLM.
"""
