"""Every part of LiteLLM genq replaces for speed, behind one guard on LiteLLM's version.

- :mod:`providers._lean_chunks`: each chunk's ``ModelResponseStream`` / ``StreamingChoices`` /
  ``Delta`` built by copying a pristine instance instead of through pydantic's constructors,
  and their extras read and written without pydantic's missing-attribute path.
- :mod:`providers._lean_streams`: the per-stream bookkeeping only LiteLLM's Router, cost
  tracking, cache and logging callbacks read (accumulated deltas, success handlers, the price,
  the assembled response), skipped while nobody reads it.

They replace private methods, so they are on only with the release they were tested on
(:data:`TESTED_VERSIONS`: the one pyproject.toml pins, read from genq's installed metadata by
:func:`genq.pinned`): with any other, :func:`check` logs one
warning and LiteLLM's own methods run. tests/providers/test_lean_chunks.py and
test_lean_streams.py run both ways on the same streams and compare what LiteLLM yields and
logs; ``bench/workers.py`` prints what the patches buy. Upgrading LiteLLM is the pin's one
line in pyproject.toml: reinstalled, the patches follow the new pin, and the tests (those
contract tests among them) say whether they still hold on the new release.

:mod:`providers._litellm` runs :func:`check` once LiteLLM is configured; the patches' modules
are imported only then.
"""

from __future__ import annotations

from typing import Any

from genq import PatchGuard, pinned

_INHERITED = object()
"""The class had no method of its own by that name (it inherits pydantic's): off, none again."""

_SWITCHES: list[tuple[type, str, Any, Any]] = []
"""(class, method name, LiteLLM's method, its replacement), made once, on the tested release."""


def _apply(on: bool) -> None:
    """Puts the replacements in place (``on``) or LiteLLM's own methods back."""
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


GUARD = PatchGuard(
    tested=pinned("litellm"),
    off_warning="genq's LiteLLM patches are off; LiteLLM's own per-chunk bookkeeping runs "
    "(slower streams)",
    logger="providers",
    apply=_apply,
)
"""On with the release the patches were written and tested against, the one pyproject.toml
pins; turning it on or off swaps the methods for the whole process."""

TESTED_VERSIONS = GUARD.tested
version_mismatch = GUARD.version_mismatch
check = GUARD.check
set_patched = GUARD.set_patched
patched = GUARD.patched
