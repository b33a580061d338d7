"""The arena's listing threshold, set by the admin on a running server (``/admin/arena`` and
``/ll/arena/api/settings``): a real server on 127.0.0.1, its real SQLite file, real votes
written through the arena's data layer (the battles themselves are tested in
test_arena_server.py), and real Chromium for the page."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from app.server import create_app
from app.web.identity import owner_for_token
from tests.support.app_util import chromium, live_server, tmp_db

SYSTEMS = {"piper": "piper?deterministic=1", "qwen": "piper?deterministic=1&profile=qwen3-tts"}
OUTSIDER = {"X-Forwarded-For": "203.0.113.9"}  # not this machine: not the admin
T0 = 1_000_000.0


def cast_votes(app, n: int, voter: str = "ip:" + "ab" * 12) -> None:
    """``n`` finished battles between the two systems, each voted 'a', by ``voter``."""
    arena = app.state.arena.arena
    owner = owner_for_token("c" * 43)
    for i in range(n):
        now = T0 + 10 * i
        bt = arena.new_battle(
            owner, f"Vote {i}.", list(SYSTEMS), np.random.default_rng(i), now=now, voter=voter
        )
        for k, side in enumerate("ab"):
            take = f"{i:04d}{side}".ljust(32, "0")
            arena.start_stream(bt, side, take, "s1", now=now + k)
            arena.finish_stream(take, "ok", 1.0, now + k + 0.1)
            arena.played(bt.battle_id, owner, side, take, 1000, now=now + k + 1.5)
        arena.vote(bt.battle_id, owner, "a", now=now + 4, voter=voter)


def board(live) -> dict:
    return httpx.get(live.url + "ll/arena/api/leaderboard", timeout=60).json()


def settings(live, body=None, headers=None) -> httpx.Response:
    url = live.url + "ll/arena/api/settings"
    if body is None:
        return httpx.get(url, headers=headers, timeout=60)
    return httpx.post(url, json=body, headers=headers, timeout=60)


def test_threshold_changes_the_board_and_survives_a_restart(monkeypatch):
    monkeypatch.setenv("LISTENLAB_ARENA_MIN_VOTES", "20")
    db = tmp_db()
    app = create_app(SYSTEMS, db, mount_ui=False)
    with live_server(app) as live:
        cast_votes(app, 3)
        b = board(live)
        assert b["min_votes"] == 20 and b["listed"] == [] and len(b["preliminary"]) == 2
        assert settings(live).json() == {"min_votes": 20, "default_min_votes": 20}

        r = settings(live, {"min_votes": 3})
        assert r.status_code == 200 and r.json() == {"min_votes": 3, "default_min_votes": 20}
        b = board(live)
        assert b["min_votes"] == 3 and b["preliminary"] == []
        assert sorted(x["system"] for x in b["listed"]) == sorted(SYSTEMS)
        assert all(x["votes"] == 3 for x in b["listed"])
        assert "set by the admin" in b["listing"]

        r = settings(live, {"min_votes": 4})  # one more than any system has: preliminary again
        assert r.json()["min_votes"] == 4 and board(live)["listed"] == []
        settings(live, {"min_votes": 3})

    again = create_app(SYSTEMS, db, mount_ui=False)  # a restarted Space: same DB
    with live_server(again) as live:
        assert settings(live).json()["min_votes"] == 3
        assert len(board(live)["listed"]) == 2
        r = settings(live, {"min_votes": None})  # back to the deployment's default
        assert r.json() == {"min_votes": 20, "default_min_votes": 20}
        assert board(live)["listed"] == []


@pytest.mark.parametrize(
    "value", [-1, 100_001, 1.5, True, "abc", [3], {"n": 3}], ids=lambda v: repr(v)
)
def test_bad_thresholds_are_refused_and_change_nothing(value):
    app = create_app(SYSTEMS, tmp_db(), mount_ui=False)
    with live_server(app) as live:
        settings(live, {"min_votes": 7})
        r = settings(live, {"min_votes": value})
        assert r.status_code == 400, r.text
        assert "min_votes must be a whole number 0..100000" in r.text
        assert settings(live).json()["min_votes"] == 7
        r = httpx.post(live.url + "ll/arena/api/settings", content=b"{not json", timeout=60)
        assert r.status_code == 400 and "min_votes" in r.text


def test_only_the_admin_sees_or_sets_the_threshold():
    app = create_app(SYSTEMS, tmp_db(), mount_ui=False)
    with live_server(app) as live:
        assert settings(live, headers=OUTSIDER).status_code == 403
        r = settings(live, {"min_votes": 0}, headers=OUTSIDER)
        assert r.status_code == 403 and "admin" in r.text
        assert settings(live).json()["min_votes"] == app.state.arena.config.min_votes
        page = httpx.get(
            live.url + "admin/arena", headers={**OUTSIDER, "Accept": "text/html"}, timeout=60
        )
        assert page.status_code == 403 and "password" in page.text.lower()
        assert "aa-form" not in page.text


def test_admin_page_in_chromium_sets_the_threshold_and_drops_a_voter(monkeypatch):
    monkeypatch.setenv("LISTENLAB_ARENA_MIN_VOTES", "20")
    app = create_app(SYSTEMS, tmp_db(), mount_ui=False)
    voter = "ip:" + "ab" * 12
    with live_server(app) as live, chromium() as ctx:
        cast_votes(app, 2, voter=voter)
        page = ctx.new_page()
        page.on("dialog", lambda d: d.accept())
        page.goto(live.url + "admin/arena")  # slash-less, as the docs write it
        page.wait_for_selector("#aa-root[data-ready='1']", timeout=30_000)
        assert page.input_value("#aa-min") == "20"
        assert page.text_content("#aa-default") == "20"
        rows = page.locator("#aa-voters tr")
        assert rows.count() == 1 and rows.nth(0).locator("td").nth(0).text_content() == voter
        assert rows.nth(0).locator("td").nth(1).text_content() == "2"

        page.fill("#aa-min", "2")
        page.click("#aa-form button[type=submit]")
        page.wait_for_function("document.getElementById('aa-now').textContent === '2'")
        assert page.text_content("#aa-status") == "Saved"
        assert len(board(live)["listed"]) == 2

        page.click(".aa-drop")
        page.wait_for_function("document.querySelectorAll('#aa-voters tr').length === 0")
        assert page.text_content("#aa-status") == "2 votes dropped"
        b = board(live)
        assert b["total_votes"] == 0 and b["listed"] == []
