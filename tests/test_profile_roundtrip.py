"""Each profile served by a real ``listenlab api`` child process, read back by the remote backend.

The server runs ``piper?deterministic=1&profile=NAME`` (real Piper, real sockets on 127.0.0.1);
the client is ``vllm-omni+http://…`` in SSE, raw-audio and WebSocket modes. The take must have
the profile's rate and channels, and its audio must equal the profile's direct output.
"""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

import backends.profile  # noqa: F401  (registers the wrapper)
from backends.base import SpeechRequest
from backends.profile import PROFILES, ProfileBackend, profile_from_params
from backends.registry import load_backend
from evaluation.takes import record

sys.path.insert(0, str(Path(__file__).parent))
from tests.support.remote_util import api_subprocess  # noqa: E402

TEXT = "One two three four five. Six seven eight."
PACE = 4.0
# (profile, extra knobs): custom uses the example settings (48 kHz stereo, 1 then 25).
CASES = [(name, {}) for name in PROFILES if name != "custom"] + [
    (
        "custom",
        {
            "rate": "48000",
            "channels": "2",
            "first_frames": "1",
            "chunk_frames": "25",
            "frame_hz": "12.5",
        },
    )
]
MODES = [("sse", "wav"), ("sse", "pcm"), ("audio", "pcm"), ("audio", "wav"), ("ws", "pcm")]


def _params(name: str, extra: dict[str, str], pace: float) -> dict[str, str]:
    return {"profile": name, **extra, "pace": str(pace)}


def _spec(name: str, extra: dict[str, str]) -> str:
    knobs = "".join(f"&{k}={v}" for k, v in _params(name, extra, PACE).items())
    return "piper?deterministic=1" + knobs


@pytest.mark.parametrize(("name", "extra"), CASES, ids=[c[0] for c in CASES])
def test_profile_round_trip_all_modes(piper_det, name, extra):
    profile = profile_from_params(_params(name, extra, PACE))

    async def direct() -> np.ndarray:
        unpaced = ProfileBackend(piper_det, profile_from_params(_params(name, extra, 0)))
        audio = await unpaced.synthesize(SpeechRequest(TEXT))
        return audio.samples

    expected = asyncio.run(direct())
    assert expected.shape[1] == profile.channels

    with api_subprocess(_spec(name, extra)) as url:
        card = httpx.get(url + "/v1/models", timeout=10, trust_env=False).json()["data"][0]
        assert card["id"] == profile.model
        assert (card["listenlab"]["sample_rate"], card["listenlab"]["channels"]) == (
            profile.sample_rate,
            profile.channels,
        )

        # Non-streaming: one WAV file at the profile's rate and channels, same samples.
        r = httpx.post(
            url + "/v1/audio/speech",
            json={"input": TEXT, "response_format": "wav"},
            timeout=60,
            trust_env=False,
        )
        assert r.status_code == 200, r.text
        whole, sr = sf.read(io.BytesIO(r.content), dtype="int16", always_2d=True)
        assert (sr, whole.shape[1]) == (profile.sample_rate, profile.channels)
        assert whole.shape == expected.shape
        assert np.abs(whole.astype(np.int32) - expected.astype(np.int32)).max() <= 4

        async def through(mode: str, fmt: str):
            remote = load_backend(f"vllm-omni+{url}?mode={mode}&format={fmt}")
            try:
                return await record(remote, SpeechRequest(TEXT))
            finally:
                await remote.aclose()

        for mode, fmt in MODES:
            take = asyncio.run(through(mode, fmt))
            where = f"{name} over {mode}/{fmt}"
            assert take.status == "ok", where
            assert (take.sample_rate, take.channels) == (profile.sample_rate, profile.channels), (
                where
            )
            got = take.audio
            assert got.shape == expected.shape, where
            diff = np.abs(got.astype(np.int32) - expected.astype(np.int32)).max()
            assert diff <= 4, f"{where}: max sample difference {diff}"
            corr = np.corrcoef(got[:, 0].astype(float), expected[:, 0].astype(float))[0, 1]
            assert corr > 0.9999, where
            if profile.channels > 1:
                assert np.array_equal(got[:, 0], got[:, 1]), where
            # The profile's pacing survives the wire: the last audio cannot come before the
            # simulated server finished (duration / pace after the request).
            due_ms = 1000 * take.duration_s / PACE
            assert take.chunks[-1].arrival_ms >= due_ms - 20, where
            assert len(take.chunks) >= 2, where
