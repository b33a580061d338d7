"""Inside the huggingface.co page: the Space framed by another site, in real Chromium.

A Space is served over https and shown in an ``<iframe>`` on huggingface.co, a different site,
so its cookies are third-party cookies there. Here the app is served over TLS on
``https://127.0.0.1`` and framed by a page of ``http://localhost`` (another site); Chromium
takes the self-signed certificate with ``--ignore-certificate-errors``. Through the frame: a
rater takes a test, a visitor runs an arena battle to the vote, and the admin logs in, in a
browser that keeps third-party cookies (the profile's "allow" preference). Then in one that
keeps no third-party cookie or storage (a fresh Chromium profile's default): the rater still
finishes (in memory), and every page says so and links to itself opened on its own.
"""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from app.server import create_app
from tests.support.app_util import chromium, live_server, self_signed, tmp_db
from tests.support.remote_util import serve_app

pytestmark = pytest.mark.browser
PW = "framed-admin-pw"
SYSTEMS = {"alpha": "piper?deterministic=1", "beta": "piper?deterministic=1&profile=qwen3-tts"}
TLS_OK = ["--ignore-certificate-errors"]


def frame_page(request):
    src = request.query_params["src"]
    return HTMLResponse(
        "<!doctype html><title>a Space page on another site</title>"
        f'<iframe id=space src="{src}" style="width:1000px;height:900px" '
        'allow="autoplay"></iframe>'
    )


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """(the app over TLS on 127.0.0.1, the framing site's base URL on localhost, playing
    huggingface.co: the one other site the app lets frame it, and another site's base URL)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("LISTENLAB_ADMIN_PASSWORD", PW)
    tls = self_signed(tmp_path_factory.mktemp("tls"))
    framer = Starlette(routes=[Route("/", frame_page)])
    with serve_app(framer) as hf, serve_app(framer) as other:
        outer = hf.replace("127.0.0.1", "localhost")
        mp.setenv("LISTENLAB_FRAME_ANCESTORS", outer)
        app = create_app(SYSTEMS, tmp_db())
        app.state.arena.config.min_votes = 1
        with live_server(app, tls=tls) as live:
            yield live, outer, other.replace("127.0.0.1", "localhost")
    mp.undo()


def framed(ctx, outer: str, src: str):
    page = ctx.new_page()
    page.goto(f"{outer}/?src={src}")
    frame = page.frame_locator("#space")
    return page, frame


def new_test(live) -> str:
    spec = {
        "name": "framed",
        "kind": "mos",
        "systems": [{"name": "alpha", "backend": "alpha"}],
        "prompts": ["A rater in a frame hears this."],
        "items_per_rater": 1,
        "screening": False,
        "headphone_check": False,
        "familiarise": False,
    }
    r = httpx.post(
        live.url + "ll/admin/tests",
        json=spec,
        headers={"Authorization": f"Bearer {PW}"},
        verify=False,
        timeout=300,
    )
    assert r.status_code == 200, r.text
    return r.json()["test_id"]


def rate_in_frame(ctx, outer: str, live, tid: str, score: int):
    """A rater's whole one-item test through the frame; returns the frame."""
    _page, f = framed(ctx, outer, f"{live.url}listen/{tid}")
    f.locator("#lt-root[data-ready='1']").wait_for(timeout=60_000)
    f.locator("#lt-agree").click()
    f.locator("#lt-item:not([hidden])").wait_for(timeout=30_000)
    f.locator(".lt-play[data-slot='0']").click()
    f.locator(f".lt-choice[data-value='{score}']").click()
    f.locator("#lt-submit:not([disabled])").wait_for(timeout=60_000)
    f.locator("#lt-submit").click()
    f.locator("#lt-done:not([hidden])").wait_for(timeout=30_000)
    return f


def admin_login_in_frame(ctx, outer: str, live):
    _page, f = framed(ctx, outer, f"{live.url}admin/tests/")
    f.locator("input[name=password]").fill(PW)
    f.locator("button").click()
    return f


