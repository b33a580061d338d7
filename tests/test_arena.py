"""The arena's rules (app/arena/battles.py) on a real SQLite store (its tables: app/store/arena.py):
pair weighting, the play checks, one vote per battle, ownership, rate limits, the schema that
holds the arena's tables, and the Bradley–Terry board (evaluation/arena.py)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest
import sqlite_utils
from starlette.requests import Request

from app.arena.battles import (
    AlreadyVoted,
    Arena,
    ArenaError,
    Draw,
    Limits,
    NotPlayed,
    NotYours,
    RateLimited,
    UnknownBattle,
    clean_battle_text,
    next_pair,
    owner_view,
)
from app.arena.service import owner_of
from app.store import MIGRATIONS, SCHEMA_VERSION, Store
from app.web.identity import COOKIE, owner_for_token
from evaluation.arena import leaderboard

ME = owner_for_token("a" * 43)
OTHER = owner_for_token("b" * 43)
T0 = 1_000_000.0


@pytest.fixture
def arena(tmp_path):
    store = Store.open(tmp_path / "ll.db")
    yield Arena(store, Limits(battles_per_minute=3, global_battles_per_minute=5))
    store.close()


def new(arena, owner=ME, now=T0, text="Hello there, arena."):
    return arena.new_battle(owner, text, ["x", "y"], np.random.default_rng(0), now=now)


def stream(arena, bt, side, take_id, *, duration=2.0, first=T0 + 0.1, session="s1", now=T0):
    arena.start_stream(bt, side, take_id, session, now=now)
    arena.finish_stream(take_id, "ok", duration, first)


ARENA_V3 = [
    # the arena's tables as app/arena/battles.py:ensure_tables made them beside a schema-3
    # store, before the arena joined the migrations; its first release had no voter column
    """CREATE TABLE arena_battles (battle_id TEXT PRIMARY KEY, owner TEXT NOT NULL,
    text TEXT NOT NULL, text_source TEXT NOT NULL, system_a TEXT NOT NULL,
    system_b TEXT NOT NULL, created_ts REAL NOT NULL, created_at TEXT NOT NULL,
    played_a_ts REAL, played_b_ts REAL)""",
    "CREATE INDEX arena_battles_owner ON arena_battles (owner, created_ts)",
    """CREATE TABLE arena_streams (take_id TEXT PRIMARY KEY,
    battle_id TEXT NOT NULL REFERENCES arena_battles(battle_id),
    side TEXT NOT NULL CHECK (side IN ('a', 'b')), ws_session TEXT NOT NULL,
    requested_ts REAL NOT NULL, status TEXT NOT NULL DEFAULT 'streaming', duration_s REAL,
    earliest_end_ts REAL, superseded_ts REAL, played_ts REAL, played_ms REAL)""",
    "CREATE TABLE arena_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE arena_votes (battle_id TEXT PRIMARY KEY REFERENCES arena_battles(battle_id),
    choice TEXT NOT NULL CHECK (choice IN ('a', 'b', 'tie', 'both_bad')),
    system_a TEXT NOT NULL, system_b TEXT NOT NULL, text_source TEXT NOT NULL,
    decision_ms REAL, voted_ts REAL NOT NULL, created_at TEXT NOT NULL)""",
]
VOTER_COLUMNS = [
    "ALTER TABLE arena_battles ADD COLUMN voter TEXT",
    "ALTER TABLE arena_votes ADD COLUMN voter TEXT",
    """CREATE TABLE arena_dropped_voters (voter TEXT PRIMARY KEY,
    votes_dropped INTEGER NOT NULL, dropped_at TEXT NOT NULL)""",
]


def schema_3_db(path, arena: list[str]) -> None:
    """A DB as listenlab left it at schema version 3: a take's system and a test, plus the
    arena's tables (``arena``: the statements the old code ran) with one voted battle."""
    db = sqlite_utils.Database(sqlite3.connect(path))
    for v in (1, 2, 3):
        MIGRATIONS[v](db)
    db.execute("PRAGMA user_version = 3")
    db.execute("INSERT INTO systems (system_id, backend) VALUES ('x', 'piper')")
    db.execute("INSERT INTO tests (test_id, kind, name, status) VALUES ('t', 'mos', 'old', 'open')")
    for sql in arena:
        db.execute(sql)
    if arena:
        db.execute(
            "INSERT INTO arena_battles (battle_id, owner, text, text_source, system_a, system_b,"
            " created_ts, created_at, played_a_ts, played_b_ts) VALUES"
            f" ('{'e' * 32}', 'o', 'Old.', 'typed', 'x', 'y', {T0}, 'then', {T0 + 1}, {T0 + 2})"
        )
        db.execute(
            "INSERT INTO arena_votes (battle_id, choice, system_a, system_b, text_source,"
            f" decision_ms, voted_ts, created_at) VALUES ('{'e' * 32}', 'b', 'x', 'y', 'typed',"
            f" 3000, {T0 + 3}, 'then')"
        )
        db.execute("INSERT INTO arena_meta (key, value) VALUES ('setting:min_votes', '7')")
    db.conn.commit()
    db.conn.close()


