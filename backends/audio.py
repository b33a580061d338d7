"""The one audio writer and the one bounded decoder: samples to and from file bytes.

Why one writer: takes, stored stimuli, cloned voices' clips, screening tones and ``listenlab
api``'s whole-file answers are all 16-bit files; written in six places they could differ in
subtype, channel layout or in what a half-written file looks like. Here: int16 samples are
written as they are, float samples go through libsndfile's conversion (clipped to [-1, 1]
first), and a file is written to a temporary name beside it and moved into place, so a reader
never sees a half-written file.

Why one decoder: every clip a visitor or a client sends (voice uploads, ``ref_audio`` on the
API, imported stimuli, the embedded engine's reference clips) is untrusted bytes. The container
is detected from the bytes and must be one of :data:`ALLOWED_FORMATS`; the header's rate,
channels and duration are checked before decoding; decoded samples are capped; ffmpeg (the
fallback for m4a/aac and webm/opus) runs only on one local file with a forced demuxer,
``-protocol_whitelist file,pipe`` (no playlists, concat or network) and a time limit.

It lives at the bottom of the import order (``backends``) because every layer reads or writes
audio. soundfile is imported where it is used, so a command that never touches audio does not
pay for it.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import numpy as np

from backends.errors import InvalidRequest

FORMATS = {
    "wav": ("WAV", "PCM_16"),
    "flac": ("FLAC", "PCM_16"),
    "mp3": ("MP3", None),
    "opus": ("OGG", "OPUS"),
}
"""Container and subtype per format name (``pcm`` is raw little-endian int16, no container)."""

# --------------------------------------------------------------------------- writing


def _samples(samples: np.ndarray) -> np.ndarray:
    x = np.asarray(samples)
    if x.dtype == np.int16:
        return x
    return np.clip(x.astype(np.float32, copy=False), -1.0, 1.0)


def encode_audio(samples: np.ndarray, sample_rate: int, fmt: str = "wav") -> bytes:
    """``samples`` (``(frames,)`` or ``(frames, channels)``, int16 or float) as ``fmt`` bytes."""
    if fmt == "pcm":
        x = np.asarray(samples)
        if x.dtype != np.int16:
            x = np.round(np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16)
        return np.ascontiguousarray(x, dtype="<i2").tobytes()
    import soundfile as sf

    container, subtype = FORMATS[fmt]
    buf = io.BytesIO()
    sf.write(buf, _samples(samples), sample_rate, format=container, subtype=subtype)
    return buf.getvalue()


def mp3_available() -> bool:
    """Whether this libsndfile can write MP3 (1.1 and later)."""
    import soundfile as sf

    return "MP3" in sf.available_formats()


def write_audio_file(path: str | Path, samples: np.ndarray, sample_rate: int) -> Path:
    """Write a 16-bit ``.wav`` or ``.flac`` file atomically (temporary name, then rename)."""
    import soundfile as sf

    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("wav", "flac"):
        raise ValueError(f"audio files are .wav or .flac, got {path.name!r}")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp.{fmt}")
    try:
        sf.write(tmp, _samples(samples), sample_rate, format=FORMATS[fmt][0], subtype="PCM_16")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# --------------------------------------------------------------------------- decoding limits

REF_MIN_SECONDS, REF_MAX_SECONDS = 1.0, 30.0
"""A reference clip's length: vLLM-Omni's ``serving_speech.py`` ``_REF_AUDIO_MIN_DURATION`` /
``_REF_AUDIO_MAX_DURATION``."""
MAX_CLIP_BYTES = 10 * 1024 * 1024
"""Largest uploaded clip: vLLM-Omni's ``POST /v1/audio/voices`` limit."""
ALLOWED_FORMATS = ("wav", "flac", "mp3", "ogg", "mp4", "webm")
"""Containers a clip may be in, detected from its bytes (never from its name)."""
MAX_INPUT_SECONDS = 60.0
"""Longest input decoded at all (a clip must be <= 30 s after trimming its silence)."""
MAX_INPUT_RATE = 192_000
MAX_INPUT_CHANNELS = 8
MAX_DECODED_SAMPLES = int(MAX_INPUT_SECONDS * 48_000 * 2)
"""Cap on decoded samples (all channels): 5.8 M float32 = 23 MB, whatever the header says."""
FFMPEG_MAX_RATE = 48000
"""ffmpeg decodes to at most this rate (nothing needs more for a reference clip)."""
FFMPEG_TIMEOUT_S = 30.0
FFMPEG_FORMAT = {"wav": "wav", "flac": "flac", "mp3": "mp3", "ogg": "ogg", "mp4": "mov"}
FFMPEG_FORMAT["webm"] = "matroska"
_FFMPEG_SAFE = ["-v", "error", "-protocol_whitelist", "file,pipe"]


