"""Helpers for reading stream entry ids in tests."""


def entry_id(value: str) -> tuple[int, int]:
    ms, seq = value.split("-")
    return int(ms), int(seq)
