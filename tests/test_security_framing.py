"""Framing and other sites' requests to admin routes, over real HTTP (issue #38, item 3;
and item 9's ``Host: testserver``).

Every answer of ``listenlab serve`` says who may frame it (``frame-ancestors``: the page's own
origin, and on a Space huggingface.co and the Space's host); a request a browser marks as
another site's (``Sec-Fetch-Site``) reaches no admin route, except a navigation to an admin
page (huggingface.co frames the Space). The same in real Chromium: tests/test_browser_framed.py.
"""

from __future__ import annotations

import httpx
import pytest

from app.config import WebSettings, frame_ancestors
from app.server import create_app
from backends.errors import InvalidRequest
from tests.support.app_util import create_test, live_server, tmp_db

PW = "framing-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
SPACE = "someone-study.hf.space"


@pytest.fixture(scope="module")
def space(piper_det):
    """``listenlab serve`` as on a Space (``SPACE_HOST`` set, an admin password)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("LISTENLAB_ADMIN_PASSWORD", PW)
    mp.setenv("SPACE_HOST", SPACE)
    mp.delenv("LISTENLAB_FRAME_ANCESTORS", raising=False)
    app = create_app({"piper": piper_det, "qwen": piper_det}, tmp_db(), mount_ui=False)
    mp.undo()
    with live_server(app) as live:
        test_id = create_test(live, ADMIN, items_per_rater=1, screening=False)
        yield live, test_id


def get(live, path: str, **headers) -> httpx.Response:
    return httpx.get(live.url + path.lstrip("/"), headers=headers, timeout=120)


def test_a_space_may_be_framed_by_huggingface_co_and_itself_only(space):
    live, test_id = space
    for path in (f"/listen/{test_id}", "/admin/arena", "/ll/health", "/no/such/page"):
        r = get(live, path, **ADMIN)
        assert r.headers["content-security-policy"] == (
            f"frame-ancestors 'self' https://huggingface.co https://{SPACE}"
        ), path
        assert "x-frame-options" not in r.headers  # it cannot name huggingface.co


def test_elsewhere_only_the_pages_own_origin_may_frame(piper_det, monkeypatch):
    monkeypatch.delenv("SPACE_HOST", raising=False)
    monkeypatch.delenv("LISTENLAB_FRAME_ANCESTORS", raising=False)
    with live_server(create_app({"piper": piper_det}, tmp_db(), mount_ui=False)) as live:
        r = get(live, "/ll/health")
    assert r.headers["content-security-policy"] == "frame-ancestors 'self'"
    assert r.headers["x-frame-options"] == "SAMEORIGIN"


def test_the_framing_sites_are_a_setting():
    env = {"LISTENLAB_FRAME_ANCESTORS": "https://a.example, https://b.example:8443/"}
    assert frame_ancestors(env) == ("https://a.example", "https://b.example:8443")
    assert frame_ancestors({**env, "SPACE_HOST": SPACE}) == frame_ancestors(env)  # it wins
    assert frame_ancestors({"LISTENLAB_FRAME_ANCESTORS": "none", "SPACE_HOST": SPACE}) == ()
    assert frame_ancestors({"SPACE_HOST": SPACE}) == ("https://huggingface.co", f"https://{SPACE}")
    assert WebSettings.from_env({}).frame_ancestors == ()
    for bad in ("https://a.example; script-src *", "huggingface.co", "javascript:alert(1)"):
        with pytest.raises(InvalidRequest, match="LISTENLAB_FRAME_ANCESTORS"):
            frame_ancestors({"LISTENLAB_FRAME_ANCESTORS": bad})


OTHER_SITE = {
    "Sec-Fetch-Site": "cross-site",
    "Sec-Fetch-Mode": "no-cors",
    "Sec-Fetch-Dest": "image",
}


def test_another_sites_page_cannot_make_the_admin_build_a_snapshot_or_an_export(space):
    live, test_id = space
    calls = []
    store = live.state.store
    real = store.snapshot
    store.snapshot = lambda *a, **k: calls.append(1) or real(*a, **k)  # counts real snapshots
    try:
        for path in ("/ll/admin/snapshot.zip", f"/ll/admin/tests/{test_id}/export.zip"):
            for site in ("cross-site", "same-site"):  # another Space on the same parent too
                r = get(live, path, **ADMIN, **{**OTHER_SITE, "Sec-Fetch-Site": site})
                assert r.status_code == 403, (path, site)
                assert "cross-site request refused" in r.json()["error"]
            # a top-level navigation from another site (a link) is no page either
            nav = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
            assert (
                get(live, path, **ADMIN, **nav, **{"Sec-Fetch-Dest": "document"}).status_code == 403
            )
        assert calls == []
        # the admin's own page (same-origin), a typed address ("none") and a script all work
        for h in ({"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}, {}):
            r = get(live, "/ll/admin/snapshot.zip", **ADMIN, **h)
            assert r.status_code == 200 and r.content[:2] == b"PK", h
        assert len(calls) == 3
    finally:
        store.snapshot = real
    for path in (
        "/ll/arena/api/votes.csv",
        "/ll/arena/api/voters",
        f"/ll/admin/tests/{test_id}/results",
    ):
        assert get(live, path, **ADMIN, **OTHER_SITE).status_code == 403, path
        assert get(live, path, **ADMIN).status_code == 200, path


def test_huggingface_co_may_still_open_the_admin_pages_in_its_frame(space):
    live, test_id = space
    frame = {
        "Sec-Fetch-Site": "cross-site",
        "Sec-Fetch-Mode": "navigate",
        "Sec-Fetch-Dest": "iframe",
    }
    r = get(live, "/admin/arena", **frame, **ADMIN)
    assert r.status_code == 200 and "arena" in r.text.lower()
    # the same page fetched by another site's script is refused
    r = get(live, "/admin/arena", **ADMIN, **{**frame, "Sec-Fetch-Mode": "cors"})
    assert r.status_code == 403
    # other sites' requests to public routes are not concerned
    assert get(live, f"/listen/{test_id}", **OTHER_SITE).status_code == 200


def test_a_host_not_in_the_documented_list_is_refused(space):
    live, _ = space
    for host in ("testserver", "evil.example"):
        r = get(live, "/ll/health", Host=host)
        assert r.status_code == 403 and f"host '{host}' is not allowed" in r.json()["error"]
    for host in ("localhost", SPACE, "127.0.0.1"):
        assert get(live, "/ll/health", Host=host).status_code == 200, host
