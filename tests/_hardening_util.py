"""Attack material and measuring tools shared by the hardening tests and benchmarks/abuse.py.

A server under attack runs as a real child process (``tests._remote_util.listenlab_process``), so
its memory can be read from ``/proc/<pid>/status`` without the test's own allocations in it.
"""

from __future__ import annotations

import contextlib
import io
import json
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

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
