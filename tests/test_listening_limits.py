"""What a listening test's routes accept, over real HTTP (issue #38, items 9 and 17): the
JSON body limit is the documented 64 KiB (a spec with 200 ordinary prompts is ~17 KB), nested
JSON is a 400 not a 500, and ``/ll/health`` shows the database's path to the admin only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.config import storage
from app.server import create_app
from app.web.inputs import JSON_BODY_BYTES
from tests.support.app_util import create_test, live_server, tmp_db

PW = "limits-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
ROOT = Path(__file__).resolve().parents[1]
PROMPTS = [
    f"Prompt {i}: the quick brown fox jumps over the lazy dog beside the quiet river bank."
    for i in range(200)
]
SPEC = {  # the documented maximum of prompts; a system that does not exist stops it early
    "name": "two hundred prompts",
    "kind": "mos",
    "systems": [{"name": "a", "backend": "no-such-backend"}],
    "prompts": PROMPTS,
    "open": False,
}


@pytest.fixture(scope="module")
def live(piper_det):
    mp = pytest.MonkeyPatch()
    mp.setenv("LISTENLAB_ADMIN_PASSWORD", PW)
    db = tmp_db()
    kept = storage({"LISTENLAB_DB": str(db)})  # as `listenlab serve` makes it
    app = create_app({"piper": piper_det, "qwen": piper_det}, db, mount_ui=False, storage=kept)
    mp.undo()
    with live_server(app) as lv:
        yield lv, str(db)


def test_a_spec_with_200_prompts_is_not_too_large(live):
    lv, _ = live
    size = len(json.dumps(SPEC).encode())
    assert 16_384 < size < JSON_BODY_BYTES  # over the old limit, well inside the documented one
    r = httpx.post(lv.url + "ll/admin/tests", json=SPEC, headers=ADMIN, timeout=60)
    assert r.status_code == 400 and "no-such-backend" in r.json()["detail"], r.text
    big = {**SPEC, "prompts": ["x" * 1000] * 70}  # 70 KB: over the limit
    r = httpx.post(lv.url + "ll/admin/tests", json=big, headers=ADMIN, timeout=60)
    assert r.status_code == 413
    assert f"over the {JSON_BODY_BYTES:,} byte limit" in r.json()["error"]


def test_the_same_spec_through_test_create_server(live, tmp_path):
    lv, _ = live
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "test",
            "create",
            "--server",
            lv.url,
            "--spec",
            str(spec),
        ],
        cwd=ROOT,
        env={**os.environ, "LISTENLAB_ADMIN_PASSWORD": PW},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode != 0 and "HTTP 400" in p.stderr and "no-such-backend" in p.stderr, p.stderr
    assert "413" not in p.stderr


def test_nested_json_is_a_400_not_a_500(live):
    lv, _ = live
    tid = create_test(lv, ADMIN, items_per_rater=1, screening=False)
    deep = b"[" * 2500 + b"]" * 2500  # 5 KB, the body
    for path in (f"ll/listen/{tid}/join", "ll/admin/tests"):
        r = httpx.post(
            lv.url + path,
            content=deep,
            headers={**ADMIN, "Content-Type": "application/json"},
            timeout=30,
        )
        assert r.status_code == 400, (path, r.status_code, r.text)
        assert "nested too deeply (the limit is 32 levels)" in r.json()["detail"]


def test_health_shows_the_database_path_to_the_admin_only(live):
    lv, db = live
    public = httpx.get(lv.url + "ll/health", timeout=30)
    assert public.status_code == 200 and public.json()["storage"]["persistent"] is True
    assert db not in public.text and str(Path(db).parent) not in public.text
    admin = httpx.get(lv.url + "ll/health", headers=ADMIN, timeout=30)
    assert db in admin.json()["storage"]["note"]
