"""Command-line options several commands share: the Host names and page origins a server
answers (``listenlab serve`` and ``listenlab api``)."""

from __future__ import annotations

import argparse

from app.config import ServeSettings, serve_settings
from app.web.guard import default_allowed_hosts


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


def hosts_from_args(
    args: argparse.Namespace, bound: str, settings: ServeSettings | None = None
) -> tuple[list[str], list[str] | None]:
    """The Host names and page origins to answer: the flags plus the environment's
    (``settings``, read once by the command; :func:`app.config.serve_settings` when None)."""
    env = settings or serve_settings()
    extra = [h.strip() for v in args.allowed_hosts for h in v.split(",") if h.strip()]
    origins = [o.strip() for v in args.allowed_origins for o in v.split(",") if o.strip()]
    hosts = default_allowed_hosts(bound, extra)
    if bound in ("0.0.0.0", "::") and not extra and not env.space_host:
        print(
            "listenlab: bound to all interfaces; answered Host names: "
            f"{', '.join(hosts)} and any IP address. Add your domain with --allowed-hosts.",
            flush=True,
        )
    if origins:  # given origins replace the app's default, which is the environment's list
        origins += env.allowed_origins
    return hosts, (origins or None)


__all__ = ["add_host_args", "hosts_from_args"]
