"""The arena page in real Chromium: real server, two real Piper systems, the one player.

What it checks is what the visitor sees and what the server stored: the vote is locked until
the server accepted both sides as played to the end (an early vote sent from the page anyway is
refused), the names are hidden until the vote and revealed after it, a re-sent vote counts once,
and the Gradio leaderboard shows the vote.
"""

from __future__ import annotations

import json

import pytest

from app.server import create_app
from tests.support.app_util import live_server, tmp_db

pytestmark = pytest.mark.browser

SYSTEMS = {
    "alpha": "piper?deterministic=1",
    "beta": "piper?deterministic=1&profile=qwen3-tts",
}
VOTES = ["#ar-vote-a", "#ar-vote-tie", "#ar-vote-both_bad", "#ar-vote-b"]


@pytest.fixture(scope="module")
def server():
    app = create_app(SYSTEMS, tmp_db())
    app.state.arena.config.min_votes = 1  # so the first vote ranks both systems
    with live_server(app) as live:
        yield live


def open_arena(ctx, url: str):
    page = ctx.new_page()
    page.goto(url + "arena/")
    page.wait_for_selector("#ll-arena[data-ready='1']", timeout=60_000)
    return page


def votes_disabled(page) -> list[bool]:
    return [page.is_disabled(v) for v in VOTES]


def test_arena_battle_locked_then_revealed_and_the_board_updates(server, browser):
    page = open_arena(browser, server.url)
    page.wait_for_function(
        "document.querySelector('#arena-summary').textContent.includes('0 votes.')", timeout=30_000
    )
    page.click("#ar-random")
    page.wait_for_function("document.querySelector('#ar-text').value.length > 10")
    text = page.input_value("#ar-text")
    assert text in server.app.state.arena.prompts
    assert votes_disabled(page) == [True] * 4

    page.click("#ar-start")
    # side A played to the end (the server accepted the report); B not yet: still locked
    page.wait_for_function("window.listenlab.arena.played.a", timeout=90_000)
    st = page.evaluate(
        "({b: window.listenlab.arena.played.b, ready: window.listenlab.arena.ready})"
    )
    assert st == {"b": False, "ready": False}
    assert votes_disabled(page) == [True] * 4
    assert page.inner_text("#ar-name-a") == "hidden until you vote"
    # a vote sent from the page anyway, skipping the disabled button: the server refuses it
    page.evaluate(
        "window.listenlab.player.send({type: 'arena_vote', choice: 'a',"
        " battle_id: window.listenlab.arena.battle.battle_id})"
    )
    page.wait_for_function(
        "document.querySelector('#ar-status').textContent.includes('listen to both sides')"
    )
    assert server.state.store.db["arena_votes"].count == 0

    page.wait_for_function("window.listenlab.arena.ready", timeout=90_000)
    assert votes_disabled(page) == [False] * 4
    assert page.inner_text("#ar-state-a") == page.inner_text("#ar-state-b") == "played ✓"
    # both sides were really played by the player, to the end, from complete streams
    ended = page.evaluate(
        "window.listenlab.arena.events.filter(e => e.type === 'ended').map(e => e.detail)"
    )
    done = [e for e in ended if e["complete"] and not e["stopped"]]
    assert len(done) >= 2
    for e in done:
        assert e["played_ms"] == pytest.approx(e["duration_ms"]) and e["duration_ms"] > 1000
    # nothing the page received so far names a system
    seen = json.dumps(page.evaluate("window.listenlab.arena.events"))
    assert "alpha" not in seen and "beta" not in seen
    assert page.inner_text("#ar-name-b") == "hidden until you vote"
    # Piper (22050 Hz) and the Qwen3-TTS profile (24000 Hz) reached the player in one format
    formats = page.evaluate("window.listenlab.player.gens.map(g => [g.sr, g.ch, !!g.start.learnt])")
    assert len(formats) >= 2 and {tuple(f) for f in formats} == {(24000, 1, False)}

    page.click("#ar-vote-b")
    page.wait_for_function("window.listenlab.arena.voted === 'b'", timeout=30_000)
    bid = page.evaluate("window.listenlab.arena.battle.battle_id")
    row = server.state.store.db["arena_battles"].get(bid)
    assert row["text"] == text
    assert page.inner_text("#ar-name-a") == row["system_a"]
    assert page.inner_text("#ar-name-b") == row["system_b"]
    assert {row["system_a"], row["system_b"]} == set(SYSTEMS)
    assert votes_disabled(page) == [True] * 4
    # the same vote re-sent (a double click that slipped through): counted once
    page.evaluate(
        "window.listenlab.player.send({type: 'arena_vote', choice: 'b',"
        " battle_id: window.listenlab.arena.battle.battle_id})"
    )
    page.wait_for_function("document.querySelector('#ar-status').textContent.includes('already')")
    votes = list(server.state.store.db["arena_votes"].rows)
    assert [(v["battle_id"], v["choice"]) for v in votes] == [(bid, "b")]

    # the leaderboard (Gradio components) was refreshed by the vote: B's system ranks first
    page.wait_for_function(
        "document.querySelector('#arena-summary').textContent.includes('1 vote.')", timeout=30_000
    )
    board = page.inner_text("#arena-board")
    winner, loser = row["system_b"], row["system_a"]
    assert winner in board and loser in board
    assert board.index(winner) < board.index(loser)
    api = server.app.state.arena.board_data()
    assert [r["system"] for r in api["listed"]] == [winner, loser]
    assert api["listed"][0]["wins"] == 1 and api["listed"][1]["losses"] == 1


def test_arena_page_escapes_text_and_shows_the_rate_limit(server, browser):
    svc = server.app.state.arena
    old = svc.config.limits
    page = open_arena(browser, server.url)
    # one battle already made by this browser session in the test above (same cookie)
    made = server.state.store.db.execute("SELECT count(*) FROM arena_battles").fetchone()[0]
    svc.set_limits(battles_per_minute=made + 1)
    try:
        hostile = "<img src=x onerror=window.pwned=1>Hello <b>there</b>, arena."
        page.fill("#ar-text", hostile)
        page.click("#ar-start")
        page.wait_for_function("window.listenlab.arena.battle !== null", timeout=30_000)
        assert page.evaluate("window.listenlab.arena.battle.text") == hostile
        assert page.evaluate("window.pwned === undefined")
        assert page.query_selector_all("#ll-arena img, #ll-arena b") == []
        # next battle over the limit: the page says why and when to come back
        page.click("#ar-start")
        page.wait_for_function(
            "document.querySelector('#ar-status').textContent.includes('Slow down')",
            timeout=30_000,
        )
        msg = page.inner_text("#ar-status")
        assert f"at most {made + 1} battles per minute" in msg and "Try again in" in msg
        assert not page.is_disabled("#ar-start")  # the visitor can retry later
    finally:
        svc.set_limits(battles_per_minute=old.battles_per_minute)
