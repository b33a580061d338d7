"""A 13-system MOS study for the Results tab and the export's tests: the CPU voice (Piper)
speaks two prompts, each clip is damaged 13 ways (white noise from 45 dB SNR down to -3 dB,
every other one also low-passed), the test is created through the admin route from that
folder, and scripted raters rate it over the real HTTP and WebSocket routes, each score the
system's known quality plus the rater's bias and noise (one rater gives 3 throughout and is
screened out). The systems' true order is therefore known: ``s00`` best, ``s12`` worst.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import soundfile as sf
from scipy.signal import butter, sosfilt

from tests.support.rater import RaterClient

SYSTEMS = [f"s{i:02d}" for i in range(13)]
PROMPTS = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
]
SECONDS = 0.6
"""Each stimulus is the voice's first 0.6 s (raters listen in real time)."""


def quality(system: str) -> float:
    """The known MOS of a system: 4.8 for ``s00`` down to 1.2 for ``s12``."""
    return 4.8 - 3.6 * SYSTEMS.index(system) / (len(SYSTEMS) - 1)


def damaged(x: np.ndarray, sr: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Damage level ``k`` of 0..12: noise at an SNR falling 4 dB a step, odd levels low-passed."""
    y = x.astype(np.float64)
    if k % 2:
        y = sosfilt(butter(4, max(800.0, 6000.0 - 450 * k), fs=sr, output="sos"), y)
    snr = 45.0 - 4.0 * k
    noise = rng.standard_normal(len(y)) * np.sqrt(np.mean(y**2) / 10 ** (snr / 10))
    out = y + noise
    return (out / max(1.0, np.max(np.abs(out)) / 0.9)).astype(np.float32)


def stimuli_folder(root: Path, piper) -> Path:
    """``root/sNN/pK.wav``: the damaged clips of both prompts."""
    from tests.support.evaluation_util import synthesize

    rng = np.random.default_rng(13)
    takes = synthesize(piper, PROMPTS)
    for i, s in enumerate(SYSTEMS):
        (root / s).mkdir(parents=True, exist_ok=True)
        for k, t in enumerate(takes):
            x = t.audio[:, 0] if t.audio.ndim == 2 else t.audio
            x = x[: int(t.sample_rate * SECONDS)].astype(np.float32)
            if x.dtype.kind == "i" or np.max(np.abs(x)) > 2:
                x = x / 32768.0
            sf.write(root / s / f"p{k + 1}.wav", damaged(x, t.sample_rate, i, rng), t.sample_rate)
    return root


@dataclass
class Study:
    test_id: str
    raters: list[str]
    straight_liner: str


def create(url: str, folder: Path, headers: dict | None = None) -> str:
    body = {
        "name": "thirteen",
        "kind": "mos",
        "systems": [],
        "prompts": [],
        "stimuli": str(folder),
        "items_per_rater": 13,
        "screening": False,
        "headphone_check": False,
        "familiarise": False,
    }
    r = httpx.post(url + "ll/admin/tests", json=body, headers=headers or {}, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()["test_id"]


async def rate_one(url: str, tid: str, store, bias: float, seed: int, flat: bool) -> str:
    """One rater: every item listened to in real time, scored by the system's quality."""
    rng = np.random.default_rng(seed)
    c = RaterClient(url, tid, crowd_id=f"P{seed:04d}", timeout=120)
    await c.join()
    st = await c.status()
    while not st["finished"]:
        aid = st["item"]["assignment_id"]
        await c.listen(aid, 0)
        system = next(a for a in store.assignments(tid, st["rater_id"]) if a.assignment_id == aid)
        q = quality(system.meta["systems"][0]) + bias + rng.normal(0, 0.5)
        score = 3 if flat else int(np.clip(round(q), 1, 5))
        r = await c.vote({"assignment_id": aid, "score": score})
        assert r.status_code == 200, r.text
        st = await c.status()
    await c.aclose()
    return st["rater_id"]


def run_study(url: str, store, folder: Path, raters: int = 6, headers=None) -> Study:
    """Create the test and let ``raters`` raters (and one straight-liner) rate all of it."""
    tid = create(url, folder, headers)
    biases = np.linspace(-0.4, 0.4, raters)

    async def go():
        jobs = [rate_one(url, tid, store, float(b), n + 1, False) for n, b in enumerate(biases)]
        jobs.append(rate_one(url, tid, store, 0.0, 99, True))
        return await asyncio.gather(*jobs)

    ids = asyncio.run(go())
    return Study(tid, ids[:-1], ids[-1])
