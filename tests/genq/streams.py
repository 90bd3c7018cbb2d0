"""Helpers for reading stream entry ids in tests."""


def entry_id(value: str) -> tuple[int, int]:
    ms, seq = value.split("-")
    return int(ms), int(seq)


def rebuild_text(events) -> str:
    """What a client shows: chunks appended, cleared on `restarted`."""
    text = ""
    for ev in events:
        if ev.type == "restarted":
            text = ""
        elif ev.type == "chunk":
            text += ev.data
    return text
