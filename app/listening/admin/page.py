"""What every tab of the admin page (``/admin/tests``, Gradio) shares: the page's state, the
handlers' binding, the test pickers and the top line.

Admin-only as a whole: the middleware in :func:`app.listening.mount` refuses every request
under ``/admin/`` (page, API, queue) that :mod:`app.web.admin` does not accept. So whoever sees
the page is the admin; the top line says how they got in (the password's sign-in, or this
machine).

Why the handlers are module-level functions: each takes the app's :class:`AdminPage` first
(bound with :func:`bind` when the page is built), so a handler can be read and tested on its
own, as in Gradio's demos; the tab modules' builders only lay out components and wire events.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.listening.service import Listening
from app.web.admin import COOKIE


def login_line(mode: str, headers: Mapping[str, str]) -> str:
    """Who is logged in, for the top of the admin page (only admins get this far)."""
    if mode == "password":
        cookie = headers.get("cookie", "")
        how = (
            "signed in with the admin password in this browser (the sign-in lasts 12 h)"
            if f"{COOKIE}=" in cookie
            else "the admin password sent with each request"
        )
        return f"Logged in as **admin**: {how}."
    return (
        "Logged in as **admin on this machine**: no LISTENLAB_ADMIN_PASSWORD is set, so only "
        "requests from this machine (localhost) reach these pages. Set it to administer a "
        "public deployment."
    )


@dataclass(frozen=True)
class AdminPage:
    """What the admin page's handlers share in one app: its state (backends, store), the
    listening service and the folder exports are kept in."""

    state: Any
    svc: Listening
    exports: Path

    @property
    def tests(self):
        return self.svc.tests


def bind(fn: Callable[..., Any], page: AdminPage) -> Callable[..., Any]:
    """``fn`` with the page as its first argument, under ``fn``'s name (Gradio's API names)."""
    bound = functools.partial(fn, page)
    bound.__name__ = fn.__name__  # type: ignore[attr-defined]
    return bound


def test_choices(page: AdminPage) -> list[tuple[str, str]]:
    return [
        (f"{t.name} ({t.test_id}, {t.kind}, {t.status})", t.test_id)
        for t in page.tests.list_tests()
    ]


def test_listing(page: AdminPage) -> pd.DataFrame:
    rows = [t.as_dict() for t in page.tests.list_tests()]
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["test_id", "name"])


def not_persistent_box(page: AdminPage, elem_id: str) -> Any:
    """The explicit yes that opening a test needs when the store is not persistent (shown
    only then)."""
    return gr.Checkbox(
        value=False,
        visible=not page.state.storage.persistent,
        label="Open for raters although the data is not persistent (lost on a restart)",
        elem_id=elem_id,
    )


def reload_choices(page: AdminPage) -> tuple:
    c = test_choices(page)
    latest = c[0][1] if c else None  # newest first
    return gr.update(choices=c), gr.update(choices=c, value=latest), test_listing(page)


def preview_choices(page: AdminPage) -> Any:
    return gr.update(choices=test_choices(page))


class LoginLine:
    """The page's top line for the admin in this request (a class: Gradio hands a handler the
    request by its annotation, which a bound partial would hide)."""

    def __init__(self, mode: str):
        self.mode = mode

    def __call__(self, request: gr.Request) -> str:
        headers = {k.lower(): v for k, v in dict(request.headers).items()} if request else {}
        return login_line(self.mode, headers)


__all__ = [
    "AdminPage",
    "LoginLine",
    "bind",
    "login_line",
    "not_persistent_box",
    "preview_choices",
    "reload_choices",
    "test_choices",
    "test_listing",
]
