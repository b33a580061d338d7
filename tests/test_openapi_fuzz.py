"""A schema-driven fuzz run of both apps: schemathesis reads each app's ``/openapi.json`` and
sends what it generates from it (valid bodies, then every kind of wrong one) to a real uvicorn
server on 127.0.0.1, admin routes included (with the admin's login cookie).

Checks on every answer: never a 5xx (``not_a_server_error``), and where ``/openapi.json``
declares a status's body or media type, the answer has it (``response_schema_conformance``,
``content_type_conformance``). So a route whose body is not declared, or whose declaration
is wrong, fails here as surely as a crash.

Why seeded ids: a fuzzer that only makes up ids gets 404 from every route behind one. Before
the run the test makes two real listening tests (open; one with a consented rater, the other
for the admin's routes of a test, which may close it), a voice, a take and an
upload, and schemathesis uses their ids and the rater's token most of the time (dictionaries
bound with a probability), made-up ones the rest.

The number of examples is bounded (:data:`EXAMPLES`) and the seed fixed, so a run fails the
same way twice: about 1,450 requests to ``serve`` (107 s) and 660 to ``api`` (42 s), both
tests at once on the 2 shared cores at a load average of 10 (3 min 34 s of wall time);
``LISTENLAB_FUZZ_SEED`` explores another seed, ``LISTENLAB_FUZZ_EXAMPLES`` more examples.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.app_util import (
    create_test,
    listening_app,
    live_server,
    speak_ws,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = "fuzz-admin-pw"
EXAMPLES = int(os.environ.get("LISTENLAB_FUZZ_EXAMPLES", "8"))
"""Examples per operation in the fuzzing phase (the coverage phase adds its own cases)."""
SEED = int(os.environ.get("LISTENLAB_FUZZ_SEED", "20240611"))
CHECKS = "not_a_server_error,response_schema_conformance,content_type_conformance"
SEEDED_SHARE = 0.75
"""How often a seeded id is used rather than a generated one."""


@dataclass
class FuzzRun:
    returncode: int
    output: str

    @property
    def tested(self) -> int:
        m = re.search(r"Tested:\s+(\d+)", self.output)
        return int(m.group(1)) if m else 0

    @property
    def cases(self) -> int:
        m = re.search(r"(\d+) generated", self.output)
        return int(m.group(1)) if m else 0

    def failures(self) -> str:
        """The report's failures section (what to read when the run fails)."""
        start = self.output.find("FAILURES")
        return self.output[start:] if start >= 0 else self.output[-6000:]


ADMIN_TESTS = "^/ll/admin/tests/"
"""The admin's routes of one test (status, crowd, results, export): they take the second
seeded test, so a generated ``{"status": "closed"}`` does not close the raters' test."""


def config_toml(ids: dict[str, list[str | int]]) -> str:
    """Dictionaries of seeded values, each bound to its path parameter (``admin_test_id``:
    the ``test_id`` of :data:`ADMIN_TESTS`); the checks."""
    lines = ["[checks]", "enabled = false"]
    lines += [f"{c}.enabled = true" for c in CHECKS.split(",")]
    lines.append("")
    for name, values in ids.items():
        quoted = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values)
        lines += [f"[dictionaries.{name}]", f"values = [{quoted}]", ""]

    def bind(param: str, name: str) -> str:
        return f'"path.{param}" = {{ dictionary = "{name}", probability = {SEEDED_SHARE} }}'

    lines.append("[parameters]")
    lines += [bind(name, name) for name in ids if name != "admin_test_id"]
    if "admin_test_id" in ids:
        lines += ["", "[[operations]]", f'include-path-regex = "{ADMIN_TESTS}"']
        lines += ["[operations.parameters]", bind("test_id", "admin_test_id")]
    return "\n".join(lines) + "\n"


def fuzz(url: str, tmp: Path, headers: dict[str, str], ids: dict[str, list[str | int]]) -> FuzzRun:
    """``st run`` against ``url``'s ``/openapi.json``; its exit code and report."""
    cfg = tmp / "schemathesis.toml"
    cfg.write_text(config_toml(ids), encoding="utf-8")
    cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(cfg), "--no-color"]
    cmd += ["run", url + "openapi.json", "--workers", "1"]
    cmd += ["--max-examples", str(EXAMPLES), "--seed", str(SEED), "--generation-database", "none"]
    cmd += ["--phases", "examples,coverage,fuzzing", "--request-timeout", "120"]
    cmd += ["--suppress-health-check", "all", "--output-truncate", "false"]
    for k, v in headers.items():
        cmd += ["--header", f"{k}: {v}"]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_proxy")}
    p = subprocess.run(
        cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=800, check=False
    )
    (tmp / "report.txt").write_text(p.stdout + p.stderr, encoding="utf-8")
    return FuzzRun(p.returncode, p.stdout + p.stderr)


