"""Where a webhook may point: the URL's form, and the addresses its host resolves to (SSRF).

A tenant chooses the URL and genq's processes POST to it from inside the deployment, so a URL
naming a private, loopback, link-local (cloud metadata at 169.254.169.254), multicast,
reserved or unspecified address would let a tenant reach what only genq should. The host is
resolved and EVERY address checked: at create and update (the gateway) and again before each
delivery (the workers), since a name may resolve elsewhere later. A delivery then connects to
an address it checked (:func:`destination`), not to whatever the name resolves to a moment
later (DNS rebinding). Only ``https`` is taken. ``GENQ_WEBHOOK_ALLOW_PRIVATE=1`` lifts both
rules (tests, local setups): ``http`` and any address. Redirects are never followed (a 3xx is
a failed delivery).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass, field
from typing import Any

import httpx

from genq_contract.webhooks import MAX_URL_LENGTH

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeUrlError(ValueError):
    """The URL is malformed or points where webhooks must not go (the message says why)."""


def check_form(url: str, allow_private: bool) -> httpx.URL:
    """The URL parsed, or :class:`UnsafeUrlError`: at most ``MAX_URL_LENGTH`` characters, a
    host, https (http too when private addresses are allowed), no user or password."""
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeUrlError(f"url must be at most {MAX_URL_LENGTH} characters")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UnsafeUrlError(f"url is not a URL: {exc}") from None
    schemes = ("https", "http") if allow_private else ("https",)
    if parsed.scheme not in schemes or not parsed.host:
        need = "an https:// or http://" if allow_private else "an https://"
        raise UnsafeUrlError(f"url must be {need} URL with a host")
    if parsed.userinfo:
        raise UnsafeUrlError("url must not hold a user name or password")
    return parsed


def refusal(address: IpAddress) -> str | None:
    """Why webhooks must not reach ``address`` (IPv4-mapped IPv6 judged as its IPv4), or None
    for a public address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    checks = (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("unspecified", address.is_unspecified),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved or not address.is_global),
    )
    return next((kind for kind, hit in checks if hit), None)


async def resolve(host: str, port: int) -> list[IpAddress]:
    """Every address ``host`` resolves to (an IP literal is itself)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UnsafeUrlError(f"url's host {host!r} does not resolve: {exc}") from None
    addresses: list[IpAddress] = []
    for info in infos:
        literal = str(info[4][0]).split("%", 1)[0]  # an IPv6 scope id is not part of it
        address = ipaddress.ip_address(literal)
        if address not in addresses:
            addresses.append(address)
    return addresses


async def check_url(url: str, allow_private: bool) -> httpx.URL:
    """:func:`check_form`, then every address of the host is public (unless allowed)."""
    parsed = check_form(url, allow_private)
    if not allow_private:
        check_addresses(parsed.host, await resolve(_ascii_host(parsed), _port(parsed)))
    return parsed


def check_addresses(host: str, addresses: list[IpAddress]) -> None:
    """:class:`UnsafeUrlError` unless every one of ``host``'s ``addresses`` is public."""
    for address in addresses:
        kind = refusal(address)
        if kind is not None:
            raise UnsafeUrlError(
                f"url's host {host!r} resolves to {address}, a {kind} address: "
                "webhooks go to public addresses only"
            )


def _port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def _ascii_host(url: httpx.URL) -> str:
    """The host as it is looked up and sent: an international name in its ASCII form."""
    return url.raw_host.decode("ascii")


@dataclass(frozen=True)
class Destination:
    """Where a delivery's request goes: ``urls`` name the host's addresses that were checked,
    in the resolver's order, instead of its name (a connection is tried to each in turn), and
    ``headers`` and ``extensions`` keep the request the name's (its ``Host`` header; for https
    the TLS server name, which is both the SNI and the name the certificate must hold: httpx's
    ``sni_hostname``)."""

    urls: tuple[httpx.URL, ...]
    headers: dict[str, str] = field(default_factory=dict)
    extensions: dict[str, Any] = field(default_factory=dict)


async def destination(url: str, allow_private: bool) -> Destination:
    """:func:`check_url`'s checks, and the addresses the delivery must connect to: the host's,
    every one of them checked. Their connections are not kept for another request
    (``Connection: close``): a pool keyed by the address would hand one to another name served
    there. A name that does not resolve is :class:`UnsafeUrlError` (given up), or
    ``httpx.ConnectError`` (retried, as a connection by name would be) when private addresses
    are allowed."""
    parsed = check_form(url, allow_private)
    host = _ascii_host(parsed)
    try:
        addresses = await resolve(host, _port(parsed))
    except UnsafeUrlError as exc:
        if allow_private:
            raise httpx.ConnectError(str(exc)) from None
        raise
    if not allow_private:
        check_addresses(parsed.host, addresses)
    if [str(a) for a in addresses] == [host.strip("[]")]:  # an address already
        return Destination((parsed,))
    headers = {"Host": parsed.netloc.decode("ascii"), "Connection": "close"}
    extensions = {"sni_hostname": host} if parsed.scheme == "https" else {}
    urls = tuple(parsed.copy_with(host=str(address)) for address in addresses)
    return Destination(urls, headers, extensions)
