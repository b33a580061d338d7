"""The admin's snapshot of a running server (``GET /ll/admin/snapshot.zip``): a consistent
database taken while the server keeps writing, and every take's audio, for the admin only.
Real server on 127.0.0.1, real SQLite file, the real Piper voice."""

from __future__ import annotations

import asyncio
import io
import sqlite3
import threading
import zipfile

import httpx

from app.server import create_app
from app.store import Store, System
from backends.base import SpeechRequest
from evaluation.takes import record
from tests.support.app_util import live_server, tmp_db
from tests.support.postgres import (  # noqa: F401 (fixtures)
    db_target_fixture,
    pg_cluster_fixture,
    pg_url_fixture,
)

PW = "snapshot-pw"


def test_snapshot_is_consistent_and_admin_only(piper_det, db_target, monkeypatch):
    """On either engine: a SQLite file whose rows are one moment's (the systems written
    meanwhile are busy-0..busy-k, none missing) and the take's audio beside it."""
    monkeypatch.setenv("LISTENLAB_ADMIN_PASSWORD", PW)
    app = create_app({"piper": piper_det}, str(db_target), mount_ui=False, warm=False)
    take = asyncio.run(record(piper_det, SpeechRequest("A snapshot keeps this take.")))
    with live_server(app) as live:
        state = live.state
        state.save_take(state.backends["piper"], take)
        stop = threading.Event()

        def keep_writing() -> None:  # the server goes on writing while the snapshot is taken
            n = 0
            while not stop.is_set():
                state.store.add_system(System(f"busy-{n}", backend="piper"))
                n += 1

        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            refused = httpx.get(live.url + "ll/admin/snapshot.zip", timeout=60)
            r = httpx.get(
                live.url + "ll/admin/snapshot.zip",
                headers={"Authorization": f"Bearer {PW}"},
                timeout=60,
            )
        finally:
            stop.set()
            writer.join()
    assert refused.status_code == 403 and "admin only" in refused.json()["detail"]
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    assert r.headers["content-disposition"].startswith('attachment; filename="listenlab-snapshot-')
    z = zipfile.ZipFile(io.BytesIO(r.content))
    names = z.namelist()
    audio = [n for n in names if n.endswith(f"{take.take_id}.wav")]
    assert names[0] == "listenlab.db" and len(audio) == 1
    out = tmp_db()
    out.write_bytes(z.read("listenlab.db"))
    con = sqlite3.connect(out)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    (out.parent / audio[0]).parent.mkdir(parents=True, exist_ok=True)
    (out.parent / audio[0]).write_bytes(z.read(audio[0]))
    with Store.open(out, read_only=True) as copy:
        again = copy.load_take(take.take_id)
        busy = [n for (n,) in copy.sql.execute("SELECT system_id FROM systems") if "busy-" in n]
    assert sorted(busy, key=lambda n: int(n[5:])) == [f"busy-{i}" for i in range(len(busy))]
    assert again.request.text == "A snapshot keeps this take."
    assert again.audio.shape == take.audio.shape and (again.audio == take.audio).all()
    assert len(again.chunks) == len(take.chunks)
