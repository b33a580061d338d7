"""The arena's success answers are what ``/openapi.json`` declares for them: a real server on
127.0.0.1 (``listenlab serve``'s app, two real Piper systems, a real SQLite file), a visitor who
battles over ``/ll/ws`` and votes over HTTP like the page, and an admin who sets the threshold,
reads the audit, excludes, undoes and drops. Every answer is validated against the schema the
served ``/openapi.json`` declares for its operation and status (``tests/support/openapi_check``),
in the states where a field changes shape: a battle before and after its vote, a board row
unranked and ranked, with and without a predicted MOS, an exclusion active and undone.

The declared schema of each JSON answer must be its model's (the dataclass the route builds the
answer from): the component's title and properties are the model's fields, so a route that
assembles a dict of its own beside its model, or a new arena route that declares nothing, fails.
"""

from __future__ import annotations

import dataclasses
import time

import httpx
import jsonschema_rs
import numpy as np
import pytest

from app.arena.audit import AuditReport, ExclusionView
from app.arena.battles import BattleView, VoteView
from app.arena.lineup import Prompt
from app.arena.routes import ArenaSession, ArenaVoter, DroppedVoter, ListingThreshold
from app.arena.service import ArenaBoard
from app.server import create_app
from app.store.scores import TakeScore, scores_of
from app.web.identity import COOKIE, owner_for_token
from app.web.proxies import Proxies
from tests.support.app_util import live_server, tmp_db
from tests.support.openapi_check import assert_declared, declared
from tests.test_arena_server import TEXT, get, http_vote, new_cookie, page, post, wait_until_heard

SYSTEMS = {"piper": "piper?deterministic=1", "fast": "piper?deterministic=1&speed=1.25"}
BATTLE = "/ll/arena/api/battles/{battle_id}"
ANSWERS = {
    ("POST", "/ll/arena/session"): (ArenaSession, None),
    ("GET", "/ll/arena/api/prompt"): (Prompt, None),
    ("GET", "/ll/arena/api/leaderboard"): (ArenaBoard, None),
    ("GET", BATTLE): (BattleView, None),
    ("POST", BATTLE + "/vote"): (VoteView, None),
    ("GET", "/ll/arena/api/voters"): (ArenaVoter, "voters"),
    ("POST", "/ll/arena/api/voters/{voter}/drop"): (DroppedVoter, None),
    ("GET", "/ll/arena/api/audit"): (AuditReport, None),
    ("POST", "/ll/arena/api/voters/{voter}/exclude"): (ExclusionView, None),
    ("POST", "/ll/arena/api/exclusions/{exclusion_id}/undo"): (ExclusionView, None),
    ("GET", "/ll/arena/api/settings"): (ListingThreshold, None),
    ("POST", "/ll/arena/api/settings"): (ListingThreshold, None),
}
"""Every JSON success answer of the arena, and the model (and list key) it is written from."""
MEDIA = {("GET", "/ll/arena/api/votes.csv"): "text/csv", ("GET", "/admin/arena"): "text/html"}
"""The arena's answers that are not JSON, and their one media type."""
OUTSIDER = {"X-Forwarded-For": "198.51.100.7"}  # through the trusted proxy: not this machine
T0 = 1_000_000.0
ADMIN_OWNER_TOKEN = "c" * 43


@pytest.fixture
def server():
    """A fresh server per test: each test counts the votes it made."""
    app = create_app(SYSTEMS, tmp_db(), mount_ui=False)
    app.state.arena.proxies = Proxies.parse(["127.0.0.1"])  # each visitor its own address
    with live_server(app) as live:
        yield live


@pytest.fixture
def spec(server) -> dict:
    """The served ``/openapi.json``."""
    r = get(server.url + "openapi.json")
    assert r.status_code == 200
    return r.json()


def component(spec: dict, schema: dict) -> dict:
    """The component a ``$ref`` schema names."""
    assert set(schema) == {"$ref"}, schema  # the model's own schema, nothing merged beside it
    return spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]


