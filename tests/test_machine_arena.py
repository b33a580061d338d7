"""The arena board's predicted-MOS column, on real parts: a real server on 127.0.0.1, two
real Piper systems (the same voice, one 1.25 times faster), a battle streamed, played and voted over ``/ll/ws`` as the page does, the
models of the ``[metrics]`` extra scoring the battle's takes in the background.

Skips without the extra (``LISTENLAB_METRICS_REQUIRED=1`` makes that a failure).
"""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

from app.store.scores import scores_of
from tests.test_arena_server import TEXT, get, new_cookie, page, wait_until_heard

SYSTEMS = {"piper": "piper?deterministic=1", "fast": "piper?deterministic=1&speed=1.25"}
"""Two Piper systems (the Qwen3-TTS profile of tests/test_arena_server.py reports Qwen's
language names, "English", which share no tag with the bundled English prompts on this base)."""

EXTRA = ("torch", "distillmos", "speechmos", "pocketsphinx", "jiwer")
MISSING = [m for m in EXTRA if importlib.util.find_spec(m) is None]
if MISSING:
    if os.environ.get("LISTENLAB_METRICS_REQUIRED"):
        pytest.fail(f"the [metrics] extra is required here; missing: {MISSING}", pytrace=False)
    pytest.skip(f"the [metrics] extra is not installed ({MISSING})", allow_module_level=True)


@pytest.fixture(scope="module")
def server():
    from app.server import create_app
    from app.web.proxies import Proxies
    from tests.support.app_util import live_server, tmp_db

    app = create_app(SYSTEMS, tmp_db(), mount_ui=False)
    svc = app.state.arena
    svc.proxies = Proxies.parse(["127.0.0.1"])
    with live_server(app) as live:
        yield live


def battle(server) -> tuple[str, dict, dict]:
    cookie = new_cookie(server)
    with page(server, cookie) as p:
        b = p.arena("arena_new", text=TEXT)
        assert b["type"] == "arena_battle", b
        bid = b["battle_id"]
        sides = {}
        for side in ("a", "b"):
            t = time.time()
            sides[side] = p.speak(bid, side)
            wait_until_heard(sides[side], t)
            assert p.played(bid, side, sides[side])["type"] == "arena_played"
        assert p.arena("arena_vote", battle_id=bid, choice="a")["type"] == "arena_voted"
    return bid, sides["a"], sides["b"]


def test_the_board_gains_a_predicted_mos_per_system(server):
    board = get(server.url + "ll/arena/api/leaderboard").json()
    assert board["listed"] + board["preliminary"] == [] or all(
        r["predicted_mos"] is None for r in board["listed"] + board["preliminary"]
    )
    _bid, a, b = battle(server)
    deadline = time.monotonic() + 300
    while True:  # the board queues the battle's takes; the column fills in when they are scored
        board = get(server.url + "ll/arena/api/leaderboard").json()
        rows = {r["system"]: r for r in board["listed"] + board["preliminary"]}
        if all(r["scored_takes"] == 1 for r in rows.values()) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert set(rows) == set(SYSTEMS)
    assert all(r["scored_takes"] == 1 for r in rows.values()), rows
    mos = [rows[s]["predicted_mos"] for s in SYSTEMS]
    assert all(2.5 <= m <= 5.0 for m in mos)
    assert "DistillMOS" in board["machine"]
    while True:  # the other metrics of the last take may still be running
        stored = scores_of(server.state.store).of_takes([a["take_id"], b["take_id"]])
        if len(stored) >= 6 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(r.metric for r in stored) == sorted(["distillmos", "dnsmos", "words"] * 2)
