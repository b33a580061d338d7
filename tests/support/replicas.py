"""Several ``listenlab serve`` processes on one database, as a deployment with replicas runs
them: each its own port and local data folder, all on one PostgreSQL URL (or one SQLite file
for the single-process baseline). Used by ``tests/test_replicas.py`` and
``benchmarks/raters.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("joe=piper?deterministic=1", "qwen-wire=piper?deterministic=1&profile=qwen3-tts")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Replica:
    """One ``listenlab serve`` process."""

    db: str
    port: int
    data: Path
    backends: tuple[str, ...] = BACKENDS
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Replica:
        env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "LISTENLAB_DATA": str(self.data)}
        env.pop("LISTENLAB_ADMIN_PASSWORD", None)  # localhost admin creates the test
        flags = [x for b in self.backends for x in ("--backend", b)]
        self.data.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "serve",
                "--port",
                str(self.port),
                "--db",
                self.db,
                *flags,
            ],
            cwd=ROOT,
            env=env,
            stdout=open(self.data / "serve.out", "ab"),  # noqa: SIM115 (the child keeps it)
            stderr=open(self.data / "serve.log", "ab"),  # noqa: SIM115
            start_new_session=True,
        )
        return self

    def wait_up(self, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                log = (self.data / "serve.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"replica on {self.port} exited: {log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/ll/health", timeout=2).status_code == 200:
                    return
            time.sleep(0.3)
        raise RuntimeError(f"replica on {self.port} did not come up")

    def kill(self) -> None:
        """SIGKILL, as a crashed machine: no clean shutdown, nothing flushed."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@contextlib.contextmanager
def replicas(db: str, folder: Path, n: int = 2, backends: tuple[str, ...] = BACKENDS):
    """``n`` replicas on ``db``, started together and all killed at the end."""
    reps = [Replica(db, free_port(), folder / f"replica{i}", backends) for i in range(n)]
    try:
        for r in reps:
            r.start()
        for r in reps:
            r.wait_up()
        yield reps
    finally:
        for r in reps:
            r.kill()


__all__ = ["BACKENDS", "Replica", "free_port", "replicas"]