def test_every_arena_answer_declares_its_model(spec):
    arena = {
        (m.upper(), p)
        for p, ops in spec["paths"].items()
        if "/arena" in p
        for m in ops
        if m in {"get", "post", "put", "patch", "delete"}
    }
    # a new arena route must be listed here, with what it answers
    assert arena == set(ANSWERS) | set(MEDIA)
    for (method, path), (model, key) in ANSWERS.items():
        schema = component(spec, declared(spec, method, path))
        if key is not None:  # {"voters": [...]}
            assert schema["required"] == [key]
            schema = component(spec, schema["properties"][key]["items"])
        assert schema["title"] == model.__name__, (method, path)
        names = [f.name for f in dataclasses.fields(model)]
        assert list(schema["properties"]) == names, (method, path)
    for (method, path), media in MEDIA.items():
        content = spec["paths"][path][method.lower()]["responses"]["200"]["content"]
        assert list(content) == [media], (method, path, content)


def cast_votes(app, voters: list[str], texts: int, start: int = 0) -> list[tuple]:
    """Finished battles between the two systems written through the arena's data layer, one
    browser session (``ADMIN_OWNER_TOKEN``) voting 'a' as each of ``voters`` in turn on
    ``texts`` texts; returns each battle with its played takes."""
    arena = app.state.arena.arena
    owner = owner_for_token(ADMIN_OWNER_TOKEN)
    out = []
    for i in range(start, start + texts):
        for k, voter in enumerate(voters):
            now = T0 + 100 * i + 10 * k
            bt = arena.new_battle(
                owner, f"Vote {i}.", list(SYSTEMS), np.random.default_rng(i), now=now, voter=voter
            )
            for j, side in enumerate("ab"):
                take = f"{i:04d}{k:02d}{side}".ljust(32, "0")
                arena.start_stream(bt, side, take, "s1", now=now + j)
                arena.finish_stream(take, "ok", 1.0, now + j + 0.1)
                arena.played(bt.battle_id, owner, side, take, 1000, now=now + j + 1.5)
            arena.vote(bt.battle_id, owner, "a", now=now + 4, voter=voter)
            out.append((bt, f"{i:04d}{k:02d}a".ljust(32, "0")))
    return out


def test_a_visitor_s_answers_are_as_declared(server, spec):
    r = post(server.url + "ll/arena/session")
    assert_declared(spec, "POST", "/ll/arena/session", r.json())
    assert r.json() == {
        "systems": 2,
        "ready": True,
        "max_chars": 300,
        "battles_per_minute": 10,
        "new_session": True,
    }
    cookie = new_cookie(server)
    again = post(server.url + "ll/arena/session", cookies={COOKIE: cookie}).json()
    assert_declared(spec, "POST", "/ll/arena/session", again)
    assert again["new_session"] is False

    prompt = get(server.url + "ll/arena/api/prompt").json()
    assert_declared(spec, "GET", "/ll/arena/api/prompt", prompt)
    assert set(prompt) == {"text", "language"} and prompt["language"] == "en"

    with page(server, cookie) as p:
        b = p.arena("arena_new", text=TEXT)
        assert b["type"] == "arena_battle", b
        bid = b["battle_id"]
        url = f"{server.url}ll/arena/api/battles/{bid}"
        fresh = get(url, cookies={COOKIE: cookie}).json()
        assert_declared(spec, "GET", BATTLE, fresh)
        # before the vote: no names, and no "systems": null either
        assert set(fresh) == {"battle_id", "text", "language", "played", "voted"}
        assert fresh["played"] == {"a": False, "b": False} and fresh["voted"] is None
        done = {}
        for side in "ab":
            t = time.time()
            done[side] = p.speak(bid, side)
            wait_until_heard(done[side], t)
            assert p.played(bid, side, done[side])["type"] == "arena_played"
        heard = get(url, cookies={COOKIE: cookie}).json()
        assert_declared(spec, "GET", BATTLE, heard)
        assert heard["played"] == {"a": True, "b": True} and "systems" not in heard

    r = http_vote(server, bid, "tie", cookie)
    assert r.status_code == 200, r.text
    assert_declared(spec, "POST", BATTLE + "/vote", r.json())
    row = server.state.store.arena.battle(bid)
    names = {"a": row.system_a, "b": row.system_b}
    assert r.json() == {**heard, "voted": "tie", "systems": names, "choice": "tie", "counted": True}
    resent = http_vote(server, bid, "tie", cookie).json()
    assert_declared(spec, "POST", BATTLE + "/vote", resent)
    assert resent["counted"] is False
    after = get(url, cookies={COOKIE: cookie}).json()
    assert_declared(spec, "GET", BATTLE, after)
    assert after["systems"] == names and after["voted"] == "tie"

    board = get(server.url + "ll/arena/api/leaderboard").json()
    assert_declared(spec, "GET", "/ll/arena/api/leaderboard", board)
    rows = board["listed"] + board["preliminary"]
    assert {r["system"] for r in rows} == set(SYSTEMS)
    assert all(r["ties"] == 1 and r["rank"] is None and r["predicted_mos"] is None for r in rows)
    assert board["votes_stored"] == 1 and board["systems_configured"] == list(SYSTEMS)

    # side A's take scored, as the background scorer stores it (its models are the [metrics]
    # extra, not installed here): that system's column fills in, the other's stays null
    scores_of(server.state.store).put(
        TakeScore(
            done["a"]["take_id"], "k1", "distillmos", "0.9.1-1", "0" * 64, {"predicted_mos": 3.5}
        )
    )
    board = get(server.url + "ll/arena/api/leaderboard").json()
    assert_declared(spec, "GET", "/ll/arena/api/leaderboard", board)
    rows = {r["system"]: r for r in board["listed"] + board["preliminary"]}
    assert (rows[names["a"]]["predicted_mos"], rows[names["a"]]["scored_takes"]) == (3.5, 1)
    assert (rows[names["b"]]["predicted_mos"], rows[names["b"]]["scored_takes"]) == (None, 0)


