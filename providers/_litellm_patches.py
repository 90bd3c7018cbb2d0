"""Every part of LiteLLM genq replaces for speed, behind one guard on LiteLLM's version.

- :mod:`providers._lean_chunks`: each chunk's ``ModelResponseStream`` / ``StreamingChoices`` /
  ``Delta`` built by copying a pristine instance instead of through pydantic's constructors,
  and their extras read and written without pydantic's missing-attribute path.
- :mod:`providers._lean_streams`: the per-stream bookkeeping only LiteLLM's Router, cost
  tracking, cache and logging callbacks read (accumulated deltas, success handlers, the price,
  the assembled response), skipped while nobody reads it.

They replace private methods, so they are on only with the release they were tested on
(:data:`TESTED_VERSIONS`, the one pyproject.toml pins): with any other, :func:`check` logs one
warning and LiteLLM's own methods run. tests/providers/test_lean_chunks.py and
test_lean_streams.py run both ways on the same streams and compare what LiteLLM yields and
logs; ``bench/workers.py`` prints what the patches buy. Upgrading LiteLLM: move the pin in
pyproject.toml; with the tests green on the new release, move :data:`TESTED_VERSIONS` too
(until then the patches stay off and genq runs on LiteLLM's own code).

:mod:`providers._litellm` runs :func:`check` once LiteLLM is configured; the patches' modules
are imported only then.
"""

from __future__ import annotations

import logging
from typing import Any

from genq import untested_version

log = logging.getLogger("providers")

TESTED_VERSIONS = {"litellm": "1.110.2"}
"""Distribution -> the exact release the patches were written and tested against."""

_INHERITED = object()
"""The class had no method of its own by that name (it inherits pydantic's): off, none again."""

_SWITCHES: list[tuple[type, str, Any, Any]] = []
"""(class, method name, LiteLLM's method, its replacement), made once, on the tested release."""

_on = False
_tested = False
"""Whether the installed release is the tested one, as :func:`check` found."""


def version_mismatch() -> str | None:
    """What differs from :data:`TESTED_VERSIONS` in this environment, or None."""
    return untested_version(TESTED_VERSIONS)


def check() -> bool:
    """Turns the patches on if the installed LiteLLM is the tested one, and off with one
    warning otherwise (as importing :mod:`providers._litellm` does); returns whether on."""
    global _tested
    mismatch = version_mismatch()
    _tested = mismatch is None
    if mismatch is not None:
        log.warning(
            "%s: genq's LiteLLM patches are off; LiteLLM's own per-chunk bookkeeping runs "
            "(slower streams)",
            mismatch,
        )
    return _apply(_tested)


def set_patched(on: bool) -> bool:
    """Turns the patches on or off (LiteLLM's own methods, e.g. for a benchmark's reference
    run) for the whole process; returns whether they are on (never with another LiteLLM than
    the tested one)."""
    return _apply(on and _tested)


def patched() -> bool:
    """Whether LiteLLM runs with genq's patches now."""
    return _on


def _apply(on: bool) -> bool:
    global _on
    if on and not _SWITCHES:  # snapshots LiteLLM's own methods: made while they are in place
        # Imported here: LiteLLM must be configured (providers._litellm) before they import it.
        import providers._litellm  # noqa: F401
        from providers import _lean_streams
        from providers._lean_chunks import LeanChunks

        replaced = _lean_streams.replacements() + LeanChunks.build().replacements()
        _SWITCHES.extend(
            (owner, name, owner.__dict__.get(name, _INHERITED), new)
            for owner, name, new in replaced
        )
    for owner, name, original, replacement in _SWITCHES:
        if on:
            setattr(owner, name, replacement)
        elif original is _INHERITED:
            if name in owner.__dict__:
                delattr(owner, name)
        else:
            setattr(owner, name, original)
    _on = on
    return on
