"""One study exports the same bytes on either engine and after ``listenlab db copy``: a real
study (a server on 127.0.0.1 with the Piper voice, a SQLite file; MOS, A/B and MUSHRA tests,
raters who listen in real time, vote and mark a glitch, a changed crowd setting) is exported,
copied to PostgreSQL (a database that sorts text as English does, as managed servers' often
do) and back to SQLite, and every file of every test's export is compared byte for byte:
the raw tables, ``raw/ratings.csv``, every results table, ``study.json`` and ``methods.md``.
"""

from __future__ import annotations

import asyncio

import pytest

from app.listening.export import export_files
from app.store import copy_store, open_store
from app.store.listening import TestStore
from app.store.schema import export_tables
from tests.support.app_util import create_test, listening_app, live_server
from tests.support.postgres import pg_cluster_fixture  # noqa: F401
from tests.support.rater import RaterClient


async def _rate(url: str, tid: str, crowd: str, mark: bool) -> None:
    """One rater through the whole test: every slot played, a vote per item (its score from
    the crowd id, so raters differ), a glitch mark on the first item if ``mark``."""
    c = RaterClient(url, tid, crowd_id=crowd)
    await c.join()
    st = await c.status()
    n = 0
    while not st["finished"]:
        it = st["item"]
        aid = it["assignment_id"]
        for slot in range(it.get("slots") or 1):
            await c.listen(aid, slot)
        if mark and n == 0:
            assert (await c.glitch(aid, 0, 400.0))["type"] == "listen_glitch_saved"
        k = (len(crowd) + n) % 3
        if it["kind"] == "mushra":
            body = {"scores": [100 - 10 * k - 5 * i for i in range(it["slots"])]}
        elif it["kind"] == "ab":
            body = {"cmos": (-1, 2, 0)[k]}
        else:
            body = {"score": 2 + k}
        r = await c.vote({"assignment_id": aid, **body})
        assert r.status_code == 200, r.text
        n += 1
        st = await c.status()
    await c.aclose()


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The SQLite file of a finished study and its tests' ids."""
    app = listening_app()
    db = app.state.listenlab.store.path
    with live_server(app) as lv:
        common = {"headphone_check": False, "items_per_rater": 2}
        tests = [
            create_test(lv, name="mos study", **common),
            create_test(lv, name="ab study", kind="ab", **common),
            create_test(lv, name="mushra study", kind="mushra", reference="a", **common),
        ]
        TestStore(lv.state.store).change_settings(tests[0], {"completion_code": "CODE2"})

        async def everyone() -> None:
            await asyncio.gather(
                *(
                    _rate(lv.url, tid, f"crowd-{i}-{tid[:4]}", mark=i == 0)
                    for tid in tests
                    for i in range(2)
                )
            )

        asyncio.run(everyone())
    return db, tests


def _exports(target, tests: list[str], local) -> dict[str, dict[str, bytes]]:
    with open_store(target, read_only=True, local_dir=local) as s:
        t = TestStore(s)
        return {
            tid: {name: text.encode() for name, text in export_files(t, tid).items()}
            for tid in tests
        }


def _rewrite_first_rows(url: str, local) -> None:
    """Rewrite each exported table's first stored row, as every UPDATE on PostgreSQL does (a
    rater's row changes with each step): it moves to the end of the table's storage, so a read
    without a total order would return it last."""
    with open_store(url, local_dir=local) as s:
        for name in export_tables():
            s.sql.execute(
                f'UPDATE "{name}" SET test_id = test_id '
                f'WHERE ctid = (SELECT ctid FROM "{name}" LIMIT 1)'
            )


def test_a_study_exports_the_same_bytes_on_both_engines_and_after_copy(study, pg_cluster, tmp_path):
    db, tests = study
    want = _exports(db, tests, tmp_path / "local")
    files = want[tests[0]]
    assert {"raw/answers.csv", "raw/ratings.csv", "study.json", "methods.md"} <= set(files)
    assert files["raw/glitch_reports.csv"].count(b"\n") >= 2  # a header and the mark
    assert b"CODE2" in files["study.json"]  # the changed setting is in the export
    for tid in tests:  # each test's raters answered every item
        assert want[tid]["raw/answers.csv"].count(b"\n") >= 1 + 2 * 2
    url = pg_cluster.new_database(icu_locale="en-US")
    try:
        copy_store(db, url, local_dir=tmp_path / "pg-local")
        _rewrite_first_rows(url, tmp_path / "pg-local")
        on_pg = _exports(url, tests, tmp_path / "pg-read")
        back = tmp_path / "back" / "lab.db"
        copy_store(url, back, local_dir=tmp_path / "pg-local")
        after = _exports(back, tests, tmp_path / "local")
    finally:
        pg_cluster.drop_database(url)
    for tid in tests:
        for name, data in want[tid].items():
            assert on_pg[tid][name] == data, (tid, name, "PostgreSQL")
            assert after[tid][name] == data, (tid, name, "SQLite after the round trip")
        assert set(on_pg[tid]) == set(after[tid]) == set(want[tid])
