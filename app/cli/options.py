"""Command-line options several commands share: the Host names and page origins a server
answers (``listenlab serve`` and ``listenlab api``)."""

from __future__ import annotations

import argparse
import os

from app.web.guard import ENV_ALLOWED_ORIGINS, default_allowed_hosts


def add_host_args(p: argparse.ArgumentParser) -> None:
    """``--allowed-hosts`` / ``--allowed-origins``, shared by ``serve`` and ``api``."""
    p.add_argument(
        "--allowed-hosts",
        action="append",
        default=[],
        metavar="HOSTS",
        help="comma-separated Host names to answer besides the bound host, localhost and "
        "$SPACE_HOST (also $LISTENLAB_ALLOWED_HOSTS); '*' answers any (not for public servers)",
    )
    p.add_argument(
        "--allowed-origins",
        action="append",
        default=[],
        metavar="ORIGINS",
        help="comma-separated page origins (https://example.org) whose pages may open the "
        "WebSockets, besides the server's own pages (also $LISTENLAB_ALLOWED_ORIGINS)",
    )


def hosts_from_args(args: argparse.Namespace, bound: str) -> tuple[list[str], list[str] | None]:
    extra = [h.strip() for v in args.allowed_hosts for h in v.split(",") if h.strip()]
    origins = [o.strip() for v in args.allowed_origins for o in v.split(",") if o.strip()]
    hosts = default_allowed_hosts(bound, extra)
    if bound in ("0.0.0.0", "::") and not extra and not os.environ.get("SPACE_HOST"):
        print(
            "listenlab: bound to all interfaces; answered Host names: "
            f"{', '.join(hosts)} and any IP address. Add your domain with --allowed-hosts.",
            flush=True,
        )
    if origins:
        origins += [o for o in os.environ.get(ENV_ALLOWED_ORIGINS, "").split(",") if o.strip()]
    return hosts, (origins or None)


__all__ = ["add_host_args", "hosts_from_args"]
