"""Raters' work is not put where a restart loses it without the admin saying yes.

On a Space without persistent storage (no writable ``/data``) the store lives in the
container and every restart or push loses it (:func:`app.config.storage`). Opening a test for
raters there needs an explicit confirmation, the same on every path (the designer, the Tests
tab, ``POST /ll/admin/tests/ID/status``, ``listenlab test open``), and the admin pages carry a
banner that says so.
"""

from __future__ import annotations

from app.config import Storage
from backends.errors import NotPersistent

CONFIRM_FIELD = "confirm_not_persistent"


def check_may_open(storage: Storage | None, confirmed: bool) -> None:
    """Refuse (409, reason ``not_persistent``) to open a test on a store a restart loses,
    unless the admin confirmed it."""
    if storage is None or storage.persistent or confirmed:
        return
    raise NotPersistent(
        f"not opened: the data is not persistent ({storage.note}) Open it anyway only if "
        f"losing every rating on a restart is acceptable: send {CONFIRM_FIELD}=true "
        "(designer and Tests tab: tick the box; CLI: --confirm-not-persistent)."
    )


def banner(storage: Storage | None) -> str:
    """The admin pages' warning (Markdown), or "" when the store is persistent."""
    if storage is None or storage.persistent:
        return ""
    return f"**⚠ Data is not persistent.** {storage.note}"


__all__ = ["CONFIRM_FIELD", "banner", "check_may_open"]
