"""Admin rule (app.web.admin) over the real app: password, signed cookie, localhost-only default."""

from __future__ import annotations

import base64

import pytest
from fastapi.testclient import TestClient

from app.server import create_app
from app.web.admin import AdminPolicy


@pytest.fixture
def make_client(tmp_path, piper_det, monkeypatch):
    def make(password: str | None, client=("127.0.0.1", 5000)):
        if password is None:
            monkeypatch.delenv("LISTENLAB_ADMIN_PASSWORD", raising=False)
        else:
            monkeypatch.setenv("LISTENLAB_ADMIN_PASSWORD", password)
        app = create_app({"piper": piper_det}, tmp_path / "db.sqlite", mount_ui=False, warm=False)
        return TestClient(app, client=client, base_url="http://localhost")

    return make


def test_no_password_means_localhost_only(make_client):
    local = make_client(None)
    assert local.get("/ll/admin/whoami").json()["admin"] is True
    assert local.get("/ll/admin/whoami").json()["mode"] == "localhost"
    # a proxy on this machine relays strangers: not admin
    relayed = local.get("/ll/admin/whoami", headers={"X-Forwarded-For": "203.0.113.9"})
    assert relayed.json()["admin"] is False
    remote = make_client(None, client=("203.0.113.9", 5000))
    body = remote.get("/ll/admin/whoami").json()
    assert body["admin"] is False and "localhost" in body["note"]


def test_password_header_basic_and_cookie(make_client):
    c = make_client("s3cret", client=("203.0.113.9", 5000))
    assert c.get("/ll/admin/whoami").json()["admin"] is False
    ok = {"Authorization": "Bearer s3cret"}
    assert c.get("/ll/admin/whoami", headers=ok).json()["admin"] is True
    basic = "Basic " + base64.b64encode(b"anyone:s3cret").decode()
    assert c.get("/ll/admin/whoami", headers={"Authorization": basic}).json()["admin"] is True
    assert (
        c.get("/ll/admin/whoami", headers={"Authorization": "Bearer wrong"}).json()["admin"]
        is False
    )
    bad = c.post("/ll/admin/login", data={"password": "nope"})
    assert bad.status_code == 403 and "wrong password" in bad.json()["detail"]
    assert c.get("/ll/admin/whoami").json()["admin"] is False
    good = c.post("/ll/admin/login", data={"password": "s3cret"})
    assert good.status_code == 200 and "ll_admin" in good.cookies
    attrs = good.headers["set-cookie"]  # plain http: Strict, not Secure (docs/security.md)
    assert "HttpOnly" in attrs and "SameSite=Strict" in attrs and "Secure" not in attrs
    assert "Max-Age=43200" in attrs
    assert c.get("/ll/admin/whoami").json()["admin"] is True


def test_password_set_localhost_is_not_enough(make_client):
    c = make_client("s3cret")
    assert c.get("/ll/admin/whoami").json()["admin"] is False


def test_cookie_forgery_and_expiry_refused():
    pol = AdminPolicy("pw", b"k" * 32)
    v = pol.login_cookie(now=1000.0)
    assert pol.cookie_ok(v, now=1001.0)
    assert not pol.cookie_ok(v, now=1000.0 + 13 * 3600)  # expired
    expires, _, sig = v.partition(".")
    assert not pol.cookie_ok(f"{int(expires) + 10**6}.{sig}", now=1001.0)  # extended
    assert not pol.cookie_ok("garbage", now=1001.0)
    # changing the password invalidates cookies made under the old one
    assert not AdminPolicy("other", b"k" * 32).cookie_ok(v, now=1001.0)
