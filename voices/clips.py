"""Reference clips for cloning: decode anything common, trim silence, validate, emit mono WAV.

Why these rules: vLLM-Omni refuses references outside 1-30 s and uploads over 10 MB
(``/v1/audio/voices``), and every engine wants mono 16-bit PCM. Checking here gives the user a
clear message *before* a remote server answers with a 400, and means a clip that passes plays
the same on every backend. Decoding is soundfile first (wav, flac, ogg, mp3 with libsndfile
>= 1.1) and ffmpeg as the fallback (m4a/aac, webm/opus from the browser recorder, odd wavs).

Every byte is untrusted (a public Space): the container is detected from the bytes and must be
one of :data:`ALLOWED_FORMATS`; ffmpeg runs only on one local file with a forced demuxer and
``-protocol_whitelist file,pipe`` (no playlists, concat or network); the header's rate,
channels and duration are checked before decoding and decoded samples are capped.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from backends.audio import encode_audio
from backends.errors import InvalidRequest

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
"""Same limit as vLLM-Omni's ``POST /v1/audio/voices``."""
MIN_SECONDS = 1.0
MAX_SECONDS = 30.0
MAX_RATE = 48000
"""Clips above this rate are resampled down (soxr); nothing needs more for a reference."""
SILENCE_DBFS = -45.0
"""Frames quieter than this (RMS over 10 ms windows) at the clip's ends are trimmed."""
FFMPEG_TIMEOUT_S = 30.0


class ClipError(InvalidRequest):
    """The uploaded clip cannot be used; the message says why in user terms."""


@dataclass(frozen=True)
class Clip:
    """A validated reference clip: mono 16-bit WAV bytes plus what was done to it."""

    wav: bytes
    sample_rate: int
    duration_s: float
    original_duration_s: float
    source_format: str

    @property
    def trimmed_s(self) -> float:
        return round(self.original_duration_s - self.duration_s, 3)


# --------------------------------------------------------------------------- safe decoding

ALLOWED_FORMATS = ("wav", "flac", "mp3", "ogg", "mp4", "webm")
"""Containers a clip may be in, detected from its bytes (never from its name)."""
MAX_INPUT_SECONDS = 60.0
"""Longest input decoded at all (a clip must be <= 30 s after trimming its silence)."""
MAX_INPUT_RATE = 192_000
MAX_INPUT_CHANNELS = 8
MAX_DECODED_SAMPLES = int(MAX_INPUT_SECONDS * 48_000 * 2)
"""Cap on decoded samples (all channels): 5.8 M float32 = 23 MB, whatever the header says."""
FFMPEG_FORMAT = {"wav": "wav", "flac": "flac", "mp3": "mp3", "ogg": "ogg", "mp4": "mov"}
FFMPEG_FORMAT["webm"] = "matroska"
_FFMPEG_SAFE = ["-v", "error", "-protocol_whitelist", "file,pipe"]


def sniff_format(data: bytes) -> str | None:
    """The container from the magic bytes, or None: a playlist, a text or an unknown format.

    Why bytes, not names: ffmpeg picks its demuxer from the content, so an HLS playlist named
    ``clip.wav`` would be followed to any local file it lists.
    """
    head = data[:64]
    if head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE":
        return "wav"
    if head[:4] == b"fLaC":
        return "flac"
    if head[:4] == b"OggS":
        return "ogg"
    if head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "mp3"
    if head[4:8] == b"ftyp":
        return "mp4"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "webm"
    return None


def _describe_unknown(data: bytes) -> str:
    head = data[:16].lstrip()
    if head.startswith(b"#EXTM3U") or head.startswith(b"#EXT"):
        return "a playlist (HLS/m3u), not audio"
    if head.startswith(b"ffconcat") or head.startswith(b"file "):
        return "a concat script, not audio"
    try:
        data[:256].decode("utf-8")
        return "text, not audio"
    except UnicodeDecodeError:
        return "an unknown format"


def _check_header(what: str, rate: int, channels: int, seconds: float | None) -> None:
    """Refuse from the header alone: a tiny file can claim hours of 8-channel 192 kHz audio."""
    if rate <= 0 or channels <= 0:
        raise ClipError(f"{what} has no audio stream (rate {rate}, {channels} channels)")
    if rate > MAX_INPUT_RATE:
        raise ClipError(f"{what} has a sample rate of {rate} Hz; at most {MAX_INPUT_RATE} Hz")
    if channels > MAX_INPUT_CHANNELS:
        raise ClipError(f"{what} has {channels} channels; at most {MAX_INPUT_CHANNELS}")
    if seconds is not None and seconds > MAX_INPUT_SECONDS:
        raise ClipError(
            f"{what} is {seconds:.0f} s long; at most {MAX_INPUT_SECONDS:.0f} s is accepted "
            f"(a reference clip must be {MIN_SECONDS:.0f}-{MAX_SECONDS:.0f} s)"
        )


