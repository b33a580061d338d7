"""A set of stimuli has one set of limits however it arrives, zip bombs are bounded as a
whole, and the disk an upload declares is promised to it (issue #38, items 7, 8 and 18).
Real zips on disk, a real server on 127.0.0.1, the real free space of its disk."""

from __future__ import annotations

import shutil
import threading
import zipfile
from pathlib import Path

import httpx
import pytest

from app.listening import imported, upload
from app.listening.imported import ImportProblem, unpack_zip
from tests.support.app_util import listening_app, live_server
from tests.support.upload_util import send

PW = "limits-upload-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}


def many_small_bombs(path: Path, members: int = 64, mib: int = 1) -> Path:
    """``members`` files of ``mib`` MiB of zeros: each under the per-member allowance
    (100 x its compressed size + 1 MiB), together 64 MiB from a zip of tens of kB."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for i in range(members):
            z.writestr(f"s{i // 8}/p{i:03d}.wav", bytes(mib << 20))
    return path


def test_many_members_each_under_the_allowance_are_a_bomb_as_a_whole(tmp_path):
    bomb = many_small_bombs(tmp_path / "bomb.zip")
    size = bomb.stat().st_size
    with zipfile.ZipFile(bomb) as z:  # every member alone passes the per-member rule
        assert all(i.file_size <= 100 * i.compress_size + 2**20 for i in z.infolist())
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ImportProblem, match="unpacks to over 10 times its size") as e:
        unpack_zip(bomb, dest)
    assert f"{size:,} bytes" in str(e.value)
    written = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    print(f"{size:,}-byte zip declaring 64 MiB: refused, {written:,} bytes written")
    assert written == 0  # refused on the headers, before anything was written


def test_a_bomb_through_the_upload_route_leaves_nothing(tmp_path):
    bomb = many_small_bombs(tmp_path / "bomb.zip")
    with live_server(listening_app(PW)) as live, httpx.Client(timeout=120) as c:
        uid = send(c, live.url, bomb, ADMIN)
        r = c.post(live.url + f"ll/admin/uploads/{uid}/import", json={}, headers=ADMIN)
        assert r.status_code == 400 and "zip bomb" in r.json()["detail"]
        root = Path(live.state.store.root)
        assert not any((root / "uploads").iterdir())


def test_one_set_of_limits_for_a_local_zip_a_folder_and_an_upload(tmp_path):
    """A local ``--stimuli FILE.zip`` once stopped at 1,616 entries and 1 GiB (8 systems)."""
    assert imported.MAX_ZIP_MEMBERS == upload.MAX_SYSTEMS * upload.MAX_PROMPTS + 16 == 12_816
    assert imported.MAX_TOTAL_BYTES == upload.DEFAULT_MAX_BYTES == 2 * 1024**3
    assert imported.MAX_SYSTEMS == upload.MAX_SYSTEMS == 64
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        for i in range(1700):  # more entries than 8 systems x 200 prompts + 16
            z.writestr(f"s{i // 200}/p{i % 200:03d}.txt", b"x")
    dest = tmp_path / "out"
    dest.mkdir()
    unpack_zip(archive, dest)  # the defaults the designer's local zip uses
    assert sum(1 for p in dest.rglob("*") if p.is_file()) == 1700
    with zipfile.ZipFile(tmp_path / "too-many.zip", "w") as z:
        for i in range(imported.MAX_ZIP_MEMBERS + 1):
            z.writestr(f"d/{i}.txt", b"")
    with pytest.raises(ImportProblem, match="at most 12816"):
        unpack_zip(tmp_path / "too-many.zip", tmp_path / "out2")


def test_parallel_uploads_cannot_promise_the_same_disk_twice(monkeypatch):
    """The issue's four 21 GiB uploads with 60 GiB free: here four uploads of 30 % of the
    disk's real free space, started at once. One fits (it needs 60 %: the zip and its
    unpacked copy); the others are refused, naming what is promised."""
    monkeypatch.setenv("LISTENLAB_UPLOAD_MAX_BYTES", str(10**15))
    with live_server(listening_app(PW)) as live:
        root = Path(live.state.store.root)
        size = int(shutil.disk_usage(root).free * 0.3)
        answers: list[httpx.Response] = []

        def start(i: int) -> None:
            body = {"name": f"big{i}.zip", "size": size}
            answers.append(httpx.post(live.url + "ll/admin/uploads", json=body, headers=ADMIN))

        threads = [threading.Thread(target=start, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        ok = [r for r in answers if r.status_code == 200]
        refused = [r for r in answers if r.status_code == 413]
        assert len(ok) == 1 and len(refused) == 3, [r.text for r in answers]
        for r in refused:
            assert "promised to 1 unfinished upload(s)" in r.json()["detail"]
        # the promise ends with the upload: then another fits again
        uid = ok[0].json()["upload_id"]
        assert httpx.delete(live.url + f"ll/admin/uploads/{uid}", headers=ADMIN).is_success
        r = httpx.post(
            live.url + "ll/admin/uploads", json={"name": "b.zip", "size": size}, headers=ADMIN
        )
        assert r.status_code == 200, r.text
