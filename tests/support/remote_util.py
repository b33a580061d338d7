"""Run real ASGI servers on 127.0.0.1 for tests (reusable by other areas).

``with serve_app(app) as url:`` starts uvicorn in a thread on a free port and stops it after;
``with serve_api("piper?deterministic=1") as url:`` does that for ``listenlab api`` over a
backend (a spec string or a Backend instance).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A port free right now, for a child process's ``--port`` (an in-process server should
    take :func:`bound_socket` instead: it keeps the port, so a parallel test cannot take it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bound_socket(port: int = 0) -> socket.socket:
    """A socket bound to 127.0.0.1 (``port`` 0: one the system picks) and held until uvicorn
    listens on it: no gap in which another test worker could take the same port."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    return s


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``listenlab ARGS`` run to the end (3 min at most); with ``check`` a failure raises."""
    p = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if check and p.returncode != 0:
        raise AssertionError(
            f"listenlab {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
        )
    return p


class ServerThread:
    """uvicorn in a daemon thread with its own event loop."""

    def __init__(self, app, port: int | None = None):
        import uvicorn

        self.sock = bound_socket(port or 0)
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            ws="websockets-sansio",
            lifespan="on",
            timeout_graceful_shutdown=2,
            proxy_headers=False,  # as ``listenlab serve``: app.web.proxies decides whom to trust
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, args=([self.sock],), name=f"uvicorn-{self.port}", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@contextlib.contextmanager
def serve_app(app) -> Iterator[str]:
    srv = ServerThread(app).start()
    try:
        yield srv.url
    finally:
        srv.stop()


@contextlib.contextmanager
def serve_api(backend, **app_kwargs) -> Iterator[str]:
    """``listenlab api`` over ``backend`` (spec or instance) in a thread; yields the base URL."""
    from app.api import create_api_app
    from backends.registry import load_backend

    own = isinstance(backend, str)
    be = load_backend(backend) if own else backend
    app = create_api_app(be, own_backend=own, **app_kwargs)
    with serve_app(app) as url:
        yield url


@contextlib.contextmanager
def api_subprocess(spec: str, *extra: str, timeout: float = 60.0) -> Iterator[str]:
    """``listenlab api --backend SPEC`` as a real child process; yields the base URL."""
    with listenlab_process(
        "api", "--backend", spec, *extra, health="/health", timeout=timeout
    ) as c:
        yield c.url


@dataclass
class Child:
    url: str
    proc: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.proc.pid


@contextlib.contextmanager
def listenlab_process(
    command: str, *args: str, health: str, env: dict[str, str] | None = None, timeout: float = 90
) -> Iterator[Child]:
    """``listenlab COMMAND ARGS --port P`` as a child process, until ``health`` answers 200."""
    port = free_port()
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", command, *args, "--port", str(port)],
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"listenlab {command} exited with {proc.returncode}: {err}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + health, timeout=2, trust_env=False).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"listenlab {command} did not become healthy")
            time.sleep(0.2)
        yield Child(url, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