def test_a_rater_an_arena_battle_and_the_admin_in_a_cross_site_frame(sites):
    live, outer, _ = sites
    tid = new_test(live)
    with chromium(TLS_OK, cookies="third-party") as ctx:
        # a rater's whole test; storage is kept, so no note
        f = rate_in_frame(ctx, outer, live, tid, 4)
        assert f.locator("#lt-frame-note").count() == 0
        assert live.state.store.answer_frame("mos_ratings", tid)["score"].tolist() == [4.0]
        # an arena battle to the vote
        _page, f = framed(ctx, outer, f"{live.url}arena/")
        f.locator("#ll-arena[data-ready='1']").wait_for(timeout=60_000)
        assert f.locator("#ar-cookie-note").count() == 0
        f.locator("#ar-random").click()
        f.locator("#ar-start").click()
        f.locator("#ar-vote-a:not([disabled])").wait_for(timeout=120_000)
        f.locator("#ar-vote-a").click()
        f.locator("#ar-name-a:not(:has-text('hidden'))").wait_for(timeout=30_000)
        assert live.state.store.arena.vote_count() == 1
        # the admin logs in inside the frame and reaches the designer
        f = admin_login_in_frame(ctx, outer, live)
        f.get_by_text("Logged in as admin").first.wait_for(timeout=60_000)
        cookies = {c["name"]: c for c in ctx.cookies(live.url)}
        for name in ("ll_admin", "ll_owner"):
            assert cookies[name]["secure"] and cookies[name]["sameSite"] == "None", cookies[name]
            assert cookies[name]["httpOnly"]


def test_partitioned_cookies_only_the_rater_is_told_and_still_finishes(sites):
    """A fresh Chromium profile: cookies in a framed page are kept partitioned (CHIPS), storage
    is refused. The rater's test runs in memory and the page says a reload starts again; the
    admin login (a Partitioned cookie) works."""
    live, outer, _ = sites
    tid = new_test(live)
    with chromium(TLS_OK) as ctx:
        f = rate_in_frame(ctx, outer, live, tid, 2)
        assert "a reload starts again" in f.locator("#lt-frame-note").inner_text()
        link = f.locator("#lt-open-direct")
        assert link.get_attribute("href") == f"{live.url}listen/{tid}"
        assert link.get_attribute("target") == "_blank"
        assert live.state.store.answer_frame("mos_ratings", tid)["score"].tolist() == [2.0]
        f = admin_login_in_frame(ctx, outer, live)
        f.get_by_text("Logged in as admin").first.wait_for(timeout=60_000)
        assert {c["partitionKey"] for c in ctx.cookies(live.url)} == {"http://localhost"}


def test_a_crowd_rater_in_a_frame_is_told_a_reload_finds_their_place(sites):
    """#38 item 14: with no storage in the frame, a rater who came with a crowd id is told a
    reload brings them back where they were (not that it starts again), and it does: after a
    reload and "I agree", the second item, not the first."""
    from urllib.parse import quote

    live, outer, _ = sites
    spec = {
        "name": "framed crowd",
        "kind": "mos",
        "systems": [{"name": "alpha", "backend": "alpha"}, {"name": "beta", "backend": "beta"}],
        "prompts": ["A rater in a frame hears this."],
        "items_per_rater": 2,
        "screening": False,
        "headphone_check": False,
        "familiarise": False,
    }
    r = httpx.post(
        live.url + "ll/admin/tests",
        json=spec,
        headers={"Authorization": f"Bearer {PW}"},
        verify=False,
        timeout=300,
    )
    tid = r.json()["test_id"]
    src = quote(f"{live.url}listen/{tid}?PROLIFIC_PID=pid-in-a-frame", safe="")
    with chromium(TLS_OK) as ctx:
        page, f = framed(ctx, outer, src)
        f.locator("#lt-root[data-ready='1']").wait_for(timeout=60_000)
        note = f.locator("#lt-frame-note").inner_text()
        assert "you are back at the clip you were on" in note
        assert "a reload starts again" not in note
        f.locator("#lt-agree").click()
        f.locator("#lt-item:not([hidden])").wait_for(timeout=30_000)
        assert f.locator("#lt-root").get_attribute("data-position") == "0"
        f.locator(".lt-play[data-slot='0']").click()
        f.locator(".lt-choice[data-value='3']").click()
        f.locator("#lt-submit:not([disabled])").wait_for(timeout=60_000)
        f.locator("#lt-submit").click()
        f.locator("#lt-root[data-position='1']").wait_for(timeout=30_000)
        page.reload()  # the frame keeps nothing: the consent again, then the same place
        f = page.frame_locator("#space")
        f.locator("#lt-root[data-ready='1']").wait_for(timeout=60_000)
        f.locator("#lt-agree").click()
        f.locator("#lt-item:not([hidden])").wait_for(timeout=30_000)
        assert f.locator("#lt-root").get_attribute("data-position") == "1"


