"""The arena's public Gradio page: a battle block on the one player, and the leaderboard.

The battle block is a ``gr.HTML`` whose ``js_on_load`` is the player core plus
``static/arena.js``: audio goes straight from ``/ll/ws`` into Web Audio, as in the Playground.
The leaderboard uses Gradio's own components (tables and a plot), refreshed on load, on the
Refresh button, and by the page after each vote.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from app.arena.service import MACHINE_COLUMNS
from evaluation.arena import BOARD_COLUMNS

if TYPE_CHECKING:
    import gradio as gr

    from app.arena.service import ArenaService


SIDE_HTML = """    <div class="ar-side" id="ar-side-{s}">
      <div class="ar-title">System {S}</div>
      <div class="ar-name" id="ar-name-{s}">hidden until you vote</div>
      <div class="ar-state" id="ar-state-{s}">not played</div>
      <button id="ar-play-{s}" type="button" disabled>Play {S}</button>
    </div>
"""
"""One side's panel (``{s}``: a or b), filled in for both sides into ``ARENA_HTML``."""

ARENA_HTML = """
<div id="ll-arena" data-ready="0">
  <label class="ar-label">Text to speak
    <textarea id="ar-text" rows="3" maxlength="__MAX__"
      placeholder="Type a sentence, or draw a random prompt"></textarea></label>
  <div class="ar-row">
    <button id="ar-random" type="button">Random prompt</button>
    <button id="ar-start" type="button" disabled>Start battle</button>
    <span id="ar-count" class="ar-muted"></span>
  </div>
  <div class="ar-sides">
__SIDES__  </div>
  <div class="ar-row ar-votes">
    <button id="ar-vote-a" type="button" disabled>A is better</button>
    <button id="ar-vote-tie" type="button" disabled>Tie</button>
    <button id="ar-vote-both_bad" type="button" disabled>Both bad</button>
    <button id="ar-vote-b" type="button" disabled>B is better</button>
  </div>
  <div id="ar-status" class="ar-status" role="status" aria-live="polite"></div>
</div>
"""
ARENA_HTML = ARENA_HTML.replace(
    "__SIDES__", "".join(SIDE_HTML.format(s=s, S=s.upper()) for s in ("a", "b"))
)

ARENA_CSS = """
#ll-arena { display: flex; flex-direction: column; gap: .6rem; }
#ll-arena textarea { width: 100%; font: inherit; padding: .4rem; box-sizing: border-box; }
#ll-arena .ar-row { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
#ll-arena .ar-sides { display: grid; grid-template-columns: 1fr 1fr; gap: .8rem; }
#ll-arena .ar-side { border: 1px solid var(--border-color-primary, #ccc); border-radius: 8px;
  padding: .6rem; display: flex; flex-direction: column; gap: .3rem; }
#ll-arena .ar-side.ar-playing { outline: 2px solid var(--color-accent, #f97316); }
#ll-arena .ar-title { font-weight: 600; }
#ll-arena .ar-name { font-family: monospace; }
#ll-arena .ar-muted { opacity: .7; font-size: .9em; }
#ll-arena button { padding: .35rem .8rem; border-radius: 6px; cursor: pointer;
  border: 1px solid var(--border-color-primary, #ccc); background: var(--button-secondary-background-fill, #eee);
  color: inherit; }
#ll-arena button:disabled { opacity: .45; cursor: not-allowed; }
#ll-arena .ar-status.ar-error { color: var(--error-text-color, #b91c1c); }
"""


def arena_js() -> str:
    return (Path(__file__).parent / "static" / "arena.js").read_text(encoding="utf-8")


def board_frames(data: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    cols = [*BOARD_COLUMNS, *MACHINE_COLUMNS]

    def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
        return pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame(columns=cols)

    prelim = frame(data["preliminary"]).drop(columns=["rank"])
    return frame(data["listed"]), prelim


def board_plot(data: dict[str, Any]):
    """Ratings with their 95 % intervals (listed systems solid, preliminary ones hollow)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = data["listed"] + data["preliminary"]
    fig, ax = plt.subplots(figsize=(6, 1.2 + 0.5 * max(1, len(rows))))
    for i, r in enumerate(reversed(rows)):
        ax.errorbar(
            r["rating"],
            i,
            xerr=[[r["rating"] - r["ci_low"]], [r["ci_high"] - r["rating"]]],
            fmt="o",
            capsize=4,
            color="C0" if r["listed"] else "0.5",
            mfc="C0" if r["listed"] else "white",
        )
    ax.set_yticks(range(len(rows)), [f"{r['system']} ({r['votes']})" for r in reversed(rows)])
    ax.set_xlabel("Bradley–Terry rating, 95 % bootstrap interval")
    if not rows:
        ax.text(0.5, 0.5, "no votes yet", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    plt.close(fig)
    return fig


def board_summary(data: dict[str, Any]) -> str:
    n = data["total_votes"]
    return (
        f"**{n} vote{'' if n == 1 else 's'}.** {data['method']}. Ties: {data['ties']}. "
        f"Systems with fewer than {data['min_votes']} votes are listed below as preliminary. "
        "JSON: `/ll/arena/api/leaderboard`."
    )


def refresh_board(svc: ArenaService) -> tuple[str, pd.DataFrame, pd.DataFrame, Any]:
    """The leaderboard's components (summary, ranked, preliminary, plot), from the board."""
    data = svc.board_data()
    listed, prelim = board_frames(data)
    return board_summary(data), listed, prelim, board_plot(data)


def build_arena_ui(svc: ArenaService) -> gr.Blocks:
    import gradio as gr

    from app.player.page import player_core_js
    from app.web.identity import hf_login_configured

    n = len(svc.systems)
    note = (
        ""
        if n >= 2
        else "\n\n**The arena needs at least two systems: start the server with two backends.**"
    )
    html = ARENA_HTML.replace("__MAX__", str(svc.config.limits.max_chars))

    refresh = functools.partial(refresh_board, svc)
    refresh.__name__ = "refresh"  # type: ignore[attr-defined]  # Gradio names the event by it
    with gr.Blocks(title="listenlab arena", analytics_enabled=False) as demo:
        gr.Markdown(
            "## listenlab arena\n"
            f"Type a sentence (or draw a random one). Two of the {n} systems on this server, "
            "picked at random, speak it blind, one after the other. Listen to both to the end, "
            "then vote: the names are revealed after your vote." + note
        )
        if hf_login_configured():  # a Space with hf_oauth: votes count per Hugging Face user
            gr.Markdown("Log in with Hugging Face to battle and vote (one account, one voter).")
            gr.LoginButton()
        gr.HTML(
            html,
            js_on_load=player_core_js() + "\n" + arena_js(),
            apply_default_css=False,
            elem_id="ll-arena-block",
        )
        gr.Markdown("### Leaderboard")
        summary = gr.Markdown(elem_id="arena-summary")
        listed = gr.Dataframe(
            headers=[*BOARD_COLUMNS, *MACHINE_COLUMNS],
            interactive=False,
            label="Ranked",
            elem_id="arena-board",
        )
        prelim = gr.Dataframe(
            headers=[*BOARD_COLUMNS[1:], *MACHINE_COLUMNS],
            interactive=False,
            label="Preliminary (too few votes to rank)",
            elem_id="arena-prelim",
        )
        plot = gr.Plot(label="Ratings with 95 % intervals", elem_id="arena-plot")
        btn = gr.Button("Refresh leaderboard", elem_id="arena-refresh")
        btn.click(refresh, outputs=[summary, listed, prelim, plot])
        demo.load(refresh, outputs=[summary, listed, prelim, plot])
    return demo
