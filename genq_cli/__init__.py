"""The ``genq`` command, the dev stack and the embedded server: the top floor of genq.

It is the one package that may import every other layer (the core, the contract, the gateway,
the workers); nothing imports it except the tests and the benchmarks.
"""
