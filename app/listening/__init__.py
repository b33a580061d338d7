"""Listening tests: rater pages, their routes and WebSocket handlers, the admin designer/results.

``mount(app, state)`` is the one hook ``app.server.create_app`` calls (before the Playground is
mounted at ``/``): it puts the :class:`~app.listening.service.Listening` service on
``app.state.listening`` (where the module-level routers of :mod:`app.listening.routes` find
it), adds the rater page's ``/ll/ws`` message types (:mod:`app.listening.ws`), the admin-only
guard of ``/admin/`` and, with ``mount_ui``, the Gradio admin page (:mod:`app.listening.admin`).
It refuses to start over a stored test whose kind is not registered
(:func:`evaluation.listening.kinds.check_stored`): such a test has no pages, votes or results.
"""

from __future__ import annotations

from typing import Any


def mount(app: Any, state: Any, *, mount_ui: bool = True) -> Any:
    """Add the listening-test routes, WS handlers and (with ``mount_ui``) the Gradio admin page."""
    from app.listening import routes, ws
    from app.listening.service import Listening
    from evaluation.listening.kinds import check_stored

    svc = Listening(state.store)
    check_stored((t.test_id, t.kind) for t in svc.tests.list_tests())
    app.state.listening = svc
    ws.register(state, svc)
    app.include_router(routes.router)
    app.include_router(routes.admin_router)
    app.middleware("http")(routes.admin_pages)

    if mount_ui:
        import gradio as gr

        from app.listening.admin import STATUS_WORDS, build_admin

        app = gr.mount_gradio_app(
            app, build_admin(state, svc), path="/admin/tests", i18n=gr.I18n(**STATUS_WORDS)
        )
    return app


__all__ = ["mount"]
