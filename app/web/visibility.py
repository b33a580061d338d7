"""What a visitor may see of where a backend runs: a remote engine's address is hidden from
everyone but the admin, in the Playground's config and in every error a page is sent.

Why here: a public Space must not publish the internal address of the GPU server behind it,
and both the Playground's JSON (:mod:`app.playground.routes`) and the player's socket
(:mod:`app.player.session`) quote backend errors that name it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from backends.errors import ListenlabError
from backends.registry import BackendSpec

HIDDEN_HOST = "(hidden)"
"""What a visitor sees in place of a remote engine's host and port."""


def remote_hosts(spec: str) -> list[str]:
    """The ``host:port`` and host of a spec's remote server (none for a local engine)."""
    try:
        target = BackendSpec.parse(spec).target
    except ListenlabError:
        return []
    u = urlsplit(target or "")
    return [h for h in (u.netloc.rpartition("@")[2], u.hostname) if h]


def for_visitor(text: str | None, spec: str, admin: bool) -> str | None:
    """``text`` with the remote server's address hidden unless the admin asks: a public Space
    must not publish the internal address of the GPU server behind it (the admin needs it to
    see which server a label is)."""
    if admin or text is None:
        return text
    for host in remote_hosts(spec):  # host:port first, then the bare name where it stands alone
        text = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w.-])", HIDDEN_HOST, text)
    return text


__all__ = ["HIDDEN_HOST", "for_visitor", "remote_hosts"]
