"""Listening tests: rater pages, their routes and WebSocket handlers, the admin designer/results.

``mount(app, state)`` is the one hook ``app.server.create_app`` calls (before the Playground is
mounted at ``/``). The open arena lives beside this in ``app/listening/arena*.py``.
"""

from __future__ import annotations

from typing import Any


def mount(app: Any, state: Any, *, mount_ui: bool = True) -> Any:
    """Add the listening-test routes, WS handlers and (with ``mount_ui``) the Gradio admin page."""
    from app.listening import routes, ws
    from app.listening.service import Listening

    svc = Listening(state.store)
    ws.register(state, svc)
    routes.add_routes(app, svc, state)

    if mount_ui:
        import gradio as gr

        from app.listening.admin_ui import build_admin

        app = gr.mount_gradio_app(app, build_admin(state, svc), path="/admin/tests")
    return app


__all__ = ["mount"]
