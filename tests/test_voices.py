"""Reference-clip validation/conversion and the voice library (real files, real ffmpeg)."""

from __future__ import annotations

import io
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from backends.errors import InvalidRequest
from voices.clips import MAX_UPLOAD_BYTES, ClipError, prepare_clip, trim_silence
from voices.library import VoiceLibrary, VoiceNotFound, remote_name, sanitize_name

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def tone(seconds: float, sr: int = 16000, channels: int = 1, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    x = amp * np.sin(2 * np.pi * 220 * t)
    return np.stack([x] * channels, axis=1) if channels > 1 else x


def encode(x: np.ndarray, sr: int, fmt: str, tmp_path: Path) -> bytes:
    """Write WAV, then let ffmpeg encode it to ``fmt`` (as a user's file would be)."""
    src = tmp_path / "src.wav"
    sf.write(src, x, sr, subtype="PCM_16")
    if fmt == "wav":
        return src.read_bytes()
    out = tmp_path / f"clip.{fmt}"
    codec = {"m4a": ["-c:a", "aac"], "webm": ["-c:a", "libopus"], "ogg": ["-c:a", "libvorbis"]}
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-i", str(src), *codec.get(fmt, []), str(out)], check=True
    )
    return out.read_bytes()


@pytest.mark.parametrize("fmt", ["wav", "flac", "mp3", "ogg", "m4a", "webm"])
def test_common_formats_become_mono_16bit_wav(fmt, tmp_path):
    data = encode(tone(2.0, 24000, channels=2), 24000, fmt, tmp_path)
    clip = prepare_clip(data, f"upload.{fmt}")
    info = sf.info(io.BytesIO(clip.wav))
    assert info.format == "WAV" and info.subtype == "PCM_16" and info.channels == 1
    # codecs pad a little (priming), and opus always decodes at 48 kHz
    assert 1.9 < clip.duration_s < 2.15, clip
    assert info.samplerate == (48000 if fmt == "webm" else 24000)
    x, _ = sf.read(io.BytesIO(clip.wav))
    assert 0.2 < np.abs(x).max() < 0.4  # the level survives (no normalisation)


def test_stereo_is_mixed_and_silence_trimmed(tmp_path):
    sr = 16000
    left = np.concatenate([np.zeros(2 * sr), tone(1.5, sr), np.zeros(3 * sr)])
    right = np.concatenate([np.zeros(2 * sr), -0.5 * tone(1.5, sr), np.zeros(3 * sr)])
    clip = prepare_clip(encode(np.stack([left, right], 1), sr, "wav", tmp_path), "a.wav")
    assert clip.original_duration_s == pytest.approx(6.5, abs=0.01)
    assert 1.5 <= clip.duration_s <= 1.65  # 1.5 s of sound plus at most 2 x 50 ms pad
    x, _ = sf.read(io.BytesIO(clip.wav))
    assert np.abs(x).max() == pytest.approx(0.075, abs=0.005)  # (0.3 - 0.15) / 2


def test_high_rates_are_resampled_to_48k(tmp_path):
    clip = prepare_clip(encode(tone(1.5, 96000), 96000, "wav", tmp_path))
    assert clip.sample_rate == 48000 and sf.info(io.BytesIO(clip.wav)).samplerate == 48000


def test_the_piper_reference_clip_passes():
    clip = prepare_clip((ASSETS / "reference_joe.mp3").read_bytes(), "reference_joe.mp3")
    assert 4.0 < clip.duration_s < 5.2


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: b"", "empty"),
        (lambda p: b"RIFF\x00\x00garbage" * 50, "not readable audio"),
        (lambda p: b"just some text, not audio\n" * 100, "not readable audio"),
        (lambda p: encode(tone(0.6), 16000, "wav", p), "too short"),
        (lambda p: encode(tone(31.0, 8000), 8000, "wav", p), "too long"),
        (lambda p: encode(np.zeros(16000 * 3), 16000, "wav", p), "silent"),
        (lambda p: b"\x00" * (MAX_UPLOAD_BYTES + 1), "limit"),
    ],
)
def test_bad_clips_are_refused_with_a_clear_message(make, message, tmp_path):
    with pytest.raises(ClipError, match=message):
        prepare_clip(make(tmp_path), "clip.wav")