def test_the_declared_schemas_refuse_a_wrong_answer(spec):
    """The declarations are strict enough to catch a route that changes its answer."""
    battle = {
        "battle_id": "0" * 32,
        "text": TEXT,
        "language": None,
        "played": {"a": True, "b": False},
        "voted": None,
    }
    assert_declared(spec, "GET", BATTLE, battle)
    vote = {**battle, "voted": "a", "systems": {"a": "x", "b": "y"}, "choice": "a", "counted": 1}
    wrong = [
        ("GET", BATTLE, {k: v for k, v in battle.items() if k != "played"}),
        ("GET", BATTLE, {**battle, "voted": "maybe"}),
        ("GET", BATTLE, {**battle, "played": {"a": "yes", "b": False}}),
        ("POST", BATTLE + "/vote", {k: v for k, v in vote.items() if k != "systems"}),
        ("POST", BATTLE + "/vote", vote),  # counted must be a boolean
        ("GET", "/ll/arena/api/settings", {"min_votes": None, "default_min_votes": 20}),
        ("GET", "/ll/arena/api/voters", [{"voter": "ip:" + "a" * 24}]),
    ]
    for method, path, body in wrong:
        schema = declared(spec, method, path)
        root = {**schema, "components": spec["components"]}
        assert not jsonschema_rs.validator_for(root).is_valid(body), (method, path, body)


def admin(live, path: str, body=None, headers=None) -> httpx.Response:
    """An admin call from this machine (the localhost rule: no password is set)."""
    if body is None:
        return httpx.get(live.url + path, headers=headers, timeout=120)
    return httpx.post(live.url + path, json=body, headers=headers, timeout=120)


