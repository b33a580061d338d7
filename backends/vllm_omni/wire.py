"""vLLM-Omni's speech API on the wire: every format both written and parsed here.

Why one module: ``listenlab api`` writes these bytes and the remote backend
(:mod:`backends.vllm_omni.remote`) reads them. Written in one place and parsed in another, the two
could drift apart and a round trip through ``listenlab api`` would still pass while a real
server failed. Here each format has its writer beside its parser, and
``tests/test_vllm_omni_wire.py`` writes with one and reads with the other.

The formats follow vLLM-Omni (``shared/reference/vllm-omni-speech-api.md`` §2-§5):

* the 44-byte **streaming WAV header** whose sizes are the ``0xFFFFFFFF`` placeholder
  (:func:`wav_stream_header` / :func:`parse_wav_header`);
* **SSE events**: an ``event:`` line, one compact ``data:`` line, a blank line; the speech events
  ``speech.audio.delta`` / ``.done`` / ``.error`` (:func:`sse_event`, :func:`audio_delta`, … /
  :class:`SseParser`, :func:`speech_event`, …);
* **error bodies**: OpenAI's ``{"error": {message, type, param, code}}`` (:func:`error_body` /
  :func:`error_message`, which also reads FastAPI's and older shapes);
* the **WebSocket** session's JSON messages (:func:`ws_message` and friends);
* ``ref_audio`` as a **data URL** (:func:`ref_audio_url` / :func:`parse_ref_audio_url`);
* the **content types** of each ``response_format`` (:data:`CONTENT_TYPES` / :func:`body_kind`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
from dataclasses import dataclass
from typing import Any

from backends.errors import BackendError, InvalidRequest

# --------------------------------------------------------------------------- content types

CONTENT_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
}
"""The ``Content-Type`` of each ``response_format``."""
SSE_TYPE = "text/event-stream"
WAV_TYPES = frozenset({"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"})
PCM_TYPES = frozenset({"audio/pcm", "audio/l16", "application/octet-stream", "audio/raw"})


def body_kind(content_type: str) -> str | None:
    """How a speech response body must be read, from its ``Content-Type``: ``"sse"``,
    ``"wav"`` or ``"pcm"`` (a stream), ``"file"`` (another ``audio/*``: a whole file), or
    None (not audio: an error body)."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == SSE_TYPE:
        return "sse"
    if ctype in WAV_TYPES:
        return "wav"
    if ctype in PCM_TYPES:
        return "pcm"
    if ctype.startswith("audio/"):
        return "file"
    return None


# --------------------------------------------------------------------------- streaming WAV header

WAV_PLACEHOLDER = 0xFFFFFFFF
"""The RIFF and data sizes of a streaming WAV header: the length is not known yet."""
MAX_WAV_HEADER = 64 * 1024


def wav_stream_header(sample_rate: int, channels: int) -> bytes:
    """The 44-byte streaming header: RIFF and data sizes are the 0xFFFFFFFF placeholder."""
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        WAV_PLACEHOLDER,
        b"WAVE",
        b"fmt ",
        16,
        1,
        channels,
        sample_rate,
        sample_rate * channels * 2,
        channels * 2,
        16,
        b"data",
        WAV_PLACEHOLDER,
    )


@dataclass(frozen=True)
class WavFormat:
    sample_rate: int
    channels: int
    data_offset: int


IGNORED_WAV = "although WAV was requested (it ignored response_format)"


def not_wav_message(buf: bytes) -> str:
    """Why a stream that should be WAV is not: name what the server sent instead."""
    kind = "raw PCM"
    if buf[:3] == b"ID3" or buf[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        kind = "MP3"
    elif buf[:4] == b"OggS":
        kind = "Ogg audio"
    elif buf[:4] == b"fLaC":
        kind = "FLAC"
    return (
        f"the server sent {kind} {IGNORED_WAV}; set format=pcm (and pin sample_rate=…) to play it"
    )


def _check_fmt(fmt: tuple[int, ...]) -> None:
    tag, ch, sr, _, _, bits = fmt
    if tag not in (1, 0xFFFE) or bits != 16:
        raise BackendError(f"the server's WAV stream is not 16-bit PCM (format {tag}, {bits} bits)")
    if not 1 <= ch <= 8:
        raise BackendError(f"the server's WAV header says {ch} channels")
    if not 1000 <= sr <= 384000:
        raise BackendError(f"the server's WAV header has an impossible sample rate: {sr} Hz")


def parse_wav_header(buf: bytes) -> WavFormat | None:
    """Parse a RIFF/WAVE header, or return None if ``buf`` does not hold all of it yet.

    Sizes are ignored (streaming headers carry ``0xFFFFFFFF``); only the ``fmt `` chunk matters.
    Anything that is not 16-bit integer PCM with a plausible rate raises :class:`BackendError`.
    """
    if len(buf) < 12:
        return None
    if buf[:4] != b"RIFF" or buf[8:12] != b"WAVE":
        raise BackendError(not_wav_message(buf))
    pos, fmt = 12, None
    while True:
        if len(buf) < pos + 8:
            return None
        cid, size = buf[pos : pos + 4], struct.unpack("<I", buf[pos + 4 : pos + 8])[0]
        if cid == b"data":
            if fmt is None:
                raise BackendError("the server's WAV stream has no fmt chunk before its data")
            _check_fmt(fmt)
            return WavFormat(fmt[2], fmt[1], pos + 8)
        if size == WAV_PLACEHOLDER:
            raise BackendError(f"the server's WAV header has a placeholder size on chunk {cid!r}")
        end = pos + 8 + size + (size & 1)
        if len(buf) < end:
            return None
        if cid == b"fmt ":
            if size < 16:
                raise BackendError("the server's WAV fmt chunk is truncated")
            fmt = struct.unpack("<HHIIHH", buf[pos + 8 : pos + 24])
        pos = end
        if pos > MAX_WAV_HEADER:
            raise BackendError("the server's WAV header is larger than 64 KiB")


# --------------------------------------------------------------------------- SSE framing


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str


def sse_event(name: str, payload: dict[str, Any]) -> bytes:
    """One event: an ``event:`` line, one compact ``data:`` line, a blank line (no [DONE])."""
    return f"event: {name}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


MAX_SSE_LINE = 16 * 1024 * 1024


class SseParser:
    """Incremental ``text/event-stream`` parser (WHATWG rules: any line ending, multi-line data)."""

    def __init__(self) -> None:
        self._buf = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, data: bytes) -> list[SseEvent]:
        self._buf += data
        out: list[SseEvent] = []
        while True:
            i = min(
                (j for j in (self._buf.find(b"\n"), self._buf.find(b"\r")) if j >= 0), default=-1
            )
            if i < 0:
                break
            line, rest = self._buf[:i], self._buf[i + 1 :]
            if self._buf[i : i + 1] == b"\r":
                if not rest:  # a lone \r at the end may be the first half of \r\n
                    break
                if rest[:1] == b"\n":
                    rest = rest[1:]
            self._buf = rest
            ev = self._line(line.decode("utf-8", "replace"))
            if ev:
                out.append(ev)
        if len(self._buf) > MAX_SSE_LINE:
            raise BackendError("malformed SSE: a line longer than 16 MiB")
        return out

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            if not self._data and not self._event:
                return None
            ev = SseEvent(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return ev
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

    @property
    def pending(self) -> bool:
        return bool(self._buf.strip() or self._data or self._event)


# --------------------------------------------------------------------------- speech events

DELTA = "speech.audio.delta"
DONE = "speech.audio.done"
ERROR = "speech.audio.error"

NO_USAGE: dict[str, Any] = {
    "input_tokens": 0,
    "output_tokens": 0,
    "total_tokens": 0,
    "input_token_details": {"text_tokens": 0, "audio_tokens": 0},
}
"""``speech.audio.done``'s usage when nothing was counted (listenlab's voices have no tokens)."""

USAGE_HEADERS = {
    "X-VLLM-OMNI-INPUT-TOKENS": "0",
    "X-VLLM-OMNI-OUTPUT-TOKENS": "0",
    "X-VLLM-OMNI-TOTAL-TOKENS": "0",
    "X-VLLM-OMNI-INPUT-TEXT-TOKENS": "0",
    "X-VLLM-OMNI-INPUT-AUDIO-TOKENS": "0",
}
"""vLLM-Omni 0.30.0 sends its token usage on whole-file answers; listenlab's voices have no
tokens, so the same headers say 0 (as vLLM-Omni's do when it cannot count), like
:data:`NO_USAGE` in ``speech.audio.done``. Over a remote vLLM-Omni the server's own counts are
passed on (:func:`usage_headers`)."""

USAGE_FIELDS = (
    ("X-VLLM-OMNI-INPUT-TOKENS", ("input_tokens",)),
    ("X-VLLM-OMNI-OUTPUT-TOKENS", ("output_tokens",)),
    ("X-VLLM-OMNI-TOTAL-TOKENS", ("total_tokens",)),
    ("X-VLLM-OMNI-INPUT-TEXT-TOKENS", ("input_token_details", "text_tokens")),
    ("X-VLLM-OMNI-INPUT-AUDIO-TOKENS", ("input_token_details", "audio_tokens")),
)
"""Each usage header and where its count sits in ``speech.audio.done``'s ``usage``."""


def usage_headers(usage: dict[str, Any] | None) -> dict[str, str]:
    """The usage headers for ``usage`` (an upstream server's counts), zeros when None."""
    if not isinstance(usage, dict):
        return dict(USAGE_HEADERS)
    out = {}
    for header, path in USAGE_FIELDS:
        value: Any = usage
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        out[header] = str(int(value)) if isinstance(value, int | float) else "0"
    return out


def usage_from_headers(headers: Any) -> dict[str, Any] | None:
    """A whole-file answer's usage headers as ``speech.audio.done``'s ``usage`` (None when the
    server sent none)."""
    counts = {}
    for header, path in USAGE_FIELDS:
        raw = headers.get(header)
        if raw is None:
            continue
        try:
            counts[path] = int(raw)
        except ValueError:
            continue
    if not counts:
        return None
    usage: dict[str, Any] = {"input_token_details": {}}
    for path, n in counts.items():
        (usage if len(path) == 1 else usage["input_token_details"])[path[-1]] = n
    return usage


def audio_delta(data: bytes, response_format: str) -> bytes:
    """A ``speech.audio.delta`` event carrying ``data`` (for wav, the first holds the header)."""
    payload = {
        "type": DELTA,
        "audio": base64.b64encode(data).decode(),
        "response_format": response_format,
    }
    return sse_event(DELTA, payload)


def audio_done(usage: dict[str, Any] | None = None) -> bytes:
    """The terminal ``speech.audio.done`` event."""
    return sse_event(DONE, {"type": DONE, "usage": NO_USAGE if usage is None else usage})


def audio_error(message: str, *, partial_audio: bool = True) -> bytes:
    """The terminal ``speech.audio.error`` event; ``partial_audio`` asks the client to discard
    the audio it already has (a response that started always has some)."""
    payload: dict[str, Any] = {
        "type": ERROR,
        "error": {"message": message, "type": "server_error", "param": None, "code": 500},
    }
    if partial_audio:
        payload.update(partial_audio=True, action="discard")
    return sse_event(ERROR, payload)


def speech_event(ev: SseEvent) -> tuple[str, dict[str, Any]]:
    """``(kind, payload)`` of one speech event: its JSON object and its ``type`` (else the
    event name). Malformed data raises :class:`BackendError`."""
    try:
        payload = json.loads(ev.data)
    except ValueError:
        raise BackendError(f"malformed SSE: event data is not JSON: {ev.data[:120]!r}") from None
    if not isinstance(payload, dict):
        raise BackendError(f"malformed SSE: event data is not an object: {ev.data[:120]!r}")
    return payload.get("type") or ev.event, payload


def delta_audio(payload: dict[str, Any]) -> bytes:
    """The bytes of a ``speech.audio.delta`` payload (strict base64)."""
    audio = payload.get("audio")
    if not isinstance(audio, str):
        raise BackendError("malformed SSE: speech.audio.delta without an 'audio' string")
    try:
        return base64.b64decode(audio, validate=True)
    except ValueError:
        raise BackendError("malformed SSE: speech.audio.delta audio is not base64") from None


@dataclass(frozen=True)
class ErrorEvent:
    """What a ``speech.audio.error`` event says."""

    message: str
    code: int | None
    discard: bool
    """The server asked to discard the audio sent so far (``partial_audio``)."""

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> ErrorEvent:
        err = payload.get("error") if isinstance(payload.get("error"), dict) else {}
        message = str(err.get("message") or payload.get("error") or "unknown error")
        code = err.get("code") if isinstance(err.get("code"), int) else None
        discard = bool(payload.get("partial_audio") or err.get("partial_audio"))
        return cls(message, code, discard)


# --------------------------------------------------------------------------- error bodies


def error_body(
    message: str, type_: str = "BadRequestError", code: int = 400, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape, as vLLM-Omni answers every failed request."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _detail_message(det: Any) -> str:
    if not isinstance(det, list):
        return str(det)
    parts = []
    for item in det:
        if isinstance(item, dict):
            loc = ".".join(str(x) for x in item.get("loc", ()) if x != "body")
            parts.append(f"{loc}: {item.get('msg', item)}" if loc else str(item.get("msg")))
        else:
            parts.append(str(item))
    return "; ".join(parts)


def error_message(body: bytes | str, status: int | None = None) -> str:
    """The server's own words from any error shape vLLM-Omni (or FastAPI) uses.

    OpenAI ``{"error":{message,type,param,code}}``, FastAPI ``{"detail": str|list}``, the old
    voice-delete ``{"success":false,"error":"…"}``, or plain text.
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        d = json.loads(text)
    except ValueError:
        d = None
    msg: str
    if isinstance(d, dict) and isinstance(d.get("error"), dict):
        e = d["error"]
        msg = str(e.get("message") or e)
        if e.get("type"):
            msg = f"{e['type']}: {msg}"
        if e.get("param"):
            msg += f" (param {e['param']})"
    elif isinstance(d, dict) and isinstance(d.get("error"), str):
        msg = d["error"]
    elif isinstance(d, dict) and "detail" in d:
        msg = _detail_message(d["detail"])
    elif isinstance(d, dict) and "message" in d:
        msg = str(d["message"])
    else:
        msg = text.strip()[:500] or "(empty body)"
    return f"server answered {status}: {msg}" if status is not None else msg


# --------------------------------------------------------------------------- WebSocket messages

SESSION_CONFIG = "session.config"
INPUT_TEXT = "input.text"
INPUT_DONE = "input.done"
SESSION_CLOSE = "session.close"
AUDIO_START = "audio.start"
AUDIO_CHUNK = "audio.chunk"
AUDIO_DONE = "audio.done"
SESSION_DONE = "session.done"
WS_ERROR = "error"


def ws_message(kind: str, **fields: Any) -> dict[str, Any]:
    """One JSON message of the WebSocket session: its ``type`` first, then its fields."""
    return {"type": kind, **fields}


def ws_audio_start(
    utterance: int, sentence: int, text: str, response_format: str
) -> dict[str, Any]:
    """``audio.start`` before a unit's audio; :func:`state_format` adds its rate and channels."""
    return ws_message(
        AUDIO_START,
        utterance_index=utterance,
        sentence_index=sentence,
        sentence_text=text,
        format=response_format,
    )


def state_format(start: dict[str, Any], sample_rate: int, channels: int) -> None:
    """Make an ``audio.start`` state the PCM format (listenlab api sends it deferred, with the
    first audio, so it is the real one)."""
    start["sample_rate"], start["channels"] = sample_rate, channels


def stated_format(start: dict[str, Any]) -> tuple[int, int] | None:
    """``(sample_rate, channels)`` when an ``audio.start`` states both, else None.

    vLLM-Omni 0.30.0 sends ``audio.start`` before generating with a nominal ``sample_rate``
    and no ``channels`` (``serving_speech_stream.py`` ``_PCM_SAMPLE_RATE``): not a statement.
    """
    sr, ch = start.get("sample_rate"), start.get("channels")
    if isinstance(sr, int) and sr > 0 and isinstance(ch, int) and ch > 0:
        return sr, ch
    return None


def ws_audio_done(utterance: int, sentence: int, total_bytes: int, error: bool) -> dict[str, Any]:
    return ws_message(
        AUDIO_DONE,
        utterance_index=utterance,
        sentence_index=sentence,
        total_bytes=total_bytes,
        error=error,
    )


def ws_session_done(utterance: int, total_sentences: int) -> dict[str, Any]:
    return ws_message(SESSION_DONE, utterance_index=utterance, total_sentences=total_sentences)


def ws_error(message: str, **extra: Any) -> dict[str, Any]:
    """An ``error`` message (``partial_audio``/``action`` when audio must be discarded)."""
    return ws_message(WS_ERROR, message=message, **extra)


# --------------------------------------------------------------------------- ref_audio data URLs

_DATA_URL = re.compile(r"(?is)^data:([^;,]*)(;[^,]*)?,(.*)$")


def ref_audio_url(wav: bytes) -> str:
    """A reference clip inline, as the remote backend sends it."""
    return "data:audio/wav;base64," + base64.b64encode(wav).decode("ascii")


def parse_ref_audio_url(ref: str | list[str]) -> bytes:
    """The clip bytes of an inline ``data:<mime>;base64,…`` URL.

    listenlab fetches nothing: ``http(s)://`` and ``file://`` references are refused, as is a
    list (vLLM-Omni's multi-speaker form). Synchronous and linear in the URL's length (megabytes
    for a long clip): callers run it off the event loop.
    """
    if isinstance(ref, list):
        raise InvalidRequest(
            "ref_audio as a list is only for multi-speaker models; send one data: URL"
        )
    scheme = ref.split(":", 1)[0].lower()
    if scheme in ("http", "https", "file") or "://" in ref[:10]:
        raise InvalidRequest(
            f"ref_audio with scheme {scheme!r} is not accepted by listenlab api; "
            "send it inline as data:audio/wav;base64,…"
        )
    m = _DATA_URL.match(ref)
    if not m or "base64" not in (m.group(2) or "").lower():
        raise InvalidRequest("ref_audio must be a data:<mime>;base64,… URL")
    try:
        return base64.b64decode(m.group(3), validate=False)
    except (binascii.Error, ValueError):
        raise InvalidRequest("ref_audio is not valid base64") from None


__all__ = [
    "AUDIO_DONE",
    "AUDIO_START",
    "CONTENT_TYPES",
    "DELTA",
    "DONE",
    "ERROR",
    "INPUT_DONE",
    "INPUT_TEXT",
    "NO_USAGE",
    "USAGE_FIELDS",
    "SESSION_CLOSE",
    "SESSION_CONFIG",
    "SESSION_DONE",
    "SSE_TYPE",
    "USAGE_HEADERS",
    "usage_from_headers",
    "usage_headers",
    "WAV_PLACEHOLDER",
    "WS_ERROR",
    "ErrorEvent",
    "SseEvent",
    "SseParser",
    "WavFormat",
    "audio_delta",
    "audio_done",
    "audio_error",
    "body_kind",
    "delta_audio",
    "error_body",
    "error_message",
    "not_wav_message",
    "parse_ref_audio_url",
    "parse_wav_header",
    "ref_audio_url",
    "speech_event",
    "sse_event",
    "state_format",
    "stated_format",
    "wav_stream_header",
    "ws_audio_done",
    "ws_audio_start",
    "ws_error",
    "ws_message",
    "ws_session_done",
]
