"""A study's audio onto a server: the streamed, resumable upload and its import, over a real
uvicorn on 127.0.0.1 with real WAV files (48 kHz noise written with soundfile) and a real
SQLite store. Hostile uploads (a zip bomb, a text file among the WAVs, a cut-off upload, a
chunk longer than it says) are refused with the file named and leave nothing behind: no
stimulus set, no staging files, no test rows, no stored audio."""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from app.cli.remote import zip_folder
from app.listening.upload import MAX_CHUNK_BYTES, max_upload_bytes
from app.store.listening import TestStore
from tests.support.app_util import listening_app, live_server
from tests.support.upload_util import make_set, send, zip_bomb, zip_bytes

PW = "upload-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}


@pytest.fixture()
def live():
    with live_server(listening_app(PW)) as lv:
        yield lv


@pytest.fixture()
def client():
    with httpx.Client(timeout=300) as c:
        yield c


def data_root(live) -> Path:
    return Path(live.state.store.root)


def assert_nothing_left(live) -> None:
    """No set, no staging, no test, no audio: the failed import changed nothing."""
    root = data_root(live)
    assert not (root / "stimuli").exists() or not any((root / "stimuli").iterdir())
    assert not (root / "uploads").exists() or not any((root / "uploads").iterdir())
    assert TestStore(live.state.store).list_tests() == []
    store = live.state.store
    audio = Path(store.root) / store.audio_rel
    assert not audio.exists() or not any(p.is_file() for p in audio.rglob("*"))
    assert store.sql.execute("SELECT count(*) FROM takes").fetchone()[0] == 0