@pytest.mark.parametrize(
    "arena",
    [[], ARENA_V3, ARENA_V3 + VOTER_COLUMNS],
    ids=["without-arena-tables", "arena-first-release", "arena-with-voters"],
)
def test_a_schema_3_store_migrates_and_keeps_its_rows(tmp_path, arena):
    schema_3_db(tmp_path / "ll.db", arena)
    store = Store.open(tmp_path / "ll.db")
    assert store.schema_version == SCHEMA_VERSION == 8  # 8: the arena's second version (#42)
    names = set(store.db.table_names())
    assert {"arena_battles", "arena_streams", "arena_votes", "arena_meta"} <= names
    assert "arena_dropped_voters" in names
    for table in ("arena_battles", "arena_votes"):
        assert "voter" in {c.name for c in store.db[table].columns}
    assert store.frame("systems")["system_id"].tolist() == ["x"]
    assert store.frame("tests")["name"].tolist() == ["old"]
    arena_ = Arena(store, Limits(battles_per_minute=3, global_battles_per_minute=5))
    if arena:  # the old battle, vote and setting are still there, and count
        old = arena_.get("e" * 32, "o")
        assert (old.voted, old.both_played, old.text) == ("b", True, "Old.")
        assert arena_.vote_count() == 1 and arena_.setting("min_votes") == "7"
        assert arena_.votes_frame()["voter"].isna().tolist() == [True]
    else:
        assert arena_.vote_count() == 0 and arena_.setting("min_votes") is None
    bt = new(arena_)  # and the arena works on it
    assert arena_.get(bt.battle_id, ME).voted is None
    store.close()
    again = Store.open(tmp_path / "ll.db")  # opening again migrates nothing more
    assert again.schema_version == SCHEMA_VERSION
    assert again.arena.vote_count() == (1 if arena else 0)
    again.close()


def _conn(cookie: str | None) -> Request:
    headers = [(b"cookie", f"{COOKIE}={cookie}".encode())] if cookie is not None else []
    return Request({"type": "http", "headers": headers})


def test_the_owner_is_the_visitors_identity_never_a_malformed_or_missing_cookie():
    assert owner_of(_conn(None)) is None and owner_of(_conn("")) is None
    assert owner_of(_conn("z" * 10)) is None and owner_of(_conn("a" * 43 + "!")) is None
    assert owner_of(_conn("a" * 43)) == ME and owner_of(_conn("b" * 43)) == OTHER != ME
    assert "a" * 43 not in ME  # the cookie itself is never stored


def vote_rows(arena, rows, *, voter="ip:" + "0" * 24, t0=T0):
    """Store decided votes directly (battles played on paper): ``(a, b, choice)`` rows."""
    from app.store import ArenaVote, BattleRecord

    for k, (a, b, choice) in enumerate(rows):
        bid = f"{k + int(t0):032x}"
        rec = BattleRecord(bid, ME, f"text {k}", "typed", a, b, t0 + k, text_key=f"k{k}")
        arena.rows.add_battle(rec, voter, lambda w: None)
        arena.rows.add_vote(ArenaVote(bid, choice, a, b, "typed", 1.0, t0 + k + 1, voter))


