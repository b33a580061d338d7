"""The voting-ring flags (evaluation/arena/rings.py) on simulated crowds with known truth, and
the admin's reversible exclusions and the first-use rule on a real store of each engine,
SQLite and PostgreSQL (app/arena/audit.py, app/store/arena.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app.arena.audit import Audit, admin_name, clean_reason
from app.arena.battles import Arena, ArenaError, Limits
from app.store import open_store
from app.store.arena import AlreadyExcluded, UnknownExclusion
from evaluation.arena.rings import RingRules, ring_flags
from tests.support.postgres import (  # noqa: F401 (fixtures)
    db_target_fixture,
    pg_cluster_fixture,
    pg_url_fixture,
)

SYSTEMS = ["a", "b", "c", "d"]
THETA = {"a": 1.0, "b": 0.5, "c": 0.0, "d": -1.0}
COLUMNS = ["system_a", "system_b", "choice", "voted_ts", "voter", "network", "owner"]


def crowd(seed: int, ring: int = 4, ring_votes: int = 12, honest: int = 40) -> pd.DataFrame:
    """Honest voters (Bradley–Terry with THETA, 8..24 votes each, each on its own network)
    and a ring from one network that picks d (the weakest) whenever it is there and
    otherwise the weaker system."""
    rng = np.random.default_rng(seed)
    rows, t = [], 0.0
    for v in range(honest):
        for _ in range(int(rng.integers(8, 25))):
            x, y = rng.choice(SYSTEMS, 2, replace=False)
            p = 1 / (1 + np.exp(-(THETA[x] - THETA[y])))
            rows.append((x, y, "a" if rng.random() < p else "b", t, f"ip:h{v}", f"n{v}", f"o{v}"))
            t += 37.0
    for v in range(ring):
        for _ in range(ring_votes):
            x, y = rng.choice(SYSTEMS, 2, replace=False)
            weak = "d" if "d" in (x, y) else min((x, y), key=THETA.get)
            rows.append((x, y, "a" if x == weak else "b", t, f"ip:r{v}", "nR", f"or{v}"))
            t += 20.0
    return pd.DataFrame(rows, columns=COLUMNS)


def test_a_ring_is_flagged_and_honest_voters_are_not():
    caught, false = 0, 0
    for seed in range(20):
        flags = ring_flags(crowd(seed))
        flagged = {v for f in flags if f.kind != "network_burst" for v in f.voters}
        caught += sum(v.startswith("ip:r") for v in flagged)
        false += sum(v.startswith("ip:h") for v in flagged)
        kinds = {f.kind for f in flags}
        assert {"ring", "network_burst"} <= kinds, (seed, kinds)
        (ring,) = [f for f in flags if f.kind == "ring"]
        assert set(ring.voters) == {f"ip:r{k}" for k in range(4)}
        assert "agree with each other and against the panel" in ring.detail
    assert caught == 80  # every ring voter in every crowd
    assert false <= 1  # of 800 honest voters


def test_one_system_shared_owner_and_quiet_crowds():
    df = crowd(1, ring=0)
    assert ring_flags(df) == []  # honest voters, each on a network of their own
    fan = [("a", "d", "b", 1e6 + k, "ip:fan", "nF", "oF") for k in range(12)]
    fan += [("d", "c", "a", 2e6 + k, "ip:fan", "nF", "oF") for k in range(4)]
    df2 = pd.concat([df, pd.DataFrame(fan, columns=COLUMNS)], ignore_index=True)
    (f,) = [f for f in ring_flags(df2) if f.kind == "one_system"]
    assert f.voters == ("ip:fan",) and f.facts["system"] == "d" and f.facts["picked"] == 16
    assert "picked d in 16 of 16 decisive battles" in f.detail
    shared = df.copy()
    shared.loc[shared["voter"].isin(["ip:h1", "ip:h2"]), "owner"] = "same-browser"
    (s,) = [f for f in ring_flags(shared) if f.kind == "shared_owner"]
    assert s.voters == ("ip:h1", "ip:h2") and "one browser session voted as 2 voters" in s.detail
    strict = RingRules(burst_votes=10_000)
    assert not [f for f in ring_flags(crowd(2), strict) if f.kind == "network_burst"]


@pytest.fixture
def arena(tmp_path, db_target):
    """The arena on a real store of each engine (SQLite, and a PostgreSQL database)."""
    store = open_store(db_target, local_dir=tmp_path / "local")
    yield Arena(store, Limits(battles_per_minute=1000, votes_per_hour=1000, votes_per_day=1000))
    store.close()


def play_and_vote(arena, voter, text, choice, now, systems=("x", "y")):
    bt = arena.new_battle(
        "o-" + voter, text, list(systems), np.random.default_rng(int(now)), now=now, voter=voter
    )
    for k, side in enumerate("ab"):
        tid = f"{int(now * 10) + k:032x}"
        arena.start_stream(bt, side, tid, "s", now=now)
        arena.finish_stream(tid, "ok", 1.0, now + 0.1)
        arena.played(bt.battle_id, "o-" + voter, side, tid, 1000, now=now + 1.2 + k)
    return arena.vote(bt.battle_id, "o-" + voter, choice, now=now + 5, voter=voter)[0]


def test_a_text_counts_only_on_its_first_use_per_voter(arena):
    play_and_vote(arena, "ip:v1", "Hello, world!", "a", 1000.0)
    play_and_vote(arena, "ip:v1", "hello   WORLD", "b", 1100.0)  # the same text, normalised
    play_and_vote(arena, "ip:v2", "Hello, world!", "a", 1200.0)  # another voter: counts
    play_and_vote(arena, "ip:v1", "Another text.", "tie", 1300.0)
    v = arena.votes_frame()
    assert v["counted"].tolist() == [1, 0, 1, 1]
    assert v["uncounted"].fillna("").tolist() == ["", "repeat_text", "", ""]
    assert len(arena.counted_frame()) == 3
    assert sum(n for *_, n in arena.rows.tally()) == 3


def test_an_exclusion_is_recorded_reversible_and_recomputes_what_counts(arena):
    for k in range(3):
        play_and_vote(arena, "ip:ring", f"text {k}", "a", 1000.0 + 100 * k)
    play_and_vote(arena, "ip:ok", "text 0", "b", 2000.0)
    audit = Audit(arena.rows)
    before = arena.rows.board_stamp()
    e = audit.exclude("ip:ring", "  votes  in lockstep  ", "ana (localhost)", now=5000.0)
    assert (e.voter, e.reason, e.votes, e.excluded_by, e.active) == (
        "ip:ring",
        "votes in lockstep",
        3,
        "ana (localhost)",
        True,
    )
    assert arena.rows.board_stamp() != before
    assert arena.counted_frame()["voter"].tolist() == ["ip:ok"]
    assert arena.votes_frame()["excluded"].tolist() == [1, 1, 1, 0]  # kept, marked
    with pytest.raises(AlreadyExcluded):
        audit.exclude("ip:ring", "again", "ana (localhost)")
    with pytest.raises(ArenaError, match="give a reason"):
        audit.exclude("ip:ok", "  ", "ana (localhost)")
    play_and_vote(arena, "ip:ring", "text 9", "a", 6000.0)  # shadow: stored, not counted
    assert len(arena.votes_frame()) == 5 and len(arena.counted_frame()) == 1
    undone = audit.undo(e.exclusion_id, "a class at one school, not a ring", "bo (password)")
    assert (undone.active, undone.undone_by, undone.undo_reason) == (
        False,
        "bo (password)",
        "a class at one school, not a ring",
    )
    assert len(arena.counted_frame()) == 5
    with pytest.raises(UnknownExclusion):
        audit.undo(e.exclusion_id, "twice", "bo (password)")
    again = audit.exclude("ip:ring", "after all", "ana (localhost)")
    rows = arena.rows.exclusions()
    assert [(x.exclusion_id, x.active) for x in rows] == [
        (e.exclusion_id, False),
        (again.exclusion_id, True),
    ]
    report = audit.report()
    assert [x.reason for x in report.exclusions] == ["votes in lockstep", "after all"]


def test_reasons_and_names_are_bounded():
    assert clean_reason("x" * 500) == "x" * 500
    with pytest.raises(ArenaError, match="501 characters; the limit is 500"):
        clean_reason("x" * 501)
    with pytest.raises(ArenaError, match="give a reason"):
        clean_reason({"nested": "dict"})
    assert admin_name("  Ana\nBo  ", "password") == "Ana Bo (password)"
    assert admin_name(None, "localhost") == "admin (localhost)"
    assert admin_name("<b>" * 100, "password").startswith("<b><b>")  # escaped where shown
    assert len(admin_name("y" * 1000, "password")) == 80 + len(" (password)")
