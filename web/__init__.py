"""The web pages and their assets, installed as the package ``genq_web``.

This directory stays at the top of the repository; pyproject.toml maps the package name
``genq_web`` onto it, so a wheel carries the files as package data and the gateway finds them
with ``importlib.resources``, from a checkout (editable install) and from an installed wheel.
"""