def test_the_next_pair_follows_the_information_and_keeps_its_safeguards(arena):
    """A pair whose order is settled (x beat y 60 times) comes up far less than the two
    uncertain pairs; every pair still comes up (exploration), sides are random, a mask of
    pairs that may meet is obeyed, and one system is refused."""
    vote_rows(arena, [("x", "y", "a")] * 60)
    rng = np.random.default_rng(1)
    draw = Draw(["x", "y", "z"])
    picks = [next_pair(arena.rows, draw, rng, T0 + 1e6) for _ in range(3000)]
    share = {
        p: sum(frozenset((c.a, c.b)) == frozenset(p) for c in picks) / 3000
        for p in (("x", "y"), ("x", "z"), ("y", "z"))
    }
    assert share[("x", "y")] < 0.08, share  # only its exploration share (0.1 × 1/3) and less
    assert share[("x", "z")] > 0.3 and share[("y", "z")] > 0.3, share
    xz = [c for c in picks if {c.a, c.b} == {"x", "z"}]
    assert 0.42 < sum(c.a == "x" for c in xz) / len(xz) < 0.58  # neither is always side A
    assert {c.why for c in picks} == {"floor", "explore"}  # z has no vote: below its floor
    mask = np.zeros((3, 3), dtype=bool)
    mask[0, 1] = mask[1, 0] = True
    only = next_pair(arena.rows, Draw(["x", "y", "z"], allowed=mask), rng, T0 + 1e6)
    assert {only.a, only.b} == {"x", "y"} and only.why == "only"
    with pytest.raises(ArenaError, match="at least two systems"):
        next_pair(arena.rows, Draw(["x"]), rng, T0)


def test_a_starved_system_gets_its_floor_and_pending_battles_spread_the_draw(arena):
    # z took part in 4 of 100 votes (its fair share is 67): the next battle includes it
    vote_rows(arena, [("x", "y", "a" if k % 2 else "b") for k in range(96)])
    vote_rows(arena, [("x", "z", "a")] * 4, t0=T0 + 500)
    rng = np.random.default_rng(2)
    picks = [next_pair(arena.rows, Draw(["x", "y", "z"]), rng, T0 + 1e6) for _ in range(400)]
    assert all("z" in (c.a, c.b) for c in picks if c.why != "explore")
    assert sum(c.why == "floor" for c in picks) > 300
    # battles made in the last 5 minutes and not voted count as votes on their way
    from app.store import BattleRecord

    for k in range(40):
        rec = BattleRecord(f"{k:032x}", ME, "t", "typed", "x", "z", T0 + 2e6 - 10)
        arena.rows.add_battle(rec, "ip:pending", lambda w: None)
    pend = arena.rows.pending_pairs(T0 + 2e6 - 300)
    assert pend == [("x", "z", 40)]
    picks = [next_pair(arena.rows, Draw(["x", "y", "z"]), rng, T0 + 2e6) for _ in range(300)]
    assert sum({c.a, c.b} == {"y", "z"} for c in picks) > sum(
        {c.a, c.b} == {"x", "z"} for c in picks
    )


def test_text_is_bounded_and_cleaned():
    lim = Limits(max_chars=20)
    assert clean_battle_text("  Hello\n\tthere  ", lim) == "Hello there"
    with pytest.raises(ArenaError, match="type a text"):
        clean_battle_text("   ", lim)
    with pytest.raises(ArenaError, match="21 characters; the arena's limit is 20"):
        clean_battle_text("x" * 21, lim)
    with pytest.raises(ArenaError, match="must be a string"):
        clean_battle_text(["x"], lim)
    with pytest.raises(ArenaError):
        clean_battle_text("y" * 10_000_000, lim)  # cut before cleaning: bounded work


def test_battles_belong_to_their_session(arena):
    bt = new(arena)
    assert arena.get(bt.battle_id, ME).text == "Hello there, arena."
    with pytest.raises(NotYours, match="another visitor"):
        arena.get(bt.battle_id, OTHER)
    with pytest.raises(NotYours):
        arena.get(bt.battle_id, None)
    with pytest.raises(UnknownBattle, match="malformed"):
        arena.get("../../etc/passwd", ME)
    with pytest.raises(UnknownBattle, match="no such battle"):
        arena.get("0" * 32, ME)
    with pytest.raises(NotYours):
        arena.vote(bt.battle_id, OTHER, "a")
    assert "systems" not in owner_view(bt)  # no names before the vote