def operations(url: str) -> int:
    spec = httpx.get(url + "openapi.json", timeout=30).json()
    methods = {"get", "put", "post", "delete", "patch"}
    return sum(1 for ops in spec["paths"].values() for m in ops if m in methods)


def admin_cookie(url: str) -> str:
    r = httpx.post(url + "ll/admin/login", data={"password": PASSWORD}, timeout=30)
    assert r.status_code == 200, r.text
    return r.cookies["ll_admin"]


def seed_serve(url: str, port: int, live) -> tuple[dict[str, list[str | int]], str]:
    """A listening test (open, one rater joined), a voice, a take and an upload: their ids,
    and the rater's token."""
    auth = {"Authorization": f"Bearer {PASSWORD}"}
    test_id, admin_test_id = create_test(live, auth), create_test(live, auth)
    for tid in (test_id, admin_test_id):
        r = httpx.post(url + f"ll/admin/tests/{tid}/status", json={"status": "open"}, headers=auth)
        assert r.status_code == 200, r.text
    token = httpx.post(url + f"ll/listen/{test_id}/join", json={}, timeout=30).json()["token"]
    r = httpx.post(url + f"ll/listen/{test_id}/consent", headers={"X-Rater-Token": token})
    assert r.status_code == 200, r.text  # so a vote gets past "consent first" to its checks
    clip = (ROOT / "assets" / "reference_joe.wav").read_bytes()
    text = (ROOT / "assets" / "reference_joe.txt").read_text(encoding="utf-8").strip()
    r = httpx.post(
        url + "ll/api/voices",
        files={"file": ("joe.wav", clip, "audio/wav")},
        data={"name": "joe", "ref_text": text, "consent": "true"},
        headers=auth,
        timeout=120,
    )
    assert r.status_code == 200, r.text
    voice_id = r.json()["voice"]["voice_id"]
    done = asyncio.run(speak_ws(port, "A take to fetch."))
    assert done["type"] == "done", done
    up = httpx.post(url + "ll/admin/uploads", json={"size": 4096}, headers=auth, timeout=30)
    assert up.status_code == 200, up.text
    ids = {
        "test_id": [test_id],
        "admin_test_id": [admin_test_id],
        "voice_id": [voice_id],
        "take_id": [done["take_id"]],
        "upload_id": [up.json()["upload_id"]],
        "kind": ["mos", "ab", "mushra"],
        "name": ["page.js", "listen.js", "listen.css"],
        "n": [0, 1],
        "k": [0],
    }
    return ids, token


def test_serve_answers_every_generated_request_without_a_5xx(tmp_path):
    """``listenlab serve`` (every room but Gradio's pages, which are not in its schema)."""
    app = listening_app(admin_password=PASSWORD)
    with live_server(app) as live:
        ids, token = seed_serve(live.url, live.port, live)
        headers = {"Cookie": f"ll_admin={admin_cookie(live.url)}", "X-Rater-Token": token}
        run = fuzz(live.url, tmp_path, headers, ids)
        n_ops = operations(live.url)
        joined = len(live.app.state.listening.tests.raters_frame(ids["test_id"][0]))
    assert run.returncode == 0, run.failures()
    assert joined > 1, "the seeded test never reached: the fuzzer's ids are all made up"
    assert run.tested == n_ops >= 45, run.output[-3000:]
    assert run.cases >= 10 * n_ops, run.output[-3000:]


def test_api_answers_every_generated_request_without_a_5xx(tmp_path):
    """``listenlab api`` over the CPU voice."""
    from app.api.server import create_api_app
    from backends.registry import load_backend

    app = create_api_app(load_backend("piper?deterministic=1"), own_backend=True)
    with live_server(app) as live:
        run = fuzz(live.url, tmp_path, {}, {"name": ["default", "nobody"]})
        n_ops = operations(live.url)
    assert run.returncode == 0, run.failures()
    assert run.tested == n_ops == 12, run.output[-3000:]
    assert run.cases >= 10 * n_ops, run.output[-3000:]
