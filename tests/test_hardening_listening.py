"""One test per attack of issue #19 (listening tests, arena, admin), over real HTTP/WebSocket.

Each performs the attack against a real server on 127.0.0.1 (a child process where its memory
is measured) and asserts it fails, then that the honest path still works. Arena visitors from
several addresses are made the way a Space's proxy makes them: the server trusts 127.0.0.1 as
its proxy and reads ``X-Forwarded-For``; without that trust the same header is ignored.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import math
import time
import zipfile
from types import SimpleNamespace

import httpx
import numpy as np
import pytest

from app.arena.battles import Arena, Limits, RateLimited
from app.player.blind import LoudnessMatch, Reframer, equal_frames
from app.server import GRADIO_UPLOAD_LIMIT, create_app
from app.store import Store
from app.web.admin import AdminPolicy
from app.web.outbox import Outbox
from app.web.proxies import Proxies
from app.web.ratelimit import KeyedRate
from evaluation.report import neutralise_cell
from tests.support.app_util import create_one_item_test, listening_app, live_server, tmp_db
from tests.support.hardening_util import (
    ArenaPage,
    RssSampler,
    arena_cookie,
    arena_page,
    recv_json,
    rss_kb,
    stimulus_flood,
)
from tests.support.rater import RaterClient
from tests.support.remote_util import listenlab_process

PW = "s3cret-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
PROMPT = "The birch canoe slid on the smooth planks, glued the sheet to the dark blue background."
TIMEOUT = 60.0


def run(coro):
    return asyncio.run(coro)


# --------------------------------------------------------------------------- row 1: outbox


def test_outbox_counts_bytes_slows_then_overflows():
    async def go():
        dropped = []
        box = Outbox(
            soft_bytes=1000, hard_bytes=3000, stall_s=0.2, on_overflow=lambda: dropped.append(1)
        )
        assert box.put_nowait(b"x" * 900) and not box.full
        assert box.put_nowait({"type": "t", "pad": "y" * 200}) and box.full
        assert await box.wait_for_room() is False  # nobody reads: the wait gives up
        assert await box.get() == b"x" * 900 and not box.full  # a read makes room
        assert await box.wait_for_room() is True
        assert box.put_nowait(b"z" * 2500) and box.put_nowait(b"z" * 10) is True
        assert box.put_nowait(b"z" * 600) is False and box.overflowed and dropped == [1]
        assert box.bytes == 0 and await box.get() is None  # freed at once, writer stops
        big = Outbox(soft_bytes=10, hard_bytes=20)
        assert big.put_nowait(b"w" * 100)  # one message bigger than the budget still goes

    run(go())


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    """``listenlab serve`` as a child process (its RSS is its own), one open test."""
    db = tmp_path_factory.mktemp("ll-flood") / "lab.db"
    env = {"LISTENLAB_ADMIN_PASSWORD": PW, "LISTENLAB_WS_STALL_S": "4"}
    with listenlab_process(
        "serve", "--backend", "piper=piper?deterministic=1", "--db", str(db),
        health="/ll/health", env=env,
    ) as c:  # fmt: skip
        live = SimpleNamespace(url=c.url + "/")
        tid = create_one_item_test(
            live, {"name": "a", "backend": "piper", "condition": "whole"}, PROMPT, ADMIN
        )
        yield SimpleNamespace(url=c.url, pid=c.pid, test_id=tid)


async def _rater(url: str, test_id: str) -> tuple[RaterClient, str]:
    c = RaterClient(url, test_id)
    await c.join()
    return c, (await c.status())["item"]["assignment_id"]


@pytest.mark.timeout(900)
def test_stimulus_flood_without_reading_is_slowed_closed_and_memory_stays_flat(child):
    """Before: +228 MB RSS from one socket sending ~190-byte ``stimulus`` messages."""

    async def go():
        c, aid = await _rater(child.url, child.test_id)
        msg = json.dumps(
            {"type": "stimulus", "token": 1, "test_id": child.test_id,
             "rater_token": c.token, "assignment_id": aid, "slot": 0}
        )  # fmt: skip
        out = await stimulus_flood(child.url, msg, seconds=30)
        await c.aclose()
        return out

    base = rss_kb(child.pid)
    with RssSampler(child.pid) as rss:
        sent, blocked_after, closed_after = run(go())
    growth_mb = (rss.peak_kb - base) / 1024
    print(
        f"flood: {sent} sent, blocked {blocked_after} s, closed {closed_after} s, RSS +{growth_mb:.1f} MB"
    )
    assert closed_after is not None, f"the server kept a non-reading socket open ({sent} sent)"
    assert closed_after < 45  # slowed (its messages not read) for the 4 s stall, then dropped
    assert growth_mb < 60, f"RSS grew {growth_mb:.0f} MB under the flood"
    # the server still answers, and an honest rater still hears the stimulus
    assert httpx.get(child.url + "/ll/health", timeout=TIMEOUT).status_code == 200

    async def honest():
        c, aid = await _rater(child.url, child.test_id)
        p = await c.listen(aid, 0, realtime=False, report=False)
        await c.aclose()
        return p

    p = run(honest())
    assert p.frames > 22050 and p.done["status"] == "ok"


# --------------------------------------------------------------------------- rows 2-3, 7


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app(PW)) as lv:
        yield lv


@pytest.fixture(scope="module")
def whole_test(live):
    return create_one_item_test(
        live, {"name": "a", "backend": "piper", "condition": "whole"}, PROMPT, ADMIN
    )


def test_play_event_and_glitch_floods_are_capped(live, whole_test):
    """Before: 1,500 ``play_event`` + 1,500 ``listen_glitch`` wrote 3,000 rows in 2.5 s."""
    db = live.state.store.db

    async def go():
        c, aid = await _rater(live.url, whole_test)
        p = await c.listen(aid, 0, realtime=False, report=False)
        # honest: one play event and one mark are stored
        ev = await c.play_event(aid, 0, p.played_ms)
        assert ev["type"] == "play_saved", ev
        g = await c.glitch(aid, 0, 500.0)
        assert g["type"] == "listen_glitch_saved", g
        ws = c.ws
        t0 = time.monotonic()
        for i in range(1500):
            await ws.send(json.dumps({"type": "play_event", "test_id": whole_test,
                "rater_token": c.token, "assignment_id": aid, "slot": 0, "played_ms": 100 + i}))  # fmt: skip
            await ws.send(json.dumps({"type": "listen_glitch", "test_id": whole_test,
                "rater_token": c.token, "assignment_id": aid, "slot": 0,
                "position_ms": 100 + i, "report_id": f"r{i}"}))  # fmt: skip
        replies: list[dict] = []
        while len(replies) < 3000:
            replies.append(await recv_json(ws, lambda d: d["type"] != "pong"))
        elapsed = time.monotonic() - t0
        rid = (await c.status())["rater_id"]
        await c.aclose()
        return replies, elapsed, rid

    replies, elapsed, rid = run(go())
    plays = db.execute("SELECT count(*) FROM play_events WHERE rater_id=?", [rid]).fetchone()[0]
    marks = db.execute("SELECT count(*) FROM glitch_reports WHERE rater_id=?", [rid]).fetchone()[0]
    refused = [r for r in replies if r["type"] == "listen_error"]
    # the page's and the rater's buckets: 30 at once, then 5 a second
    assert plays + marks <= 2 + 30 + 5 * elapsed + 5, (plays, marks, elapsed)
    assert plays <= 60 and marks <= 40
    assert len(refused) >= 3000 - (plays + marks)
    assert any("at most 5 a second" in r["message"] for r in refused)


def test_glitch_cap_per_stimulus(live, whole_test):
    """Slow enough for the rate, a rater still keeps at most 40 marks per stimulus."""

    async def go():
        c, aid = await _rater(live.url, whole_test)
        await c.listen(aid, 0, realtime=False, report=False)
        out = []
        for i in range(46):
            out.append(await c.glitch(aid, 0, 10.0 * i))
            await asyncio.sleep(0.2)  # 5 a second: never over the rate
        await c.aclose()
        return out

    out = run(go())
    saved = [m for m in out if m["type"] == "listen_glitch_saved"]
    assert len(saved) == 40
    assert "40 marks are kept per stimulus" in out[-1]["message"]


def test_playground_reports_cannot_touch_a_shared_stimulus_take(live, whole_test):
    """Before: ``underruns`` naming a stimulus take set its ``underrun_count`` to 999999."""
    takes = live.state.store.db["takes"]

    async def go():
        c, aid = await _rater(live.url, whole_test)
        await c.listen(aid, 0, realtime=False, report=False)
        q = "SELECT take_id FROM assignments WHERE assignment_id=?"  # the page sees no take id
        stim = live.state.store.db.execute(q, [aid]).fetchone()[0]
        ws = c.ws
        await ws.send(json.dumps({"type": "underruns", "take_id": stim, "count": 999999,
                                  "stall_ms": 1e6, "positions_ms": [1.0]}))  # fmt: skip
        u = await recv_json(ws, lambda d: d["type"] in {"report_error", "underruns_saved"})
        await ws.send(json.dumps({"type": "glitch", "take_id": stim, "position_ms": 100.0}))
        g = await recv_json(ws, lambda d: d["type"] in {"report_error", "glitch_saved"})
        # honest: the same socket's own Playground take takes its reports
        await ws.send(
            json.dumps({"type": "speak", "token": 9, "backend": "piper", "text": "Hi there."})
        )
        done = await recv_json(ws, lambda d: d.get("token") == 9 and d["type"] in {"done", "error"})
        await ws.send(json.dumps({"type": "underruns", "take_id": done["take_id"], "count": 2,
                                  "stall_ms": 30.0, "positions_ms": [5.0]}))  # fmt: skip
        own = await recv_json(ws, lambda d: d["type"] in {"report_error", "underruns_saved"})
        await c.aclose()
        return stim, u, g, done["take_id"], own

    stim, u, g, mine, own = run(go())
    assert u["type"] == "report_error" and "shared take" in u["message"]
    assert g["type"] == "report_error" and "shared take" in g["message"]
    row = takes.get(stim)
    assert (row["underrun_count"] or 0) == 0 and (row["underrun_stall_ms"] or 0) == 0
    assert (
        live.state.store.db.execute(
            "SELECT count(*) FROM glitch_reports WHERE take_id=? AND test_id IS NULL", [stim]
        ).fetchone()[0]
        == 0
    )
    assert own["type"] == "underruns_saved" and takes.get(mine)["underrun_count"] == 2


def test_formula_report_id_is_refused_and_every_csv_is_neutralised(live, whole_test):
    """Before: a ``report_id`` of ``=HYPERLINK(…)`` landed raw in export.zip."""
    evil = '=HYPERLINK("http://x.invalid","click")'

    async def go():
        c = RaterClient(live.url, whole_test, crowd_id="@SUM.A1")  # a legal id a sheet runs
        await c.join()
        aid = (await c.status())["item"]["assignment_id"]
        await c.listen(aid, 0, realtime=False, report=False)
        ws = await c._socket()
        await ws.send(json.dumps({"type": "listen_glitch", "test_id": whole_test,
            "rater_token": c.token, "assignment_id": aid, "slot": 0, "position_ms": 50.0,
            "report_id": evil}))  # fmt: skip
        bad = await recv_json(ws, lambda d: d["type"] in {"listen_error", "listen_glitch_saved"})
        ok = await c.glitch(aid, 0, 60.0)
        await c.aclose()
        return bad, ok

    bad, ok = run(go())
    assert bad["type"] == "listen_error" and "report id must be" in bad["message"]
    assert ok["type"] == "listen_glitch_saved"
    r = httpx.get(
        f"{live.url}ll/admin/tests/{whole_test}/export.zip", headers=ADMIN, timeout=TIMEOUT
    )
    assert r.status_code == 200
    z = zipfile.ZipFile(io.BytesIO(r.content))
    everything = "\n".join(z.read(n).decode() for n in z.namelist() if n.endswith(".csv"))
    assert "HYPERLINK" not in everything
    raters = z.read("raw/test_raters.csv").decode()
    assert "'@SUM.A1" in raters and ",@SUM.A1" not in raters
    assert neutralise_cell("-2.5") == "-2.5" and neutralise_cell("=1+1") == "'=1+1"


# --------------------------------------------------------------------------- arena


ARENA_SYSTEMS = {"loud": "piper?deterministic=1", "quiet": "piper?deterministic=1&gain=0.25"}
TEXT = "The birch canoe slid on the smooth planks."


@pytest.fixture(scope="module")
def arena_server():
    app = create_app(ARENA_SYSTEMS, tmp_db(), mount_ui=False)
    app.state.admin_policy = AdminPolicy(PW, b"k" * 32, Proxies())
    with live_server(app) as lv:
        yield lv


def test_fresh_cookies_do_not_make_new_voters(arena_server):
    """Before: fresh cookies moved a chosen system 1592 -> 1691 in 3 votes."""
    svc = arena_server.app.state.arena
    svc.set_limits(votes_per_hour=1)
    db = arena_server.state.store.db
    spoof = {"X-Forwarded-For": "198.51.100.7"}  # ignored: 127.0.0.1 is not a trusted proxy here

    async def go():
        results = []
        for _ in range(2):
            async with arena_page(arena_server.url, arena_cookie(arena_server.url), spoof) as ws:
                p = ArenaPage(ws)
                await p.until(lambda d: d["type"] == "hello")
                results.append(await p.battle_and_vote("a"))
        return results

    try:
        board0 = httpx.get(arena_server.url + "ll/arena/api/leaderboard").json()
        (bid1, v1), (bid2, v2) = run(go())
    finally:
        svc.set_limits(votes_per_hour=30)
    assert v1["type"] == "arena_voted" and v1["counted"] is True
    assert v2["type"] == "arena_error" and v2["reason"] == "rate_limited"
    assert "at most 1 votes per hour per visitor" in v2["message"]
    votes = list(db["arena_votes"].rows)
    assert [v["battle_id"] for v in votes] == [bid1]
    voter = votes[0]["voter"]
    assert voter.startswith("ip:") and len(voter) == 27 and "127" not in voter
    b1, b2 = db["arena_battles"].get(bid1), db["arena_battles"].get(bid2)
    assert b1["voter"] == b2["voter"] == voter and b1["owner"] != b2["owner"]
    board = httpx.get(arena_server.url + "ll/arena/api/leaderboard").json()
    assert board["total_votes"] == board0["total_votes"] + 1
    # the admin drops the voter: its vote leaves the board, its later votes are refused
    r = httpx.get(arena_server.url + "ll/arena/api/voters", headers=ADMIN)
    assert r.json()["voters"][0] == {**r.json()["voters"][0], "voter": voter, "votes": 1}
    assert httpx.post(f"{arena_server.url}ll/arena/api/voters/{voter}/drop").status_code == 403
    r = httpx.post(f"{arena_server.url}ll/arena/api/voters/{voter}/drop", headers=ADMIN)
    assert r.json() == {"voter": voter, "votes_dropped": 1}
    assert (
        httpx.get(arena_server.url + "ll/arena/api/leaderboard").json()["total_votes"]
        == board0["total_votes"]
    )
    assert svc.arena.vote_count() == 0

    async def after():
        async with arena_page(arena_server.url, arena_cookie(arena_server.url)) as ws:
            p = ArenaPage(ws)
            await p.until(lambda d: d["type"] == "hello")
            return await p.ask("arena_new", text=TEXT)

    m = run(after())
    rows = list(arena_server.state.store.db["arena_dropped_voters"].rows)
    last = arena_server.state.store.db.execute(
        "SELECT voter FROM arena_battles ORDER BY created_ts DESC LIMIT 1"
    ).fetchone()
    assert m["type"] == "arena_error" and m["reason"] == "voter_dropped", (m, rows, last, voter)


def test_one_client_cannot_take_the_global_budget(arena_server):
    """Before: one client minting 11 cookies locked every new visitor out (429)."""
    svc = arena_server.app.state.arena
    old, old_proxies = svc.config.limits, svc.proxies
    svc.set_limits(battles_per_minute=10, global_battles_per_minute=40)
    svc.proxies = Proxies.parse(["127.0.0.1"])  # as behind a Space's proxy

    async def new_battle(ip: str) -> dict:
        async with arena_page(
            arena_server.url, arena_cookie(arena_server.url), {"X-Forwarded-For": ip}
        ) as ws:
            p = ArenaPage(ws)
            await p.until(lambda d: d["type"] == "hello")
            return await p.ask("arena_new", text=TEXT)

    async def go():
        # the previous tests' battles are within the minute: count from here
        attacker = [await new_battle("203.0.113.50") for _ in range(11)]
        newcomer = await new_battle("198.51.100.20")
        spoofed = await new_battle("198.51.100.20, 203.0.113.50")  # proxy appends the real one
        return attacker, newcomer, spoofed

    try:
        attacker, newcomer, spoofed = run(go())
    finally:
        svc.config.limits, svc.arena.limits, svc.proxies = old, old, old_proxies
    kinds = [m["type"] for m in attacker]
    assert kinds.count("arena_battle") == 10 and kinds[-1] == "arena_error", kinds
    assert "at most 10 battles per minute per visitor" in attacker[-1]["message"]
    assert newcomer["type"] == "arena_battle", newcomer
    assert spoofed["type"] == "arena_error" and spoofed["reason"] == "rate_limited"


def test_fair_share_keeps_room_for_newcomers(tmp_path):
    store = Store.open(tmp_path / "ll.db")
    try:
        arena = Arena(store, Limits(battles_per_minute=6, global_battles_per_minute=8))
        rng = np.random.default_rng(0)
        t = 1_000_000.0

        def new(voter: str, dt: float = 0.0):
            return arena.new_battle("o" + voter, TEXT, ["x", "y"], rng, now=t + dt, voter=voter)

        for i in range(6):
            new("A", i * 0.1)  # alone, A may use its per-voter cap (6 of 8)
        new("B", 1)  # a newcomer gets in (7 of 8)
        with pytest.raises(RateLimited, match="at most 6 battles per minute"):
            new("A", 2)
        # A is over its fair share (8 / 2 voters): held to the shared 6 once its minute frees
        new("C", 30)  # 8 of 8 used
        with pytest.raises(RateLimited, match="busy"):
            new("D", 31)
        # a new minute: A 3, B 2, C 1 battles (6 of 8; 3 voters, a fair share is 8/3)
        T = 1000.0
        for dt, v in ((0, "A"), (0.1, "A"), (0.2, "A"), (1, "B"), (1.1, "B"), (2, "C")):
            new(v, T + dt)
        with pytest.raises(RateLimited, match="busy"):
            new("A", T + 3)  # over its share: only the shared part (6) is open to it
        new("B", T + 4)  # under its share: may use the whole budget (7 of 8)
        new("D", T + 5)  # a newcomer too (8 of 8)
        with pytest.raises(RateLimited, match="busy"):
            new("E", T + 6)
    finally:
        store.close()


def test_blind_sides_come_in_equal_frames_at_one_loudness(arena_server):
    """Before: one frame per native chunk (3840 B vs 76750 B) and each system's own level."""
    from evaluation.loudness import measure_lufs

    async def go():
        async with arena_page(
            arena_server.url, arena_cookie(arena_server.url), {"X-Forwarded-For": "192.0.2.44"}
        ) as ws:
            p = ArenaPage(ws)
            await p.until(lambda d: d["type"] == "hello")
            b = await p.ask("arena_new", text=TEXT)
            out = {}
            for side in ("a", "b"):
                p.token += 1
                tok, n0 = p.token, len(p.frames)
                await ws.send(
                    json.dumps(
                        {
                            "type": "arena_speak",
                            "token": tok,
                            "battle_id": b["battle_id"],
                            "side": side,
                        }
                    )
                )
                await p.until(lambda d, tok=tok: d.get("token") == tok and d["type"] == "done")
                out[side] = [
                    raw for _, raw in p.frames[n0:] if int.from_bytes(raw[:4], "little") == tok
                ]
            return b["battle_id"], out

    svc = arena_server.app.state.arena
    old = svc.proxies
    svc.proxies = Proxies.parse(["127.0.0.1"])
    try:
        bid, frames = run(go())
    finally:
        svc.proxies = old
    row = arena_server.state.store.db["arena_battles"].get(bid)
    sizes = {len(f) for fs in frames.values() for f in fs}
    assert sizes == {12 + 2205 * 2}  # 0.1 s at the common rate (both systems are 22.05 kHz)
    lufs = {}
    for side, fs in frames.items():
        pcm = np.concatenate([np.frombuffer(f[12:], "<i2") for f in fs])
        lufs[row[f"system_{side}"]] = measure_lufs(pcm, 22050)
    # natively 15 dB apart (gain 1.4 vs 0.25): within 1.5 LU of the target and of each other
    assert abs(lufs["loud"] - lufs["quiet"]) < 1.5, lufs
    assert all(abs(v + 23.0) < 1.5 for v in lufs.values()), lufs


