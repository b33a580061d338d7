"""The Gradio Playground page.

The controls, player and metrics card are one ``gr.HTML`` block whose ``js_on_load`` runs the
player core (:mod:`app.player.page`, ``window.LLPlayer``) and then the Playground page
(``static/playground.js``) on top of it. That keeps Speak -> first sound off Gradio's queue round
trip (~130 ms) and off its HLS/AAC audio path (~1.4 s); Gradio provides the page, theme and
layout. Other pages (listening tests, arena) reuse the same core: ``player_core_js() + page_js``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.player.page import player_core_js

if TYPE_CHECKING:
    import gradio as gr

    from app.state import AppState

STATIC = Path(__file__).parent / "static"
CSS = (STATIC / "player.css").read_text(encoding="utf-8")


def player_html(base: str = "/") -> str:
    return (STATIC / "player.html").read_text(encoding="utf-8").replace("__BASE__", base)


def playground_js() -> str:
    """The Playground page's script; it needs the core to run first."""
    return (STATIC / "playground.js").read_text(encoding="utf-8")


def player_js() -> str:
    """Core + Playground, the Playground block's ``js_on_load``."""
    return player_core_js() + "\n" + playground_js()


def build_ui(state: AppState, base: str = "/") -> gr.Blocks:
    import gradio as gr

    labels = ", ".join(state.backends)
    with gr.Blocks(title="listenlab Playground", analytics_enabled=False) as demo:
        gr.Markdown(
            "## listenlab Playground\n"
            f"Stream speech from **{labels}** into a raw-PCM Web Audio player. "
            "Press **G** (or the Glitch button) whenever you hear a glitch."
        )
        gr.HTML(
            player_html(base),
            js_on_load=player_js(),
            apply_default_css=False,
            elem_id="ll-player",
        )
    return demo
