"""The ring attack through the real routes: a real server on 127.0.0.1 with three real Piper
systems, honest votes already on the board, then a ring of voters from one network battling
and voting over ``/ll/ws`` like pages (each side streamed and heard to its end). The ring is
flagged (``/ll/arena/api/audit``), excluded by the admin with a reason, and the board is the
honest one again; an undo brings the ring's votes back, and the record keeps both."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from app.server import create_app
from app.store import ArenaVote, BattleRecord
from app.web.proxies import Proxies
from tests.support.app_util import live_server, tmp_db
from tests.test_arena_server import new_cookie, page, wait_until_heard

SYSTEMS = {
    "alpha": "piper?deterministic=1",
    "beta": "piper?deterministic=1",
    "gamma": "piper?deterministic=1",
}
THETA = {"alpha": 1.0, "beta": 0.0, "gamma": -1.0}
RING = 4
RING_BATTLES = 11
T0 = time.time() - 7 * 86400  # honest votes of last week


def honest_votes(app, voters: int = 14, each: int = 10) -> None:
    """Decided battles of honest voters (Bradley–Terry with THETA), each from its own
    network, written through the store (the routes are what the ring uses)."""
    rows = app.state.arena.arena.rows
    rng = np.random.default_rng(7)
    k = 0
    for v in range(voters):
        voter, net = f"ip:{v:024x}", f"net:{v:024x}"
        for _ in range(each):
            a, b = rng.choice(list(SYSTEMS), 2, replace=False)
            p = 1 / (1 + np.exp(-(THETA[a] - THETA[b])))
            choice = "a" if rng.random() < p else "b"
            bid, ts = f"{k:032x}", T0 + 60 * k
            rec = BattleRecord(
                bid, f"o{v}", f"h{k}", "prompt", a, b, ts, text_key=f"h{k}", network=net
            )
            rows.add_battle(rec, voter, lambda w: None)
            rows.add_vote(ArenaVote(bid, choice, a, b, "prompt", 9000.0, ts + 9, voter))
            k += 1


def ring_voter(live, n: int) -> list[str]:
    """One ring member: battles over the WebSocket, hears both sides, votes for gamma when it
    is there and for the weaker system otherwise. Returns its choices."""
    cookie = new_cookie(live)
    out = []
    with page(live, cookie) as p:
        for i in range(RING_BATTLES):
            b = p.arena("arena_new", text=f"Ring {n} says number {i}.")
            assert b["type"] == "arena_battle", b
            bid = b["battle_id"]
            row = live.app.state.arena.arena.rows.battle(bid)  # the ring's own oracle
            for side in "ab":
                t = time.time()
                done = p.speak(bid, side)
                wait_until_heard(done, t)
                ok = p.played(bid, side, done)
                assert ok["type"] == "arena_played", ok
            weak = "gamma" if "gamma" in (row.system_a, row.system_b) else "beta"
            choice = "a" if row.system_a == weak else "b"
            v = p.arena("arena_vote", battle_id=bid, choice=choice)
            assert v["type"] == "arena_voted" and v["counted"] is True, v
            out.append(choice)
    return out


def board(live) -> dict:
    return httpx.get(live.url + "ll/arena/api/leaderboard", timeout=60).json()


def admin(live, path: str, body=None) -> httpx.Response:
    """An admin call: from this machine, with no proxy header (the localhost admin rule)."""
    if body is None:
        return httpx.get(live.url + path, timeout=120)
    return httpx.post(live.url + path, json=body, timeout=120)


@pytest.mark.timeout(900)
def test_a_ring_is_flagged_excluded_and_the_board_recovers():
    app = create_app(SYSTEMS, tmp_db(), mount_ui=False)
    app.state.arena.proxies = Proxies.parse(["127.0.0.1"])  # X-Forwarded-For: the ring's /24
    app.state.arena.set_limits(battles_per_minute=60)
    with live_server(app) as live:
        live.app = app
        assert admin(live, "ll/arena/api/settings", {"min_votes": 10}).status_code == 200
        honest_votes(app)
        honest = board(live)
        order = [r["system"] for r in honest["listed"]]
        assert order == ["alpha", "beta", "gamma"], honest
        gamma_before = next(r for r in honest["listed"] if r["system"] == "gamma")["rating"]
        assert admin(live, "ll/arena/api/audit").json()["flags"] == []

        with ThreadPoolExecutor(RING) as pool:
            choices = list(pool.map(lambda n: ring_voter(live, n), range(RING)))
        assert sum(map(len, choices)) == RING * RING_BATTLES
        attacked = board(live)
        gamma_after = next(r for r in attacked["listed"] if r["system"] == "gamma")["rating"]
        assert gamma_after > gamma_before + 50, (gamma_before, gamma_after)

        audit = admin(live, "ll/arena/api/audit").json()
        kinds = {f["kind"]: f for f in audit["flags"]}
        assert "ring" in kinds and "network_burst" in kinds, audit["flags"]
        ring_voters = set(kinds["ring"]["voters"])
        assert len(ring_voters) == RING
        assert set(kinds["network_burst"]["voters"]) == ring_voters
        honest_voters = {f"ip:{v:024x}" for v in range(14)}
        assert not honest_voters & {v for f in audit["flags"] for v in f["voters"]}

        made = []
        for v in sorted(ring_voters):
            r = admin(
                live,
                f"ll/arena/api/voters/{v}/exclude",
                {"reason": "ring: one network, all votes against the panel", "by": "ana"},
            )
            assert r.status_code == 200, r.text
            e = r.json()
            assert (e["voter"], e["active"], e["excluded_by"]) == (v, True, "ana (localhost)")
            assert e["votes"] == RING_BATTLES and "ring" in e["flags"]
            made.append(e)
        again = admin(live, f"ll/arena/api/voters/{made[0]['voter']}/exclude", {"reason": "x2x"})
        assert again.status_code == 409
        recovered = board(live)
        assert recovered["listed"] == honest["listed"]  # the honest board, number for number
        assert recovered["votes_not_counted"]["excluded_voter"] == RING * RING_BATTLES
        assert recovered["votes_stored"] == honest["votes_stored"] + RING * RING_BATTLES

        r = admin(
            live,
            f"ll/arena/api/exclusions/{made[0]['exclusion_id']}/undo",
            {"reason": "checked: a real listener after all", "by": "bo"},
        )
        assert r.status_code == 200 and r.json()["active"] is False
        assert r.json()["undone_by"] == "bo (localhost)"
        back = board(live)
        assert back["votes_not_counted"]["excluded_voter"] == (RING - 1) * RING_BATTLES
        assert back["listed"] != honest["listed"]
        record = admin(live, "ll/arena/api/audit").json()["exclusions"]
        assert [x["active"] for x in record] == [False] + [True] * (RING - 1)
        assert record[0]["undo_reason"] == "checked: a real listener after all"
        # an outsider can neither read the audit nor exclude
        out = {"X-Forwarded-For": "203.0.113.250"}
        assert httpx.get(live.url + "ll/arena/api/audit", headers=out, timeout=60).status_code in (
            401,
            403,
        )
        r = httpx.post(
            live.url + f"ll/arena/api/voters/{made[1]['voter']}/exclude",
            json={"reason": "hostile"},
            headers=out,
            timeout=60,
        )
        assert r.status_code in (401, 403)
