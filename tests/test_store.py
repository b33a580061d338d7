"""The store on both engines: a real SQLite file and a real PostgreSQL server (a throwaway
cluster, :mod:`tests.support.postgres`), real Piper takes, real threads and processes. Every
test that takes ``db_target`` runs once per engine; the SQLite-only ones test its file."""

from __future__ import annotations

import inspect
import sqlite3
import threading
from pathlib import Path
from typing import Generic, Protocol

import numpy as np
import pytest

from app.store import (
    SCHEMA_VERSION,
    AbVote,
    AlreadyVoted,
    ArenaStore,
    Assignment,
    GlitchReport,
    ListeningTest,
    MosRating,
    Prompt,
    Rater,
    RatingStore,
    Store,
    StoreEngine,
    StoreError,
    System,
    TakeStore,
    UnknownItem,
    nearest_boundary,
    open_store,
)
from backends.base import SpeechRequest
from backends.errors import InvalidRequest
from evaluation.takes import record
from tests.support.postgres import (  # noqa: F401 (fixtures: db_target, pg_cluster, pg_url)
    db_target_fixture,
    pg_cluster_fixture,
    pg_url_fixture,
)

TEXT = (
    "The quick brown fox jumps over the lazy dog, and then it runs away. A second sentence follows."
)


@pytest.fixture(scope="module")
def takes(piper_det):
    import asyncio

    async def go():
        return [
            await record(piper_det, SpeechRequest(text=TEXT)),
            await record(piper_det, SpeechRequest(text="Short and sweet. Another short one here.")),
        ]

    return asyncio.run(go())


@pytest.fixture
def store(db_target, tmp_path, takes):
    s = open_store(db_target, local_dir=tmp_path / "local")
    s.add_system(System("piper", "piper?deterministic=1", voice="joe", params={"speed": 1.0}))
    s.add_system(System("piper-fast", "piper?deterministic=1&speed=1.3", voice="joe"))
    s.add_prompt(Prompt("p1", TEXT))
    s.save_take(takes[0], system_id="piper", prompt_id="p1")
    s.save_take(takes[1], system_id="piper-fast", prompt_id="p1")
    s.add_test(ListeningTest("mos1", "mos"))
    s.add_test(ListeningTest("ab1", "ab"))
    yield s
    s.close()


def test_schema_created_and_versioned(db_target, tmp_path):
    s = open_store(db_target, local_dir=tmp_path)
    assert s.schema_version == SCHEMA_VERSION
    names = set(s.sql.table_names())
    for t in [
        "systems",
        "prompts",
        "takes",
        "chunks",
        "raters",
        "tests",
        "assignments",
        "mos_ratings",
        "ab_votes",
        "glitch_reports",
        "auto_findings",
    ]:
        assert t in names
    s.close()


def test_sqlite_journal_and_busy_timeout(tmp_path):
    s = Store.open(tmp_path / "a.db")
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s.db.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    s.close()


def test_newer_schema_is_refused(db_target, tmp_path):
    s = open_store(db_target, local_dir=tmp_path)
    if s.engine == "sqlite":
        s.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    else:
        s.sql.execute("UPDATE schema_version SET version = ?", [SCHEMA_VERSION + 1])
    s.close()
    with pytest.raises(StoreError, match="upgrade listenlab"):
        open_store(db_target, local_dir=tmp_path)
    with pytest.raises(StoreError, match="upgrade listenlab"):
        open_store(db_target, local_dir=tmp_path, read_only=True)


def test_journal_mode_configurable(tmp_path):
    s = Store.open(tmp_path / "a.db", journal_mode="delete")
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    s.close()
    assert not (tmp_path / "a.db-wal").exists()
    with pytest.raises(InvalidRequest, match="journal_mode"):
        Store.open(tmp_path / "b.db", journal_mode="banana")


