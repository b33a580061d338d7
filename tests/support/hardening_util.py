"""Attack material and measuring tools shared by the hardening tests and benchmarks/abuse.py.

A server under attack runs as a real child process (``tests.support.remote_util.listenlab_process``), so
its memory can be read from ``/proc/<pid>/status`` without the test's own allocations in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import soundfile as sf
import websockets

from app.web.identity import COOKIE

# --------------------------------------------------------------------------- attack material


def flac_bomb(seconds: int = 600, rate: int = 48000, channels: int = 1, lie: bool = False) -> bytes:
    """Silence compressed to almost nothing: ``seconds`` of audio in a few hundred KB.

    ``lie=True`` zeroes STREAMINFO's total-samples field ("unknown length"), so the header
    check cannot see the duration and only the decode cap can stop it.
    """
    buf = io.BytesIO()
    block = np.zeros((rate * 10, channels), np.int16)
    with sf.SoundFile(buf, "w", rate, channels, format="FLAC", subtype="PCM_16") as f:
        for _ in range(seconds // 10):
            f.write(block)
    d = bytearray(buf.getvalue())
    if lie:
        v = struct.unpack(">Q", bytes(d[18:26]))[0] & ~((1 << 36) - 1)
        d[18:26] = struct.pack(">Q", v)
    return bytes(d)


def hls_playlist(target: Path) -> bytes:
    """The reproduced attack: an HLS playlist naming a local media file (95 bytes or so)."""
    return (
        f"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10.0,\n{target}\n#EXT-X-ENDLIST\n"
    ).encode()


def concat_script(target: Path) -> bytes:
    return f"ffconcat version 1.0\nfile '{target}'\n".encode()


def tone_wav(seconds: float = 2.0, sr: int = 16000, freq: float = 440.0) -> bytes:
    t = np.arange(int(seconds * sr)) / sr
    buf = io.BytesIO()
    sf.write(buf, 0.3 * np.sin(2 * np.pi * freq * t), sr, format="WAV", subtype="PCM_16")
    return buf.getvalue()


# --------------------------------------------------------------------------- pages

TIMEOUT = 60.0
ARENA_TEXT = "The birch canoe slid on the smooth planks."


def ws_url(base: str) -> str:
    return base.rstrip("/").replace("http://", "ws://") + "/ll/ws"


async def recv_json(ws, pred, timeout: float = TIMEOUT) -> dict:
    async def loop():
        while True:
            m = await ws.recv()
            if isinstance(m, bytes):
                continue
            d = json.loads(m)
            if pred(d):
                return d

    return await asyncio.wait_for(loop(), timeout)


def arena_cookie(base: str) -> str:
    """A fresh arena session cookie: free for anyone, which is why votes are not counted by it."""
    r = httpx.post(base.rstrip("/") + "/ll/arena/session", timeout=TIMEOUT, trust_env=False)
    return r.cookies[COOKIE]


class ArenaPage:
    """A raw arena page on one socket: keeps the audio frames it received, with their time."""

    def __init__(self, ws):
        self.ws, self.frames, self.token = ws, [], 100

    async def until(self, pred, timeout=TIMEOUT):
        async def loop():
            while True:
                m = await self.ws.recv()
                if isinstance(m, bytes):
                    self.frames.append((time.time(), m))
                    continue
                d = json.loads(m)
                if pred(d):
                    return d

        return await asyncio.wait_for(loop(), timeout)

    async def ask(self, kind: str, **msg) -> dict:
        await self.ws.send(json.dumps({"type": kind, **msg}))
        return await self.until(lambda d: str(d.get("type", "")).startswith("arena_"))

    async def battle_and_vote(
        self, choice: str | Callable[[str], str], text: str = ARENA_TEXT
    ) -> tuple[str, dict]:
        """A whole honest battle: both sides streamed, heard to the end, then the vote
        (``choice``, or ``choice(battle_id)`` for a voter who picks a system by name)."""
        b = await self.ask("arena_new", text=text)
        if b["type"] != "arena_battle":
            return "", b
        bid = b["battle_id"]
        for side in ("a", "b"):
            self.token += 1
            tok, n0, t = self.token, len(self.frames), time.time()
            await self.ws.send(
                json.dumps({"type": "arena_speak", "token": tok, "battle_id": bid, "side": side})
            )
            done = await self.until(
                lambda d, tok=tok: d.get("token") == tok and d["type"] in {"done", "error"}
            )
            assert done["type"] == "done", done
            first = next(
                ts for ts, raw in self.frames[n0:] if int.from_bytes(raw[:4], "little") == tok
            )
            await asyncio.sleep(max(0.0, max(t, first) + done["duration_s"] + 0.15 - time.time()))
            ok = await self.ask("arena_played", battle_id=bid, side=side,
                                take_id=done["take_id"], played_ms=done["duration_s"] * 1000)  # fmt: skip
            assert ok["type"] == "arena_played", ok
        pick = choice(bid) if callable(choice) else choice
        return bid, await self.ask("arena_vote", battle_id=bid, choice=pick)


def arena_page(base: str, cookie: str, headers: dict | None = None):
    """``/ll/ws`` carrying an arena cookie (and e.g. ``X-Forwarded-For``)."""
    h = {"Cookie": f"{COOKIE}={cookie}", **(headers or {})}
    return websockets.connect(ws_url(base), additional_headers=h, max_size=2**24)


async def stimulus_flood(
    base: str, msg: str, seconds: float = 30.0
) -> tuple[int, float | None, float | None]:
    """Send ``msg`` on a new ``/ll/ws`` as fast as possible for ``seconds`` without ever reading
    the answers; returns (messages sent, when a send blocked, when the server dropped us)."""
    sent, blocked_after, closed_after = 0, None, None
    t0 = time.monotonic()
    # max_queue=1: the client library stops reading once one message waits (TCP backpressure)
    async with websockets.connect(ws_url(base), max_queue=1, max_size=2**24) as ws:
        try:
            while time.monotonic() - t0 < seconds:
                await asyncio.wait_for(ws.send(msg), 5)
                sent += 1
        except TimeoutError:  # the server stopped taking our messages: we are slowed
            blocked_after = time.monotonic() - t0
        except (websockets.ConnectionClosed, ConnectionError):
            closed_after = time.monotonic() - t0
        if closed_after is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ws.wait_closed(), 60)  # then dropped
                closed_after = time.monotonic() - t0
    return sent, blocked_after, closed_after


# --------------------------------------------------------------------------- measuring


def rss_kb(pid: int, key: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{key} not found for pid {pid}")


@dataclass
class RssSampler:
    """Samples a process's RSS every ``interval`` s in a thread; ``peak_kb`` is the maximum."""

    pid: int
    interval: float = 0.02
    peak_kb: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RssSampler:
        def run() -> None:
            while not self._stop.is_set():
                with contextlib.suppress(Exception):
                    self.peak_kb = max(self.peak_kb, rss_kb(self.pid))
                time.sleep(self.interval)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(2)


