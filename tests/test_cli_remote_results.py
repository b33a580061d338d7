"""``listenlab test … --server`` does what the same command does on a local ``--db`` (issue #38,
items 4, 5, 10 and 11): ``results --csv DIR`` writes the documented export, byte for byte the
files of ``--db`` (``--public``: no crowd id, every CSV cell neutralised); ``results`` prints
the tables, JSON only with ``--json``; ``open --confirm-not-persistent`` reaches the server;
plain ``http://`` is refused unless the server is this machine (the password would travel in
clear). Real uvicorn on 127.0.0.1, the Piper voice, a SQLite file, a scripted Prolific rater,
the CLI as a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.cli.remote import Client, is_loopback
from app.config import Storage
from app.server import create_app
from backends.errors import InvalidRequest
from tests.support.app_util import LISTENING_BACKENDS, create_test, live_server, tmp_db
from tests.support.rater import RaterClient

PW = "remote-results-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
ROOT = Path(__file__).resolve().parents[1]
PID = "@PPIDREMOTE0001"  # a crowd id from the URL: a stranger's, and a spreadsheet formula
FORMULA = '=HYPERLINK("https://evil.example","click") is what the voice reads.'


def app_with(db: Path, storage: Storage | None = None):
    old = os.environ.get("LISTENLAB_ADMIN_PASSWORD")
    os.environ["LISTENLAB_ADMIN_PASSWORD"] = PW
    try:
        return create_app(dict(LISTENING_BACKENDS), db, mount_ui=False, storage=storage)
    finally:
        if old is None:
            os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
        else:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old


async def rate_everything(url: str, tid: str) -> None:
    c = RaterClient(url, tid, crowd_id=PID)
    await c.join()
    st = await c.status()
    while not st["finished"]:
        aid = st["item"]["assignment_id"]
        await c.listen(aid, 0)
        (await c.vote({"assignment_id": aid, "score": 4})).raise_for_status()
        st = await c.status()
    await c.aclose()


@pytest.fixture(scope="module")
def study():
    """A finished MOS study (a prompt and a crowd id a spreadsheet would run as formulas)."""
    db = tmp_db()
    with live_server(app_with(db)) as lv:
        tid = create_test(
            lv,
            ADMIN,
            systems=[{"name": "a", "backend": "piper"}],
            prompts=[FORMULA, "A plain sentence to rate."],
            items_per_rater=2,
            screening=False,
            headphone_check=False,
        )
        asyncio.run(rate_everything(lv.url, tid))
        yield lv, tid, db


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "test", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "LISTENLAB_ADMIN_PASSWORD": PW},
    )


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_results_csv_over_the_server_is_the_local_export_byte_for_byte(study, tmp_path):
    lv, tid, db = study
    server = lv.url.rstrip("/")
    for public in (False, True):
        flag = ["--public"] if public else []
        here, there = tmp_path / f"db-{public}", tmp_path / f"server-{public}"
        r = cli("results", tid, "--db", str(db), "--csv", str(here), *flag)
        assert r.returncode == 0, r.stderr
        r = cli("results", tid, "--server", server, "--csv", str(there), *flag)
        assert r.returncode == 0, r.stderr
        local, remote = files_under(here), files_under(there)
        assert {"study.json", "methods.md", "test.json", "raw/ratings.csv"} <= set(remote)
        assert any(n.startswith("results/") for n in remote)
        assert remote == local  # the same files, the same bytes
        joined = b"\n".join(remote.values())
        assert (PID.encode() in joined) is not public  # --public: no crowd id anywhere
        lines = [ln for n, v in remote.items() if n.endswith(".csv") for ln in v.splitlines()]
        cells = [c.strip(b'"') for ln in lines for c in ln.split(b",")]
        assert (b"'" + PID.encode() in cells) is not public  # text, not a formula
        assert not any(c[:1] in (b"=", b"@", b"+") for c in cells)


def test_results_prints_the_tables_and_json_only_when_asked(study):
    lv, tid, db = study
    server = lv.url.rstrip("/")
    local = cli("results", tid, "--db", str(db))
    remote = cli("results", tid, "--server", server)
    assert remote.returncode == 0 and local.returncode == 0, remote.stderr
    with pytest.raises(ValueError):
        json.loads(remote.stdout)
    header, *_ = remote.stdout.splitlines()
    assert header == local.stdout.splitlines()[0] == f"t (mos, {'open'})"
    sections = [ln for ln in remote.stdout.splitlines() if ln.startswith("== ")]
    assert sections == [ln for ln in local.stdout.splitlines() if ln.startswith("== ")]
    r = cli("results", tid, "--server", server, "--json")
    want = httpx.get(f"{server}/ll/admin/tests/{tid}/results", headers=ADMIN, timeout=60)
    assert json.loads(r.stdout) == want.json()


def test_open_passes_confirm_not_persistent_to_the_server():
    db = tmp_db()
    note = "/data does not exist (no persistent storage is attached)"
    with live_server(app_with(db, Storage(str(db), False, note))) as lv:
        server = lv.url.rstrip("/")
        tid = create_test(lv, ADMIN, items_per_rater=1, screening=False, open=False)
        r = cli("open", tid, "--server", server)
        assert (
            r.returncode != 0 and "HTTP 409" in r.stderr and "--confirm-not-persistent" in r.stderr
        )
        r = cli("open", tid, "--server", server, "--confirm-not-persistent")
        assert r.returncode == 0, r.stderr
        assert lv.app.state.listening.tests.require_test(tid).status == "open"


def lan_address() -> str | None:
    """This machine's address on its network (not loopback), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: only the route is looked up
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def test_plain_http_to_another_machine_is_refused_before_anything_is_sent():
    ip = lan_address() or "192.0.2.1"
    listener = socket.socket()
    listener.setblocking(False)
    bound = ip != "192.0.2.1"
    if bound:
        listener.bind((ip, 0))
        listener.listen()
    port = listener.getsockname()[1] if bound else 7860
    try:
        r = cli("list", "--server", f"http://{ip}:{port}")
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert "plain http:// would send the admin password unencrypted" in r.stderr
        assert "use https://" in r.stderr and "ssh -L" in r.stderr
        if bound:  # nothing connected, so no password left this machine
            with pytest.raises(BlockingIOError):
                listener.accept()
    finally:
        listener.close()
    for base in ("http://localhost:7860", "http://127.0.0.1:1", "http://[::1]:7860"):
        Client(base, PW)  # this machine: allowed
    for base in ("http://10.0.0.5", "http://study.example", "http://127.0.0.1.evil.example"):
        with pytest.raises(InvalidRequest, match="plain http://"):
            Client(base, PW)
    Client("https://study.example", PW)
    assert is_loopback("127.8.9.1") and not is_loopback("localhost.evil.example")