def test_reframer_and_loudness_match_units():
    blocks = [np.arange(n, dtype=np.int16) for n in (7, 1, 30, 2)]
    frames = list(equal_frames(blocks, 8))
    assert [len(f) for f in frames] == [8] * 5  # 40 samples -> 5 frames, the last padded
    assert np.concatenate(frames)[:40, 0].tolist() == np.concatenate(blocks).tolist()
    assert not np.concatenate(frames)[40:].any()
    r = Reframer(8)
    assert r.push(np.zeros(3, np.int16)) == [] and r.flush()[0].shape == (8, 1) and r.flush() == []
    rate = 24000
    t = np.arange(rate * 2) / rate
    tone = (0.05 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
    m = LoudnessMatch(rate, rate)
    out = np.concatenate([m.push(tone[:10000]), m.push(tone[10000:]), m.flush()])
    assert len(out) == len(tone) and m.gain_db is not None and m.gain_db > 0
    assert np.allclose(out, tone * 10 ** (m.gain_db / 20), atol=1e-6)  # one gain throughout
    silent = LoudnessMatch(rate, rate)
    assert silent.push(np.zeros(rate * 2, np.float32)).any() == False and silent.gain_db == 0.0  # noqa: E712


def test_hf_login_is_the_voter_where_configured(arena_server, monkeypatch):
    """On a Space with ``hf_oauth``, voting needs the HF login; a forged session is no login.

    The Hugging Face OAuth server cannot run here: the session cookie Gradio would set after a
    login is made the way Gradio's SessionMiddleware makes it (same key, itsdangerous)."""
    itsdangerous = pytest.importorskip("itsdangerous")
    monkeypatch.setenv("OAUTH_CLIENT_ID", "test-client")
    monkeypatch.setenv("OAUTH_CLIENT_SECRET", "test-secret")
    key = hashlib.sha256(b"test-secret-v4").hexdigest()

    def session(user: str, signer_key: str = key) -> str:
        data = base64.b64encode(
            json.dumps(
                {
                    "oauth_info": {
                        "userinfo": {"preferred_username": user},
                        "expires_at": time.time() + 600,
                    }
                }
            ).encode()
        )
        return itsdangerous.TimestampSigner(signer_key).sign(data).decode()

    async def new_battle(extra_cookie: str) -> dict:
        cookie = arena_cookie(arena_server.url) + extra_cookie
        async with arena_page(arena_server.url, cookie) as ws:
            p = ArenaPage(ws)
            await p.until(lambda d: d["type"] == "hello")
            return await p.ask("arena_new", text=TEXT)

    anon = run(new_battle(""))
    forged = run(new_battle(f"; session={session('alice', 'wrong-key')}"))
    alice = run(new_battle(f"; session={session('alice')}"))
    assert anon["type"] == forged["type"] == "arena_error"
    assert anon["reason"] == forged["reason"] == "login_required"
    assert "log in with Hugging Face" in anon["message"]
    assert alice["type"] == "arena_battle"
    row = arena_server.state.store.db["arena_battles"].get(alice["battle_id"])
    assert row["voter"] == arena_server.app.state.arena.arena.voter_hash("hf", "alice")
    assert row["voter"].startswith("hf:") and "alice" not in row["voter"]


def test_votes_csv_goes_through_the_neutraliser(arena_server):
    db = arena_server.state.store.db
    db.execute(
        "INSERT INTO arena_battles (battle_id, owner, text, text_source, system_a, system_b, "
        "created_ts, created_at) VALUES (?,?,?,?,?,?,?,?)",
        ["f" * 32, "o", "t", "typed", "loud", "quiet", 0.0, "x"],
    )
    db.execute(
        "INSERT INTO arena_votes (battle_id, choice, system_a, system_b, text_source, voted_ts, "
        "created_at, voter) VALUES (?,?,?,?,?,?,?,?)",
        ["f" * 32, "a", "loud", "quiet", "=HYPERLINK(1)", 0.0, "x", "ip:" + "0" * 24],
    )
    db.conn.commit()
    r = httpx.get(arena_server.url + "ll/arena/api/votes.csv", headers=ADMIN)
    db.execute("DELETE FROM arena_votes WHERE battle_id=?", ["f" * 32])
    db.conn.commit()
    assert r.status_code == 200 and "'=HYPERLINK(1)" in r.text and ",=HYPERLINK" not in r.text
    header = r.text.splitlines()[0].split(",")
    assert header[:8] == ["battle_id", "system_a", "system_b", "choice", "text_source",
                          "decision_ms", "created_at", "voter"]  # fmt: skip


# --------------------------------------------------------------------------- admin


@pytest.fixture(scope="module")
def admin_app():
    """The whole app (Gradio mounted) with a password; 127.0.0.1 is a trusted proxy, so two
    "clients" can be told apart by ``X-Forwarded-For``."""
    app = create_app({"piper": "piper?deterministic=1"}, tmp_db(), warm=False)
    app.state.admin_policy = AdminPolicy(PW, b"k" * 32, Proxies.parse(["127.0.0.1"]))
    with live_server(app) as lv:
        yield lv


def login(live, password: str, ip: str, **headers) -> httpx.Response:
    return httpx.post(
        live.url + "ll/admin/login",
        data={"password": password},
        headers={"X-Forwarded-For": ip, **headers},
        timeout=TIMEOUT,
    )


def test_admin_password_guessing_is_slowed_per_client(admin_app):
    """Before: 120 wrong tries at 23/s, no slowdown, then the right one worked."""
    t0 = time.monotonic()
    codes = [login(admin_app, f"guess-{i}", "203.0.113.66").status_code for i in range(120)]
    elapsed = time.monotonic() - t0
    assert codes[:4] == [403, 403, 403, 429]  # three are checked, then the client waits ...
    # ... 2 s, then 4 s, 8 s …: in `elapsed` seconds at most log2(elapsed / 2) more checks
    assert codes.count(403) <= 3 + 1 + math.log2(1 + elapsed / 2), (codes.count(403), elapsed)
    assert codes.count(429) >= 110
    r = login(admin_app, PW, "203.0.113.66")
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert "too many wrong admin passwords" in r.json()["detail"]
    # a password in a header is the same guess, with the same wait
    r = httpx.get(
        admin_app.url + "ll/admin/tests", headers={**ADMIN, "X-Forwarded-For": "203.0.113.66"}
    )
    assert r.status_code == 429
    # another client is not locked out by it; over the (trusted) proxy's TLS the cookie is
    # the one a framed Space keeps: SameSite=None; Secure; Partitioned
    r = login(admin_app, PW, "198.51.100.3", **{"X-Forwarded-Proto": "https"})
    assert r.status_code == 200
    admin = [c for c in r.headers.get_list("set-cookie") if c.startswith("ll_admin=")]
    assert admin[0].endswith("; Max-Age=43200; HttpOnly; SameSite=None; Secure; Partitioned")


def test_admin_delay_grows_and_ends():
    pol = AdminPolicy(PW, b"k" * 32)
    th, key, t = pol.throttle, "1.2.3.4", 100.0
    waits = [th.failed(key, t) for _ in range(6)]
    assert waits == [0.0, 0.0, 2.0, 4.0, 8.0, 16.0]
    assert th.wait_s(key, t + 15) == pytest.approx(1.0) and th.wait_s(key, t + 16) == 0.0
    th.succeeded(key)
    assert th.wait_s(key, t) == 0.0


def test_admin_cookie_is_secure_behind_a_trusted_tls_proxy(admin_app):
    """Before: no ``Secure`` flag on the admin cookie behind the Space's TLS proxy."""
    r = login(admin_app, PW, "198.51.100.4", **{"X-Forwarded-Proto": "https"})
    assert r.status_code == 200
    attrs = r.headers["set-cookie"].lower()
    assert "ll_admin=" in attrs and "secure" in attrs and "httponly" in attrs
    r = login(admin_app, PW, "198.51.100.4")  # plain http to the app: a cookie http can use
    assert "secure" not in r.headers["set-cookie"].lower()
    untrusted = Proxies()
    scope = {
        "client": ("127.0.0.1", 1),
        "headers": [(b"x-forwarded-proto", b"https")],
        "scheme": "http",
    }
    assert untrusted.is_tls(scope) is False and Proxies.parse(["127.0.0.1"]).is_tls(scope) is True


def test_proxies_from_env(monkeypatch):
    monkeypatch.delenv("LISTENLAB_TRUSTED_PROXIES", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert Proxies.from_env().nets == ()
    monkeypatch.setenv("SPACE_ID", "someone/space")
    p = Proxies.from_env()
    fwd = {"client": ("10.1.2.3", 9), "headers": [(b"x-forwarded-for", b"6.6.6.6, 203.0.113.9")]}
    assert p.client_ip(fwd) == "203.0.113.9"  # the right-most address the proxy saw
    assert Proxies().client_ip(fwd) == "10.1.2.3"  # an untrusted peer's header is ignored
    v6 = {"client": ("2001:db8:1:2:aaaa::1", 9), "headers": []}
    assert Proxies().client_key(v6) == "2001:db8:1:2::/64"
    monkeypatch.setenv("LISTENLAB_TRUSTED_PROXIES", "not-an-address")
    with pytest.raises(ValueError, match="LISTENLAB_TRUSTED_PROXIES"):
        Proxies.from_env()


def test_keyed_rate_bounds_its_keys():
    r = KeyedRate(rate_per_s=1.0, burst=2.0, max_keys=3)
    assert [r.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, 1.0]
    assert r.take("a", 1.0) == 0.0
    for k in "bcdef":
        r.take(k, 2.0)
    assert len(r._buckets) == 3


@pytest.mark.parametrize("path", ["admin/tests/", "", "arena/"])
def test_no_credentialed_cors_for_foreign_origins(admin_app, path):
    """Before: the Gradio admin app answered ``Origin: http://localhost:9`` with credentials."""
    foreign = {"Origin": "http://localhost:9", **ADMIN}
    for r in (
        httpx.get(admin_app.url + path + "config", headers=foreign, timeout=TIMEOUT),
        httpx.options(
            admin_app.url + path + "gradio_api/queue/join",
            headers={**foreign, "Access-Control-Request-Method": "POST"},
            timeout=TIMEOUT,
        ),
    ):
        allow = {k for k in r.headers if k.lower().startswith("access-control-allow")}
        assert not allow, (r.request.method, r.status_code, dict(r.headers))
    # the page itself (same origin) still loads its config
    own = httpx.get(
        admin_app.url + path + "config",
        headers={"Origin": admin_app.url.rstrip("/"), **ADMIN},
        timeout=TIMEOUT,
    )
    assert own.status_code == 200 and "components" in own.json()


def test_gradio_upload_route_closed_where_no_component_needs_it(admin_app):
    """Before: 20/20 anonymous uploads kept on disk though no public page has an upload."""
    files = {"files": ("a.txt", b"x" * 1000, "text/plain")}
    for path in ("gradio_api/upload", "arena/gradio_api/upload"):
        codes = {
            httpx.post(admin_app.url + path, files=files, timeout=TIMEOUT).status_code
            for _ in range(20)
        }
        assert codes == {404}, (path, codes)
    # the admin designer's prompt file: admin only, and bounded
    r = httpx.post(admin_app.url + "admin/tests/gradio_api/upload", files=files, timeout=TIMEOUT)
    assert r.status_code == 403
    big = {"files": ("a.txt", b"x" * (GRADIO_UPLOAD_LIMIT + 1), "text/plain")}
    assert GRADIO_UPLOAD_LIMIT == 10_747_904  # the number docs/security.md states
    r = httpx.post(
        admin_app.url + "admin/tests/gradio_api/upload", files=big, headers=ADMIN, timeout=TIMEOUT
    )
    assert r.status_code == 413
    r = httpx.post(
        admin_app.url + "admin/tests/gradio_api/upload", files=files, headers=ADMIN, timeout=TIMEOUT
    )
    assert r.status_code == 200 and len(r.json()) == 1


@pytest.mark.browser
def test_login_page_shows_the_wait_in_chromium(admin_app, browser):
    page = browser.new_page()
    page.goto(admin_app.url + "admin/tests/")
    page.wait_for_selector("input[name=password]")
    for i in range(4):
        page.fill("input[name=password]", f"wrong-{i}")
        page.click("button")
        page.wait_for_function(
            "document.querySelector('#msg').textContent.length > 0", timeout=TIMEOUT * 1000
        )
        if i < 3:
            assert page.inner_text("#msg") == "wrong password. " + AdminPolicy(PW, b"").describe()
            page.evaluate("document.querySelector('#msg').textContent = ''")
    assert "too many wrong admin passwords" in page.inner_text("#msg")
    page.fill("input[name=password]", PW)
    page.click("button")  # the right one, but this client must wait: still the login form
    page.wait_for_function("document.querySelector('#msg').textContent.includes('try again')")
    assert page.query_selector("input[name=password]") is not None