def test_the_admin_s_answers_are_as_declared(server, spec):
    app = server.app
    ip = ["ip:" + f"{n:02d}" * 12 for n in (11, 12, 13)]
    settings = admin(server, "ll/arena/api/settings").json()
    assert_declared(spec, "GET", "/ll/arena/api/settings", settings)
    default = settings["default_min_votes"]
    assert settings == {"min_votes": default, "default_min_votes": 20}

    # one browser session voting as two voters (a shared_owner flag), and a third voter
    battles = cast_votes(app, ip[:2], 3) + cast_votes(app, ip[2:], 2, start=10)
    set_high = admin(server, "ll/arena/api/settings", {"min_votes": 1000}).json()
    assert_declared(spec, "POST", "/ll/arena/api/settings", set_high)
    assert set_high == {"min_votes": 1000, "default_min_votes": default}
    board = admin(server, "ll/arena/api/leaderboard").json()
    assert_declared(spec, "GET", "/ll/arena/api/leaderboard", board)
    assert board["listed"] == [] and all(r["rank"] is None for r in board["preliminary"])

    low = admin(server, "ll/arena/api/settings", {"min_votes": 1}).json()
    assert low["min_votes"] == 1
    board = admin(server, "ll/arena/api/leaderboard").json()
    assert_declared(spec, "GET", "/ll/arena/api/leaderboard", board)
    assert board["preliminary"] == [] and len(board["listed"]) == 2
    assert all(isinstance(r["rank"], int) for r in board["listed"])
    back = admin(server, "ll/arena/api/settings", {"min_votes": None}).json()
    assert_declared(spec, "POST", "/ll/arena/api/settings", back)
    assert back == {"min_votes": default, "default_min_votes": default}

    # a battle of that session, as it sees it: stored without a language
    first = battles[0][0]
    mine = get(
        f"{server.url}ll/arena/api/battles/{first.battle_id}",
        cookies={COOKIE: ADMIN_OWNER_TOKEN},
    ).json()
    assert_declared(spec, "GET", BATTLE, mine)
    assert mine["language"] is None and mine["systems"] == {
        "a": first.system_a,
        "b": first.system_b,
    }

    voters = admin(server, "ll/arena/api/voters").json()
    assert_declared(spec, "GET", "/ll/arena/api/voters", voters)
    assert {v["voter"]: v["votes"] for v in voters["voters"]} == {ip[0]: 3, ip[1]: 3, ip[2]: 2}
    assert all(v["excluded"] == 0 for v in voters["voters"])

    audit = admin(server, "ll/arena/api/audit").json()
    assert_declared(spec, "GET", "/ll/arena/api/audit", audit)
    assert [f["kind"] for f in audit["flags"]] == ["shared_owner"]
    assert audit["flags"][0]["voters"] == ip[:3] and audit["exclusions"] == []
    assert [(v["voter"], v["excluded"]) for v in audit["flagged_voters"]] == [
        (v, False) for v in ip
    ]

    r = admin(
        server, f"ll/arena/api/voters/{ip[0]}/exclude", {"reason": "one browser", "by": "ana"}
    )
    assert r.status_code == 200, r.text
    e = r.json()
    assert_declared(spec, "POST", "/ll/arena/api/voters/{voter}/exclude", e)
    assert (e["voter"], e["active"], e["flags"], e["votes"]) == (ip[0], True, ["shared_owner"], 3)
    assert e["excluded_by"] == "ana (localhost)" and e["undone_at"] is None
    audit = admin(server, "ll/arena/api/audit").json()
    assert_declared(spec, "GET", "/ll/arena/api/audit", audit)
    assert [x["active"] for x in audit["exclusions"]] == [True]
    board = admin(server, "ll/arena/api/leaderboard").json()
    assert_declared(spec, "GET", "/ll/arena/api/leaderboard", board)
    assert board["votes_not_counted"] == {"repeat_text": 0, "excluded_voter": 3}

    r = admin(
        server,
        f"ll/arena/api/exclusions/{e['exclusion_id']}/undo",
        {"reason": "a family, not a ring", "by": "bo"},
    )
    assert r.status_code == 200, r.text
    u = r.json()
    assert_declared(spec, "POST", "/ll/arena/api/exclusions/{exclusion_id}/undo", u)
    assert (u["active"], u["undone_by"], u["undo_reason"]) == (
        False,
        "bo (localhost)",
        "a family, not a ring",
    )
    assert isinstance(u["undone_at"], str)

    r = admin(server, f"ll/arena/api/voters/{ip[2]}/drop", {})
    assert r.status_code == 200, r.text
    assert_declared(spec, "POST", "/ll/arena/api/voters/{voter}/drop", r.json())
    assert r.json() == {"voter": ip[2], "votes_dropped": 2}

    csv = admin(server, "ll/arena/api/votes.csv")
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert csv.text.count("\n") == 1 + 6  # the header, the 6 votes kept
    page_ = admin(server, "admin/arena", headers={"Accept": "text/html"})
    assert page_.status_code == 200 and page_.headers["content-type"].startswith("text/html")

    # not the admin: the declared refusal, in its declared shape
    for method, path in (("GET", "audit"), ("GET", "voters"), ("GET", "settings")):
        r = admin(server, f"ll/arena/api/{path}", headers=OUTSIDER)
        assert r.status_code == 403, r.text
        assert_declared(spec, method, f"/ll/arena/api/{path}", r.json(), status=403)