def test_take_roundtrip_relative_paths(store, takes, tmp_path):
    t = takes[0]
    back = store.load_take(t.take_id)
    assert np.array_equal(back.audio, t.audio)
    assert back.chunks == t.chunks and back.sample_rate == t.sample_rate
    assert back.request.text == t.request.text and back.status == "ok"
    row = store.frame("takes").set_index("take_id").loc[t.take_id]
    assert not row["audio_path"].startswith("/")
    assert store.audio_path(t.take_id).is_file()
    if store.engine == "sqlite":
        assert (tmp_path / row["audio_path"]).is_file()
    else:  # the audio is in the database: a replica without the local copy reads it back
        assert store.audio_path(t.take_id).is_relative_to(tmp_path / "local")
        store.audio_path(t.take_id).unlink()
        assert np.array_equal(store.load_take(t.take_id).audio, t.audio)
        assert store.audio_path(t.take_id).read_bytes() == store.audio_bytes(t.take_id)[1]
    assert row["chunk_count"] == len(t.chunks) and row["system_id"] == "piper"
    assert len(store.chunks_frame().query("take_id == @t.take_id")) == len(t.chunks)
    # saving again is a no-op
    assert store.save_take(t, system_id="piper") == t.take_id
    assert len(store.takes_frame()) == 2
    with pytest.raises(UnknownItem):
        store.load_take("nope")
    with pytest.raises(UnknownItem):
        store.save_take(t.__class__(**{**t.__dict__, "take_id": "x"}), system_id="no-such-system")


def test_survives_reopen_and_move(store, takes, tmp_path):
    if store.engine != "sqlite":
        pytest.skip("SQLite's file and audio folder move together; PostgreSQL: the next test")
    store.add_mos_rating(MosRating("v1", "mos1", "r1", takes[0].take_id, 4, played_ms=3000))
    store.close()
    moved = tmp_path / "moved"
    moved.mkdir()
    for p in tmp_path.iterdir():
        if p.name != "moved":
            p.rename(moved / p.name)
    s = Store.open(moved / "lab.db")
    assert s.frame("mos_ratings")["score"].tolist() == [4.0]
    assert np.array_equal(s.load_take(takes[0].take_id).audio, takes[0].audio)
    s.close()


def test_survives_reopen_from_another_replica(pg_url, takes, tmp_path):
    """PostgreSQL: a second process with its own empty local folder (another replica, another
    machine) sees the rating and plays the take's audio from the database."""
    a = open_store(pg_url, local_dir=tmp_path / "replica-a")
    a.add_system(System("piper", "piper"))
    a.save_take(takes[0], system_id="piper")
    a.add_test(ListeningTest("mos1", "mos"))
    a.add_mos_rating(MosRating("v1", "mos1", "r1", takes[0].take_id, 4, played_ms=3000))
    a.close()
    b = open_store(pg_url, local_dir=tmp_path / "replica-b")
    assert b.frame("mos_ratings")["score"].tolist() == [4.0]
    assert not (tmp_path / "replica-b" / "pg_audio").exists()
    assert np.array_equal(b.load_take(takes[0].take_id).audio, takes[0].audio)
    assert b.audio_path(takes[0].take_id).is_relative_to(tmp_path / "replica-b")
    b.close()


def test_resent_votes_ignored_and_one_vote_per_item(store, takes):
    a, b = takes[0].take_id, takes[1].take_id
    w = store.add_mos_rating(MosRating("v1", "mos1", "r1", a, 4))
    assert w.created
    assert not store.add_mos_rating(MosRating("v1", "mos1", "r1", a, 4)).created
    with pytest.raises(AlreadyVoted) as e:
        store.add_mos_rating(MosRating("v2", "mos1", "r1", a, 2))
    assert e.value.existing_id == "v1"
    assert store.frame("mos_ratings")["score"].tolist() == [4.0]

    assert store.add_ab_vote(AbVote("ab-1", "ab1", "r1", a, b, "b", cmos=2)).created
    assert not store.add_ab_vote(AbVote("ab-1", "ab1", "r1", a, b, "b", cmos=2)).created
    with pytest.raises(AlreadyVoted):  # the same pair presented the other way round
        store.add_ab_vote(AbVote("ab-2", "ab1", "r1", b, a, "a"))
    df = store.answer_frame("ab_votes")
    assert len(df) == 1
    assert (df.loc[0, "system_a"], df.loc[0, "system_b"]) == ("piper", "piper-fast")
    # another rater may vote on the same item
    assert store.add_ab_vote(AbVote("ab-3", "ab1", "r2", b, a, "tie")).created


