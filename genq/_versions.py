"""Which installed dependency differs from the release a patch of it was tested against.

Every module that replaces a dependency's internals for speed (genq's redis-py patches, the
workers' LiteLLM patches, the gateway's sse-starlette send) turns itself off on any other
release; this is the one check they share.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import version


def untested_version(tested: Mapping[str, str]) -> str | None:
    """The first distribution of ``tested`` (name -> exact release) whose installed release
    differs, said in words; None when every one is the tested release."""
    for dist, release in tested.items():
        installed = version(dist)
        if installed != release:
            return f"{dist} {installed} is not the tested {release}"
    return None