_HEALTH_LOOP = """
import json, sys, time, httpx
url = sys.argv[1]
worst, count, failures = 0.0, 0, 0
with httpx.Client(timeout=30, trust_env=False) as c:
    while True:  # until terminated
        t0 = time.perf_counter()
        try:
            ok = c.get(url).status_code == 200
        except httpx.HTTPError:
            ok = False
        worst = max(worst, (time.perf_counter() - t0) * 1000)
        count += 1
        failures += not ok
        print(json.dumps([worst, count, failures]), flush=True)
        time.sleep(0.01)
"""


@dataclass
class HealthProbe:
    """GETs ``url`` back to back and records the longest answer time (ms).

    Why a separate process: a thread in the caller would share its GIL with the attack itself
    (building a 200 MB body, sending it), so the caller's own pauses would be counted as the
    server's."""

    url: str
    max_ms: float = 0.0
    count: int = 0
    failures: int = 0
    _proc: subprocess.Popen | None = None
    _reader: threading.Thread | None = None
    _first: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> HealthProbe:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _HEALTH_LOOP, self.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

        def read() -> None:
            assert self._proc is not None and self._proc.stdout is not None
            for line in self._proc.stdout:
                self.max_ms, self.count, self.failures = json.loads(line)
                self._first.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        # the probe measures from its first answer on: on a busy machine (parallel test
        # workers) starting its interpreter can take longer than the attack it should watch
        if not self._first.wait(60):
            self.__exit__()
            raise RuntimeError(f"the health probe of {self.url} got no answer in 60 s")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(35)
        if self._reader is not None:
            self._reader.join(5)
