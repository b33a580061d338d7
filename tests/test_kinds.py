"""A test kind is one folder: the registry, its refusals, and a toy kind run end to end.

The toy kind (``tests/fixtures/kinds/toy/``: its ``__init__.py`` and ``page.js``, nothing
else) is registered with one call and run through the real app: a test created by the admin
route, a rater who joins, streams each clip over ``/ll/ws``, votes; the answers in the SQLite
file; its results and export; and its page script loaded and answered in headless Chromium.
No runtime file names it, so a new kind needs its folder and a registry line only, as
``docs/architecture.md`` says.
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
from tests.fixtures.kinds import toy
from tests.support.app_util import (
    TWO_PROMPTS,
    chromium,
    create_test,
    listening_app,
    live_server,
    play_all_and_wait,
    tmp_db,
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


async def rate_all(live, tid: str, thumb: str) -> tuple[dict, list[int]]:
    rater = RaterClient(live.url, tid, crowd_id="toy-rater")
    try:
        await rater.join()
        st = await rater.status()
        codes = []
        while st["item"] is not None:
            item = st["item"]
            assert item["kind"] == "toy" and item["slots"] == 1
            early = await rater.vote({"assignment_id": item["assignment_id"], "thumb": thumb})
            codes.append(early.status_code)  # 409: not played yet
            await rater.listen(item["assignment_id"])
            bad = await rater.vote({"assignment_id": item["assignment_id"], "thumb": "sideways"})
            codes.append(bad.status_code)
            assert bad.json()["detail"] == "thumb must be 'up' or 'down'"
            r = await rater.vote({"assignment_id": item["assignment_id"], "thumb": thumb})
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
    here = {p.name for p in (ROOT / "tests" / "fixtures" / "kinds" / "toy").iterdir()}
    assert named == here - {"__pycache__"}
    for top in ("app", "evaluation", "backends", "voices"):
        for p in (ROOT / top).rglob("*"):
            if p.suffix in {".py", ".js", ".html"}:
                assert not re.search(r"['\"]toy['\"]|Thumbs", p.read_text(encoding="utf-8")), p


ALLOWED = {
    "evaluation/stats.py": (3, "the ab_votes column cmos (the A/B answer), not the kind"),
    "evaluation/report.py": (1, "the ab_votes column cmos in the numeric columns"),
    "app/listening/ws.py": (1, "the 'for' of a failed listen_glitch message, as on the wire"),
    "app/player/session.py": (1, "the Playground's glitch report message, not the kind"),
    "app/player/messages.py": (1, "the Playground's glitch report message, not the kind"),
    "app/player/static/player-core.js": (1, "the Playground's glitch report message"),
    "app/playground/static/playground.js": (1, "a Playground glitch mark's label"),
    "app/store/schema.py": (1, "the ab_votes column cmos"),
    "app/store/listening/views.py": (
        8,
        "the store's raw ratings and A/B checks (the store's wave)",
    ),
    "app/store/records.py": (1, "ListeningTest's default kind (the store's wave)"),
}
"""Where a kind's name may be written outside its own folder, and why: column names and the
Playground's glitch messages that happen to be spelt like a kind, and the store's own files,
which its helper reworks in the same wave (the count may only go down)."""


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
    assert sum(found.values()) <= sum(n for n, _ in ALLOWED.values()) == 19