def test_play_reports_are_checked_against_what_was_streamed(arena):
    bt = new(arena)
    with pytest.raises(NotPlayed, match="not streamed to you"):
        arena.played(bt.battle_id, ME, "a", "f" * 32, 2000, now=T0 + 10)
    arena.start_stream(bt, "a", "1" * 32, "s1", now=T0)
    with pytest.raises(NotPlayed, match="still streaming"):
        arena.played(bt.battle_id, ME, "a", "1" * 32, 2000, now=T0 + 10)
    arena.finish_stream("1" * 32, "error")
    with pytest.raises(NotPlayed, match="did not complete"):
        arena.played(bt.battle_id, ME, "a", "1" * 32, 2000, now=T0 + 10)
    # a complete 2 s stream whose first chunk left at T0 + 0.1
    stream(arena, bt, "a", "2" * 32, duration=2.0, first=T0 + 0.1, now=T0)
    with pytest.raises(NotPlayed, match="cannot have finished playing yet"):
        arena.played(bt.battle_id, ME, "a", "2" * 32, 2000, now=T0 + 1.0)
    with pytest.raises(NotPlayed, match=r"played 1\.0 s of 2\.0 s"):
        arena.played(bt.battle_id, ME, "a", "2" * 32, 1000, now=T0 + 3)
    with pytest.raises(NotPlayed, match="not streamed"):  # a take of side a is not side b's
        arena.played(bt.battle_id, ME, "b", "2" * 32, 2000, now=T0 + 3)
    got = arena.played(bt.battle_id, ME, "a", "2" * 32, 2000, now=T0 + 2.2)
    assert got.played_a_ts == T0 + 2.2 and got.played_b_ts is None


def test_a_stream_replaced_before_its_end_does_not_count(arena):
    bt = new(arena)
    stream(arena, bt, "a", "3" * 32, duration=3.0, first=T0 + 0.1, now=T0)
    # the page asked for side b 1 s into side a: the one player dropped a's audio
    stream(arena, bt, "b", "4" * 32, duration=3.0, first=T0 + 1.1, now=T0 + 1.0)
    with pytest.raises(NotPlayed, match="interrupted"):
        arena.played(bt.battle_id, ME, "a", "3" * 32, 3000, now=T0 + 10)
    assert arena.played(bt.battle_id, ME, "b", "4" * 32, 3000, now=T0 + 4.5).played_b_ts
    # a stream on another page (session) does not interrupt this one
    stream(arena, bt, "a", "5" * 32, duration=1.0, first=T0 + 5.1, now=T0 + 5.0)
    stream(arena, new(arena, now=T0 + 5), "a", "6" * 32, session="s2", now=T0 + 5.2)
    assert arena.played(bt.battle_id, ME, "a", "5" * 32, 1000, now=T0 + 6.2).both_played


def test_each_side_can_be_streamed_a_bounded_number_of_times(arena):
    bt = new(arena)
    for i in range(arena.limits.streams_per_side):
        arena.start_stream(bt, "a", f"{i:032x}", "s1", now=T0)
    with pytest.raises(RateLimited, match="already streamed 3 times"):
        arena.start_stream(bt, "a", "e" * 32, "s1", now=T0)
    arena.start_stream(bt, "b", "d" * 32, "s1", now=T0)


def test_one_vote_per_battle_and_only_after_both_played(arena):
    bt = new(arena)
    with pytest.raises(NotPlayed, match="listen to both sides.*A, B"):
        arena.vote(bt.battle_id, ME, "a", now=T0 + 1)
    stream(arena, bt, "a", "a" * 32, duration=1.0, now=T0)
    arena.played(bt.battle_id, ME, "a", "a" * 32, 1000, now=T0 + 1.2)
    with pytest.raises(NotPlayed, match="not yet played: B"):
        arena.vote(bt.battle_id, ME, "a", now=T0 + 2)
    stream(arena, bt, "b", "b" * 32, duration=1.0, first=T0 + 1.5, now=T0 + 1.3)
    arena.played(bt.battle_id, ME, "b", "b" * 32, 1000, now=T0 + 2.6)
    with pytest.raises(ArenaError, match="must be one of"):
        arena.vote(bt.battle_id, ME, "<script>", now=T0 + 3)
    voted, created = arena.vote(bt.battle_id, ME, "both_bad", now=T0 + 3)
    assert created and voted.voted == "both_bad"
    assert owner_view(voted)["systems"] == {"a": bt.system_a, "b": bt.system_b}
    again, created = arena.vote(bt.battle_id, ME, "both_bad", now=T0 + 3.1)
    assert not created and again.voted == "both_bad"
    with pytest.raises(AlreadyVoted, match="already voted 'both_bad'"):
        arena.vote(bt.battle_id, ME, "a", now=T0 + 4)
    v = arena.votes_frame()
    assert len(v) == 1 and v.loc[0, "choice"] == "both_bad"
    assert v.loc[0, "decision_ms"] == pytest.approx(3000.0)


