"""The admin page (``/admin/tests``, Gradio): one module per tab over the shared page state.

* :mod:`.design_tab`: design a test, generate its stimuli, preview what a rater sees;
* :mod:`.tests_tab`: open, close, duplicate or delete a test; its crowd settings;
* :mod:`.results_tab`: the results of a test, in words, a plot and the kind's tables;
* :mod:`.page`: what they share (:class:`AdminPage`, the test pickers, the top line).

:func:`build_admin` lays the tabs out; :func:`app.listening.mount` mounts it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from app.listening.admin.design_tab import design_tab
from app.listening.admin.page import AdminPage, LoginLine, bind, preview_choices, reload_choices
from app.listening.admin.results_tab import results_tab
from app.listening.admin.tests_tab import tests_tab
from app.listening.persistence import banner
from app.listening.service import Listening
from app.web.admin import AdminPolicy

STATUS_WORDS = {
    "en": {"common.complete": "Done.", "common.error": "Something went wrong."},
}
"""What Gradio announces when an event ends (its status line for screen readers): Gradio's
own English has no words for these keys and showed ``common.complete`` on the Tests tab after
Open or Close (#38 item 19), so the page gives them."""


def build_admin(state: Any, svc: Listening) -> gr.Blocks:
    """The admin page of this app: three tabs over the app's store and backends."""
    page = AdminPage(state, svc, Path(state.store.root) / "exports")
    with gr.Blocks(title="listenlab listening tests", analytics_enabled=False) as demo:
        gr.Markdown("## listenlab listening tests (admin)")
        if warning := banner(state.storage):
            gr.Markdown(warning, elem_id="lt-not-persistent")
        who = gr.Markdown(elem_id="lt-login")
        with gr.Tab("Design"):
            pv_pick = design_tab(page)
        with gr.Tab("Tests"):
            table, pick = tests_tab(page)
        with gr.Tab("Results"):
            rpick = results_tab(page)
        demo.load(bind(reload_choices, page), None, [pick, rpick, table])
        demo.load(LoginLine(AdminPolicy.from_env().mode), None, who)
        demo.load(bind(preview_choices, page), None, pv_pick)
    return demo


__all__ = ["STATUS_WORDS", "AdminPage", "build_admin"]
