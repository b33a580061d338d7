"""What a ``--db`` value names, and how it is shown: a SQLite path, or a PostgreSQL URL whose
secrets are never printed.

Why a module of its own: choosing the engine (:func:`app.store.engines.open_store`) and
showing where a store is (``serve``'s banner, ``db check``, every error that names the store)
must not load either engine. A PostgreSQL URL can carry its password in two places, the
``user:password@`` part and libpq's ``?password=`` (and ``?sslpassword=``, the client key's
passphrase); :func:`masked` hides both.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

SCHEMES = ("postgresql://", "postgres://")
SECRET_PARAMS = ("password", "sslpassword")
"""libpq URL parameters that hold a secret (``passfile`` names a file: not a secret)."""
HIDDEN = "***"


def is_postgres(target: str | Path) -> bool:
    """Whether a ``--db`` value names a PostgreSQL server rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(SCHEMES)


def masked(url: str) -> str:
    """The URL with every secret replaced by ``***`` (what banners and errors show); a SQLite
    path is returned as it is."""
    if not is_postgres(url):
        return url
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # a URL libpq would refuse anyway: show only what it is
        return url.split("://", 1)[0] + "://" + HIDDEN
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = user.split(":", 1)[0] + ":" + HIDDEN + "@" + host
    query = "&".join(_masked_pair(p) for p in parts.query.split("&")) if parts.query else ""
    return urlunsplit(parts._replace(netloc=netloc, query=query, fragment=""))


def _masked_pair(pair: str) -> str:
    name, eq, _ = pair.partition("=")
    secret = unquote(name).strip().lower() in SECRET_PARAMS
    return f"{name}={HIDDEN}" if eq and secret else pair


__all__ = ["SCHEMES", "SECRET_PARAMS", "is_postgres", "masked"]