class ClipError(InvalidRequest):
    """The clip cannot be used; the message says why in user terms (never a Python repr)."""


class UnreadableAudio(ClipError):
    """The bytes are not audio this decoder reads; ``why`` says what they are instead."""

    def __init__(self, what: str, why: str, hint: str = ""):
        super().__init__(f"{what} is not readable audio: {why}{hint}")
        self.why = why


# --------------------------------------------------------------------------- decoding


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
            f"(a reference clip must be {REF_MIN_SECONDS:.0f}-{REF_MAX_SECONDS:.0f} s)"
        )


def _cap_frames(rate: int, channels: int) -> int:
    return min(int(MAX_INPUT_SECONDS * rate), MAX_DECODED_SAMPLES // channels)


def _decode_soundfile(data: bytes, what: str, mono: bool = True) -> tuple[np.ndarray, int] | None:
    """Header check, then a bounded read; None when libsndfile cannot open it at all.

    ``mono``: mix down (a reference clip); otherwise keep the channels, shape (frames, ch)."""
    import soundfile as sf

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


def _ffmpeg_command(src: Path, fmt: str, channels: int, out_rate: int) -> list[str]:
    return [
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
        str(channels),
        "-ar",
        str(out_rate),
        "-f",
        "s16le",
        "-acodec",
        "pcm_s16le",
        "pipe:1",
    ]


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
        out_rate = min(rate, FFMPEG_MAX_RATE)
        n_ch = 1 if mono else ch
        try:
            proc = _run_bounded(_ffmpeg_command(src, fmt, n_ch, out_rate))
        except subprocess.TimeoutExpired:
            raise ClipError(
                f"{what} took longer than {FFMPEG_TIMEOUT_S:.0f} s to decode; send a simpler file"
            ) from None
    if proc.returncode != 0 or not proc.stdout:
        return None
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
        hint = (
            "Upload wav, flac, mp3, ogg/opus, m4a or webm"
            if formats == ALLOWED_FORMATS
            else f"Use {' or '.join(formats)}"
        )
        raise UnreadableAudio(what, f"it is {_describe_unknown(data)}", f". {hint}")
    if fmt not in formats:
        raise ClipError(f"{what} is {fmt} audio; only {' or '.join(formats)} is accepted here")
    got = _decode_soundfile(data, what, mono) if fmt in ("wav", "flac", "ogg", "mp3") else None
    if got is None:
        got = _decode_ffmpeg(data, fmt, what, mono)
    if got is None:
        raise UnreadableAudio(
            what,
            f"it looks like {fmt} but cannot be decoded (damaged or an unsupported codec)",
        )
    return got[0], got[1], fmt


__all__ = [
    "ALLOWED_FORMATS",
    "FORMATS",
    "MAX_CLIP_BYTES",
    "MAX_INPUT_SECONDS",
    "REF_MAX_SECONDS",
    "REF_MIN_SECONDS",
    "ClipError",
    "UnreadableAudio",
    "decode_audio",
    "decode_mono",
    "encode_audio",
    "mp3_available",
    "sniff_format",
    "write_audio_file",
]
