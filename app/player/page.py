"""The player's browser file, ``player-core.js`` (``window.LLPlayer``): one player for every page.

Gradio pages (the Playground, the arena) inline it into their ``js_on_load`` and run their own
script on top; the rater page loads it by URL from ``/ll/static/player-core.js``, which
:data:`STATIC` serves. Its start rule has a Python twin, :mod:`evaluation.playout`.
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"
"""Served at ``/ll/static/``."""


def player_core_js() -> str:
    """The one player, for any page's ``js_on_load``; it defines ``window.LLPlayer`` once."""
    return (STATIC / "player-core.js").read_text(encoding="utf-8")


__all__ = ["STATIC", "player_core_js"]
