"""The built Space image, run as a Space runs it: UID 1000, with and without a volume at /data.

``.ci/run`` builds the image from the Dockerfile with buildah (no Docker daemon) on a local
Debian stand-in for ``python:3.11-slim`` (base images cannot be pulled here; see ``.ci/image``)
and runs this file with ``LISTENLAB_IMAGE`` naming it; without it every test here is skipped.
Each test starts real containers with podman on the host's network: Playground speech over the
player's WebSocket, a scripted rater's vote, ``listenlab test list`` inside the container on the
server's own database, and whether the data survives a new container. One study is run as a
researcher runs it (#38): their audio uploaded from the host with ``listenlab test upload
--server``, a test created and opened with the CLI, raters answering over the real routes, the
results read with ``listenlab test results --server``, the container restarted, and the same
results, byte for byte, after.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.app_util import speak_ws
from tests.support.rater import RaterClient
from tests.support.remote_util import free_port

IMAGE = os.environ.get("LISTENLAB_IMAGE")
ROOT = Path(__file__).resolve().parents[1]
PW = "image-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
TEXT = "The image keeps every answer."

pytestmark = [
    pytest.mark.image,
    pytest.mark.skipif(not IMAGE, reason="LISTENLAB_IMAGE is not set (.ci/run builds the image)"),
    pytest.mark.skipif(not shutil.which("podman"), reason="podman is not installed"),
]


def podman_base() -> list[str]:
    """podman as this sandbox allows it: runc (crun wants cgroup v2 here) and limits no higher
    than the current ones (raising one needs a capability the sandbox does not give)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    runtime = ["--runtime", "runc"] if shutil.which("runc") else []
    return ["podman", *runtime], [
        "--ulimit",
        f"nofile={nofile}:{nofile}",
        "--ulimit",
        "nproc=4096:4096",
    ]


