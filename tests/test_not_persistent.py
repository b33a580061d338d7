"""A store a restart loses is said everywhere, and raters are let in only on an explicit yes.

A Space without a writable ``/data`` keeps its database in the container
(:func:`app.config.storage`). Here a real server is given such a store: ``/ll/health`` says so,
the admin page carries the banner, and opening a test (created open, or opened later from the
route, the Tests tab or ``listenlab test open``) is refused with 409 ``not_persistent`` until it
is confirmed. A refused create makes nothing.
"""

from __future__ import annotations

import os

import gradio as gr
import httpx
import pytest

from app.cli import main
from app.config import Storage, storage
from app.listening.admin.page import AdminPage
from app.listening.admin.tests_tab import open_test
from app.server import create_app
from tests.support.app_util import live_server, tmp_db

PW = "np-admin"
AUTH = {"Authorization": f"Bearer {PW}"}
NOTE = "/data does not exist (no persistent storage is attached): the data goes to X."
SPEC = {
    "name": "np",
    "kind": "mos",
    "systems": [{"name": "alpha", "backend": "alpha"}],
    "prompts": ["Nothing here outlives the container."],
    "items_per_rater": 1,
    "screening": False,
    "headphone_check": False,
    "familiarise": False,
}


@pytest.fixture(scope="module")
def live():
    mp = pytest.MonkeyPatch()
    mp.setenv("LISTENLAB_ADMIN_PASSWORD", PW)
    db = tmp_db()
    app = create_app(
        {"alpha": "piper?deterministic=1"}, db, storage=Storage(str(db), False, NOTE), warm=False
    )
    with live_server(app) as lv:
        yield lv
    mp.undo()


def post(live, path: str, body: dict) -> httpx.Response:
    return httpx.post(live.url + path, json=body, headers=AUTH, timeout=300)


def test_health_and_the_admin_banner_say_it(live):
    health = httpx.get(live.url + "ll/health", headers=AUTH, timeout=30).json()
    assert health["storage"] == {"persistent": False, "note": NOTE}  # the admin: the reason
    public = httpx.get(live.url + "ll/health", timeout=30).json()["storage"]
    assert public["persistent"] is False and NOTE not in public["note"]  # anyone: no path
    config = httpx.get(live.url + "admin/tests/config", headers=AUTH, timeout=60).text
    assert "Data is not persistent." in config and "no persistent storage is attached" in config


def test_opening_needs_an_explicit_yes_on_every_path(live):
    tests = live.app.state.listening.tests  # the store's rows, not the route's answer
    before = len(httpx.get(live.url + "ll/admin/tests", headers=AUTH, timeout=30).json()["tests"])
    r = post(live, "ll/admin/tests", SPEC)  # created open (the default): refused, nothing made
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["reason"] == "not_persistent" and NOTE in body["detail"]
    assert "confirm_not_persistent=true" in body["detail"]
    listed = httpx.get(live.url + "ll/admin/tests", headers=AUTH, timeout=30).json()["tests"]
    assert len(listed) == before
    # confirmed: open
    r = post(live, "ll/admin/tests", {**SPEC, "confirm_not_persistent": True})
    assert r.status_code == 200, r.text
    assert tests.require_test(r.json()["test_id"]).status == "open"
    # a draft needs no yes; opening it does (a truthy non-boolean is not a yes)
    tid = post(live, "ll/admin/tests", {**SPEC, "open": False}).json()["test_id"]
    for confirm in ({}, {"confirm_not_persistent": "yes"}):
        r = post(live, f"ll/admin/tests/{tid}/status", {"status": "open", **confirm})
        assert r.status_code == 409 and r.json()["reason"] == "not_persistent"
        assert tests.require_test(tid).status == "draft"
    assert post(live, f"ll/admin/tests/{tid}/status", {"status": "closed"}).status_code == 200
    # the Tests tab's Open button: refused without the box ticked, opens with it
    page = AdminPage(live.state, live.app.state.listening, tmp_path_exports(live))
    with pytest.raises(gr.Error, match="not persistent"):
        open_test(page, tid)
    assert tests.require_test(tid).status == "closed"
    msg = open_test(page, tid, True)[0]
    assert msg == f"{tid} is open."
    assert tests.require_test(tid).status == "open"


def test_the_cli_refuses_to_open_on_a_container_only_store(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "no-volume"
    own = tmp_path / "home-data"
    own.mkdir()
    monkeypatch.delenv("LISTENLAB_DB", raising=False)
    monkeypatch.setenv("LISTENLAB_DATA", f"{missing}:{own}")
    assert storage(os.environ).persistent is False
    folder = tmp_path / "stimuli"
    for system in ("a", "b"):
        (folder / system).mkdir(parents=True)
    write_tone_set(folder)
    code = main(["test", "create", "--stimuli", str(folder), "--items-per-rater", "1"])
    err = capsys.readouterr().err
    assert code != 0 and "not persistent" in err and "--confirm-not-persistent" in err
    assert main(["test", "create", "--stimuli", str(folder), "--draft", "--json"]) == 0
    tid = capsys.readouterr().out.strip().splitlines()[-1].split('"test_id": "')[1][:12]
    assert main(["test", "open", tid]) != 0
    assert "not persistent" in capsys.readouterr().err
    assert main(["test", "open", tid, "--confirm-not-persistent"]) == 0
    assert f"test {tid} is open" in capsys.readouterr().out


def write_tone_set(folder) -> None:
    """Two systems x two prompts of real (short, different) tones, 24 kHz mono."""
    import numpy as np
    import soundfile as sf

    t = np.arange(24_000) / 24_000
    for i, system in enumerate(("a", "b")):
        for j, prompt in enumerate(("p1", "p2")):
            tone = 0.2 * np.sin(2 * np.pi * (220 + 110 * i + 55 * j) * t)
            sf.write(folder / system / f"{prompt}.wav", tone.astype(np.float32), 24_000)


def tmp_path_exports(live):
    from pathlib import Path

    return Path(live.state.store.root) / "exports"