def test_bad_votes_rejected(store, takes):
    a = takes[0].take_id
    with pytest.raises(InvalidRequest, match="choice"):
        store.add_ab_vote(AbVote("x", "ab1", "r1", a, takes[1].take_id, "left"))
    with pytest.raises(InvalidRequest, match="different"):
        store.add_ab_vote(AbVote("x", "ab1", "r1", a, a, "a"))
    with pytest.raises(InvalidRequest, match="cmos"):
        store.add_ab_vote(AbVote("x", "ab1", "r1", a, takes[1].take_id, "a", cmos=5))
    with pytest.raises(UnknownItem):
        store.add_mos_rating(MosRating("x", "no-test", "r1", a, 3))
    with pytest.raises(InvalidRequest, match="glitch kind"):
        store.add_glitch_report(GlitchReport("g", a, "r1", 100.0, kind="boom"))
    assert store.frame("ab_votes").empty and store.frame("mos_ratings").empty


def test_the_store_keeps_no_list_of_kinds(store):
    """Which test kinds exist is the kinds' registry's to say: the store takes a kind
    registered after it was opened, and refuses one the registry does not know (a stored test of
    an unknown kind would stop the app at start), whatever its spelling."""
    from evaluation.listening.kinds import register, unregister
    from tests.fixtures.kinds import toy

    with pytest.raises(InvalidRequest, match="test kind must be one of mos, ab, mushra, glitch"):
        store.add_test(ListeningTest("toy0", "toy"))
    kind = register(toy.KIND)
    try:
        assert store.add_test(ListeningTest("toy1", "toy")).created
    finally:
        unregister(kind.name)
    assert store.frame("tests").set_index("test_id").loc["toy1", "kind"] == "toy"
    for bad in ("", "Toy", "<b>mos</b>", "mos ", "cmos", "x" * 33, 7):
        with pytest.raises(InvalidRequest, match="kind"):
            store.add_test(ListeningTest("bad", bad))
    assert {"bad", "toy0"}.isdisjoint(store.frame("tests")["test_id"])


def test_assignment_role_flows_into_rating(store, takes):
    store.add_rater(Rater("r1", "Ann"))
    store.add_assignment(
        Assignment("as1", "mos1", "r1", 0, takes[0].take_id, role="gold", expected=5)
    )
    with pytest.raises(AlreadyVoted):
        store.add_assignment(Assignment("as2", "mos1", "r1", 0, takes[1].take_id))
    store.add_mos_rating(MosRating("v1", "mos1", "r1", takes[0].take_id, 3))
    row = store.answer_frame("mos_ratings").iloc[0]
    assert row["role"] == "gold" and row["expected"] == 5.0 and row["system_id"] == "piper"
    assert [a.assignment_id for a in store.assignments("mos1", "r1")] == ["as1"]


