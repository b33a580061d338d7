"""A test kind is one folder: the registry, its refusals, and a toy kind run end to end.

The toy kind (``tests/fixtures/kinds/toy/``: its ``__init__.py`` and ``page.js``, nothing
else) is registered with one call and run through the real app: a test created by the admin
route, a rater who joins, streams each clip over ``/ll/ws``, votes; the answers in the SQLite
file; its results and export; and its page script loaded and answered in headless Chromium.
Its twin with a table of its own (``tests/fixtures/kinds/tally/``) runs the same way on
SQLite and on PostgreSQL, its table declared in its folder and created on a store made before
it was registered. No runtime file names either, so a new kind needs its folder and a
registry line only, as ``docs/architecture.md`` says.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import zipfile
from pathlib import Path

import httpx
import pytest

from app.listening.columns import columns
from app.store import TEST_KINDS, ListeningTest, Store
from backends.errors import InvalidRequest
from evaluation.listening.design import Design
from evaluation.listening.kinds import (
    BUILT_IN,
    KINDS,
    NAMES,
    KindError,
    TestKind,
    kind_of,
    missing_parts,
    register,
    unregister,
)
from evaluation.listening.kinds.base import PlanModel, Spread
from tests.fixtures.kinds import tally, toy
from tests.support.app_util import (
    TWO_PROMPTS,
    chromium,
    create_test,
    listening_app,
    live_server,
    play_all_and_wait,
    tmp_db,
)
from tests.support.postgres import (  # noqa: F401
    db_target_fixture,
    pg_cluster_fixture,
    pg_url_fixture,
)
from tests.support.rater import RaterClient

ROOT = Path(__file__).resolve().parents[1]
KINDS_DIR = ROOT / "evaluation" / "listening" / "kinds"


@pytest.fixture(scope="module")
def thumbs():
    """The toy kind, registered for this module (one call), unregistered after it."""
    kind = register(toy.KIND)
    yield kind
    unregister(kind.name)


# --------------------------------------------------------------------------- the registry


def test_every_kind_is_one_folder_with_every_part():
    assert [k.name for k in BUILT_IN] == ["mos", "ab", "mushra", "glitch", "parity_ab"]
    spread = Spread(0.5, 0.3, 0.6, 0.3)
    for kind in BUILT_IN:
        assert missing_parts(kind) == []
        assert kind.folder == KINDS_DIR / kind.name
        assert sorted(p.name for p in kind.folder.iterdir() if p.suffix in {".py", ".js"}) == [
            "__init__.py",
            "page.js",
        ]
        script = (kind.folder / "page.js").read_text(encoding="utf-8")
        assert re.search(rf"\.{kind.name} = \{{", script)  # window.LLKinds[name] = {render}
        assert kind.instructions and kind.scale("cmos")["question"]
        assert all(f.startswith(("raw/", "results/")) for f in kind.columns)
        d = Design(kind.name, ("a", "b"), ("p",), 2, reference="a", gold=True)
        m = kind.plan_model(d, spread)
        assert (m is None) == (kind.name == "glitch")
        assert m is None or (isinstance(m, PlanModel) and m.axis.low < m.centre < m.axis.high)
    # the store's list of kinds is the registry itself (the retired cmos is gone)
    assert TEST_KINDS is KINDS and "cmos" not in TEST_KINDS


def test_a_kind_missing_a_part_is_refused(tmp_path):
    class Half(TestKind):
        name = "half"
        title = "Half a kind"
        folder = tmp_path  # no page.js in it

    with pytest.raises(KindError) as e:
        register(Half())
    msg = str(e.value)
    for part in ("instructions", "main_table", "scale()", "plan_model()", "read_vote()"):
        assert part in msg
    assert "results()" in msg and "page.js in" in msg
    assert "half" not in KINDS

    class Bad(toy.Thumbs):
        name = "Bad Name"

    with pytest.raises(KindError, match="name 'Bad Name'"):
        register(Bad())

    class Twin(toy.Thumbs):
        name = "mos"  # a second kind of the same name

    with pytest.raises(KindError, match="registered already"):
        register(Twin())
    with pytest.raises(KindError, match="built-in"):
        unregister("mos")


def test_an_unknown_kind_is_an_error_never_another_kinds_default(tmp_path):
    from app.listening.texts import rater_texts

    # before: an unknown kind got the glitch hunt's question
    with pytest.raises(InvalidRequest, match="test type must be one of mos, ab, mushra, glitch"):
        rater_texts("nope", {}, "")
    with pytest.raises(InvalidRequest):
        kind_of("cmos")
    store = Store.open(tmp_path / "k.db")
    try:
        with pytest.raises(InvalidRequest, match="test kind must be one of"):
            store.add_test(ListeningTest("old", "cmos"))
    finally:
        store.close()


def test_the_app_refuses_to_start_over_a_test_of_an_unregistered_kind(capsys):
    from app.cli import main
    from app.server import create_app
    from tests.support.app_util import LISTENING_BACKENDS

    class Gone(toy.Thumbs):
        name = "gone"  # a kind that was registered when the test was made, and is no more

    db = tmp_db()
    kind = register(Gone())
    try:
        store = Store.open(db)
        store.add_test(ListeningTest("g0ne", kind.name, "a test of a kind since removed"))
        store.close()
    finally:
        unregister(kind.name)
    with pytest.raises(KindError) as e:
        create_app(dict(LISTENING_BACKENDS), db, mount_ui=False)
    assert "1 stored test(s) of a kind this app does not have: g0ne ('gone')" in str(e.value)
    assert "Registered kinds: mos, ab, mushra, glitch" in str(e.value)
    # what the message says to do: remove it (no export: its kind has no texts or results)
    assert main(["test", "delete", "g0ne", "--db", str(db)]) == 2  # not without --yes
    assert "give --yes" in capsys.readouterr().err
    assert main(["test", "delete", "g0ne", "--db", str(db), "--yes"]) == 1
    assert "not deleted: its export could not be made" in capsys.readouterr().err
    assert main(["test", "delete", "g0ne", "--db", str(db), "--yes", "--no-export"]) == 0
    assert "deleted test g0ne; no export" in capsys.readouterr().out
    create_app(dict(LISTENING_BACKENDS), db, mount_ui=False)  # starts now


# --------------------------------------------------------------------------- the toy, end to end


@pytest.fixture(scope="module")
def live(thumbs):
    with live_server(listening_app()) as lv:
        yield lv


def toy_test(live) -> str:
    return create_test(
        live,
        name="thumbs",
        kind="toy",
        systems=[{"name": "joe", "backend": "piper"}, {"name": "qwen", "backend": "qwen"}],
        prompts=list(TWO_PROMPTS),
        items_per_rater=2,
        screening=False,
        headphone_check=False,
        completion_code="T0Y",
    )


async def rate_all(
    live, tid: str, thumb: str, kind: str = "toy", extra: dict | None = None
) -> tuple[dict, list[int]]:
    rater = RaterClient(live.url, tid, crowd_id=f"{kind}-rater")
    try:
        await rater.join()
        st = await rater.status()
        codes = []
        while st["item"] is not None:
            item = st["item"]
            assert item["kind"] == kind and item["slots"] == 1
            early = await rater.vote({"assignment_id": item["assignment_id"], "thumb": thumb})
            codes.append(early.status_code)  # 409: not played yet
            await rater.listen(item["assignment_id"])
            bad = await rater.vote({"assignment_id": item["assignment_id"], "thumb": "sideways"})
            codes.append(bad.status_code)
            assert bad.json()["detail"] == "thumb must be 'up' or 'down'"
            vote = {"assignment_id": item["assignment_id"], "thumb": thumb, **(extra or {})}
            r = await rater.vote(vote)
            codes.append(r.status_code)
            st = await rater.status()
        return st, codes
    finally:
        await rater.aclose()


def test_a_toy_kind_runs_end_to_end(live, thumbs):
    tid = toy_test(live)
    # the page texts are the kind's
    st, codes = asyncio.run(rate_all(live, tid, "up"))
    assert codes == [409, 400, 200] * 2
    assert st["stage"] == "done" and st["completion_code"] == "T0Y"
    assert st["test"]["texts"]["scale"] == {"question": toy.QUESTION, "labels": toy.THUMBS}
    assert st["test"]["texts"]["instructions"] == thumbs.instructions
    # the answers, in the SQLite file: one per item, the kind's payload
    rows = live.state.store.db.execute(
        "SELECT kind, payload FROM answers WHERE test_id = ? ORDER BY created_at", [tid]
    ).fetchall()
    assert [k for k, _ in rows] == ["toy", "toy"]
    assert sorted(json.loads(p)["system"] for _, p in rows) == ["joe", "qwen"]
    assert {json.loads(p)["thumb"] for _, p in rows} == {"up"}
    # the results: the kind's table, through the admin route
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", timeout=60).json()
    assert {(r["system_id"], r["n"], r["up"], r["share_up"]) for r in res["toy"]} == {
        ("joe", 1, 1, 1.0),
        ("qwen", 1, 1, 1.0),
    }
    assert "toy" in {m["table"] for m in res["methods"]}
    # the export: the kind's file, its columns in the dictionary
    z = zipfile.ZipFile(io.BytesIO(httpx.get(f"{live.url}ll/admin/tests/{tid}/export.zip").content))
    head = z.read("results/toy.csv").decode().splitlines()[0].split(",")
    assert set(head) <= set(columns()["results/toy.csv"])
    assert json.loads(z.read("study.json"))["texts"]["scale"]["question"] == toy.QUESTION
    # deleted from the command line, as the Tests tab does: an export is kept first
    from app.cli import main

    db = str(live.state.store.path)
    assert main(["test", "delete", tid, "--db", db, "--yes"]) == 0
    kept = sorted((Path(db).parent / "exports").glob(f"{tid}-*.zip"))
    assert len(kept) == 1 and "results/toy.csv" in zipfile.ZipFile(kept[0]).namelist()
    assert httpx.get(f"{live.url}ll/listen/{tid}/info").status_code == 404


def test_the_kinds_page_script_is_served_from_its_folder_and_nothing_else(live, thumbs):
    tid = toy_test(live)
    page = httpx.get(f"{live.url}listen/{tid}").text
    assert '<script src="/ll/listening/kinds/toy/page.js"></script>' in page
    assert "/kinds/mos/" not in page  # only the test's own kind
    js = httpx.get(f"{live.url}ll/listening/kinds/toy/page.js")
    assert js.status_code == 200 and js.text == (thumbs.folder / "page.js").read_text()
    for path in (
        "ll/listening/kinds/toy/__init__.py",
        "ll/listening/kinds/nope/page.js",
        "ll/listening/kinds/toy/..%2F..%2Fdesign.py",
        "ll/listening/static/mushra.js",  # moved into the MUSHRA kind's folder
    ):
        assert httpx.get(live.url + path).status_code == 404, path
    assert httpx.get(f"{live.url}ll/listening/kinds/mushra/page.js").status_code == 200


@pytest.mark.browser
def test_the_toy_kind_in_chromium(live, thumbs):
    tid = toy_test(live)
    with chromium(["--autoplay-policy=no-user-gesture-required"]) as ctx:
        page = ctx.new_page()
        page.goto(f"{live.url}listen/{tid}")
        page.wait_for_selector("#lt-root[data-ready='1']", timeout=30_000)
        assert page.evaluate("typeof window.LLKinds.toy.render") == "function"
        page.click("#lt-agree")
        page.wait_for_selector("#lt-item:not([hidden])", timeout=30_000)
        for n in range(2):
            assert page.inner_text("#lt-question") == toy.QUESTION
            assert page.locator(".lt-choice").all_inner_texts() == ["Good", "Bad"]
            assert page.is_disabled("#lt-submit")  # nothing chosen, nothing played
            play_all_and_wait(page, 1)
            page.click(".lt-choice[data-value='down']")
            page.wait_for_selector("#lt-submit:not([disabled])", timeout=30_000)
            page.click("#lt-submit")
            if n == 0:
                page.wait_for_function("window.listenTest.status.answered === 1", timeout=30_000)
        page.wait_for_selector("#lt-done:not([hidden])", timeout=30_000)
        assert page.inner_text("#lt-code") == "T0Y"
    rows = live.state.store.db.execute(
        "SELECT payload FROM answers WHERE test_id = ?", [tid]
    ).fetchall()
    assert [json.loads(p)["thumb"] for (p,) in rows] == ["down", "down"]


# --------------------------------------------------------------------------- a table of its own


def tally_app(target):
    """The app over ``target`` (a SQLite file or a PostgreSQL URL), admin routes open to
    localhost (as :func:`listening_app`)."""
    import os

    from app.server import create_app
    from tests.support.app_util import LISTENING_BACKENDS

    old = os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
    try:
        return create_app(dict(LISTENING_BACKENDS), target, mount_ui=False)
    finally:
        if old is not None:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old


def rows_of(store, sql: str, params=()) -> list[tuple]:
    return [tuple(r) for r in store.sql.execute(sql, list(params)).fetchall()]


def test_a_kind_with_a_table_of_its_own_end_to_end(db_target, tmp_path):
    """The tally kind's table is declared in its folder only. On a store made before the kind
    was registered (SQLite or PostgreSQL), the app creates it; a rater's thumbs become its
    rows (with the take's system in its frame); the results, the export's raw file, the copy
    to the other engine and the test's deletion all take it from the declaration."""
    from app.cli import main
    from app.store import StoreError, copy_store, open_store

    target = str(db_target)
    with open_store(target, local_dir=tmp_path) as s:  # before the kind: no table of it
        assert "tally_votes" not in s.sql.table_names()
    kind = register(tally.KIND)
    try:
        with pytest.raises(StoreError, match=r"lacks the answer tables .*tally_votes"):
            open_store(target, read_only=True, local_dir=tmp_path)
        with live_server(tally_app(target)) as lv:
            store = lv.state.store
            cols = [c for c in store.sql.columns("tally_votes")]
            assert sorted(cols) == sorted(tally.VOTES.names)
            tid = create_test(
                lv,
                name="tally",
                kind=kind.name,
                systems=[{"name": "joe", "backend": "piper"}, {"name": "qwen", "backend": "qwen"}],
                prompts=list(TWO_PROMPTS),
                items_per_rater=2,
                screening=False,
                headphone_check=False,
            )
            asyncio.run(rate_all(lv, tid, "down", kind=kind.name))
            got = rows_of(store, "SELECT rater_id, up FROM tally_votes WHERE test_id = ?", [tid])
            assert len(got) == 2 and {u for _, u in got} == {0}
            frame = store.answer_frame("tally_votes", tid)
            assert sorted(frame["system_id"]) == ["joe", "qwen"]
            res = httpx.get(f"{lv.url}ll/admin/tests/{tid}/results", timeout=60).json()
            assert {(r["system_id"], r["n"], r["up"]) for r in res["tally"]} == {
                ("joe", 1, 0),
                ("qwen", 1, 0),
            }
            zf = httpx.get(f"{lv.url}ll/admin/tests/{tid}/export.zip", timeout=60).content
            z = zipfile.ZipFile(io.BytesIO(zf))
            raw = z.read("raw/tally_votes.csv").decode().splitlines()
            assert raw[0].split(",") == list(tally.VOTES.names) and len(raw) == 3
            assert set(raw[0].split(",")) <= set(columns()["raw/tally_votes.csv"])
        other = tmp_path / "copy.db" if target.startswith("postgres") else None
        if other is not None:  # PostgreSQL → SQLite: the kind's table is copied and checked
            pairs = copy_store(target, other, local_dir=tmp_path)
            assert [b.rows for b, _ in pairs if b.table == "tally_votes"] == [2]
        assert main(["test", "delete", tid, "--db", target, "--yes", "--no-export"]) == 0
        with open_store(target, local_dir=tmp_path) as s:
            assert rows_of(s, "SELECT count(*) FROM tally_votes") == [(0,)]
    finally:
        unregister(kind.name)
    with open_store(target, local_dir=tmp_path) as s:  # the kind gone: its table stays, unread
        assert "tally_votes" in s.sql.table_names()


def test_a_kinds_table_is_checked_when_registered_and_when_written(tmp_path):
    """A kind's table must be a plain per-test table, named as no other kind's or store's
    table; a vote's rows go only to its own kind's tables, with only their columns."""
    from dataclasses import replace

    from app.store.listening.answers import check_rows
    from app.store.schema import all_tables

    class NoTest(tally.Tally):
        name = "notest"
        tables = (replace(tally.VOTES, name="notest_votes", per_test=False),)

    with pytest.raises(KindError, match="a test_id column and per_test=True"):
        register(NoTest())

    class Twin(tally.Tally):
        name = "twin"
        tables = (replace(tally.VOTES, name="mos_ratings"),)  # the MOS kind's table

    with pytest.raises(KindError, match="the 'mos' kind's already"):
        register(Twin())

    class Shadow(tally.Tally):
        name = "shadow"
        tables = (replace(tally.VOTES, name="takes"),)  # a table of the store

    kind = register(Shadow())
    try:
        with pytest.raises(KindError, match="'takes' is a table of the store"):
            all_tables()
    finally:
        unregister(kind.name)
    assert "takes" in {t.name for t in all_tables()}
    kind = register(tally.KIND)
    try:
        check_rows("tally", [("tally_votes", {"vote_id": "v", "up": 1})])
        with pytest.raises(InvalidRequest, match="declares no table 'mos_ratings'"):
            check_rows("tally", [("mos_ratings", {"rating_id": "x"})])
        with pytest.raises(InvalidRequest, match=r"no column\(s\) \['drop'\]"):
            check_rows("tally", [("tally_votes", {"vote_id": "v", "drop": 1})])
    finally:
        unregister(kind.name)


def test_a_new_column_of_a_kinds_table_needs_the_kinds_file_only(tmp_path):
    """The map's row for a column of a kind's table names the kind's ``__init__.py`` (and, for
    a built-in kind, the docs' dictionary), nothing in ``app/store/``; and that is all it
    takes: a copy of the tally kind's folder with one column more (its ``Column``, its meaning
    and the vote that fills it, all in ``__init__.py``) gets the column on a store made with
    the old table, its votes write it, the export has it and the dictionary explains it."""
    import filecmp
    import importlib.util
    import shutil

    from app.store import open_store

    row = next(
        line
        for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| a column of a kind's answer table |")
    )
    assert set(re.findall(r"`((?:app|evaluation|docs|tests|backends)/[^`]*)`", row)) == {
        "evaluation/listening/kinds/<kind>/__init__.py",
        "docs/listening-tests.md",
        "app/store/",
    }
    assert "Nothing in `app/store/`" in row
    old, new = ROOT / "tests" / "fixtures" / "kinds" / "tally", tmp_path / "tally_sure"
    shutil.copytree(old, new, ignore=shutil.ignore_patterns("__pycache__"))
    src = (new / "__init__.py").read_text(encoding="utf-8")
    for a, b in (
        (
            '        text("created_at"),\n    ),',
            '        text("created_at"),\n        integer("sure", since=8),\n    ),',
        ),
        ('"up": "1 up, 0 down"}', '"up": "1 up, 0 down", "sure": "1 sure, 0 not"}'),
        (
            '            "created_at": ctx.created_at,\n',
            '            "created_at": ctx.created_at,\n            "sure": int(bool(body.get("sure"))),\n',
        ),
    ):
        assert src.count(a) == 1, a
        src = src.replace(a, b)
    (new / "__init__.py").write_text(src, encoding="utf-8")
    changed = filecmp.dircmp(old, new, ignore=["__pycache__"]).diff_files
    assert changed == ["__init__.py"]  # the page script and everything else as it was
    spec = importlib.util.spec_from_file_location("tally_sure", new / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    db = tmp_path / "k.db"
    kind = register(tally.KIND)  # the store as the kind left it: no column "sure"
    try:
        open_store(db).close()
    finally:
        unregister(kind.name)
    kind = register(module.KIND)
    try:
        with live_server(tally_app(db)) as lv:
            store = lv.state.store
            assert "sure" in store.sql.columns("tally_votes")
            tid = create_test(
                lv,
                name="sure",
                kind=kind.name,
                systems=[{"name": "joe", "backend": "piper"}],
                prompts=list(TWO_PROMPTS),
                items_per_rater=1,
                screening=False,
                headphone_check=False,
            )
            asyncio.run(rate_all(lv, tid, "up", kind=kind.name, extra={"sure": True}))
            assert rows_of(store, "SELECT up, sure FROM tally_votes") == [(1, 1)]
            zf = httpx.get(f"{lv.url}ll/admin/tests/{tid}/export.zip", timeout=60).content
            z = zipfile.ZipFile(io.BytesIO(zf))
            head = z.read("raw/tally_votes.csv").decode().splitlines()[0].split(",")
            assert (
                head[-1] == "sure" and columns()["raw/tally_votes.csv"]["sure"] == "1 sure, 0 not"
            )
            assert json.loads(z.read("study.json"))["columns"]["raw/tally_votes.csv"]["sure"]
    finally:
        unregister(kind.name)


# --------------------------------------------------------------------------- one folder


def test_a_new_kind_needs_its_folder_and_a_registry_line_only():
    """The toy touched nothing else: its folder holds what the map's row names, and no
    runtime file mentions it."""
    row = next(
        line
        for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| a listening-test kind |")
    )
    named = set(re.findall(r"`evaluation/listening/kinds/<kind>/([\w.]+)`", row))
    assert named == {"__init__.py", "page.js"}
    assert "`BUILT_IN` in `evaluation/listening/kinds/__init__.py`" in row
    for fixture in ("toy", "tally"):  # without a table, and with one
        here = {p.name for p in (ROOT / "tests" / "fixtures" / "kinds" / fixture).iterdir()}
        assert named == here - {"__pycache__"}
    for top in ("app", "evaluation", "backends", "voices"):
        for p in (ROOT / top).rglob("*"):
            if p.suffix in {".py", ".js", ".html"}:
                text = p.read_text(encoding="utf-8")
                assert not re.search(r"['\"](toy|tally)['\"]|Thumbs|\bTally\b|tally_votes", text), p


ALLOWED = {
    "evaluation/stats.py": (3, "the ab_votes column cmos (the A/B answer), not the kind"),
    "app/listening/ws.py": (1, "the 'for' of a failed listen_glitch message, as on the wire"),
    "app/player/session.py": (1, "the Playground's glitch report message, not the kind"),
    "app/player/messages.py": (1, "the Playground's glitch report message, not the kind"),
    "app/player/static/player-core.js": (1, "the Playground's glitch report message"),
    "app/playground/static/playground.js": (1, "a Playground glitch mark's label"),
}
"""Where a kind's name may be written outside its own folder, and why: column names and the
Playground's glitch messages that happen to be spelt like a kind (the count may only go
down). The store, the report, the screening, the export and ``ListeningTest`` name no kind:
they ask the registry (75 literals before the kinds' wave, 19 after it, 8 now)."""


def test_kind_names_stay_in_their_folders():
    names = "|".join(re.escape(n) for n in [*NAMES, "cmos"])
    pat = re.compile(rf"""(['"])({names})\1""")
    found: dict[str, int] = {}
    for top in ("backends", "voices", "evaluation", "app"):
        for p in (ROOT / top).rglob("*"):
            rel = str(p.relative_to(ROOT))
            if p.suffix not in {".py", ".js", ".html"} or rel.startswith(
                "evaluation/listening/kinds/"
            ):
                continue
            n = sum(len(pat.findall(line)) for line in p.read_text(encoding="utf-8").splitlines())
            if n:
                found[rel] = n
    over = {f: n for f, n in found.items() if n > ALLOWED.get(f, (0, ""))[0]}
    assert not over, over
    assert sum(found.values()) <= sum(n for n, _ in ALLOWED.values()) == 8
