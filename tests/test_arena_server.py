"""The arena over its real routes: a real server on 127.0.0.1, two real Piper systems, and a raw
WebSocket client that behaves like a page, or like an attacker who skips the page's rules."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

import httpx
import pytest
from websockets.sync.client import connect

from app.player.session import HEADER
from app.server import create_app
from app.web.identity import COOKIE
from app.web.proxies import Proxies
from tests.support.app_util import live_server, tmp_db

TEXT = "The birch canoe slid on the smooth planks."
TIMEOUT_S = 60.0  # the machine may be busy: a slow answer is not a wrong one


def get(url: str, **kw) -> httpx.Response:
    return httpx.get(url, timeout=TIMEOUT_S, **kw)


def post(url: str, **kw) -> httpx.Response:
    return httpx.post(url, timeout=TIMEOUT_S, **kw)


_ADDRESSES: dict[str, str] = {}


def visitor_ip(cookie: str | None) -> str:
    """Each test visitor (cookie) comes from its own address, as a trusted local proxy says
    (``X-Forwarded-For``): the arena counts voters by address, not by the free cookie."""
    return _ADDRESSES.setdefault(cookie or "", f"203.0.113.{len(_ADDRESSES) + 1}")


def http_vote(live, battle_id: str, choice: str, cookie: str) -> httpx.Response:
    """A vote over HTTP (``POST /ll/arena/api/battles/ID/vote``) from the session ``cookie``."""
    return post(
        f"{live.url}ll/arena/api/battles/{battle_id}/vote",
        json={"choice": choice},
        cookies={COOKIE: cookie},
        headers={"X-Forwarded-For": visitor_ip(cookie)},
    )


SYSTEMS = {"piper": "piper?deterministic=1", "qwen": "piper?deterministic=1&profile=qwen3-tts"}


@pytest.fixture(scope="module")
def server():
    app = create_app(SYSTEMS, tmp_db(), mount_ui=False)
    app.state.arena.proxies = Proxies.parse(["127.0.0.1"])  # as behind a Space's proxy
    with live_server(app) as live:
        yield live


def new_cookie(live) -> str:
    """A new visitor: the arena's first call gives it the one identity cookie (``ll_owner``,
    the Playground's; the arena has no cookie of its own any more)."""
    r = post(live.url + "ll/arena/session")
    assert r.status_code == 200 and r.json()["ready"] is True
    assert r.json()["new_session"] is True
    cookie = r.cookies[COOKIE]
    assert len(cookie) == 43  # secrets.token_urlsafe(32)
    assert "httponly" in r.headers["set-cookie"].lower()
    assert "samesite=lax" in r.headers["set-cookie"].lower()  # over http; see app.web.identity
    # a valid cookie is kept, not replaced
    again = post(live.url + "ll/arena/session", cookies={COOKIE: cookie})
    assert again.json()["new_session"] is False and COOKIE not in again.cookies
    return cookie