def test_only_the_admin_may_upload(live, client):
    u = live.url
    cases = [
        ("POST", "ll/admin/uploads", {"json": {"name": "x.zip", "size": 10}}),
        ("GET", "ll/admin/uploads/abcdefgh12345678", {}),
        ("PUT", "ll/admin/uploads/abcdefgh12345678", {"content": b"x" * 10}),
        ("POST", "ll/admin/uploads/abcdefgh12345678/import", {"json": {}}),
        ("DELETE", "ll/admin/uploads/abcdefgh12345678", {}),
        ("GET", "ll/admin/stimuli", {}),
        ("GET", "ll/admin/uploads", {}),
    ]
    for method, path, kw in cases:
        anon = client.request(method, u + path, **kw)
        assert anon.status_code == 403, (method, path, anon.text)
        assert "admin only" in anon.json()["detail"]
        rater = client.request(method, u + path, headers={"X-Rater-Token": "a" * 40}, **kw)
        assert rater.status_code == 403, (method, path)
    wrong = client.post(
        u + "ll/admin/uploads", json={"size": 10}, headers={"Authorization": "Bearer no"}
    )
    assert wrong.status_code == 403
    assert not (data_root(live) / "uploads").exists()
    r = client.post(u + "ll/admin/uploads", json={"name": "x.zip", "size": 10}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["offset"] == 0 and r.json()["total"] == 10
    pending = client.get(u + "ll/admin/uploads", headers=ADMIN).json()["uploads"]
    assert [(p["upload_id"], p["name"], p["offset"]) for p in pending] == [
        (r.json()["upload_id"], "x.zip", 0)
    ]


def test_a_big_study_is_streamed_checked_and_moved_into_place(live, client, tmp_path):
    """~300 MB: 8 systems x 40 prompts of 10 s 48 kHz WAV, sent in 16 MiB chunks."""
    folder = tmp_path / "study"
    size = make_set(folder, [f"sys{i}" for i in range(7)] + ["natural"], 40, seconds=10.0)
    assert size > 300e6
    archive = zip_folder(folder, tmp_path / "study.zip")
    uid = send(client, live.url, archive, ADMIN, chunk=MAX_CHUNK_BYTES)
    r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["systems"] == sorted([f"sys{i}" for i in range(7)] + ["natural"])
    assert (got["prompts"], got["files"], got["bytes"]) == (40, 320, size)
    assert got["natural"] == ["natural"]
    final = Path(got["path"])
    assert final == data_root(live) / "stimuli" / uid
    src, dst = folder / "sys3" / "p017.wav", final / "sys3" / "p017.wav"
    assert hashlib.sha256(dst.read_bytes()).digest() == hashlib.sha256(src.read_bytes()).digest()
    assert not (data_root(live) / "uploads" / uid).exists()  # the zip and staging are gone
    listed = client.get(live.url + "ll/admin/stimuli", headers=ADMIN).json()["sets"]
    assert [s["set_id"] for s in listed] == [uid] and listed[0]["files"] == 320


def test_thirteen_systems_import(live, client, tmp_path):
    """More systems than a MOS test takes today: the import itself accepts them."""
    names = [f"s{i:02d}" for i in range(13)]
    make_set(tmp_path / "s", names, 3, seconds=1.0)
    uid = send(client, live.url, zip_bytes(tmp_path / "s"), ADMIN)
    r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["systems"] == names and r.json()["files"] == 39


def test_a_text_file_in_the_middle_refuses_the_whole_import(live, client, tmp_path):
    folder = tmp_path / "s"
    make_set(folder, ["a", "b", "c"], 6, seconds=1.0)
    (folder / "b" / "p004.wav").write_text("this is not audio, it only has a .wav name\n" * 50)
    uid = send(client, live.url, zip_bytes(folder), ADMIN)
    r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
    assert r.status_code == 400
    assert "b/p004.wav" in r.json()["detail"]
    assert_nothing_left(live)
    assert client.get(live.url + f"ll/admin/uploads/{uid}", headers=ADMIN).status_code == 404


def test_a_zip_bomb_is_refused_naming_the_member(live, client, tmp_path):
    bomb = zip_bomb(tmp_path / "bomb.zip", "a/p001.wav", mb=9)
    assert bomb.stat().st_size < 100_000
    uid = send(client, live.url, bomb, ADMIN)
    r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
    assert r.status_code == 400
    assert "a/p001.wav" in r.json()["detail"] and "zip bomb" in r.json()["detail"]
    assert_nothing_left(live)


def test_a_path_outside_the_folder_is_refused(live, client, tmp_path):
    z = tmp_path / "evil.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("../../escape.wav", b"RIFF")
    uid = send(client, live.url, z, ADMIN)
    r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
    assert r.status_code == 400 and "../../escape.wav" in r.json()["detail"]
    assert not (data_root(live).parent / "escape.wav").exists()
    assert_nothing_left(live)


def cut_off_put(live, uid: str, start: int, block: bytes, total: int, stop_after: int) -> None:
    """A chunk whose connection drops once the server has written ``stop_after`` bytes of it."""
    head = (
        f"PUT /ll/admin/uploads/{uid} HTTP/1.1\r\nHost: 127.0.0.1:{live.port}\r\n"
        f"Authorization: Bearer {PW}\r\nContent-Length: {len(block)}\r\n"
        f"Content-Range: bytes {start}-{start + len(block) - 1}/{total}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", live.port)) as s:
        s.sendall(head + block[: stop_after + (1 << 20)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = httpx.get(live.url + f"ll/admin/uploads/{uid}", headers=ADMIN).json()
            if r["offset"] >= start + stop_after:
                break
            time.sleep(0.05)
        s.shutdown(socket.SHUT_RDWR)


def test_a_cut_off_upload_resumes_and_is_never_half_imported(live, client, tmp_path):
    folder = tmp_path / "s"
    make_set(folder, ["a", "b"], 20, seconds=3.0)
    data = zip_bytes(folder)
    digest = hashlib.sha256(data).hexdigest()
    total = len(data)
    start = client.post(
        live.url + "ll/admin/uploads",
        json={"name": "s.zip", "size": total, "key": digest[:32], "sha256": digest},
        headers=ADMIN,
    ).json()
    uid = start["upload_id"]
    assert uid == digest[:32]
    cut_off_put(live, uid, 0, data[: 4 << 20], total, stop_after=2 << 20)
    time.sleep(0.3)
    have = client.get(live.url + f"ll/admin/uploads/{uid}", headers=ADMIN).json()
    assert 2 << 20 <= have["offset"] < total and not have["complete"]
    # not complete: the import refuses and keeps the bytes for the resume
    r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
    assert r.status_code == 409 and r.json()["offset"] == have["offset"]
    assert not (data_root(live) / "stimuli").exists()
    # a chunk from the wrong place is refused, saying where to resume
    wrong = client.put(
        live.url + f"ll/admin/uploads/{uid}",
        content=data[:1000],
        headers={"Content-Range": f"bytes 0-999/{total}", **ADMIN},
    )
    assert wrong.status_code == 409 and wrong.json()["offset"] == have["offset"]
    # the same upload started again (same key) resumes at the server's offset
    again = client.post(
        live.url + "ll/admin/uploads",
        json={"name": "s.zip", "size": total, "key": digest[:32], "sha256": digest},
        headers=ADMIN,
    ).json()
    assert again["offset"] == have["offset"]
    off = again["offset"]
    while off < total:
        block = data[off : off + (3 << 20)]
        h = {"Content-Range": f"bytes {off}-{off + len(block) - 1}/{total}", **ADMIN}
        off = client.put(live.url + f"ll/admin/uploads/{uid}", content=block, headers=h).json()[
            "offset"
        ]
    r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["files"] == 40
    got = Path(r.json()["path"]) / "b" / "p020.wav"
    assert got.read_bytes() == (folder / "b" / "p020.wav").read_bytes()
    # the same bytes started again: the set is there already, nothing to send
    again = client.post(
        live.url + "ll/admin/uploads",
        json={"name": "s.zip", "size": total, "key": digest[:32], "sha256": digest},
        headers=ADMIN,
    ).json()
    assert again["complete"] and again["imported"]["path"] == r.json()["path"]
    assert not (data_root(live) / "uploads" / uid).exists()


def test_wrong_bytes_fail_the_checksum_and_leave_nothing(live, client, tmp_path):
    make_set(tmp_path / "s", ["a", "b"], 2, seconds=1.0)
    data = zip_bytes(tmp_path / "s")
    digest = hashlib.sha256(data).hexdigest()
    uid = client.post(
        live.url + "ll/admin/uploads",
        json={"name": "s.zip", "size": len(data), "key": "k" * 16, "sha256": digest},
        headers=ADMIN,
    ).json()["upload_id"]
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0xFF
    h = {"Content-Range": f"bytes 0-{len(data) - 1}/{len(data)}", **ADMIN}
    assert client.put(
        live.url + f"ll/admin/uploads/{uid}", content=bytes(bad), headers=h
    ).is_success
    r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
    assert r.status_code == 400 and "SHA-256" in r.json()["detail"]
    assert_nothing_left(live)


def head_only_put(live, uid: str, length: int, content_range: str) -> tuple[int, bytes]:
    """A PUT that announces ``length`` bytes and sends none: the answer comes before the body."""
    head = (
        f"PUT /ll/admin/uploads/{uid} HTTP/1.1\r\nHost: 127.0.0.1:{live.port}\r\n"
        f"Authorization: Bearer {PW}\r\nContent-Length: {length}\r\n"
        f"Content-Range: {content_range}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as s:
        s.sendall(head)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < 20:
            got = s.recv(65536)
            if not got:
                break
            answer += got
    return int(answer.split(b" ", 2)[1]), answer


def test_bytes_are_bounded_before_and_while_writing(live, client, monkeypatch):
    u = live.url
    limit = max_upload_bytes()
    assert limit == 2 * 1024**3
    r = client.post(
        u + "ll/admin/uploads", json={"name": "big.zip", "size": limit + 1}, headers=ADMIN
    )
    assert r.status_code == 413 and f"{limit:,}" in r.json()["detail"]
    monkeypatch.setenv("LISTENLAB_UPLOAD_MAX_BYTES", str(20 * 1024**2))  # read when an app starts
    with live_server(listening_app(PW)) as small:
        r = client.post(
            small.url + "ll/admin/uploads",
            json={"name": "b.zip", "size": 21 * 1024**2},
            headers=ADMIN,
        )
    assert r.status_code == 413 and "20,971,520" in r.json()["detail"]
    uid = client.post(u + "ll/admin/uploads", json={"name": "s.zip", "size": 1000}, headers=ADMIN)
    uid = uid.json()["upload_id"]
    # a body longer than its Content-Range: refused, nothing past the range is kept
    h = {"Content-Range": "bytes 0-499/1000", **ADMIN}
    r = client.put(u + f"ll/admin/uploads/{uid}", content=b"x" * 800, headers=h)
    assert r.status_code == 400 and "longer than its Content-Range" in r.json()["detail"]
    assert client.get(u + f"ll/admin/uploads/{uid}", headers=ADMIN).json()["offset"] == 0
    # past the declared total, and over the per-chunk limit (the guard, before reading)
    h = {"Content-Range": "bytes 0-1000/1000", **ADMIN}
    assert client.put(u + f"ll/admin/uploads/{uid}", content=b"x", headers=h).status_code == 400
    status, body = head_only_put(live, uid, MAX_CHUNK_BYTES + 128 * 1024, "bytes 0-999/1000")
    assert status == 413 and b"byte limit of this route" in body
    assert client.get(u + f"ll/admin/uploads/{uid}", headers=ADMIN).json()["offset"] == 0
    assert client.delete(u + f"ll/admin/uploads/{uid}", headers=ADMIN).is_success
    assert client.get(u + f"ll/admin/uploads/{uid}", headers=ADMIN).status_code == 404


def test_a_test_is_created_from_the_uploaded_set(live, client, tmp_path):
    """End to end with <= 8 systems: upload, import, create a MOS test on the set's path."""
    make_set(tmp_path / "s", ["natural", "modelx"], 2, seconds=1.5)
    uid = send(client, live.url, zip_bytes(tmp_path / "s"), ADMIN)
    path = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN).json()[
        "path"
    ]
    r = client.post(
        live.url + "ll/admin/tests",
        json={"name": "up", "kind": "mos", "stimuli": path, "items_per_rater": 2},
        headers=ADMIN,
    )
    assert r.status_code == 200, r.text
    tid = r.json()["test_id"]
    stimuli = TestStore(live.state.store).stimuli(tid)
    assert {s.system_id for s in stimuli} >= {"natural", "modelx"}
    assert sum(s.system_id in ("natural", "modelx") for s in stimuli) == 4


def test_one_writer_and_one_import_at_a_time(live, client, tmp_path):
    """A second tab (or a double click) cannot interleave chunks or import the same upload
    twice: the upload's files are locked while a chunk is written or an import runs."""
    make_set(tmp_path / "s", ["a", "b"], 2, seconds=1.0)
    data = zip_bytes(tmp_path / "s")
    uid = client.post(
        live.url + "ll/admin/uploads", json={"name": "s.zip", "size": len(data)}, headers=ADMIN
    ).json()["upload_id"]
    folder = data_root(live) / "uploads" / uid
    h = {"Content-Range": f"bytes 0-{len(data) - 1}/{len(data)}", **ADMIN}
    with (folder / "data.zip").open("rb") as busy:
        fcntl.flock(busy, fcntl.LOCK_EX)  # a chunk being received
        r = client.put(live.url + f"ll/admin/uploads/{uid}", content=data, headers=h)
        assert r.status_code == 409 and "another chunk" in r.json()["detail"]
    assert client.put(live.url + f"ll/admin/uploads/{uid}", content=data, headers=h).is_success
    with (folder / "meta.json").open("rb") as busy:
        fcntl.flock(busy, fcntl.LOCK_EX)  # an import running
        r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
        assert r.status_code == 409 and "being imported already" in r.json()["detail"]
    r = client.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["files"] == 4


def test_unfinished_uploads_expire_after_a_day(tmp_path):
    """Kept 24 h after their last piece (for a resume), then removed when another starts."""
    from app.listening.upload import STALE_AFTER_S, Uploads

    up = Uploads(tmp_path, 10**9)
    old = up.start("old.zip", 100, "oldoldold1", None)
    new = up.start("new.zip", 100, "newnewnew1", None)
    t = time.time()
    os.utime(tmp_path / "uploads" / old.upload_id / "data.zip", (t - STALE_AFTER_S - 60,) * 2)
    os.utime(tmp_path / "uploads" / old.upload_id / "meta.json", (t - STALE_AFTER_S - 60,) * 2)
    assert up.sweep(now=t) == [old.upload_id]
    assert [u.upload_id for u in up.pending()] == [new.upload_id]
    assert STALE_AFTER_S == 24 * 3600


def test_the_deploy_page_states_the_limits_the_code_applies():
    from app.cli import remote
    from app.listening import upload
    from app.listening.imported import (
        ARCHIVE_SLACK_BYTES,
        MAX_ARCHIVE_RATIO,
        MAX_FILE_BYTES,
        MAX_ZIP_RATIO,
    )
    from app.server import UPLOAD_CHUNK_LIMIT

    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "deploy.md").read_text()
    section = page[page.index("## A study's audio onto a Space") : page.index("## Configuration")]
    for number in (
        f"{upload.DEFAULT_MAX_BYTES:,}",
        f"{upload.MAX_CHUNK_BYTES:,}",
        f"{UPLOAD_CHUNK_LIMIT:,}",
        f"{upload.MAX_SYSTEMS * upload.MAX_PROMPTS + 16:,}",
        f"{upload.MAX_SYSTEMS} systems × {upload.MAX_PROMPTS} prompts",
        f"{upload.FREE_MARGIN_BYTES // 2**20} MiB spare".replace(" spare", ""),
        f"{MAX_FILE_BYTES:,}",
        f"{MAX_ZIP_RATIO} × its compressed size + 1 MiB",
        f"{MAX_ARCHIVE_RATIO} × its own size + {ARCHIVE_SLACK_BYTES // 2**20} MiB",
        f"kept {int(upload.STALE_AFTER_S // 3600)} h",
        f"retried {remote.RETRIES} times",
        f"{remote.CHUNK_BYTES // 2**20} MiB pieces",
    ):
        assert number in section, number
    assert remote.CHUNK_BYTES == upload.MAX_CHUNK_BYTES
