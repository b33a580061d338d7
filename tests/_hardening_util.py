"""Attack material and measuring tools shared by the hardening tests and benchmarks/abuse.py.

A server under attack runs as a real child process (``tests._remote_util.listenlab_process``), so
its memory can be read from ``/proc/<pid>/status`` without the test's own allocations in it.
"""

from __future__ import annotations

import contextlib
import io
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
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


@dataclass
class HealthProbe:
    """GETs ``url`` back to back in a thread and records the longest answer time (ms)."""

    url: str
    max_ms: float = 0.0
    count: int = 0
    failures: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> HealthProbe:
        def run() -> None:
            with httpx.Client(timeout=30, trust_env=False) as c:
                while not self._stop.is_set():
                    t0 = time.perf_counter()
                    try:
                        ok = c.get(self.url).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    ms = (time.perf_counter() - t0) * 1000
                    self.max_ms = max(self.max_ms, ms)
                    self.count += 1
                    self.failures += not ok
                    time.sleep(0.01)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(35)