class Page:
    """A raw ``/ll/ws`` client carrying an arena cookie; it records every text it received."""

    def __init__(self, ws):
        self.ws = ws
        self.texts: list[str] = []
        self.frames: list[tuple[float, bytes]] = []
        """Binary frames with their arrival time (``time.time()``)."""
        self.token = 100

    def send(self, **msg) -> None:
        self.ws.send(json.dumps(msg))

    def until(self, pred, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            raw = self.ws.recv(timeout=max(0.01, deadline - time.monotonic()))
            if isinstance(raw, bytes):
                self.frames.append((time.time(), raw))
                continue
            self.texts.append(raw)
            m = json.loads(raw)
            if pred(m):
                return m

    def arena(self, kind: str, **msg) -> dict:
        """Send an arena message; return its reply (``arena_*``)."""
        self.send(type=kind, **msg)
        return self.until(lambda m: str(m.get("type", "")).startswith("arena_"))

    def played(self, battle_id: str, side: str, done: dict) -> dict:
        """Report ``side`` played to its end (as the page does when the player says so)."""
        return self.arena(
            "arena_played",
            battle_id=battle_id,
            side=side,
            take_id=done["take_id"],
            played_ms=done["duration_s"] * 1000,
        )

    def speak(self, battle_id: str, side: str) -> dict:
        """Stream one side to its end; return the ``done`` summary (with the take id), plus
        ``first_audio`` (when this client received the first audio frame)."""
        self.token += 1
        tok = self.token
        seen = len(self.frames)
        self.send(type="arena_speak", token=tok, battle_id=battle_id, side=side)
        m = self.until(lambda m: m.get("token") == tok and m["type"] in {"done", "error"})
        assert m["type"] == "done", m
        mine = [t for t, raw in self.frames[seen:] if HEADER.unpack_from(raw)[0] == tok]
        assert mine, "a finished side sent no audio"
        return {**m, "first_audio": mine[0]}


@contextmanager
def page(live, cookie: str | None):
    headers = {"Cookie": f"{COOKIE}={cookie}"} if cookie else {}
    headers["X-Forwarded-For"] = visitor_ip(cookie)
    url = live.url.replace("http", "ws") + "ll/ws"
    with connect(url, additional_headers=headers, max_size=2**24) as ws:
        p = Page(ws)
        p.until(lambda m: m["type"] == "hello")
        yield p


def wait_until_heard(done: dict, t_sent: float) -> None:
    """Sleep until the audio could have been heard to its end, as a real player would: it
    starts on the first audio frame and then plays for ``duration_s``."""
    end = max(t_sent, done["first_audio"]) + done["duration_s"] + 0.1
    time.sleep(max(0.0, end - time.time()))


def test_a_full_battle_blind_until_the_vote(server):
    svc = server.app.state.arena
    cookie = new_cookie(server)
    with page(server, cookie) as p:
        b = p.arena("arena_new", text=f"  {TEXT}  ", req=7)
        assert b["type"] == "arena_battle" and b["req"] == 7 and b["text"] == TEXT
        assert "systems" not in b
        bid = b["battle_id"]
        row = server.state.store.db["arena_battles"].get(bid)
        assert {row["system_a"], row["system_b"]} == set(SYSTEMS)
        assert row["text_source"] == "prompt"  # a bundled Harvard sentence

        t = time.time()
        done_a = p.speak(bid, "a")
        assert done_a["duration_s"] > 1.0 and done_a["frames"] >= 24000
        # Piper is faster than real time: the page cannot have heard it to the end yet
        early = p.arena(
            "arena_played", battle_id=bid, side="a", take_id=done_a["take_id"], played_ms=99_999
        )
        assert early["type"] == "arena_error" and early["reason"] == "not_played"
        assert "cannot have finished playing yet" in early["message"]
        # the vote is refused by the server, over the WebSocket and over HTTP
        v = p.arena("arena_vote", battle_id=bid, choice="a")
        assert v["type"] == "arena_error" and v["reason"] == "not_played"
        assert "listen to both sides to the end first" in v["message"]
        r = http_vote(server, bid, "a", cookie)
        assert r.status_code == 409 and "listen to both sides" in r.json()["error"]

        wait_until_heard(done_a, t)
        ok = p.played(bid, "a", done_a)
        assert ok["type"] == "arena_played", ok
        assert ok["played"] == {"a": True, "b": False}
        assert ok["ready"] is False and "systems" not in ok
        t = time.time()
        done_b = p.speak(bid, "b")
        wait_until_heard(done_b, t)
        ok = p.played(bid, "b", done_b)
        assert ok["ready"] is True
        # the page learnt no system name before voting
        before = "\n".join(p.texts)
        assert "piper" not in before and "qwen" not in before

        voted = p.arena("arena_vote", battle_id=bid, choice="b")
        assert voted["type"] == "arena_voted" and voted["counted"] is True
        assert voted["systems"] == {"a": row["system_a"], "b": row["system_b"]}
        # re-sends count once, over both routes; a different choice is refused
        again = p.arena("arena_vote", battle_id=bid, choice="b")
        assert again["type"] == "arena_voted" and again["counted"] is False
        r = http_vote(server, bid, "b", cookie)
        assert r.status_code == 200 and r.json()["counted"] is False
        r = http_vote(server, bid, "a", cookie)
        assert r.status_code == 409 and r.json()["reason"] == "already_voted"
    votes = list(server.state.store.db["arena_votes"].rows_where("battle_id = ?", [bid]))
    assert len(votes) == 1 and votes[0]["choice"] == "b"
    # the takes are stored under their systems, as any other take
    takes = server.state.store.db["takes"]
    assert takes.get(done_a["take_id"])["system_id"] == row["system_a"]
    assert takes.get(done_b["take_id"])["system_id"] == row["system_b"]
    # the board counts the vote: B's system won, A's lost
    board = get(server.url + "ll/arena/api/leaderboard").json()
    rows = {r["system"]: r for r in board["listed"] + board["preliminary"]}
    assert rows[row["system_b"]]["wins"] >= 1 and rows[row["system_a"]]["losses"] >= 1
    assert board["total_votes"] == svc.arena.vote_count() >= 1
    assert "ci_low" in rows[row["system_a"]] and board["min_votes"] == svc.config.min_votes


def test_another_session_cannot_touch_a_battle(server):
    mine, theirs = new_cookie(server), new_cookie(server)
    with page(server, mine) as p:
        bid = p.arena("arena_new", text=TEXT)["battle_id"]
    with page(server, theirs) as q:
        for kind, extra in (
            ("arena_vote", {"choice": "a"}),
            ("arena_played", {"side": "a", "take_id": "0" * 32, "played_ms": 5000}),
        ):
            m = q.arena(kind, battle_id=bid, **extra)
            assert m["type"] == "arena_error" and m["reason"] == "not_yours", m
        q.send(type="arena_speak", token=5, battle_id=bid, side="a")
        err = q.until(lambda m: m.get("token") == 5)
        assert err["type"] == "error" and "another visitor" in err["message"]
    r = get(f"{server.url}ll/arena/api/battles/{bid}", cookies={COOKIE: theirs})
    assert r.status_code == 403
    r = http_vote(server, bid, "a", theirs)
    assert r.status_code == 403 and "another visitor" in r.json()["error"]
    r = get(f"{server.url}ll/arena/api/battles/{bid}", cookies={COOKIE: mine})
    assert r.status_code == 200 and r.json()["voted"] is None and "systems" not in r.json()
    # no cookie at all: no battle
    with page(server, None) as anon:
        m = anon.arena("arena_new", text=TEXT)
        assert m["type"] == "arena_error" and "no arena session" in m["message"]


@pytest.mark.parametrize(
    "msg, reason, words",
    [
        ({"type": "arena_new", "text": ""}, "invalid", "type a text"),
        ({"type": "arena_new", "text": "x" * 301}, "invalid", "limit is 300"),
        ({"type": "arena_new", "text": {"$gt": 1}}, "invalid", "must be a string"),
        (
            {"type": "arena_vote", "battle_id": "../" * 20, "choice": "a"},
            "unknown_battle",
            "malformed",
        ),
        ({"type": "arena_vote", "battle_id": "0" * 32, "choice": "a"}, "unknown_battle", "no such"),
        ({"type": "arena_vote", "battle_id": None, "choice": "a"}, "unknown_battle", "malformed"),
        ({"type": "arena_played", "battle_id": 5, "side": "c"}, "unknown_battle", "malformed"),
    ],
)
def test_hostile_messages_get_clear_errors(server, msg, reason, words):
    with page(server, new_cookie(server)) as p:
        m = p.arena(msg.pop("type"), **msg)
        assert m["type"] == "arena_error" and m["reason"] == reason and words in m["message"], m
        got = p.arena("arena_new", text=TEXT)
        assert got["type"] == "arena_battle", got  # the socket still works


def test_speaking_the_other_side_early_interrupts_the_first(server):
    with page(server, new_cookie(server)) as p:
        bid = p.arena("arena_new", text=TEXT)["battle_id"]
        done_a = p.speak(bid, "a")
        p.speak(bid, "b")  # asked for B while A could still be playing: A was cut off
        time.sleep(done_a["duration_s"] + 0.2)
        m = p.played(bid, "a", done_a)
        assert m["type"] == "arena_error" and "interrupted" in m["message"]
        q = p.arena("arena_speak", token=1, battle_id=bid, side="x")
        assert q["type"] == "arena_error" and "side must be" in q["message"]


def test_rate_limit_gives_a_clear_message(server):
    svc = server.app.state.arena
    old = svc.config.limits
    svc.set_limits(battles_per_minute=2)
    try:
        with page(server, new_cookie(server)) as p:
            assert p.arena("arena_new", text=TEXT)["type"] == "arena_battle"
            assert p.arena("arena_new", text=TEXT)["type"] == "arena_battle"
            m = p.arena("arena_new", text=TEXT)
            assert m["type"] == "arena_error" and m["reason"] == "rate_limited"
            assert "at most 2 battles per minute" in m["message"] and "Try again in" in m["message"]
            assert 1 <= m["retry_after_s"] <= 60
        with page(server, new_cookie(server)) as other:  # another visitor is not affected
            assert other.arena("arena_new", text=TEXT)["type"] == "arena_battle"
    finally:
        svc.set_limits(**{k: getattr(old, k) for k in ("battles_per_minute",)})


def test_prompt_and_board_routes(server):
    r = get(server.url + "ll/arena/api/prompt")
    assert r.status_code == 200 and r.json()["text"] in server.app.state.arena.prompts
    board = get(server.url + "ll/arena/api/leaderboard").json()
    assert set(board) >= {"listed", "preliminary", "min_votes", "total_votes", "method", "ties"}
    assert board["systems_configured"] == list(SYSTEMS)
    r = post(f"{server.url}ll/arena/api/battles/{'0' * 32}/vote", content=b"not json")
    assert r.status_code == 400


def test_deeply_nested_json_is_a_clear_400_and_changes_nothing(server):
    """5 KB of 2,500 brackets overflowed ``request.json()`` (a 500); the bounded parser
    (app/web/inputs.py) refuses it with its reason, on the vote and the admin's settings."""
    from app.web.inputs import MAX_JSON_DEPTH

    svc = server.app.state.arena
    votes, threshold = svc.arena.vote_count(), svc.min_votes()
    cookie = new_cookie(server)
    with page(server, cookie) as p:
        bid = p.arena("arena_new", text=TEXT)["battle_id"]
    bomb = b"[" * 2500 + b"]" * 2500
    assert len(bomb) == 5000
    deep = b'{"choice": ' + b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1) + b"}"
    for body in (bomb, deep):
        for url, headers in (
            (f"ll/arena/api/battles/{bid}/vote", {"X-Forwarded-For": visitor_ip(cookie)}),
            ("ll/arena/api/settings", {}),  # from this machine, no password set: the admin
        ):
            headers["Content-Type"] = "application/json"
            r = post(server.url + url, content=body, cookies={COOKIE: cookie}, headers=headers)
            assert r.status_code == 400, (url, r.status_code, r.text[:200])
            assert f"nested too deeply (the limit is {MAX_JSON_DEPTH} levels)" in r.json()["error"]
    # as deep as allowed is not refused for its depth: the choice is simply not one of the four
    ok_deep = b'{"choice": ' + b"[" * (MAX_JSON_DEPTH - 1) + b"]" * (MAX_JSON_DEPTH - 1) + b"}"
    r = post(
        f"{server.url}ll/arena/api/battles/{bid}/vote",
        content=ok_deep,
        cookies={COOKIE: cookie},
        headers={"X-Forwarded-For": visitor_ip(cookie)},
    )
    assert r.status_code == 400 and "the vote must be one of" in r.json()["error"]
    assert svc.arena.vote_count() == votes and svc.min_votes() == threshold
    r = get(f"{server.url}ll/arena/api/battles/{bid}", cookies={COOKIE: cookie})
    assert r.status_code == 200 and r.json()["voted"] is None


