"""Each profile served by a real ``listenlab api`` child process, read back by the remote backend.

The server runs ``piper?deterministic=1&profile=NAME`` (real Piper, real sockets on 127.0.0.1);
the client is ``vllm-omni+http://…`` in SSE, raw-audio and WebSocket modes. The take must have
the profile's rate and channels, and its audio must equal the profile's direct output.

Each profile is asked what its model takes (the profile answers by the model's rules): a
reference clip and its words for the models that only clone (CosyVoice3, GLM-TTS, IndexTTS-2,
MOSS-TTS, MOSS-TTS-Nano), a caption for MiniMax Music 3, a preset voice for Voxtral TTS. The
stand-in takes the clip, checks it, and speaks the text with Piper. Every profile goes through
a whole file and SSE; the five seed models, a stereo one, a whole-file one and ``custom`` go
through every streaming mode.
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
from backends.vllm_omni.models import UNITS
from backends.vllm_omni.wire import ref_audio_url
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
EVERY_MODE = {
    "qwen3-tts",
    "fish-speech",
    "cosyvoice3",
    "moss-tts-nano",
    "voxcpm2",
    "minimax-music3",
    "indextts2",
    "custom",
}
"""Profiles read back in every mode (the others: a whole file and SSE/pcm)."""


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


def _needs(name: str) -> dict[str, str]:
    """What the profile's model needs besides the text (not the clip): Voxtral's open
    checkpoint a preset voice, MiniMax Music 3 a caption."""
    unit = UNITS.get(PROFILES[name].unit or "")
    if unit is None:
        return {}
    if unit.name == "voxtral_tts":
        return {"voice": unit.presets[0]}
    if unit.name == "minimax_music3":
        return {"instructions": "A slow piano ballad."}
    return {}


@pytest.mark.parametrize(("name", "extra"), CASES, ids=[c[0] for c in CASES])
def test_profile_round_trip_all_modes(piper_det, name, extra):
    profile = profile_from_params(_params(name, extra, PACE))
    unit = UNITS.get(profile.unit or "")
    # what vLLM-Omni requires for the imitated model: a reference clip (and its words)
    clones = bool(unit and unit.rules.requires_ref_audio)
    ref_wav = _reference_wav(piper_det) if clones else None
    ref_body = {}
    if ref_wav is not None:
        ref_body = {"ref_audio": ref_audio_url(ref_wav), "ref_text": REF_TEXT}
    ref_body |= _needs(name)

    def request() -> SpeechRequest:
        clip = {"ref_audio": ref_wav, "ref_text": REF_TEXT} if clones else {}
        return SpeechRequest(TEXT, **clip, **_needs(name))

    async def direct() -> np.ndarray:
        unpaced = ProfileBackend(piper_det, profile_from_params(_params(name, extra, 0)))
        audio = await unpaced.synthesize(request())
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
                return await record(remote, request())
            finally:
                await remote.aclose()

        for mode, fmt in MODES if name in EVERY_MODE else MODES[1:2]:
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
            # a whole-file model sends one chunk; a schedule's first chunk ends early
            assert (len(take.chunks) == 1) if profile.whole_file else len(take.chunks) >= 2, where
