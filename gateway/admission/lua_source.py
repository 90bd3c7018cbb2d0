"""The gateway's Lua scripts as the server runs them: a file of ``gateway/lua`` with the
libraries it uses spliced in after its flags line."""

from __future__ import annotations

from importlib import resources

from genq_services.budget import spliced

LIMITS_LIBRARY = (resources.files("gateway") / "lua" / "_limits_lib.lua").read_text()


def script_text(name: str, *libraries: str) -> str:
    """``gateway/lua/<name>.lua`` with the limits library and ``libraries`` spliced in."""
    text = (resources.files("gateway") / "lua" / f"{name}.lua").read_text()
    return spliced(text, LIMITS_LIBRARY, *libraries)
