"""Fixtures for the conformance tests: vLLM-Omni's own server (scripted engine) as a subprocess.

The tests run in listenlab's ``.venv``; the server runs in the conformance environment named by
``$LISTENLAB_CONFORMANCE_PYTHON`` (``.ci/run`` builds ``.venv-conformance`` and sets it). Without
it every test here is skipped, unless ``$LISTENLAB_CONFORMANCE_REQUIRED=1`` (set by ``.ci/run``'s
conformance stage): then a missing environment is an error, never a silent skip.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conformance.matrix import SUMMARY
from tests.support.remote_util import free_port

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("server.py")
ENV_PYTHON = "LISTENLAB_CONFORMANCE_PYTHON"
ENV_REQUIRED = "LISTENLAB_CONFORMANCE_REQUIRED"
ENV_REUSE = "LISTENLAB_CONFORMANCE_REUSE"
"""Development only: a JSON file ``{target: url}`` of servers already running (started with
``tests/conformance/server.py``), so a test edit does not pay the minute of vLLM imports."""

# Every server the tests use, started once in one process (vLLM's imports take most of a minute).
TARGETS = (
    "qwen3_tts",
    "fish_speech",
    "cosyvoice3",
    "moss_tts_nano",
    "voxcpm2",
    "audex",
    "ming_flash_omni_tts",
    "step_audio2",
    "qwen3_tts:replay",
    "qwen3_tts:doubled",
    "qwen3_tts:paced",
)


def conformance_python() -> str | None:
    exe = os.environ.get(ENV_PYTHON, "").strip()
    return exe if exe and os.access(exe, os.X_OK) else None


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    mine = [i for i in items if Path(str(i.fspath)).is_relative_to(here)]
    for item in mine:
        item.add_marker(pytest.mark.conformance)
    if conformance_python() or not mine:
        return
    if os.environ.get(ENV_REQUIRED) == "1":
        raise pytest.UsageError(
            f"${ENV_REQUIRED}=1 but ${ENV_PYTHON} does not name an executable Python "
            f"({os.environ.get(ENV_PYTHON)!r}): build .venv-conformance first (see .ci/run)"
        )
    skip = pytest.mark.skip(
        reason=f"needs the vLLM-Omni conformance environment: set ${ENV_PYTHON} "
        "(pip install -r tests/conformance/requirements.txt, then requirements-torch.txt)"
    )
    for item in mine:
        item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    """Print the lines tests recorded under ``SUMMARY`` (the request matrix's counts): xdist
    passes the workers' report properties to the controller, where a worker's stdout would
    be swallowed."""
    for key in ("passed", "failed"):
        for rep in terminalreporter.stats.get(key, []):
            for name, value in getattr(rep, "user_properties", ()):
                if name == SUMMARY:
                    terminalreporter.write_line(str(value))


class OmniServers:
    """The running server process and the base URL of each target."""

    def __init__(self, proc: subprocess.Popen, urls: dict[str, str], log: Path):
        self.proc, self.urls, self.log = proc, urls, log

    def url(self, target: str) -> str:
        return self.urls[target]

    def engine(self, target: str) -> dict:
        return httpx.get(self.urls[target] + "/_conformance/engine", timeout=30).json()

    def last(self, target: str) -> dict:
        return httpx.get(self.urls[target] + "/_conformance/last", timeout=60).json()


@pytest.fixture(scope="session")
def omni() -> Iterator[OmniServers]:  # noqa: C901
    """vLLM-Omni's speech server for every seed model (and the faulty/paced variants)."""
    exe = conformance_python()
    assert exe, f"${ENV_PYTHON} is not set"  # collection skipped these tests otherwise
    reuse = os.environ.get(ENV_REUSE)
    if reuse:
        import json

        yield OmniServers(None, json.loads(Path(reuse).read_text()), Path(reuse))  # type: ignore[arg-type]
        return
    ports = {t: free_port() for t in TARGETS}
    args = [exe, str(SERVER)]
    for t, port in ports.items():
        model, _, variant = t.partition(":")
        if variant == "paced":
            continue
        args += ["--serve", f"{t}={port}"]
    log = Path(tempfile.mkstemp(prefix="ll-conformance-", suffix=".log")[1])
    procs = []
    # the paced server is a second process: --pace applies to a whole process
    paced = [exe, str(SERVER), "--pace", "2", "--serve", f"qwen3_tts={ports['qwen3_tts:paced']}"]
    with open(log, "wb") as out:
        for cmd in (args, paced):
            procs.append(
                subprocess.Popen(
                    cmd,
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=out,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            )
    ready = [threading.Event() for _ in procs]

    def watch(p: subprocess.Popen, ev: threading.Event) -> None:
        for line in p.stdout:  # type: ignore[union-attr]
            if line.startswith(b"READY"):
                ev.set()
        ev.set()

    for p, ev in zip(procs, ready, strict=True):
        threading.Thread(target=watch, args=(p, ev), daemon=True).start()
    deadline = time.monotonic() + 600
    try:
        for p, ev in zip(procs, ready, strict=True):
            ev.wait(max(1.0, deadline - time.monotonic()))
            if p.poll() is not None or not ev.is_set():
                raise RuntimeError(
                    f"the vLLM-Omni conformance server did not start:\n{log.read_text()[-4000:]}"
                )
        urls = {t: f"http://127.0.0.1:{port}" for t, port in ports.items()}
        yield OmniServers(procs[0], urls, log)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
