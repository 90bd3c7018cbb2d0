"""One guard for every module that replaces a dependency's internals for speed.

Such a patch leans on private parts of one release, so it is on only with the release it was
tested on: genq's redis-py patches, the workers' LiteLLM patches and the gateway's sse-starlette
send each keep a :class:`PatchGuard` that turns them off, with one warning, on any other
release, where the dependency's public path runs instead.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, requires, version

_EXACT_PIN = re.compile(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^;,\s]+)")


def untested_version(tested: Mapping[str, str]) -> str | None:
    """The first distribution of ``tested`` (name -> exact release) whose installed release
    differs, said in words; None when every one is the tested release."""
    for dist, release in tested.items():
        installed = version(dist)
        if installed != release:
            return f"{dist} {installed} is not the tested {release}"
    return None


def pinned(dist: str) -> dict[str, str]:
    """``{dist: release}`` for the release genq's own requirements pin exactly (``dist==X`` in
    pyproject.toml, read back from the installed distribution's metadata): the release a
    patch is tested against is the pinned one, so upgrading is the pin's one line plus the
    tests, which run the patches' contract tests on the new release. Without an exact pin
    (genq not installed, or a range) the release reads as ``unpinned`` and the patches stay off."""
    try:
        wanted = requires("genq") or []
    except PackageNotFoundError:
        wanted = []
    for requirement in wanted:
        match = _EXACT_PIN.match(requirement)
        if match and match[1].lower().replace("_", "-") == dist.lower().replace("_", "-"):
            return {dist: match[2]}
    return {dist: "unpinned"}


class PatchGuard:
    """Whether one dependency's patches are on: never with another release than ``tested``
    (distribution -> exact release), and otherwise as the last :meth:`set_patched` asked.

    ``off_warning`` says what runs instead; :meth:`check` logs it on ``logger`` after what
    differs, once per check. ``apply`` (optional) puts the patches in place (``True``) or takes
    them out (``False``) each time the guard turns them on or off; without it the patched
    module asks :meth:`patched` where it chooses a path.

    ``tested`` is read at each :meth:`check`, not copied: the module's ``TESTED_VERSIONS`` is
    this mapping, so a test that names another release in it sees what an upgrade would do.
    """

    def __init__(
        self,
        tested: dict[str, str],
        off_warning: str,
        logger: str,
        apply: Callable[[bool], object] | None = None,
    ) -> None:
        self.tested = tested
        self.off_warning = off_warning
        self.log = logging.getLogger(logger)
        self._apply = apply
        self._on = False
        self._tested = False
        """Whether the installed release is the tested one, as :meth:`check` found."""

    def version_mismatch(self) -> str | None:
        """What differs from the tested releases in this environment, or None."""
        return untested_version(self.tested)

    def check(self) -> bool:
        """Turns the patches on if the installed release is the tested one, and off with one
        warning otherwise (the patched module runs it when it loads); returns whether on."""
        mismatch = self.version_mismatch()
        self._tested = mismatch is None
        if mismatch is not None:
            self.log.warning("%s: %s", mismatch, self.off_warning)
        return self.set_patched(self._tested)

    def set_patched(self, on: bool) -> bool:
        """Turns the patches on or off (the dependency's public path, e.g. for a benchmark's
        reference run); returns whether they are on (never with an untested release)."""
        on = on and self._tested
        if self._apply is not None:
            self._apply(on)
        self._on = on
        return on

    def patched(self) -> bool:
        """Whether the patches are on now."""
        return self._on

    def __repr__(self) -> str:
        state = "on" if self._on else "off"
        return f"PatchGuard({self.tested!r}, {state})"