def _cap_frames(rate: int, channels: int) -> int:
    return min(int(MAX_INPUT_SECONDS * rate), MAX_DECODED_SAMPLES // channels)


def _decode_soundfile(data: bytes, what: str, mono: bool = True) -> tuple[np.ndarray, int] | None:
    """Header check, then a bounded read; None when libsndfile cannot open it at all.

    ``mono``: mix down (a reference clip); otherwise keep the channels, shape (frames, ch)."""
    try:
        f = sf.SoundFile(io.BytesIO(data))
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError):
        return None
    with f:
        sr, ch = int(f.samplerate), int(f.channels)
        frames = int(f.frames) if 0 < f.frames < 2**62 else None
        _check_header(what, sr, ch, None if frames is None else frames / sr)
        cap = _cap_frames(sr, ch)
        blocks, n = [], 0
        try:
            while True:  # a header may lie about its length: read in blocks up to the cap
                b = f.read(min(65536, cap + 1 - n), dtype="float32", always_2d=True)
                if not len(b):
                    break
                blocks.append(b.mean(axis=1, dtype=np.float32) if mono else b)
                n += len(b)
                if n > cap:
                    raise ClipError(
                        f"{what} decodes to more than {MAX_INPUT_SECONDS:.0f} s of audio; "
                        "send a shorter clip"
                    )
        except (sf.LibsndfileError, RuntimeError) as e:
            if not blocks:
                return None
            raise ClipError(f"{what} is damaged after {n / sr:.1f} s ({e})") from None
    if not blocks:
        return (np.zeros(0 if mono else (0, ch), np.float32)), sr
    return np.concatenate(blocks), sr


def _run_bounded(cmd: list[str]) -> subprocess.CompletedProcess[bytes]:
    """ffmpeg/ffprobe with no stdin and a time bound, so a hostile file cannot hang a worker."""
    return subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=FFMPEG_TIMEOUT_S, check=False
    )