def test_a_browser_that_keeps_no_cookie_is_told_and_linked_out(sites):
    live, outer, _ = sites
    with chromium(TLS_OK, cookies="none") as ctx:
        f = admin_login_in_frame(ctx, outer, live)
        link = f.locator("#open-direct")
        link.wait_for(timeout=30_000)
        assert "does not keep the login" in f.locator("#msg").inner_text()
        assert link.get_attribute("href").startswith(live.url + "admin/tests")
        assert link.get_attribute("target") == "_blank"
        _page, f = framed(ctx, outer, f"{live.url}arena/")
        f.locator("#ar-open-direct").wait_for(timeout=60_000)
        assert f.locator("#ar-open-direct").get_attribute("href") == live.url + "arena/"
        assert "keeps no cookie" in f.locator("#ar-cookie-note").inner_text()


def test_another_site_can_neither_frame_the_admin_nor_make_it_download(sites):
    """The attack of issue #38 (item 3): an admin logged in inside the allowed frame visits
    another site, which frames the admin page and asks for ``snapshot.zip`` and
    ``export.zip`` with the admin's cookies. Chromium refuses the frame (``frame-ancestors``)
    and the server refuses the requests (``Sec-Fetch-Site``); from the admin's own page the
    same download works."""
    live, outer, evil = sites
    tid = new_test(live)
    statuses: dict[str, list[int]] = {}

    def seen(response):
        if "/ll/admin/" in response.url:
            statuses.setdefault(response.url.split("/ll/admin/", 1)[1], []).append(response.status)

    with chromium(TLS_OK, cookies="third-party") as ctx:
        ctx.on("response", seen)
        f = admin_login_in_frame(ctx, outer, live)
        f.get_by_text("Logged in as admin").first.wait_for(timeout=60_000)
        own = f.locator("body").evaluate(
            "async () => (await fetch('/ll/admin/snapshot.zip')).status"
        )
        assert own == 200 and statuses["snapshot.zip"] == [200]
        page, _frame = framed(ctx, evil, f"{live.url}admin/tests/")
        page.wait_for_load_state("load")
        page.wait_for_timeout(1500)
        child = page.frames[1]
        assert child.url.startswith("chrome-error://"), child.url  # the frame was refused
        assert child.locator("input[name=password]").count() == 0
        for path in ("snapshot.zip", f"tests/{tid}/export.zip"):
            page.evaluate(
                "async (u) => { try { await fetch(u, {credentials: 'include', mode: 'no-cors'}) }"
                " catch (e) {} }",
                f"{live.url}ll/admin/{path}",
            )
            page.evaluate(
                "(u) => new Promise(r => { const i = new Image(); i.onload = i.onerror = r;"
                " i.src = u; document.body.append(i) })",
                f"{live.url}ll/admin/{path}",
            )
        page.wait_for_timeout(500)
    # (Chromium may serve the image from the fetch's answer: one request or two per path)
    own, *others = statuses["snapshot.zip"]
    assert own == 200 and others and set(others) == {403}, statuses
    assert set(statuses[f"tests/{tid}/export.zip"]) == {403}, statuses
