"""The open arena: blind battles between two systems, votes, and the Bradley–Terry board
(``/arena``, its ``/ll/arena/...`` routes and ``/ll/ws`` messages, and ``/admin/arena``).

``install(app, state)`` is the one hook ``app.server.create_app`` calls (before the Playground
is mounted at ``/``). The room's modules, each importing only those before it:
:mod:`~app.arena.battles` (the rules) → :mod:`~app.arena.service` (one app's arena) →
:mod:`~app.arena.ws` (socket messages), :mod:`~app.arena.routes` (HTTP),
:mod:`~app.arena.page` (the Gradio page), :mod:`~app.arena.admin_page` (``/admin/arena``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from app.arena.service import ArenaService
    from app.config import ArenaSettings
    from app.state import AppState

PATH = "/arena"


def install(
    app: FastAPI,
    state: AppState,
    *,
    mount_ui: bool = True,
    settings: ArenaSettings | None = None,
) -> ArenaService:
    """Put the arena on the app: its service in ``app.state.arena``, its WebSocket handlers,
    its routers, and its page at ``/arena``. ``settings``: the deployment's knobs
    (default: :func:`app.config.arena_settings`, read here once)."""
    from app.arena import routes, ws
    from app.arena.admin_page import router as admin_page
    from app.arena.service import ArenaConfig, ArenaService
    from app.config import arena_settings

    config = ArenaConfig.of(settings or arena_settings())
    svc = ArenaService(state, config, proxies=getattr(app.state, "proxies", None))
    app.state.arena = svc
    ws.register(state, svc)
    app.include_router(routes.router)
    app.include_router(routes.admin)
    app.include_router(admin_page)
    if mount_ui:
        import gradio as gr

        from app.arena.page import ARENA_CSS, build_arena_ui

        gr.mount_gradio_app(app, build_arena_ui(svc), path=PATH, css=ARENA_CSS)
    return svc


__all__ = ["PATH", "install"]
