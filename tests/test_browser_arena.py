"""The arena page in real Chromium: real server, two real Piper systems, the one player.

What it checks is what the visitor sees and what the server stored: the vote is locked until
the server accepted both sides as played to the end (an early vote sent from the page anyway is
refused), the names are hidden until the vote and revealed after it, a re-sent vote counts once,
and the Gradio leaderboard shows the vote.
"""

from __future__ import annotations

import json

import numpy as np
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


def seed_crowd(app) -> set[str]:
    """Honest votes of ten voters (alpha beats beta 3 times in 4, each voter on its own
    network) and a ring of four voters
    from one network who always pick beta, written through the store; the ring's voters."""
    from app.store import ArenaVote, BattleRecord

    rows = app.state.arena.arena.rows
    rng = np.random.default_rng(3)
    k, ring = 0, set()
    for v in range(14):
        liar = v >= 10
        voter = f"ip:{v:024x}"
        ring |= {voter} if liar else set()
        for _ in range(12):
            a, b = rng.permutation(list(SYSTEMS))
            won = "beta" if liar else ("alpha" if rng.random() < 0.75 else "beta")
            bid, ts = f"{k:032x}", (2e6 + 10 * k) if liar else (1e6 + 60 * k)
            net = "net:ring" if liar else f"net:{v}"
            rec = BattleRecord(
                bid, f"o{v}", f"t{k}", "prompt", a, b, ts, text_key=f"t{k}", network=net
            )
            rows.add_battle(rec, voter, lambda w: None)
            choice = "a" if a == won else "b"
            rows.add_vote(ArenaVote(bid, choice, a, b, "prompt", 9000.0, ts + 9, voter))
            k += 1
    return ring


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_admin_page_shows_flags_exclusions_and_the_board_with_intervals(browser, width):
    app = create_app(SYSTEMS, tmp_db(), mount_ui=False)
    app.state.arena.set_min_votes(10)
    ring = seed_crowd(app)
    with live_server(app) as live:
        page = browser.new_page()
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(live.url + "admin/arena")
        page.wait_for_selector("#aa-root[data-ready='1']", timeout=60_000)
        # the board with its intervals, as a table and as a forest plot
        rows = page.locator("#aa-board tr")
        assert rows.count() == 2
        first, second = (
            [c.text_content() for c in rows.nth(k).locator("td").all()] for k in (0, 1)
        )
        assert (first[1], second[1]) == ("alpha", "beta")
        lo, hi = (float(x) for x in second[3].split(" – "))
        assert lo < float(second[2]) < hi
        beta_attacked = float(second[2])
        assert page.locator("#aa-forest g.aa-bar").count() == 2
        assert "1.96" in page.text_content("#aa-method")
        assert "168 votes count on the board of 168 stored" in page.text_content("#aa-counts")
        # the flags name the ring; exclude it, voter by voter, with a reason
        kinds = page.eval_on_selector_all("#aa-flags tr", "rs => rs.map(r => r.dataset.kind)")
        assert "ring" in kinds and "network_burst" in kinds and "one_system" in kinds
        ring_row = page.locator("#aa-flags tr[data-kind='ring']")
        assert all(v in ring_row.text_content() for v in ring)
        page.fill("#aa-reason", "ring: one network, always beta")
        page.fill("#aa-by", "<b>ana</b>")
        for n in range(len(ring)):
            page.locator("#aa-flags tr[data-kind='ring'] button.aa-exclude").first.click()
            page.wait_for_function(
                f"document.querySelectorAll('#aa-exclusions tr').length === {n + 1}"
            )
        page.wait_for_function(
            "document.querySelector('#aa-counts').textContent.startsWith('120 votes count')"
        )
        second = [c.text_content() for c in page.locator("#aa-board tr").nth(1).locator("td").all()]
        assert second[1] == "beta" and float(second[2]) < beta_attacked - 100  # recovered
        ex = page.locator("#aa-exclusions tr").nth(0).locator("td").all()
        assert ex[1].text_content() == "ring: one network, always beta"
        assert ex[4].text_content().startswith("<b>ana</b> (localhost), ")  # text, not markup
        assert page.query_selector_all("#aa-exclusions b") == []
        assert page.locator("#aa-flags .aa-excluded").count() >= len(ring)
        # undo one: its votes count again, the row stays with the undo's reason
        page.fill("#aa-reason", "a real listener after all")
        page.locator("#aa-exclusions button.aa-undo").first.click()
        page.wait_for_function(
            "document.querySelector('#aa-counts').textContent.startsWith('132 votes count')"
        )
        assert page.locator("#aa-exclusions tr.aa-undone").count() == 1
        assert "a real listener after all" in page.text_content("#aa-exclusions tr.aa-undone")
        # a reason too short is refused with the server's message
        page.fill("#aa-reason", "x")
        page.locator("#aa-exclusions button.aa-undo").first.click()
        page.wait_for_function("document.querySelector('#aa-status').className === 'err'")
        assert "give a reason" in page.text_content("#aa-status")
        # nothing is wider than the screen
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1 or width > 1000
        page.close()