def test_user_file_names_never_reach_the_filesystem(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = encode(tone(1.5), 16000, "m4a", tmp_path)
    # a temp root of this test's own: other workers of the suite convert clips at the same time
    tmp_root = tmp_path / "tmp"
    tmp_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_root))
    made = []
    real_tmpdir = tempfile.TemporaryDirectory

    def spy(*a, **kw):
        made.append(real_tmpdir(*a, **kw))
        return made[-1]

    monkeypatch.setattr(tempfile, "TemporaryDirectory", spy)
    clip = prepare_clip(data, "../../../../etc/evil name;rm -rf.m4a")
    assert clip.duration_s > 1.4
    assert not list(tmp_path.glob("**/evil*"))
    # ffmpeg worked in a listenlab-clip temp dir, which is removed
    assert [Path(t.name).parent for t in made] == [tmp_root]
    assert Path(made[0].name).name.startswith("listenlab-clip-")
    assert list(tmp_root.iterdir()) == []


def test_trim_silence_keeps_quiet_speech():
    sr = 16000
    x = np.concatenate([np.zeros(sr), tone(1.0, sr, amp=0.02), np.zeros(sr)]).astype(np.float32)
    y = trim_silence(x, sr)
    assert 1.0 <= len(y) / sr <= 1.11


# --------------------------------------------------------------------------- library


@pytest.fixture
def clip(tmp_path):
    return prepare_clip(encode(tone(2.0), 16000, "wav", tmp_path))


def test_library_add_list_rename_delete(tmp_path, clip):
    lib = VoiceLibrary(tmp_path / "voices")
    a = lib.add("Ann", clip, ref_text="Hello there.", consent=True)
    b = lib.add("bob", clip, ref_text="Hi.", consent=True)
    assert [v.name for v in lib.list()] == ["Ann", "bob"]
    assert lib.wav(a.voice_id) == clip.wav
    assert lib.get(b.voice_id).ref_text == "Hi."
    lib.rename(a.voice_id, "Zed")
    assert [v.name for v in lib.list()] == ["bob", "Zed"]
    with pytest.raises(InvalidRequest, match="already exists"):
        lib.rename(b.voice_id, "ZED")
    with pytest.raises(InvalidRequest, match="already exists"):
        lib.add("Bob", clip, ref_text="x", consent=True)
    lib.delete(b.voice_id)
    assert [v.name for v in lib.list()] == ["Zed"]
    assert sorted(p.suffix for p in (tmp_path / "voices").iterdir()) == [".json", ".wav"]
    # a new library object on the same folder sees the same voices
    assert [v.name for v in VoiceLibrary(tmp_path / "voices").list()] == ["Zed"]


def test_library_requires_consent_and_transcript(tmp_path, clip):
    lib = VoiceLibrary(tmp_path)
    with pytest.raises(InvalidRequest, match="consent"):
        lib.add("Ann", clip, ref_text="Hello.", consent=False)
    with pytest.raises(InvalidRequest, match="transcript"):
        lib.add("Ann", clip, ref_text="  ", consent=True)
    assert lib.list() == []


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("../../etc/passwd", "etc passwd"),
        ("  My   Voice  ", "My Voice"),
        ("Zoë's voice", "Zoë's voice"),
        ("a/b\\c\x00d", "a b c d"),
        ("x" * 80, "x" * 48),
        ("...hidden", "hidden"),
    ],
)
def test_names_are_sanitised(raw, clean):
    assert sanitize_name(raw) == clean


@pytest.mark.parametrize("raw", ["", "   ", "../..", "///", "\x00"])
def test_empty_names_are_refused(raw):
    with pytest.raises(InvalidRequest):
        sanitize_name(raw)


def test_ids_not_paths(tmp_path, clip):
    lib = VoiceLibrary(tmp_path / "voices")
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    for bad in ["../secret", "../../etc/passwd", "", "A" * 32, "0" * 31]:
        with pytest.raises(VoiceNotFound):
            lib.get(bad)
        with pytest.raises(VoiceNotFound):
            lib.delete(bad)
    assert secret.exists()
    v = lib.add("../../x", clip, ref_text="t", consent=True)
    assert (tmp_path / "voices" / f"{v.voice_id}.wav").is_file()
    assert remote_name(v).startswith("ll_x_") and "/" not in remote_name(v)
