"""Who the client is, and whether the browser's request came over TLS: one rule, trusted
proxies only.

A request's peer is the client, unless that peer is a *trusted* proxy
(``$LISTENLAB_TRUSTED_PROXIES``, comma-separated addresses or networks; on a Hugging Face Space,
whose proxy reaches the app from a private address, the private ranges by default): then the
right-most ``X-Forwarded-For`` address that is not itself a trusted proxy. The same rule says
whether the browser's request came over TLS (``X-Forwarded-Proto``), which decides the
``Secure`` flag of every cookie. A header from an untrusted peer is ignored, so a script cannot
pick its own address or claim TLS.

Why one module: the admin's login throttle, the arena's per-voter limits, the rate limits of
the player's WebSocket and every cookie need the same answer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.config import ENV_TRUSTED_PROXIES, WebSettings

SPACE_PROXY_NETS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
"""Where a Space's own proxy connects from (private addresses; never a visitor's)."""


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _parse_ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    v = value.strip().strip('"')
    if v.startswith("[") and "]" in v:  # [v6]:port
        v = v[1 : v.index("]")]
    elif v.count(":") == 1:  # v4:port
        v = v.split(":")[0]
    try:
        return ipaddress.ip_address(v)
    except ValueError:
        return None


@dataclass(frozen=True)
class Proxies:
    """The reverse proxies whose ``X-Forwarded-*`` headers are believed (see the module doc)."""

    nets: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, spec: Iterable[str]) -> Proxies:
        nets = []
        for item in spec:
            try:
                nets.append(ipaddress.ip_network(item.strip(), strict=False))
            except ValueError:
                raise ValueError(
                    f"not an address or network in {ENV_TRUSTED_PROXIES}: {item!r}"
                ) from None
        return cls(tuple(nets))

    @classmethod
    def from_env(cls, settings: WebSettings | None = None) -> Proxies:
        """From the app's settings (read once), else the environment's now."""
        web = settings if settings is not None else WebSettings.from_env()
        spec = list(web.trusted_proxies)
        if not spec and web.space_id:
            spec = list(SPACE_PROXY_NETS)
        return cls.parse(spec)

    def trusted(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        return addr is not None and any(addr in n for n in self.nets)

    def client_ip(self, scope: dict[str, Any]) -> str:
        """The client's address: the peer, or what a trusted proxy says it forwarded."""
        client = scope.get("client")
        peer_s = str(client[0]) if client else ""
        peer = _parse_ip(peer_s)
        if not self.trusted(peer):
            return str(peer) if peer else peer_s or "unknown"
        hops = [
            x for v in _header_values(scope, b"x-forwarded-for") for x in v.split(",") if x.strip()
        ]
        for hop in reversed(hops):  # each proxy appends the address it saw
            ip = _parse_ip(hop)
            if ip is None:
                return str(peer)  # a garbled chain: trust nothing in it
            if not self.trusted(ip):
                return str(ip)
        return str(peer)

    def client_key(self, scope: dict[str, Any]) -> str:
        """What limits count per client: the IPv4 address, or the IPv6 /64 (one household or
        server gets a whole /64, so single IPv6 addresses cost nothing)."""
        ip = _parse_ip(self.client_ip(scope))
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
        return str(ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else ip or "unknown")

    def is_tls(self, scope: dict[str, Any]) -> bool:
        """Did the browser's request come over TLS (directly, or to a trusted proxy)?"""
        if scope.get("scheme") in ("https", "wss"):
            return True
        client = scope.get("client")
        if not client or not self.trusted(_parse_ip(str(client[0]))):
            return False
        protos = [x for v in _header_values(scope, b"x-forwarded-proto") for x in v.split(",")]
        return bool(protos) and protos[0].strip().lower() in ("https", "wss")


def _header_values(scope: dict[str, Any], name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == name]


__all__ = ["ENV_TRUSTED_PROXIES", "SPACE_PROXY_NETS", "Proxies"]
