"""Helpers for the stimuli-upload tests and benchmark: real WAV study folders, hostile zips,
a self-signed certificate, and the raw upload protocol spoken with httpx."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import soundfile as sf

RATE = 48_000


def make_set(
    root: Path,
    systems: list[str],
    prompts: int,
    seconds: float = 2.0,
    seed: int = 0,
    rate: int = RATE,
) -> int:
    """``root/SYSTEM/pNNN.wav`` (16-bit mono noise at ``rate``, different per file) and
    ``root/prompts.csv``; the bytes written."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    n = int(seconds * rate)
    total = 0
    for s in systems:
        (root / s).mkdir(exist_ok=True)
        for i in range(prompts):
            x = (rng.standard_normal(n) * 0.1).astype(np.float32)
            p = root / s / f"p{i + 1:03d}.wav"
            sf.write(p, x, rate, subtype="PCM_16")
            total += p.stat().st_size
    lines = ["prompt_id,text"] + [f"p{i + 1:03d},Sentence number {i + 1}." for i in range(prompts)]
    (root / "prompts.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return total


def zip_bomb(path: Path, member: str = "a/p001.wav", mb: int = 9) -> Path:
    """A zip whose member ``member`` is ``mb`` MB of zeros deflated to a few kB."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("b/p001.wav", b"RIFF")
        info = zipfile.ZipInfo(member)
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w") as f:
            block = bytes(1 << 20)
            for _ in range(mb):
                f.write(block)
    return path


def zip_bytes(folder: Path) -> bytes:
    """``folder`` as a stored zip, in memory (small test sets only)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder).as_posix())
    return buf.getvalue()


def send(client, url: str, data: bytes | Path, headers: dict | None = None, chunk: int = 4 << 20):
    """Start an upload of ``data`` and send it whole in ``chunk``-byte PUTs; the last answer."""
    size = data.stat().st_size if isinstance(data, Path) else len(data)
    r = client.post(
        url + "ll/admin/uploads", json={"name": "set.zip", "size": size}, headers=headers
    )
    assert r.status_code == 200, r.text
    uid = r.json()["upload_id"]
    f = data.open("rb") if isinstance(data, Path) else io.BytesIO(data)
    with f:
        off = 0
        while off < size:
            block = f.read(chunk)
            h = {"Content-Range": f"bytes {off}-{off + len(block) - 1}/{size}", **(headers or {})}
            r = client.put(url + f"ll/admin/uploads/{uid}", content=block, headers=h)
            assert r.status_code == 200, r.text
            off = r.json()["offset"]
    return uid
