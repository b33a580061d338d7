"""``listenlab serve``: one FastAPI app on one port, every room wired onto it.

Why one app: a Hugging Face Space exposes a single port, and the player must reach its PCM
WebSocket on the *same origin* as the page (no CORS, no second server). So the player's
socket (``/ll/ws``, :mod:`app.player.session`), the Playground's JSON API (``/ll/api/...``,
:mod:`app.playground.routes`), the admin login (:mod:`app.web.admin`) and the player's file
(``/ll/static/...``) are plain FastAPI routes; the arena (:mod:`app.arena`) and the listening
tests (:mod:`app.listening`) add theirs; Gradio's pages are mounted last, the Playground at
``/``. This module only wires the rooms together: every route lives in its room.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app.config import DEFAULT_DB, Storage, WebSettings
from app.state import DEFAULT_CONCURRENCY, AppState, Detector, build_state
from app.web.admin import AdminPolicy
from app.web.errors import install_error_handler
from app.web.guard import REFUSALS, GuardConfig, GuardMiddleware, default_allowed_hosts
from app.web.identity import IdentityMiddleware
from app.web.inputs import JSON_BODY_BYTES
from app.web.openapi import install as install_openapi
from app.web.proxies import Proxies
from app.web.slashes import add_slash_redirects
from backends.base import Backend
from voices.clips import MAX_UPLOAD_BYTES

UPLOAD_CHUNK_LIMIT = 16 * 1024 * 1024 + 64 * 1024
"""One chunk of a streamed stimuli upload (:data:`app.listening.upload.MAX_CHUNK_BYTES`)."""

log = logging.getLogger("listenlab.app")

BODY_LIMIT_SMALL = JSON_BODY_BYTES
"""JSON routes under ``/ll/`` (rename, share, login, a test's spec): nothing legitimate is
bigger."""
BODY_LIMIT_DEFAULT = 1024 * 1024
"""Everything else (Gradio's own routes)."""
WS_MAX_FRAME = 1024 * 1024
"""uvicorn closes a ``/ll/ws`` connection (1009) on a bigger frame; up to it, a message over
``app.player.session.MAX_MESSAGE_CHARS`` gets an error and the socket stays open."""


@asynccontextmanager
async def lifespan(app: FastAPI):
    """Close every backend and the store when the server stops."""
    yield
    state: AppState = app.state.listenlab
    for e in state.backends.values():
        with contextlib.suppress(Exception):
            await e.backend.aclose()
    state.store.close()


ADMIN_PATHS = (
    "/ll/admin/",
    "/admin/",
    "/ll/arena/api/voters",
    "/ll/arena/api/voters/",
    "/ll/arena/api/settings",
    "/ll/arena/api/votes.csv",
)
"""Routes only an admin uses: another site's page may not ask them anything (the guard)."""
ADMIN_PAGES = ("/admin/tests", "/admin/tests/", "/admin/arena", "/admin/arena/")
"""Admin pages another site may open as a page: huggingface.co frames a Space's pages."""


def guard_config(
    allowed_hosts: Sequence[str] | None,
    allowed_origins: Sequence[str] | None,
    settings: WebSettings | None = None,
) -> GuardConfig:
    """Hosts, origins, framing, admin routes and per-route body limits of ``listenlab serve``;
    the list of closed routes is filled once every Gradio app is mounted
    (:func:`close_unused_uploads`). ``settings``: the app's (read once)."""
    web = settings if settings is not None else WebSettings.from_env()
    if allowed_origins is None:
        allowed_origins = web.allowed_origins
    return GuardConfig(
        closed=[],
        allowed_hosts=(
            list(allowed_hosts) if allowed_hosts else default_allowed_hosts(settings=web)
        ),
        frame_ancestors=list(web.frame_ancestors),
        admin_paths=ADMIN_PATHS,
        admin_pages=ADMIN_PAGES,
        body_limits=[
            ("POST", "/ll/api/voices", MAX_UPLOAD_BYTES + 256 * 1024),
            ("POST", "/admin/tests/gradio_api/upload", GRADIO_UPLOAD_LIMIT),
            ("PUT", "/ll/admin/uploads/", UPLOAD_CHUNK_LIMIT),
            ("*", "/ll/", BODY_LIMIT_SMALL),
        ],
        default_body_limit=BODY_LIMIT_DEFAULT,
        allowed_origins=list(allowed_origins),
    )


def create_app(
    backends: Mapping[str, Backend | str] | Sequence[str],
    db_path: str | Path = DEFAULT_DB,
    *,
    voices_dir: str | Path | None = None,
    concurrency: int | Mapping[str, int] = DEFAULT_CONCURRENCY,
    default: str | None = None,
    detector: Detector | None = None,
    warm: bool = True,
    mount_ui: bool = True,
    journal_mode: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    storage: Storage | None = None,
) -> FastAPI:
    """Build the app. ``backends`` maps a UI label to a Backend (or spec), or lists specs.

    ``allowed_hosts``: ``Host`` headers answered (default :func:`app.web.guard.default_allowed_hosts`:
    localhost, ``$SPACE_HOST``, ``$LISTENLAB_ALLOWED_HOSTS``); ``allowed_origins``: other page
    origins that may open ``/ll/ws`` (default ``$LISTENLAB_ALLOWED_ORIGINS``); ``storage``:
    whether the store outlives the container (:func:`app.config.storage`; default: persistent).
    """
    from app.arena import install as install_arena
    from app.listening import mount as mount_listening
    from app.listening.upload import router as upload_router
    from app.player.page import STATIC as PLAYER_STATIC
    from app.player.session import router as player_router
    from app.playground.routes import router as playground_router
    from app.web.admin import router as admin_router

    state = build_state(
        backends,
        db_path,
        voices_dir=voices_dir,
        concurrency=concurrency,
        default=default,
        detector=detector,
        warm=warm,
        journal_mode=journal_mode,
        storage=storage,
    )
    app = FastAPI(title="listenlab", lifespan=lifespan)
    app.state.listenlab = state
    web = WebSettings.from_env()  # the environment, read once for this app
    app.state.web = web
    proxies = Proxies.from_env(web)  # one trust rule for client addresses and TLS
    app.state.proxies = proxies
    # the login back-off lives in the database when replicas share one (PostgreSQL)
    app.state.admin_policy = AdminPolicy.from_env(
        proxies, tally=getattr(state.store, "login_failures", None), settings=web
    )
    app.state.guard = guard = guard_config(allowed_hosts, allowed_origins, web)
    app.add_middleware(IdentityMiddleware, proxies=proxies)
    app.add_middleware(GuardMiddleware, config=guard)  # added last = runs first
    install_error_handler(app)
    app.mount("/ll/static", StaticFiles(directory=PLAYER_STATIC), name="ll-static")
    for router in (admin_router, playground_router, player_router, upload_router):
        app.include_router(router)
    install_arena(app, state, mount_ui=mount_ui)  # routes, /ll/ws messages, /arena (before "/")
    app = mount_listening(app, state, mount_ui=mount_ui)  # rater pages, routes, /admin/tests
    if mount_ui:
        import gradio as gr

        from app.playground.ui import CSS, build_ui

        app = gr.mount_gradio_app(app, build_ui(state), path="/", css=CSS)
        add_slash_redirects(app)  # /arena and /arena/ alike, past Gradio's catch-all at "/"
        app.state.listenlab = state
    guard.closed.extend(close_unused_uploads(app))
    install_openapi(app, guard=REFUSALS)  # the bodies routes read themselves, the guard's refusals
    return app


GRADIO_UPLOAD_LIMIT = MAX_UPLOAD_BYTES + 256 * 1024
"""The admin designer's Gradio uploads: the prompt file (a .txt) and the gold clip (a WAV or
FLAC of at most the 10 MiB a stimulus file may be). A study's audio does not come this way:
it is streamed in chunks to ``/ll/admin/uploads`` (:mod:`app.listening.upload`)."""
UPLOAD_COMPONENTS = {
    "File",
    "Files",
    "UploadButton",
    "Audio",
    "Image",
    "Video",
    "Gallery",
    "Model3D",
    "ImageEditor",
    "MultimodalTextbox",
    "SimpleImage",
}
"""Gradio components that post to ``gradio_api/upload``."""


def close_unused_uploads(app: FastAPI) -> list[tuple[str, str]]:
    """``gradio_api/upload`` of every mounted Gradio app that has no upload component.

    Gradio opens the route on every app; anonymous uploads are kept on disk. The Playground's
    voice upload is its own route (``/ll/api/voices``), the arena has none; only the admin
    designer (admin-only, under ``/admin/``) has a file input."""
    from starlette.routing import Mount

    closed = []
    for r in app.router.routes:
        blocks = getattr(getattr(r, "app", None), "blocks", None) if isinstance(r, Mount) else None
        if blocks is None:
            continue
        names = {type(b).__name__ for b in blocks.blocks.values()}
        if not names & UPLOAD_COMPONENTS:
            prefix = r.path.rstrip("/")
            closed += [("POST", f"{prefix}/gradio_api/upload"), ("POST", f"{prefix}/upload")]
    return closed


__all__ = ["create_app", "close_unused_uploads", "guard_config"]