def _ffprobe(path: Path, fmt: str) -> tuple[int, int, float | None] | None:
    cmd = [
        "ffprobe",
        *_FFMPEG_SAFE,
        "-f",
        FFMPEG_FORMAT[fmt],
        "-select_streams",
        "a:0",
        "-show_entries",
        "stream=sample_rate,channels,duration:format=duration",
        "-of",
        "json",
        str(path),
    ]
    try:
        proc = _run_bounded(cmd)
        info = json.loads(proc.stdout or b"{}")
    except (subprocess.TimeoutExpired, ValueError):
        return None
    streams = info.get("streams") or []
    if proc.returncode != 0 or not streams:
        return None
    st = streams[0]

    def num(v: object) -> float | None:
        try:
            return float(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None

    dur = num(st.get("duration")) or num((info.get("format") or {}).get("duration"))
    return int(num(st.get("sample_rate")) or 0), int(st.get("channels") or 0), dur


def _decode_ffmpeg(
    data: bytes, fmt: str, what: str, mono: bool = True
) -> tuple[np.ndarray, int] | None:
    """ffmpeg on one local file, demuxer forced, no other protocol, output capped by ``-t``."""
    if shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="listenlab-clip-") as tmp:
        src = Path(tmp) / "input"  # no user name and no extension ever reaches the disk
        src.write_bytes(data)
        probed = _ffprobe(src, fmt)
        if probed is None:
            return None
        rate, ch, dur = probed
        _check_header(what, rate, ch, dur)
        out_rate = min(rate, MAX_RATE)
        cmd = [
            "ffmpeg",
            "-nostdin",
            *_FFMPEG_SAFE,
            "-f",
            FFMPEG_FORMAT[fmt],
            "-i",
            str(src),
            "-map",
            "0:a:0",
            "-t",
            f"{MAX_INPUT_SECONDS + 0.5:.1f}",
            "-ac",
            "1" if mono else str(ch),
            "-ar",
            str(out_rate),
            "-f",
            "s16le",
            "-acodec",
            "pcm_s16le",
            "pipe:1",
        ]
        try:
            proc = _run_bounded(cmd)
        except subprocess.TimeoutExpired:
            raise ClipError(
                f"{what} took longer than {FFMPEG_TIMEOUT_S:.0f} s to decode; send a simpler file"
            ) from None
    if proc.returncode != 0 or not proc.stdout:
        return None
    n_ch = 1 if mono else ch
    pcm = np.frombuffer(proc.stdout[: len(proc.stdout) // (2 * n_ch) * 2 * n_ch], dtype="<i2")
    if len(pcm) > MAX_INPUT_SECONDS * out_rate * n_ch:
        raise ClipError(
            f"{what} decodes to more than {MAX_INPUT_SECONDS:.0f} s of audio; send a shorter clip"
        )
    out = pcm.astype(np.float32) / 32768.0
    return (out if mono else out.reshape(-1, n_ch)), out_rate


def decode_mono(data: bytes, what: str = "the clip") -> tuple[np.ndarray, int, str]:
    """Decode an untrusted clip to float32 mono: ``(samples, rate, container)``.

    Only :data:`ALLOWED_FORMATS`, detected from the bytes; the header's rate, channels and
    duration are checked before any decoding, and at most :data:`MAX_DECODED_SAMPLES` are
    decoded. Raises :class:`ClipError` with a message for the user (never a Python repr).
    """
    return decode_audio(data, what, mono=True)


def decode_audio(
    data: bytes,
    what: str = "the clip",
    *,
    mono: bool = False,
    formats: tuple[str, ...] = ALLOWED_FORMATS,
) -> tuple[np.ndarray, int, str]:
    """:func:`decode_mono`'s checks, keeping the channels unless ``mono``: float32 samples,
    shape ``(frames, channels)`` (``(frames,)`` when ``mono``). ``formats`` narrows the
    accepted containers (listening-test stimuli: wav and flac only)."""
    if not data:
        raise ClipError(f"{what} is empty (0 bytes)")
    fmt = sniff_format(data)
    if fmt is None:
        raise ClipError(
            f"{what} is not readable audio: it is {_describe_unknown(data)}. "
            + (
                "Upload wav, flac, mp3, ogg/opus, m4a or webm"
                if formats == ALLOWED_FORMATS
                else f"Use {' or '.join(formats)}"
            )
        )
    if fmt not in formats:
        raise ClipError(f"{what} is {fmt} audio; only {' or '.join(formats)} is accepted here")
    got = _decode_soundfile(data, what, mono) if fmt in ("wav", "flac", "ogg", "mp3") else None
    if got is None:
        got = _decode_ffmpeg(data, fmt, what, mono)
    if got is None:
        raise ClipError(
            f"{what} is not readable audio: it looks like {fmt} but cannot be decoded "
            "(damaged or an unsupported codec)"
        )
    return got[0], got[1], fmt


def trim_silence(mono: np.ndarray, sr: int, threshold_dbfs: float = SILENCE_DBFS) -> np.ndarray:
    """Cut leading/trailing frames whose 10 ms RMS is below the threshold (keep 50 ms pad)."""
    win = max(1, sr // 100)
    n = len(mono) // win
    if n == 0:
        return mono[:0]
    rms = np.sqrt(np.mean(mono[: n * win].reshape(n, win) ** 2, axis=1) + 1e-12)
    loud = np.flatnonzero(20 * np.log10(rms) > threshold_dbfs)
    if not len(loud):
        return mono[:0]
    pad = sr // 20
    start = max(0, loud[0] * win - pad)
    end = min(len(mono), (loud[-1] + 1) * win + pad)
    return mono[start:end]


def prepare_clip(data: bytes, filename: str | None = None) -> Clip:
    """Validate and convert an uploaded or recorded clip, or raise :class:`ClipError`.

    ``filename`` is not used to decode (the format comes from the bytes); it is accepted so
    callers can pass what the browser sent.
    """
    if not data:
        raise ClipError("the clip is empty (0 bytes)")
    if len(data) > MAX_UPLOAD_BYTES:
        raise ClipError(
            f"the clip is {len(data) / 1e6:.1f} MB; the limit is {MAX_UPLOAD_BYTES // 2**20} MB"
        )
    mono, sr, fmt = decode_mono(data, "the clip")
    if mono.size == 0:
        raise ClipError("the clip contains no audio samples")
    if not np.all(np.isfinite(mono)):
        raise ClipError("the clip contains invalid (non-finite) samples")
    original = len(mono) / sr
    if sr > MAX_RATE:
        import soxr

        mono = soxr.resample(mono, sr, MAX_RATE).astype(np.float32)
        sr = MAX_RATE
    mono = trim_silence(mono, sr)
    dur = len(mono) / sr
    if dur == 0:
        raise ClipError("the clip is silent: no speech found after trimming silence")
    if dur < MIN_SECONDS:
        raise ClipError(
            f"the clip is too short: {dur:.2f} s of sound after trimming silence "
            f"(at least {MIN_SECONDS:.0f} s needed)"
        )
    if dur > MAX_SECONDS:
        raise ClipError(
            f"the clip is too long: {dur:.1f} s after trimming silence "
            f"(at most {MAX_SECONDS:.0f} s); cut it shorter"
        )
    return Clip(encode_audio(mono, sr), sr, round(dur, 3), round(original, 3), fmt)


__all__ = [
    "ALLOWED_FORMATS",
    "Clip",
    "ClipError",
    "MAX_INPUT_SECONDS",
    "MAX_SECONDS",
    "MAX_UPLOAD_BYTES",
    "MIN_SECONDS",
    "decode_audio",
    "decode_mono",
    "prepare_clip",
    "sniff_format",
]
