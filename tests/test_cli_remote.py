"""``listenlab test … --server https://…`` against a live TLS server (uvicorn on 127.0.0.1 with a
self-signed certificate), run as a real subprocess with the admin password in the environment:
upload a folder (resumed when the server already has part of it), create a test on it, open,
close, results, export; the certificate is verified (no CA: refused) and a wrong password is
refused with the server's message."""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from app.cli.remote import CHUNK_BYTES, zip_folder
from app.store.listening import TestStore
from tests.support.app_util import listening_app, live_server, self_signed
from tests.support.upload_util import make_set

PW = "remote-admin-pw"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def live(tls):
    with live_server(listening_app(PW), tls=tls) as lv:
        yield lv


def cli(
    *argv: str, password: str | None = PW, ca: Path | None = None
) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SSL_CERT_FILE", "LISTENLAB_ADMIN_PASSWORD")
    }
    if password is not None:
        env["LISTENLAB_ADMIN_PASSWORD"] = password
    if ca is not None:
        env["SSL_CERT_FILE"] = str(ca)
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "test", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )


def test_create_open_results_and_export_on_a_tls_server(live, tls, tmp_path):
    server = live.url.rstrip("/")
    assert server.startswith("https://127.0.0.1:")
    make_set(tmp_path / "study", ["natural", "modelx"], 3, seconds=1.5)
    r = cli(
        "create",
        "--server",
        server,
        "--stimuli",
        str(tmp_path / "study"),
        "--type",
        "mos",
        "--items-per-rater",
        "2",
        "--no-headphone-check",
        "--name",
        "remote",
        "--draft",
        "--json",
        ca=tls[0],
    )
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)
    tid = made["test_id"]
    assert made["url"] == f"{server}/listen/{tid}"
    assert "uploading 100%" in r.stderr
    tests = TestStore(live.state.store)
    t = tests.require_test(tid)
    assert (t.name, t.status) == ("remote", "draft")
    items = {s.system_id for s in tests.stimuli(tid) if s.kind == "item"}
    assert items == {"natural", "modelx"}
    # the same commands as locally, on the server
    r = cli("open", tid, "--server", server, "--cacert", str(tls[0]))
    assert r.returncode == 0, r.stderr
    assert tests.require_test(tid).status == "open"
    r = cli("list", "--server", server, "--json", ca=tls[0])
    assert r.returncode == 0 and tid in [x["test_id"] for x in json.loads(r.stdout)["tests"]]
    r = cli("results", tid, "--server", server, "--json", ca=tls[0])
    assert r.returncode == 0, r.stderr
    direct = httpx.get(
        f"{server}/ll/admin/tests/{tid}/results",
        headers={"Authorization": f"Bearer {PW}"},
        verify=ssl.create_default_context(cafile=str(tls[0])),
    ).json()
    assert json.loads(r.stdout) == direct
    out = tmp_path / "export.zip"
    r = cli("export", tid, "--server", server, "--out", str(out), ca=tls[0])
    assert r.returncode == 0, r.stderr
    with zipfile.ZipFile(out) as z:
        assert json.loads(z.read("test.json"))["test_id"] == tid
        assert "raw/ratings.csv" in z.namelist()
    r = cli("close", tid, "--server", server, ca=tls[0])
    assert r.returncode == 0 and tests.require_test(tid).status == "closed"


def test_certificates_are_verified_and_the_password_checked(live, tls):
    server = live.url.rstrip("/")
    r = cli("list", "--server", server)  # the system's CAs do not know this certificate
    assert r.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in r.stderr
    r = cli("list", "--server", server, password="wrong", ca=tls[0])
    assert r.returncode == 1 and "HTTP 403" in r.stderr and "admin only" in r.stderr
    r = cli("create", "--server", server, "--stimuli", "x", "--gold-clip", "g.wav", ca=tls[0])
    assert r.returncode == 2 and "the server cannot read" in r.stderr
    r = cli("list", "--server", server, "--password", "x", ca=tls[0])
    assert r.returncode == 2 and "unrecognized arguments: --password" in r.stderr


def test_a_cut_off_upload_is_resumed_by_running_the_command_again(live, tls, tmp_path):
    server = live.url.rstrip("/")
    make_set(tmp_path / "study", ["a", "b"], 6, seconds=30.0)  # ~35 MB: three chunks
    archive = zip_folder(tmp_path / "study", tmp_path / "first.zip")
    data = archive.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    admin = {"Authorization": f"Bearer {PW}"}
    with httpx.Client(
        verify=ssl.create_default_context(cafile=str(tls[0])), headers=admin, timeout=120
    ) as c:
        uid = c.post(
            f"{server}/ll/admin/uploads",
            json={"name": "study.zip", "size": len(data), "key": digest[:32], "sha256": digest},
        ).json()["upload_id"]
        first = data[:CHUNK_BYTES]
        h = {"Content-Range": f"bytes 0-{len(first) - 1}/{len(data)}"}
        assert c.put(f"{server}/ll/admin/uploads/{uid}", content=first, headers=h).is_success
    r = cli("upload", str(tmp_path / "study"), "--server", server, "--json", ca=tls[0])
    assert r.returncode == 0, r.stderr
    lines = r.stderr.split()
    # the first line after the resume is past the chunk the server had: it sent only the rest
    percents = [int(w.rstrip("%")) for w in lines if w.endswith("%")]
    assert percents[0] > 100 * CHUNK_BYTES / len(data) - 1 and percents[-1] == 100, r.stderr
    got = json.loads(r.stdout)
    assert got["set_id"] == uid and got["files"] == 12 and got["systems"] == ["a", "b"]
    # run again: the server has the set, the command reuses it without sending anything
    r = cli("upload", str(tmp_path / "study"), "--server", server, "--json", ca=tls[0])
    assert r.returncode == 0 and json.loads(r.stdout) == got
    assert r.stderr.split() == [
        "uploading",
        "100%",
        f"({len(data) / 1e6:.0f}/{len(data) / 1e6:.0f}",
        "MB)",
    ]