def podman(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    base, _ = podman_base()
    p = subprocess.run([*base, *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def run_args(*extra: str) -> list[str]:
    _, limits = podman_base()
    return ["run", *limits, "--network", "host", *extra]


@contextmanager
def container(volume: Path | None = None, env: dict[str, str] | None = None) -> Iterator[dict]:
    """One container of the image on a free port; yields its name, URL and port."""
    port = free_port()
    name = f"ll-test-{uuid.uuid4().hex[:10]}"
    args = ["-d", "--name", name, "-e", f"GRADIO_SERVER_PORT={port}"]
    args += ["-e", f"LISTENLAB_ADMIN_PASSWORD={PW}"]
    for k, v in (env or {}).items():
        args += ["-e", f"{k}={v}"]
    if volume is not None:
        args += ["-v", f"{volume}:/data"]
    podman(*run_args(*args, IMAGE))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                r = httpx.get(url + "/ll/health", timeout=2, trust_env=False)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            state = podman("inspect", "-f", "{{.State.Running}}", name, check=False).stdout
            if "true" not in state or time.monotonic() > deadline:
                logs = podman("logs", name, check=False)
                raise AssertionError(f"the container did not start:\n{logs.stdout}{logs.stderr}")
            time.sleep(0.5)
        # the admin sees where the data goes; anyone else only whether it persists
        admin = httpx.get(url + "/ll/health", headers=ADMIN, timeout=10, trust_env=False)
        yield {"name": name, "url": url, "port": port, "health": admin.json(), "public": r.json()}
    finally:
        podman("rm", "-f", name, check=False)


def listed_tests(name: str) -> list[dict]:
    """``listenlab test list --json`` inside the running container (its own database)."""
    out = podman("exec", name, "listenlab", "test", "list", "--json").stdout
    return json.loads(out)["tests"]


def listed_tests_url(url: str) -> list:
    r = httpx.get(url + "/ll/admin/tests", headers=ADMIN, timeout=30, trust_env=False)
    return r.json()["tests"]


def create_test(url: str, persistent: bool) -> str:
    """Created open; on a store a restart loses, only after it is refused (409) and confirmed."""
    spec = {
        "name": "image study",
        "kind": "mos",
        "systems": [{"name": "piper", "backend": "piper"}],
        "prompts": [TEXT],
        "items_per_rater": 1,
        "screening": False,
        "headphone_check": False,
        "familiarise": False,
    }
    post = functools.partial(
        httpx.post, url + "/ll/admin/tests", headers=ADMIN, timeout=300, trust_env=False
    )
    if not persistent:
        r = post(json=spec)
        assert r.status_code == 409 and r.json()["reason"] == "not_persistent", r.text
        assert "/home/user/data/listenlab.db" in r.json()["detail"]
        assert listed_tests_url(url) == []  # refused before anything was made
        spec["confirm_not_persistent"] = True
    r = post(json=spec)
    assert r.status_code == 200, r.text
    return r.json()["test_id"]


async def one_vote(url: str, test_id: str) -> int:
    c = RaterClient(url, test_id, crowd_id="IMAGE-RATER")
    try:
        await c.join()
        item = (await c.status())["item"]
        await c.listen(item["assignment_id"], 0)
        r = await c.vote({"assignment_id": item["assignment_id"], "score": 4})
        return r.status_code
    finally:
        await c.aclose()


def study(box: dict) -> str:
    """Speech in the Playground, a test made by the admin, one rater's vote; the test id."""
    done = asyncio.run(speak_ws(box["port"], "Hello from the built image."))
    assert done["type"] == "done" and done["frames"] == done["chunks"] >= 1, done
    test_id = create_test(box["url"], box["health"]["storage"]["persistent"])
    assert asyncio.run(one_vote(box["url"], test_id)) == 200
    (row,) = listed_tests(box["name"])
    assert row["test_id"] == test_id and row["answers"] == 1 and row["raters"] == 1
    return test_id


def test_the_image_runs_as_uid_1000_from_an_installed_wheel():
    script = (
        "id -u; ls -A /home/user; python -c 'import app, itsdangerous, authlib; "
        "print(app.__file__)'; command -v ffmpeg"
    )
    out = podman(*run_args("--rm", IMAGE, "sh", "-c", script)).stdout.split()
    assert out[0] == "1000"
    assert "app" not in out and "wheels" not in out and not any("egg-info" in x for x in out)
    assert any(x.startswith("/home/user/venv/lib/") and x.endswith("app/__init__.py") for x in out)
    assert out[-1] == "/usr/bin/ffmpeg"


def test_hugging_face_login_is_read_in_the_image():
    """The ``oauth`` extra is installed: a session cookie signed as Gradio signs it (key
    sha256(OAUTH_CLIENT_SECRET + "-v4"), itsdangerous) is a login; a forged one is not."""
    itsdangerous = pytest.importorskip("itsdangerous")

    def session(user: str, secret: str) -> str:
        key = hashlib.sha256((secret + "-v4").encode()).hexdigest()
        info = {"oauth_info": {"userinfo": {"preferred_username": user}}}
        data = base64.b64encode(json.dumps(info).encode())
        return itsdangerous.TimestampSigner(key).sign(data).decode()

    probe = (
        "import sys\n"
        "from starlette.requests import Request\n"
        "from app.web.identity import hf_user\n"
        "for c in sys.argv[1:]:\n"
        "    print(hf_user(Request({'type': 'http', 'headers': [(b'cookie', c.encode())]})))\n"
    )
    good, forged = session("alice", "s3cret"), session("alice", "wrong")
    env = ["-e", "OAUTH_CLIENT_ID=space-client", "-e", "OAUTH_CLIENT_SECRET=s3cret"]
    args = ["--rm", *env, IMAGE, "python", "-c", probe, f"session={good}", f"session={forged}"]
    assert podman(*run_args(*args)).stdout.split() == ["alice", "None"]


def test_without_a_volume_the_data_is_said_to_be_lost_and_is(tmp_path):
    with container() as box:
        assert box["health"]["storage"]["persistent"] is False
        assert "/data does not exist" in box["health"]["storage"]["note"]
        assert box["public"]["storage"]["persistent"] is False
        assert "/home/user" not in json.dumps(box["public"])  # no path for a visitor
        study(box)
        logs = podman("logs", box["name"]).stdout
        assert "listenlab: store /home/user/data/listenlab.db (wal), NOT PERSISTENT" in logs
    with container() as again:
        assert listed_tests(again["name"]) == []


def test_with_a_volume_the_study_survives_a_new_container(tmp_path):
    vol = tmp_path / "volume"
    vol.mkdir()
    os.chown(vol, 1000, 1000)
    with container(vol) as box:
        assert box["health"]["storage"]["persistent"] is True
        test_id = study(box)
        logs = podman("logs", box["name"]).stdout
        assert "listenlab: store /data/listenlab.db (delete), persistent" in logs
    assert (vol / "listenlab.db").is_file()
    with container(vol) as again:
        (row,) = listed_tests(again["name"])
        assert row["test_id"] == test_id and row["answers"] == 1


def test_a_volume_the_user_cannot_write_is_named_in_the_warning(tmp_path):
    vol = tmp_path / "root-owned"
    vol.mkdir(mode=0o755)
    with container(vol) as box:
        st = box["health"]["storage"]
        assert st["persistent"] is False
        assert "/data exists but is not writable by this user (uid 1000)" in st["note"]
    assert not any(vol.iterdir())


# --------------------------------------------------------------- a study, as a researcher runs it


def host_cli(*argv: str) -> subprocess.CompletedProcess:
    """``listenlab ARGV`` on the host (the researcher's laptop), the admin password in its
    environment as the docs say; plain http is allowed because the container is on loopback."""
    env = {k: v for k, v in os.environ.items() if k != "SSL_CERT_FILE"}
    env["LISTENLAB_ADMIN_PASSWORD"] = PW
    p = subprocess.run(
        [sys.executable, "-m", "app.cli", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert p.returncode == 0, f"listenlab {' '.join(argv)} -> {p.returncode}\n{p.stderr}"
    return p


def restart(box: dict) -> None:
    """``podman restart``: the same container (its /data volume, its port) starts again."""
    podman("restart", box["name"])
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(box["url"] + "/ll/health", timeout=2, trust_env=False).is_success:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, podman("logs", box["name"], check=False).stderr
        time.sleep(0.5)


async def rate_all(url: str, test_id: str, crowd_id: str, score) -> int:
    """One rater through every item it is given; the number of votes."""
    c = RaterClient(url, test_id, crowd_id=crowd_id)
    votes = 0
    try:
        await c.join()
        st = await c.status()
        while not st["finished"]:
            aid = st["item"]["assignment_id"]
            await c.listen(aid, 0)  # as long as it plays: the server's clock checks it
            r = await c.vote({"assignment_id": aid, "score": score(aid)})
            assert r.status_code == 200, r.text
            votes += 1
            st = await c.status()
    finally:
        await c.aclose()
    return votes


def results(url: str, test_id: str, out: Path) -> tuple[str, dict[str, bytes]]:
    """``test results --server``: its JSON, and every file of its ``--csv`` export."""
    js = host_cli("test", "results", test_id, "--server", url, "--json").stdout
    host_cli("test", "results", test_id, "--server", url, "--csv", str(out))
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    return js, files


def test_a_study_uploaded_with_the_cli_survives_a_restart(tmp_path, piper_det):
    from tests.test_stimuli_import import TEXTS, make_folder

    folder = make_folder(tmp_path / "study", piper_det)  # natural/*.wav, modelx/*.flac
    vol = tmp_path / "volume"
    vol.mkdir()
    os.chown(vol, 1000, 1000)
    with container(vol) as box:
        url = box["url"]
        up = json.loads(host_cli("test", "upload", str(folder), "--server", url, "--json").stdout)
        assert up["systems"] == ["modelx", "natural"] and up["files"] == 2 * len(TEXTS), up
        made = host_cli(
            "test", "create", "--server", url, "--stimuli", f"server:{up['path']}",
            "--type", "mos", "--name", "image upload study", "--items-per-rater", "4",
            "--no-headphone-check", "--no-screening", "--no-familiarise", "--draft", "--json",
        )  # fmt: skip
        test_id = json.loads(made.stdout)["test_id"]
        (row,) = listed_tests(box["name"])
        assert (row["test_id"], row["status"]) == (test_id, "draft")
        host_cli("test", "open", test_id, "--server", url)
        scores = {
            "PIMAGE0001": lambda a: 5,
            "PIMAGE0002": lambda a: 2,
            "PIMAGE0003": lambda a: 1 + sum(map(ord, a)) % 5,
        }

        async def all_raters() -> list[int]:  # at the same time, as raters are
            return await asyncio.gather(*(rate_all(url, test_id, p, f) for p, f in scores.items()))

        votes = dict(zip(scores, asyncio.run(all_raters()), strict=True))
        assert all(v >= 4 for v in votes.values()), votes
        js, files = results(url, test_id, tmp_path / "before")
        tables = json.loads(js)  # the results route's tables, by name
        assert len(tables["raters"]) == 3
        assert {r["system_id"] for r in tables["mos"]} == {"modelx", "natural"}, tables["raters"]
        assert all(r["n"] >= 1 for r in tables["mos"])
        (row,) = listed_tests(box["name"])
        assert row["raters"] == 3 and row["answers"] == sum(votes.values())
        raw = b"".join(v for k, v in files.items() if k.startswith("raw/"))
        assert all(p.encode() in raw for p in scores), "the raters' crowd ids in the export"
        started = podman("inspect", "-f", "{{.State.StartedAt}}", box["name"]).stdout
        restart(box)
        assert podman("inspect", "-f", "{{.State.StartedAt}}", box["name"]).stdout != started
        js2, files2 = results(url, test_id, tmp_path / "after")
        assert js2 == js  # byte for byte
        assert files2.keys() == files.keys() and all(files2[k] == files[k] for k in files)
        (row,) = listed_tests(box["name"])
        assert row["status"] == "open" and row["answers"] == sum(votes.values())
