"""``python -m genq_cli``: what the ``genq`` console script runs."""

from genq_cli.main import app

app()
