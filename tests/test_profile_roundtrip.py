"""Each profile served by a real ``listenlab api`` child process, read back by the remote backend.

The server runs ``piper?deterministic=1&profile=NAME`` (real Piper, real sockets on 127.0.0.1);
the client is ``vllm-omni+http://…`` in SSE, raw-audio and WebSocket modes. The take must have
the profile's rate and channels, and its audio must equal the profile's direct output.

Models that only clone (CosyVoice3, MOSS-TTS-Nano: vLLM-Omni 0.30 refuses a request without
``ref_audio``) are asked with a reference clip (a real Piper WAV, and its words), so the server
must clone: the same profile over Piper is served in-process behind ``EngineVoices`` (the
conformance suite's stand-in that takes ``ref_audio`` and speaks with its inner backend), since
Piper itself cannot clone and ``listenlab api`` refuses any ``ref_audio`` to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

import backends.profile  # noqa: F401  (registers the wrapper)
from backends.base import SpeechRequest
from backends.profile import PROFILES, ProfileBackend, profile_from_params
from backends.registry import load_backend
from backends.vllm_omni.models import speech_rules
from backends.vllm_omni.wire import ref_audio_url
from evaluation.takes import record

sys.path.insert(0, str(Path(__file__).parent))
from app.api import create_api_app  # noqa: E402
from tests.support.remote_util import EngineVoices, ServerThread, api_subprocess  # noqa: E402

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


REF_TEXT = "A short reference sentence."


def _reference_wav(piper_det) -> bytes:
    """A real Piper clip (mono 16-bit WAV) to clone from."""
    ref = asyncio.run(piper_det.synthesize(SpeechRequest(REF_TEXT)))
    buf = io.BytesIO()
    sf.write(buf, ref.samples, ref.sample_rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@contextlib.contextmanager
def _served(piper_det, name: str, extra: dict[str, str], clones: bool) -> Iterator[str]:
    """``listenlab api`` serving the profile: a child process, or (a model that only clones)
    in-process over a cloning stand-in wrapped around the same paced profile."""
    if not clones:
        with api_subprocess(_spec(name, extra)) as url:
            yield url
        return
    profile = profile_from_params(_params(name, extra, PACE))
    inner = EngineVoices(ProfileBackend(piper_det, profile))
    srv = ServerThread(create_api_app(inner, served_model=profile.model)).start()
    try:
        yield srv.url
    finally:
        srv.stop()


@pytest.mark.parametrize(("name", "extra"), CASES, ids=[c[0] for c in CASES])
def test_profile_round_trip_all_modes(piper_det, name, extra):
    profile = profile_from_params(_params(name, extra, PACE))
    # what vLLM-Omni requires for the imitated model: a reference clip (and its words)
    clones = bool(speech_rules(profile.model).requires_ref_audio)
    ref_wav = _reference_wav(piper_det) if clones else None
    ref_body = {}
    if ref_wav is not None:
        ref_body = {"ref_audio": ref_audio_url(ref_wav), "ref_text": REF_TEXT}

    async def direct() -> np.ndarray:
        unpaced = ProfileBackend(piper_det, profile_from_params(_params(name, extra, 0)))
        audio = await unpaced.synthesize(SpeechRequest(TEXT))
        return audio.samples

    expected = asyncio.run(direct())
    assert expected.shape[1] == profile.channels

    with _served(piper_det, name, extra, clones) as url:
        card = httpx.get(url + "/v1/models", timeout=10, trust_env=False).json()["data"][0]
        assert card["id"] == profile.model
        assert (card["listenlab"]["sample_rate"], card["listenlab"]["channels"]) == (
            profile.sample_rate,
            profile.channels,
        )

        # Non-streaming: one WAV file at the profile's rate and channels, same samples.
        r = httpx.post(
            url + "/v1/audio/speech",
            json={"input": TEXT, "response_format": "wav", **ref_body},
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
                req = SpeechRequest(TEXT, ref_audio=ref_wav, ref_text=REF_TEXT if clones else None)
                return await record(remote, req)
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
