"""Where a webhook may point: the URL's form, and the addresses its host resolves to (SSRF).

A tenant chooses the URL and genq's processes POST to it from inside the deployment, so a URL
naming a private, loopback, link-local (cloud metadata at 169.254.169.254), multicast,
reserved or unspecified address would let a tenant reach what only genq should. The host is
resolved and EVERY address checked: at create and update (the gateway) and again before each
delivery (the workers), since a name may resolve elsewhere later. Only ``https`` is taken.
``GENQ_WEBHOOK_ALLOW_PRIVATE=1`` lifts both rules (tests, local setups): ``http`` and any
address. Redirects are never followed (a 3xx is a failed delivery).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

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
    if allow_private:
        return parsed
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    for address in await resolve(parsed.host, port):
        kind = refusal(address)
        if kind is not None:
            raise UnsafeUrlError(
                f"url's host {parsed.host!r} resolves to {address}, a {kind} address: "
                "webhooks go to public addresses only"
            )
    return parsed
