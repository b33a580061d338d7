"""What a public Space shows a stranger (#38 item 19): no internal address of a remote server
in ``/ll/api/config``, and an admin refusal that says how to give the password, not to set it.

Real parts: ``listenlab serve``'s app over a real ``listenlab api`` server on 127.0.0.1 (the
remote vLLM-Omni engine speaks to it over HTTP) and a remote backend whose port nobody listens
on (its error names the address it could not reach).
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from app.server import create_app
from tests.support.remote_util import free_port, serve_api

PASSWORD = "space-admin-pw"


@pytest.fixture
def space(tmp_path, piper_det, monkeypatch):
    """A Space-like app (admin password set) with a local voice, a remote one that answers and
    a remote one that is down; yields (app, the two remote addresses)."""
    monkeypatch.setenv("LISTENLAB_ADMIN_PASSWORD", PASSWORD)
    with serve_api(piper_det) as url:
        up = url.removeprefix("http://")
        down = f"127.0.0.1:{free_port()}"
        app = create_app(
            {
                "cpu": piper_det,
                "gpu": f"vllm-omni+http://{up}?mode=sse",
                "gone": f"vllm-omni+http://{down}?mode=sse",
            },
            tmp_path / "db.sqlite",
            mount_ui=False,
            warm=False,
        )
        yield app, up, down


def config(app, headers: dict | None = None) -> tuple[str, dict]:
    visitor = TestClient(app, client=("203.0.113.9", 5000), base_url="http://localhost")
    with visitor:
        r = visitor.get("/ll/api/config", headers=headers or {})
    assert r.status_code == 200, r.text
    return r.text, {b["label"]: b for b in r.json()["backends"]}


def test_a_visitor_sees_no_internal_address_in_the_config(space):
    app, up, down = space
    text, by = config(app)
    for addr in (up, down, up.split(":")[1], down.split(":")[1]):
        assert addr not in text, addr  # neither host:port nor the bare port, anywhere
    assert by["gpu"]["spec"] == "vllm-omni+http://(hidden)?mode=sse"
    assert by["gone"]["spec"] == "vllm-omni+http://(hidden)?mode=sse"
    assert by["cpu"]["spec"] == app.state.listenlab.backends["cpu"].spec  # no address: as is
    # the server that is down: the error says what failed, without where
    assert "cannot reach http://(hidden)" in by["gone"]["voice_error"]
    assert by["gpu"]["voice_error"] is None and by["gpu"]["voices"]  # the live one still works


def test_the_admin_sees_the_addresses(space):
    app, up, down = space
    text, by = config(app, {"Authorization": f"Bearer {PASSWORD}"})
    assert by["gpu"]["spec"] == f"vllm-omni+http://{up}?mode=sse"
    assert by["gone"]["spec"] == f"vllm-omni+http://{down}?mode=sse"
    assert f"cannot reach http://{down}" in by["gone"]["voice_error"]
    assert "(hidden)" not in text


def test_the_refusal_with_a_password_set_says_how_to_give_it(tmp_path, piper_det, monkeypatch):
    """#38 item 19: it said "Admin pages need the password set in LISTENLAB_ADMIN_PASSWORD" to
    a visitor of a server where it is set; now it says to log in or send it."""
    monkeypatch.setenv("LISTENLAB_ADMIN_PASSWORD", PASSWORD)
    app = create_app({"cpu": piper_det}, tmp_path / "db.sqlite", mount_ui=False, warm=False)
    c = TestClient(app, client=("203.0.113.9", 5000), base_url="http://localhost")
    refused = c.get("/ll/admin/snapshot.zip")
    detail = refused.json()["detail"]
    assert refused.status_code == 403 and detail.startswith("admin only. ")
    assert "enter it in the form" in detail and "Authorization: Bearer PASSWORD" in detail
    assert "set in" not in detail and "Set " not in detail
    wrong = c.post("/ll/admin/login", data={"password": "nope"}).json()["detail"]
    assert wrong.startswith("wrong password. Admin pages need the password this server")
    note = json.loads(c.get("/ll/admin/whoami").text)["note"]
    assert note == detail.removeprefix("admin only. ")


def test_without_a_password_the_refusal_says_to_set_one(tmp_path, piper_det, monkeypatch):
    monkeypatch.delenv("LISTENLAB_ADMIN_PASSWORD", raising=False)
    app = create_app({"cpu": piper_det}, tmp_path / "db.sqlite", mount_ui=False, warm=False)
    c = TestClient(app, client=("203.0.113.9", 5000), base_url="http://localhost")
    detail = c.get("/ll/admin/snapshot.zip").json()["detail"]
    assert "No LISTENLAB_ADMIN_PASSWORD is set" in detail and "Set it" in detail