def test_rate_limit_per_session_and_overall(arena):
    for i in range(3):
        new(arena, now=T0 + i)
    with pytest.raises(RateLimited, match=r"at most 3 battles per minute.*Try again in 58 s") as e:
        new(arena, now=T0 + 2.5)
    assert e.value.extra["retry_after_s"] == 58
    new(arena, owner=OTHER, now=T0 + 3)  # other visitors are not blocked by me
    new(arena, owner=owner_for_token("c" * 43), now=T0 + 3)
    with pytest.raises(RateLimited, match="The arena is busy"):
        new(arena, owner=owner_for_token("d" * 43), now=T0 + 4)
    new(arena, now=T0 + 61)  # a minute later


def _votes(rows):
    return pd.DataFrame(rows, columns=["system_a", "system_b", "choice"])


def test_leaderboard_bt_with_intervals_threshold_and_draws():
    rng = np.random.default_rng(3)
    rows = []
    # strong beats mid 80 %, mid beats weak 80 %, strong beats weak 90 %; sides random
    for a, b, p in (("strong", "mid", 0.8), ("mid", "weak", 0.8), ("strong", "weak", 0.9)):
        for _ in range(60):
            win = rng.random() < p
            if rng.random() < 0.5:
                rows.append((a, b, "a" if win else "b"))
            else:
                rows.append((b, a, "b" if win else "a"))
    rows += [("strong", "newbie", "tie"), ("newbie", "mid", "both_bad"), ("weak", "mid", "tie")]
    board = leaderboard(_votes(rows), min_votes=20, n_boot=100)
    assert [r["system"] for r in board["listed"]] == ["strong", "mid", "weak"]
    assert [r["rank"] for r in board["listed"]] == [1, 2, 3]
    lows = [r["ci_low"] for r in board["listed"]]
    assert lows == sorted(lows, reverse=True)
    for r in board["listed"]:
        assert r["ci_low"] <= r["rating"] <= r["ci_high"]
    assert board["listed"][0]["ci_low"] > board["listed"][2]["ci_high"]
    (nb,) = board["preliminary"]
    assert nb["system"] == "newbie" and nb["votes"] == 2 and not nb["listed"]
    assert (nb["ties"], nb["both_bad"], nb["wins"], nb["losses"]) == (1, 1, 0, 0)
    mid = next(r for r in board["listed"] if r["system"] == "mid")
    assert mid["both_bad"] == 1 and mid["ties"] == 1
    assert board["total_votes"] == len(rows)
    # "both bad" is a draw in the fit: the same ratings as with a tie
    as_tie = [(a, b, "tie" if c == "both_bad" else c) for a, b, c in rows]
    same = leaderboard(_votes(as_tie), min_votes=20, n_boot=100)
    assert [r["rating"] for r in same["listed"]] == [r["rating"] for r in board["listed"]]


def test_leaderboard_empty():
    board = leaderboard(_votes([]), min_votes=5, n_boot=10)
    assert board["listed"] == [] and board["preliminary"] == [] and board["total_votes"] == 0


def test_refusals_are_kinds_of_the_one_error_tree_answered_by_the_one_handler():
    """Each refusal keeps its ``reason`` and gets its status from the error tree; the app's
    handler writes the body (``error``, ``reason``, the extras) and ``Retry-After``."""
    import json

    from app.arena.battles import LoginRequired, StillStreaming, VoterDropped
    from app.web.errors import error_response
    from backends import errors

    for cls, kind, status, reason in [
        (ArenaError, errors.InvalidRequest, 400, "invalid"),
        (UnknownBattle, errors.NotFound, 404, "unknown_battle"),
        (NotYours, errors.Forbidden, 403, "not_yours"),
        (VoterDropped, errors.Forbidden, 403, "voter_dropped"),
        (NotPlayed, errors.Conflict, 409, "not_played"),
        (StillStreaming, errors.Conflict, 409, "not_played"),
        (AlreadyVoted, errors.Conflict, 409, "already_voted"),
        (RateLimited, errors.TooMany, 429, "rate_limited"),
        (LoginRequired, errors.LoginRequired, 401, "login_required"),
    ]:
        e = cls("no.")
        assert isinstance(e, ArenaError) and isinstance(e, kind), cls
        r = error_response(e)
        assert r.status_code == status and json.loads(r.body)["reason"] == reason, cls
    r = error_response(RateLimited("Slow down.", retry_after_s=58))
    assert r.headers["Retry-After"] == "58"
    assert json.loads(r.body) == {
        "error": "Slow down.",
        "detail": "Slow down.",
        "reason": "rate_limited",
        "retry_after_s": 58,
    }
    body = json.loads(error_response(AlreadyVoted("once.", battle={"voted": "a"})).body)
    assert body["battle"] == {"voted": "a"} and body["error"] == "once."