def test_votes_csv_is_admin_only(server):
    r = get(server.url + "ll/arena/api/votes.csv")  # localhost, no password set: admin
    assert r.status_code == 200 and r.text.startswith("battle_id,system_a,system_b,choice")
    r = get(server.url + "ll/arena/api/votes.csv", headers={"X-Forwarded-For": "203.0.113.9"})
    assert r.status_code == 403 and "admin" in r.text


def _walk(obj, path=""):
    """Every (path, value) leaf of a JSON message."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, obj


def test_every_pre_vote_message_is_system_neutral(server):
    """Piper streams 22050 Hz, the Qwen3-TTS wire profile 24000 Hz: before the vote the page
    gets both at one rate and format, and no message names a system, a rate or a schedule."""
    import numpy as np
    import soxr

    entries = server.state.backends
    native = {label: e.backend.capabilities.sample_rate for label, e in entries.items()}
    assert native == {"piper": 22050, "qwen": 24000}
    # every string that could tell the systems apart
    secrets_ = {s.lower() for s in ("piper", "qwen", "deterministic", "profile", "joe")}
    for e in entries.values():
        secrets_ |= {e.backend.describe().lower(), str(e.backend.name).lower()}
    with page(server, new_cookie(server)) as p:
        bid = p.arena("arena_new", text=TEXT)["battle_id"]
        row = server.state.store.db["arena_battles"].get(bid)
        done, seen = {}, {}
        for side in ("a", "b"):
            t, n0, m0 = time.time(), len(p.frames), len(p.texts)
            done[side] = p.speak(bid, side)
            seen[side] = ([json.loads(x) for x in p.texts[m0:]], p.frames[n0:])
            wait_until_heard(done[side], t)
            ok = p.played(bid, side, done[side])
            assert ok["type"] == "arena_played", ok
        assert ok["ready"] is True
        before = "\n".join(p.texts).lower()
        pre_vote_frames = list(p.frames)
        voted = p.arena("arena_vote", battle_id=bid, choice="tie")

    # one format for both sides, whatever their native rate
    shapes = {}
    for side, (msgs, _frames) in seen.items():
        tok = done[side]["token"]
        mine = [m for m in msgs if m.get("token") == tok]
        kinds = [m["type"] for m in mine]
        assert "findings" not in kinds and kinds[-1] == "done", kinds
        start = next(m for m in mine if m["type"] == "start")
        assert (start["sample_rate"], start["channels"]) == (24000, 1)
        assert set(start) == {"type", "token", "take_id", "sample_rate", "channels", "text_chars"}
        assert set(done[side]) - {"first_audio"} == {
            "type", "token", "status", "take_id", "frames", "duration_s",
        }  # fmt: skip
        shapes[side] = {m["type"]: tuple(sorted(m)) for m in mine}
    assert shapes["a"] == shapes["b"]
    # no name, spec, voice or native rate anywhere before the vote
    for s in secrets_:
        assert s not in before, f"{s!r} reached the page before the vote"
    for msgs, _ in seen.values():
        for m in msgs:
            for path, v in _walk(m):
                assert v not in (22050, 22050.0), f"a native rate at {path} in {m}"
    assert len(pre_vote_frames) > 0
    # the audio is the stored native take, converted to 24 kHz mono, scaled by one gain to the
    # loudness target, in equal frames of 0.1 s (frames numbered 0, 1, …; the last one padded)
    from evaluation.loudness import measure_lufs

    sizes = set()
    for side in ("a", "b"):
        tok = done[side]["token"]
        frames = [raw for _, raw in seen[side][1] if HEADER.unpack_from(raw)[0] == tok]
        assert [HEADER.unpack_from(raw)[1] for raw in frames] == list(range(len(frames)))
        sizes |= {len(raw) for raw in frames}
        got = np.concatenate([np.frombuffer(raw[HEADER.size :], "<i2") for raw in frames])
        assert len(got) == done[side]["frames"]
        take = server.state.store.load_take(done[side]["take_id"])
        assert take.sample_rate == native[row[f"system_{side}"]]
        want = take.audio.reshape(-1).astype(np.float32) / 32768.0
        if take.sample_rate != 24000:
            want = soxr.resample(want, take.sample_rate, 24000, quality="HQ")
        assert 0 <= len(got) - len(want) < 2400 + 2  # padded up to one frame
        n = min(len(got), len(want))
        assert not got[len(want) + 2 :].any()  # the padding is silence
        x, w = got[:n].astype(np.float64), want[:n].astype(np.float64) * 32768.0
        g = float(np.dot(x, w) / np.dot(w, w))
        assert np.max(np.abs(x - g * w)) <= 3  # one fixed gain for the whole side
        assert measure_lufs(got[:n], 24000) == pytest.approx(-23.0, abs=1.5)
        assert abs(done[side]["duration_s"] - take.duration_s) < 0.1 + 0.01
    assert sizes == {HEADER.size + 2400 * 2}  # every frame of both sides: the same size
    # after the vote, the names
    assert voted["type"] == "arena_voted" and voted["counted"] is True
    assert voted["systems"] == {"a": row["system_a"], "b": row["system_b"]}