@pytest.mark.parametrize("journal_mode", ["wal", "delete", "postgresql"])
def test_twenty_threads_lose_nothing_duplicate_nothing(request, tmp_path, takes, journal_mode):
    """20 writers at once, each re-sending every vote twice; every vote lands exactly once."""
    if journal_mode == "postgresql":
        store = open_store(request.getfixturevalue("pg_url"), local_dir=tmp_path)
    else:
        store = Store.open(tmp_path / "lab.db", journal_mode=journal_mode)
    store.add_system(System("piper", "piper?deterministic=1"))
    for t in takes:
        store.save_take(t, system_id="piper")
    store.add_test(ListeningTest("mos1", "mos"))
    store.add_test(ListeningTest("ab1", "ab"))
    a, b = takes[0].take_id, takes[1].take_id
    store.add_test(ListeningTest("mos2", "mos"))
    errors: list[BaseException] = []
    barrier = threading.Barrier(20)

    def worker(k: int) -> None:
        try:
            barrier.wait()
            for rep in range(2):
                for test in ("mos1", "mos2"):
                    for tk in (a, b):
                        store.add_mos_rating(
                            MosRating(f"m-{k}-{test}-{tk}", test, f"r{k}", tk, 1 + k % 5)
                        )
                store.add_ab_vote(AbVote(f"ab-{k}", "ab1", f"r{k}", a, b, "ab"[k % 2], cmos=rep))
                store.add_glitch_report(GlitchReport(f"g-{k}", a, f"r{k}", 100.0 * k, kind="click"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    mos = store.frame("mos_ratings")
    assert len(mos) == 80 and mos["rating_id"].is_unique
    ab = store.frame("ab_votes")
    assert len(ab) == 20 and (ab["cmos"] == 0).all()  # the re-send (rep 1) did not overwrite
    assert len(store.frame("glitch_reports")) == 20
    # a separate connection (another process would see the same) agrees
    if store.engine == "sqlite":
        con = sqlite3.connect(store.path)
        assert con.execute("SELECT count(*) FROM mos_ratings").fetchone()[0] == 80
        con.close()
    else:
        import psycopg

        with psycopg.connect(store.url) as con:
            assert con.execute("SELECT count(*) FROM mos_ratings").fetchone()[0] == 80
    store.close()


WRITER = """
import sys
from app.store import open_store, MosRating
s = open_store(sys.argv[1], local_dir=sys.argv[5])
me, a, b = sys.argv[2:5]
for i in range(60):
    for rep in range(2):  # every vote is sent twice
        s.add_mos_rating(MosRating(f"shared-{i}", "mos1", f"r{i}", (a, b)[i % 2], 1 + i % 5))
        s.add_mos_rating(MosRating(f"{me}-{i}", "mos1", f"{me}-r{i}", a, 3))
s.close()
"""


def test_two_processes_write_at_once(store, takes, tmp_path):
    """Two app worker processes: the same 60 votes from both (client ids), plus 60 own each."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                store.url if store.engine == "postgresql" else str(store.path),
                me,
                takes[0].take_id,
                takes[1].take_id,
                str(tmp_path / me),
            ],
            cwd=root,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me in ("w1", "w2")
    ]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    mos = store.frame("mos_ratings")
    assert len(mos) == 60 + 2 * 60 and mos["rating_id"].is_unique


def test_glitch_report_nearest_boundary(store, takes):
    t = takes[0]
    bms = [o * 1000 / t.sample_rate for o in t.boundaries]
    assert bms, "the test text must give more than one chunk"
    store.add_glitch_report(GlitchReport("g1", t.take_id, "r1", bms[-1] + 30.0, kind="click"))
    store.add_glitch_report(GlitchReport("g2", t.take_id, "r1", 0.0))
    g = store.answer_frame("glitch_reports").set_index("report_id")
    assert g.loc["g1", "boundary_index"] == len(bms) - 1
    assert g.loc["g1", "distance_ms"] == pytest.approx(30.0)
    assert g.loc["g2", "boundary_index"] == 0 and g.loc["g2", "distance_ms"] == pytest.approx(
        -bms[0]
    )
    assert g["kind"].isna().tolist() == [False, True]
    assert nearest_boundary([], 5.0) is None
    assert nearest_boundary([100.0, 200.0, 300.0], 160.0) == (1, 200.0, -40.0)


def test_underruns_and_findings(store, takes):
    tid = takes[0].take_id
    assert store.record_underruns(tid, 2, 340.0, [1200.0, 3400.0], report_id="u1").created
    assert not store.record_underruns(tid, 2, 340.0, [1200.0, 3400.0], report_id="u1").created
    store.record_underruns(tid, 1, 100.0, [50.0], report_id="u2")
    row = store.takes_frame().set_index("take_id").loc[tid]
    assert row["underrun_count"] == 2 and row["underrun_stall_ms"] == 340.0
    assert len(store.underruns_frame()) == 2
    f = [
        {
            "kind": "click",
            "time_s": 1.0,
            "boundary_index": 0,
            "severity": 3.0,
            "evidence": {"z": 9.1},
        },
        {"kind": "gap", "time_s": 2.0, "boundary_index": 1, "severity": 1.0, "evidence": {}},
    ]
    assert store.add_auto_findings(tid, f) == 2
    assert store.add_auto_findings(tid, f[:1]) == 1  # re-running the detector replaces
    ff = store.findings_frame()
    assert ff["kind"].tolist() == ["click"] and ff["system_id"].tolist() == ["piper"]


def test_take_info_and_glitch_report_read_one_row(store, takes):
    """What the routes ask without SQL of their own: a take's row (its owner is in ``meta``)
    and a stored glitch mark with the seam the store matched it to."""
    t = takes[0]
    info = store.take_info(t.take_id)
    assert info.take_id == t.take_id and info.system_id == "piper" and info.status == "ok"
    assert info.sample_rate == t.sample_rate and info.chunk_count == len(t.chunks)
    assert info.duration_s == pytest.approx(t.duration_s) and info.meta == t.meta
    assert store.take_info("nope") is None
    store.add_glitch_report(GlitchReport("g1", t.take_id, "r1", 10.0, kind="gap"))
    g = store.glitch_report("g1")
    assert (g.take_id, g.kind, g.boundary_index) == (t.take_id, "gap", 0)
    assert g.distance_ms == pytest.approx(10.0 - store.boundaries_ms(t.take_id)[0])
    assert store.glitch_report("nope") is None


def _members(proto) -> dict[str, inspect.Signature | None]:
    """A Protocol's methods (with their signatures) and attributes (None), bases included."""
    out: dict[str, inspect.Signature | None] = {}
    for klass in reversed(proto.__mro__):
        if klass in (object, Protocol, Generic) or not getattr(klass, "_is_protocol", False):
            continue
        out.update({a: None for a in getattr(klass, "__annotations__", {})})
        for name, v in vars(klass).items():
            if callable(v) and (not name.startswith("_") or name in ("__enter__", "__exit__")):
                out[name] = inspect.signature(v)
            elif isinstance(v, property):
                out[name] = None
    return out


@pytest.mark.parametrize(
    "proto, of",
    [
        (StoreEngine, lambda s: s),
        (TakeStore, lambda s: s),
        (RatingStore, lambda s: s),
        (ArenaStore, lambda s: s.arena),
    ],  # fmt: skip
    ids=lambda p: getattr(p, "__name__", ""),
)
def test_each_engine_implements_the_engine_neutral_interface(db_target, tmp_path, proto, of):
    """Everything app.store.interface names (what a second engine must implement) is on
    each engine's store, with the same parameters, so the interface is a true description."""
    s = open_store(db_target, local_dir=tmp_path)
    impl = of(s)
    assert isinstance(impl, proto)
    members = _members(proto)
    assert len(members) >= 5
    for name, sig in members.items():
        assert hasattr(impl, name), f"{type(impl).__name__} lacks {name}"
        if sig is not None:
            got = inspect.signature(getattr(type(impl), name))
            assert list(got.parameters) == list(sig.parameters), name
            for p, want in sig.parameters.items():
                assert got.parameters[p].kind == want.kind, (name, p)
                assert got.parameters[p].default == want.default, (name, p)
    s.close()
