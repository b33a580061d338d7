"""The arena's data layer (app/arena/battles.py) on a real SQLite store: pair weighting, the play
checks, one vote per battle, ownership, rate limits and the Bradley–Terry board."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app.arena.battles import (
    AlreadyVoted,
    Arena,
    ArenaError,
    Limits,
    NotPlayed,
    NotYours,
    RateLimited,
    UnknownBattle,
    clean_battle_text,
    ensure_tables,
    leaderboard,
    owner_key,
    pick_pair,
)
from app.store.core import SCHEMA_VERSION, Store

ME = owner_key("a" * 32)
OTHER = owner_key("b" * 32)
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


def test_tables_are_idempotent_and_leave_the_schema_version_alone(tmp_path):
    store = Store.open(tmp_path / "ll.db")
    ensure_tables(store.db)
    ensure_tables(store.db)
    Arena(store)
    names = set(store.db.table_names())
    assert {"arena_battles", "arena_streams", "arena_votes"} <= names
    assert store.schema_version == SCHEMA_VERSION
    store.close()
    again = Store.open(tmp_path / "ll.db")  # the store still opens it (no version bump)
    assert again.schema_version == SCHEMA_VERSION
    again.close()


def test_owner_key_rejects_malformed_cookies():
    assert owner_key(None) is None and owner_key("") is None
    assert owner_key("z" * 32) is None and owner_key("a" * 31) is None
    assert owner_key("a" * 32) != owner_key("b" * 32)
    assert "a" * 32 not in owner_key("a" * 32)  # the cookie itself is never stored


def test_pick_pair_prefers_pairs_with_few_votes_and_randomises_sides():
    rng = np.random.default_rng(1)
    systems = ["x", "y", "z"]
    votes = {("x", "y"): 200}
    picks = [pick_pair(systems, votes, rng) for _ in range(3000)]
    xy = sum(1 for p in picks if set(p) == {"x", "y"})
    # weights 1/205 vs 1/5, 1/5: the heavily voted pair comes up ~1.2 % of the time
    assert xy / len(picks) < 0.03
    xz = [p for p in picks if set(p) == {"x", "z"}]
    assert 0.4 < len(xz) / len(picks) < 0.6
    first_x = sum(1 for p in xz if p[0] == "x") / len(xz)
    assert 0.42 < first_x < 0.58  # neither system is always side A
    assert all(p[0] != p[1] for p in picks)
    # no votes at all: uniform over pairs
    picks = [frozenset(pick_pair(systems, {}, rng)) for _ in range(3000)]
    for pair in ({"x", "y"}, {"x", "z"}, {"y", "z"}):
        assert 0.28 < picks.count(frozenset(pair)) / 3000 < 0.39
    with pytest.raises(ArenaError, match="at least two systems"):
        pick_pair(["x"], {}, rng)


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
    assert "systems" not in bt.public()  # no names before the vote


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
    assert voted.public()["systems"] == {"a": bt.system_a, "b": bt.system_b}
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
    new(arena, owner=owner_key("c" * 32), now=T0 + 3)
    with pytest.raises(RateLimited, match="The arena is busy"):
        new(arena, owner=owner_key("d" * 32), now=T0 + 4)
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
