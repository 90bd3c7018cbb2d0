"""Where a delivery connects (``genq_services.webhook_urls.destination``): the addresses its
check judged, in the resolver's order, with the request kept the name's. The resolver answers
what each test says (a real lookup of a public name needs a network these tests lack)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import pytest

from genq_services.webhook_urls import UnsafeUrlError, destination

Answer = list[tuple[Any, ...]]


def _family(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def answering(monkeypatch: pytest.MonkeyPatch, **names: list[str]) -> list[str]:
    """The running loop's resolver answers ``names`` (host -> addresses); returns the names
    looked up, in order."""
    asked: list[str] = []
    loop = asyncio.get_running_loop()

    async def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> Answer:
        asked.append(host)
        return [(_family(a), socket.SOCK_STREAM, 6, "", (a, port)) for a in names[host]]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    return asked


async def test_a_name_is_sent_to_its_checked_addresses_with_its_host_and_tls_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = answering(monkeypatch, **{"hooks.example.com": ["93.184.215.14", "2606:2800:21f::1"]})
    target = await destination("https://hooks.example.com:8443/in?x=1", allow_private=False)
    assert [str(url) for url in target.urls] == [
        "https://93.184.215.14:8443/in?x=1",
        "https://[2606:2800:21f::1]:8443/in?x=1",
    ]
    assert target.headers == {"Host": "hooks.example.com:8443", "Connection": "close"}
    assert target.extensions == {"sni_hostname": "hooks.example.com"}
    assert asked == ["hooks.example.com"]  # one lookup, the check's: nothing resolves it again


async def test_an_international_name_goes_by_its_ascii_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = answering(monkeypatch, **{"xn--bcher-kva.example": ["93.184.215.14"]})
    target = await destination("https://bücher.example/hook", allow_private=False)
    assert asked == ["xn--bcher-kva.example"]
    assert target.headers["Host"] == "xn--bcher-kva.example"
    assert target.extensions == {"sni_hostname": "xn--bcher-kva.example"}


async def test_one_private_address_refuses_the_name_and_an_address_is_its_own_destination(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answering(monkeypatch, **{"mixed.example.com": ["93.184.215.14", "10.0.0.7"]})
    with pytest.raises(UnsafeUrlError, match=r"10\.0\.0\.7, a private address"):
        await destination("https://mixed.example.com/hook", allow_private=False)
    literal = await destination("https://93.184.215.14/hook", allow_private=False)
    assert [str(u) for u in literal.urls] == ["https://93.184.215.14/hook"]
    assert (literal.headers, literal.extensions) == ({}, {})


async def test_a_name_that_does_not_resolve_is_given_up_or_retried_when_private_is_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()

    async def unknown(host: str, port: int, *args: Any, **kwargs: Any) -> Answer:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(loop, "getaddrinfo", unknown)
    with pytest.raises(UnsafeUrlError, match="does not resolve"):
        await destination("https://gone.example.com/hook", allow_private=False)
    with pytest.raises(httpx.ConnectError, match="does not resolve"):
        await destination("http://gone.example.com/hook", allow_private=True)
