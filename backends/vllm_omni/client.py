"""Remote engine: a vLLM-Omni (or ``listenlab api``) server over HTTP/SSE, raw audio or WebSocket.

Spec: ``vllm-omni+http://host:port[/prefix]?model=…&mode=sse|audio|ws&format=pcm|wav
&sample_rate=…&voice=…&connect_timeout=…&first_audio_timeout=…&chunk_timeout=…``

The server's streaming protocol has traps (``shared/reference/vllm-omni-speech-api.md`` §3, §4,
§11); each one is handled here on purpose:

* ``stream:true`` means SSE on new servers and raw PCM on old ones, so ``stream_format`` is
  always sent and the body is parsed by its *response* ``Content-Type``.
* Raw streams have no end or error marker: a cut connection (or a body ending mid-frame) is a
  failure, never a short success. SSE needs exactly one terminal event; EOF without one fails.
* The sample rate is not announced for pcm. It comes from the stream (WAV header, WebSocket
  ``audio.start``), else a pinned ``sample_rate``, else the server's model card, else the
  model table (:mod:`backends.vllm_omni.model_table`). The 44-byte streaming WAV header has placeholder sizes (``0xFFFFFFFF``):
  its sizes are ignored, and a WAV stream's first SSE delta holds only that header.
* Network reads split samples (and stereo frames): partial frames are carried over.
* Generic server failures come back as 400 ``"Speech generation failed: …"``: every non-2xx
  becomes :class:`BackendError` with the server's message and ``status``.

Timeouts are per phase (connect, first audio, between chunks) and count *audio progress*, not
bytes, so a server dripping one byte per second is caught too.

The bytes themselves (WAV header, SSE events, error bodies, WebSocket messages) are read with
:mod:`backends.vllm_omni.wire`, the module ``listenlab api`` writes them with, and the request
body is :func:`backends.vllm_omni.request.request_fields`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import numpy as np

from backends.base import Audio, AudioChunk, Backend, Capabilities, Health, SpeechRequest, Voice
from backends.errors import BackendError, InvalidRequest, StreamTimeout, UnknownVoice
from backends.registry import register
from backends.vllm_omni import wire
from backends.vllm_omni.model_table import (
    SpeechRules,
    clones,
    model_facts,
    speech_rules,
    table_format,
)
from backends.vllm_omni.request import HTTP_EXTRA, WS_EXTRA, request_fields
from backends.vllm_omni.rules import max_new_tokens_error, sample_rate_error
from backends.vllm_omni.wire import (
    ErrorEvent,
    SseParser,
    body_kind,
    error_message,
    not_wav_message,
    parse_wav_header,
)

MODES = ("sse", "audio", "ws")
FORMATS = ("pcm", "wav")

MIN_CHUNK_MS = 10.0
"""Raw streams are cut into chunks of at least this much audio (except the last)."""

# --------------------------------------------------------------------------- pcm framing


@dataclass(frozen=True)
class AssumedFormatChunk(AudioChunk):
    """A chunk whose rate/channels the stream did not state; ``assumed_format`` says from what
    they were taken (the Playground's card shows it, via the ``start`` message)."""

    assumed_format: str | None = None


@dataclass
class _Framer:
    """Turns byte pieces into whole-frame :class:`AudioChunk` s; carries partial frames over."""

    min_bytes_ms: float = MIN_CHUNK_MS
    sample_rate: int | None = None
    channels: int | None = None
    buf: bytearray = field(default_factory=bytearray)
    index: int = 0
    total_bytes: int = 0
    assumed: str | None = None
    """Set when the rate/channels were not read from the stream: from what they were taken."""

    @property
    def known(self) -> bool:
        return self.sample_rate is not None and self.channels is not None

    def feed(self, data: bytes) -> None:
        self.buf += data
        self.total_bytes += len(data)

    def take(self, *, final: bool = False, min_ms: float | None = None) -> AudioChunk | None:
        """Pop the buffered whole frames as a chunk once there is enough (or at the end)."""
        assert self.sample_rate and self.channels
        frame = 2 * self.channels
        whole = len(self.buf) - len(self.buf) % frame
        need = (
            int(self.sample_rate * (self.min_bytes_ms if min_ms is None else min_ms) / 1000) * frame
        )
        if whole == 0 or (not final and whole < max(need, frame)):
            return None
        pcm = np.frombuffer(bytes(self.buf[:whole]), dtype="<i2").astype(np.int16)
        del self.buf[:whole]
        if self.assumed:
            chunk: AudioChunk = AssumedFormatChunk(
                pcm, self.sample_rate, self.channels, self.index, assumed_format=self.assumed
            )
        else:
            chunk = AudioChunk(pcm, self.sample_rate, self.channels, self.index)
        self.index += 1
        return chunk

    def leftover(self) -> int:
        return len(self.buf)

    def check_end(self, what: str, empty: str, *, cut_note: str = "") -> None:
        """After the final :meth:`take`: stray bytes mean a cut stream, no chunk means no audio."""
        if self.leftover():
            raise BackendError(
                f"{what} ended mid-frame ({self.leftover()} stray bytes){cut_note}", partial=True
            )
        if self.index == 0:
            raise BackendError(empty)


@dataclass
class _SseState:
    """What one SSE stream has seen: its audio so far, a WAV header being read, the end."""

    framer: _Framer = field(default_factory=_Framer)
    header: bytes = b""
    fmt_name: str | None = None
    finished: bool = False


def _error_event(err: ErrorEvent, framer: _Framer) -> BackendError:
    """A ``speech.audio.error`` as the take's failure; audio already sent is a failed take."""
    msg = err.message
    if err.discard or framer.index:
        msg += f" (the server asked to discard the partial audio: {framer.total_bytes} bytes)"
    return BackendError(
        f"server error event: {msg}", status=err.code, partial=bool(err.discard or framer.index)
    )


@dataclass
class _WsState:
    """What one WebSocket utterance has seen (``ending``: session.done came, audio flushed)."""

    stream_audio: bool
    framer: _Framer = field(default_factory=_Framer)
    started: bool = False
    ending: bool = False
    done: bool = False


# --------------------------------------------------------------------------- the backend


@dataclass(frozen=True)
class RemoteOptions:
    model: str | None = None
    mode: str = "sse"
    format: str = "wav"
    """wav by default: its header is the one in-band statement of the sample rate."""
    sample_rate: int | None = None
    """Pinned output rate: sent as ``sample_rate`` (HTTP) and trusted when the stream is silent."""
    voice: str | None = None
    connect_timeout: float = 5.0
    first_audio_timeout: float = 60.0
    chunk_timeout: float = 20.0
    cloning: bool | None = None
    speed_streaming: bool | None = None
    language: str | None = None
    api_key: str | None = field(default=None, repr=False)
    """The server's ``--api-key`` (sent as Bearer). Prefer ``$LISTENLAB_VLLM_API_KEY``: a key
    in a spec is accepted but is a secret in a command line."""


ENV_API_KEY = "LISTENLAB_VLLM_API_KEY"


def _flag(v: str) -> bool:
    return v.strip().lower() in {"1", "true", "yes", "on"}


@register
class VllmOmniHttpBackend(Backend):
    """A vLLM-Omni speech server (or another listenlab via ``listenlab api``)."""

    name = "vllm-omni+http"

    def __init__(self, base_url: str, options: RemoteOptions = RemoteOptions()):
        if options.mode not in MODES:
            raise InvalidRequest(f"mode must be one of {', '.join(MODES)}, got {options.mode!r}")
        if options.format not in FORMATS:
            raise InvalidRequest(f"format must be pcm or wav, got {options.format!r}")
        base_url = base_url.rstrip("/")
        if base_url.startswith(("ws://", "wss://")):
            base_url = "http" + base_url[2:]
        # Credentials never stay in the URL: it appears in error messages and logs.
        self._basic: tuple[str, str] | None = None
        u = urlsplit(base_url)
        if u.username is not None or u.password is not None:
            self._basic = (unquote(u.username or ""), unquote(u.password or ""))
            host = f"[{u.hostname}]" if ":" in (u.hostname or "") else (u.hostname or "")
            netloc = host + (f":{u.port}" if u.port else "")
            base_url = urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))
        self.base_url = base_url
        self.options = options
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._card: dict[str, Any] | None = None
        self._served_model: str | None = None
        self._caps = self._derive_caps()

    @classmethod
    def from_params(cls, params: dict[str, str], target: str | None = None) -> VllmOmniHttpBackend:
        if not target:
            raise InvalidRequest("vllm-omni+http needs a URL: vllm-omni+http://host:port?model=…")
        p = dict(params)
        kw: dict[str, Any] = {}
        try:
            for key in ("model", "mode", "format", "voice", "language", "api_key"):
                if key in p:
                    kw[key] = p.pop(key) or None
            if "sample_rate" in p:
                kw["sample_rate"] = int(p.pop("sample_rate"))
            for key in ("connect_timeout", "first_audio_timeout", "chunk_timeout"):
                if key in p:
                    kw[key] = float(p.pop(key))
                    if kw[key] <= 0:
                        raise InvalidRequest(f"{key} must be > 0")
            for key in ("cloning", "speed_streaming"):
                if key in p:
                    kw[key] = _flag(p.pop(key))
        except ValueError as e:
            if isinstance(e, InvalidRequest):
                raise
            raise InvalidRequest(f"bad vllm-omni+http parameter: {e}") from None
        if p:
            raise InvalidRequest(f"unknown vllm-omni+http parameter(s): {', '.join(sorted(p))}")
        kw.setdefault("mode", "sse")
        kw["mode"] = kw["mode"] or "sse"
        kw.setdefault("format", "pcm" if kw["mode"] == "ws" else "wav")
        return cls(target, RemoteOptions(**kw))

    # -- connection

    def _http(self):
        """One shared client per backend and event loop (a client cannot cross loops)."""
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.is_closed:
            o = self.options
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(None, connect=o.connect_timeout, pool=o.connect_timeout),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=8),
                trust_env=False,
                headers=self._auth_headers(),
            )
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()

    def _auth_headers(self) -> dict[str, str]:
        """Bearer ``api_key`` (spec or ``$LISTENLAB_VLLM_API_KEY``), else the URL's user-info."""
        key = self.options.api_key or os.environ.get(ENV_API_KEY)
        if key:
            return {"Authorization": f"Bearer {key}"}
        if self._basic is not None:
            raw = f"{self._basic[0]}:{self._basic[1]}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
        return {}

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _ws_url(self, path: str) -> str:
        return "ws" + self.base_url[4:] + path

    async def _get_json(self, path: str) -> tuple[int, Any]:
        import httpx

        try:
            r = await self._http().get(self._url(path), timeout=self.options.connect_timeout + 10)
        except httpx.TimeoutException as e:
            raise StreamTimeout(f"{self.base_url}{path} did not answer in time ({e!r})") from None
        except httpx.HTTPError as e:
            raise BackendError(f"cannot reach {self.base_url}: {e!r}") from None
        if r.status_code >= 400:
            return r.status_code, error_message(r.content, r.status_code)
        try:
            return r.status_code, r.json()
        except ValueError:
            raise BackendError(
                f"{path} did not return JSON: {r.text[:200]!r}", status=r.status_code
            ) from None

    # -- metadata

    def _derive_caps(self) -> Capabilities:
        o = self.options
        model = (o.model or self._served_model or "").lower()
        card = (self._card or {}).get("listenlab") or {}
        facts = model_facts(model)
        fmt = (o.sample_rate, None) if o.sample_rate else table_format(model)
        cloning = o.cloning
        if cloning is None:
            cloning = bool(card["cloning"]) if "cloning" in card else clones(model)
        speed_streaming = o.speed_streaming
        if speed_streaming is None:
            speed_streaming = bool(
                card.get("speed_streaming", bool(facts and facts.speed_streaming))
            )
        langs = card.get("languages") or ()
        return Capabilities(
            streaming=bool(card.get("streaming", True)),
            cloning=cloning,
            languages=tuple(langs),
            sample_rate=card.get("sample_rate") or (fmt[0] if fmt else None),
            channels=int(card.get("channels") or (fmt[1] if fmt and fmt[1] else 1)),
            speed=bool(card.get("speed", True)),
            speed_streaming=speed_streaming,
            instructions=bool(card.get("instructions", bool(facts and facts.instructions))),
            seed=bool(card.get("seed", True)),
            voice_library=bool(card.get("voice_library", cloning)),
        )

    @property
    def capabilities(self) -> Capabilities:
        """Known from the spec, and refined by ``/v1/models`` after :meth:`refresh` (or any call)."""
        return self._caps

    async def refresh(self) -> Capabilities:
        """Read ``/v1/models`` and re-derive the capabilities."""
        status, d = await self._get_json("/v1/models")
        if status < 400 and isinstance(d, dict):
            data = [m for m in d.get("data") or [] if isinstance(m, dict)]
            want = self.options.model
            card = next((m for m in data if m.get("id") == want), None) if want else None
            card = card or (data[0] if data else None)
            if card:
                self._card = card
                self._served_model = str(card.get("id") or "") or None
        self._caps = self._derive_caps()
        return self._caps

    async def models(self) -> list[str]:
        status, d = await self._get_json("/v1/models")
        if status >= 400:
            raise BackendError(str(d), status=status)
        return [str(m.get("id")) for m in d.get("data") or [] if isinstance(m, dict)]

    async def health(self) -> Health:
        import httpx

        try:
            r = await self._http().get(
                self._url("/health"), timeout=self.options.connect_timeout + 5
            )
        except httpx.HTTPError as e:
            return Health(False, f"cannot reach {self.base_url}: {e!r}")
        if r.status_code == 200:
            with contextlib.suppress(BackendError):
                await self.refresh()
            return Health(True, f"{self.base_url}: healthy")
        try:
            d = r.json()
            reason = d.get("reason") or d.get("status") or r.text
        except ValueError:
            reason = r.text[:200]
        return Health(False, f"{self.base_url}: {r.status_code} {reason}")

    async def voices(self) -> list[Voice]:
        status, d = await self._get_json("/v1/audio/voices")
        if status >= 400:
            raise BackendError(str(d), status=status)
        with contextlib.suppress(BackendError):
            await self.refresh()
        uploaded = {
            str(u.get("name", "")).lower(): u
            for u in d.get("uploaded_voices") or []
            if isinstance(u, dict)
        }
        out: list[Voice] = []
        for name in d.get("voices") or []:
            name = str(name)
            if name.lower() == "default":  # a placeholder, not a speaker (reference §11.8)
                continue
            u = uploaded.pop(name.lower(), None)
            if u is not None:
                out.append(Voice(name, "uploaded", u.get("ref_text"), u.get("speaker_description")))
            else:
                out.append(Voice(name, "builtin"))
        out += [
            Voice(n, "uploaded", u.get("ref_text"), u.get("speaker_description"))
            for n, u in uploaded.items()
        ]
        return out

    async def add_voice(
        self, name: str, wav: bytes, *, ref_text: str | None = None, consent: str = ""
    ) -> Voice:
        import httpx

        data = {"name": name, "consent": consent or "listenlab"}
        if ref_text:
            data["ref_text"] = ref_text
        files = {"audio_sample": (f"{name}.wav", wav, "audio/wav")}
        try:
            r = await self._http().post(
                self._url("/v1/audio/voices"), data=data, files=files, timeout=60
            )
        except httpx.HTTPError as e:
            raise BackendError(f"cannot reach {self.base_url}: {e!r}") from None
        if r.status_code >= 400:
            raise BackendError(error_message(r.content, r.status_code), status=r.status_code)
        v = (r.json() or {}).get("voice") or {}
        return Voice(
            str(v.get("name") or name),
            "uploaded",
            v.get("ref_text", ref_text),
            v.get("speaker_description"),
        )

    async def delete_voice(self, name: str) -> None:
        import httpx

        try:
            r = await self._http().delete(
                self._url(f"/v1/audio/voices/{quote(name, safe='')}"), timeout=30
            )
        except httpx.HTTPError as e:
            raise BackendError(f"cannot reach {self.base_url}: {e!r}") from None
        if r.status_code == 404:  # both shapes: OpenAI error or {"success":false,"error":…}
            raise UnknownVoice(error_message(r.content))
        if r.status_code >= 400:
            raise BackendError(error_message(r.content, r.status_code), status=r.status_code)

    # -- request building

    @property
    def upstream_model(self) -> str | None:
        """The served model's name (the spec's ``model``, else the server's model card):
        ``listenlab api`` serves it under that name by default."""
        return self.options.model or self._served_model

    def rules(self) -> SpeechRules:
        """The served model's request rules: the server's own when it states them (a
        ``listenlab api`` card), else the model table's for its name."""
        card = ((self._card or {}).get("listenlab") or {}).get("rules")
        if isinstance(card, dict):
            try:
                return rules_from_card(card)
            except (TypeError, ValueError):
                pass
        return speech_rules(self.upstream_model)

    def _prepare(self, request: SpeechRequest, *, whole: bool = False) -> SpeechRequest:
        request = request.validated()
        if request.voice is None and self.options.voice:
            request = replace(request, voice=self.options.voice)
        self._check_rules(request, whole=whole)
        return request

    def _check_rules(self, request: SpeechRequest, *, whole: bool = False) -> None:
        """Never send what the served model refuses: each refusal names the field. ``whole``:
        the request goes as one non-streaming HTTP request (:meth:`synthesize`), where
        vLLM-Omni stretches speed itself."""
        rules = self.rules()
        model = self.upstream_model or "the served model"
        err = sample_rate_error(rules, self.options.sample_rate)
        if err and self.options.sample_rate != self._native_rate():
            raise InvalidRequest(
                f"sample_rate={self.options.sample_rate} cannot be asked of {model}: "
                f"vLLM-Omni would answer {err!r}"
            )
        streamed = not whole and (self.options.mode != "ws" or self.options.format == "pcm")
        facts = model_facts(self.upstream_model)
        native = self.options.speed_streaming or bool(facts and facts.speed_streaming)
        if streamed and request.speed != 1.0 and not native:
            raise InvalidRequest(
                f"speed={request.speed:g} cannot be streamed from {model}: vLLM-Omni stretches "
                "speed on whole files only (send speed 1, or use synthesize())"
            )
        lang = request.language or self.options.language
        if rules.languages is not None and lang and lang.title() not in rules.languages:
            raise InvalidRequest(
                f"language={lang!r} is not one of {model}'s: {', '.join(sorted(rules.languages))}"
            )
        tokens = (request.extra or {}).get("max_new_tokens")
        if rules.checks_max_new_tokens and isinstance(tokens, int):
            err = max_new_tokens_error(tokens)
            if err:
                raise InvalidRequest(f"max_new_tokens={tokens}: {err}")

    def _native_rate(self) -> int | None:
        fmt = table_format(self.upstream_model)
        card = (self._card or {}).get("listenlab") or {}
        return card.get("sample_rate") or (fmt[0] if fmt else None)

    def _sent_rate(self) -> int | None:
        """``sample_rate`` goes in the body only when the model accepts it; a pin equal to the
        model's own rate is kept for checking the stream instead."""
        rate = self.options.sample_rate
        if rate and sample_rate_error(self.rules(), rate) is None:
            return rate
        return None

    def _fields(self, request: SpeechRequest, allowed_extra: frozenset[str]) -> dict[str, Any]:
        return request_fields(
            request, allowed_extra, model=self.options.model, language=self.options.language
        )

    def _http_body(self, request: SpeechRequest) -> dict[str, Any]:
        body = {"input": request.text, **self._fields(request, HTTP_EXTRA)}
        body["response_format"] = self.options.format
        body["stream"] = True
        body["stream_format"] = "sse" if self.options.mode == "sse" else "audio"
        if self._sent_rate():
            body["sample_rate"] = self._sent_rate()
        return body

    async def _assume_format(self, framer: _Framer, what: str, channels: int | None = None) -> None:
        """Set ``framer``'s rate/channels from :meth:`_fallback_format` and note the assumption."""
        framer.sample_rate, framer.channels, framer.assumed = await self._fallback_format(
            what, channels
        )

    async def _fallback_format(
        self, what: str, channels: int | None = None
    ) -> tuple[int, int, str]:
        """Rate/channels when the stream does not state them: pinned, model card, table.

        Returns ``(rate, channels, note)``; the note says what was assumed and from what.
        """
        o = self.options
        if self._card is None and not o.sample_rate:
            with contextlib.suppress(BackendError):
                await self.refresh()
        model = o.model or self._served_model
        table = table_format(model)
        card = (self._card or {}).get("listenlab") or {}
        if channels:
            ch, ch_from = int(channels), "the stream"
        elif card.get("channels"):
            ch, ch_from = int(card["channels"]), "the server's model card"
        elif table:
            ch, ch_from = table[1], f"the model-name table ({model!r})"
        else:
            ch, ch_from = 1, "the default (mono)"
        if o.sample_rate:
            sr, sr_from = o.sample_rate, f"the backend's sample_rate={o.sample_rate} setting"
        elif card.get("sample_rate"):
            sr, sr_from = int(card["sample_rate"]), "the server's model card"
        elif table:
            sr, sr_from = table[0], f"the model-name table ({model!r})"
        else:
            raise BackendError(
                f"the server does not announce the sample rate of {what} and model "
                f"{model or '(unnamed)'!r} is not in the rate table; "
                "use format=wav or pin sample_rate=…"
            )
        note = f"{what} does not state its format: {sr} Hz assumed from {sr_from}" + (
            "" if ch_from == "the stream" else f", {ch} channel(s) from {ch_from}"
        )
        return sr, ch, note

    # -- whole files

    async def synthesize(self, request: SpeechRequest) -> Audio:
        """One non-streaming request (``response_format: wav``, no ``stream``), as vLLM-Omni's
        own clients send it: its whole-file path is a different code path from its streams
        (speed is a post-hoc stretch there, and streaming bugs such as replayed chunks, issues
        #3032/#2907, never reached it), so the probe's offline reference must come from it.
        ``mode=ws`` keeps to the WebSocket (its whole-file form: one binary frame per unit)."""
        import httpx
        import soundfile as sf

        # over HTTP a whole file (speed allowed); mode=ws streams it (checked as a stream)
        request = self._prepare(request, whole=self.options.mode != "ws")
        if self.options.mode == "ws":
            return await super().synthesize(request)
        body = {"input": request.text, **self._fields(request, HTTP_EXTRA)}
        body["response_format"] = "wav"
        if self._sent_rate():
            body["sample_rate"] = self._sent_rate()
        o = self.options
        timeout = httpx.Timeout(
            o.first_audio_timeout + 600.0, connect=o.connect_timeout, pool=o.connect_timeout
        )
        try:
            r = await self._http().post(
                self._url("/v1/audio/speech"),
                json=body,
                headers={"Accept": "audio/*, application/json", "X-Request-Id": request.request_id},
                timeout=timeout,
            )
        except httpx.TimeoutException as e:
            raise StreamTimeout(
                f"{self.base_url} did not return the file in time ({e!r})"
            ) from None
        except httpx.HTTPError as e:
            raise BackendError(f"cannot reach {self.base_url}: {e!r}") from None
        if r.status_code >= 400:
            raise BackendError(error_message(r.content, r.status_code), status=r.status_code)
        ctype = r.headers.get("content-type", "").split(";")[0].strip().lower()
        if not ctype.startswith("audio/"):
            raise BackendError(
                f"unexpected {r.status_code} response of type {ctype or 'unknown'}: "
                + error_message(r.content),
                status=r.status_code,
            )
        try:
            x, sr = sf.read(io.BytesIO(r.content), dtype="int16", always_2d=True)
        except Exception as e:
            raise BackendError(f"could not decode the server's {ctype} body: {e}") from None
        if not len(x):
            raise BackendError("the server returned an empty audio file")
        self._check_rate(int(sr))
        return Audio(np.ascontiguousarray(x), int(sr))

    # -- streaming

    def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        request = self._prepare(request)
        if self.options.mode == "ws":
            return self._stream_ws(request)
        return self._stream_http(request)

    async def _stream_http(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        import httpx

        clock = _Clock(self.options)
        body = self._http_body(request)
        client = self._http()
        req = client.build_request(
            "POST",
            self._url("/v1/audio/speech"),
            json=body,
            headers={
                "Accept": "text/event-stream, audio/*, application/json",
                "X-Request-Id": request.request_id,
            },
        )
        try:
            resp = await clock.wait(client.send(req, stream=True), "the response headers")
        except httpx.ConnectTimeout:
            raise StreamTimeout(
                f"could not connect to {self.base_url} within {self.options.connect_timeout} s (connect_timeout)"
            ) from None
        except httpx.HTTPError as e:
            raise BackendError(f"cannot reach {self.base_url}: {e!r}") from None
        try:
            if resp.status_code >= 400:
                content = await clock.wait(resp.aread(), "the error body")
                raise BackendError(
                    error_message(content, resp.status_code), status=resp.status_code
                )
            ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
            reader = _Reader(resp.aiter_bytes(), clock)
            kind = body_kind(ctype)
            if kind == "sse":
                gen = self._parse_sse(reader)
            elif kind in ("wav", "pcm"):
                gen = self._parse_raw(reader, wav=kind == "wav")
            elif kind == "file":
                gen = self._parse_whole_file(reader, ctype)
            else:
                content = await clock.wait(resp.aread(), "the body")
                raise BackendError(
                    f"unexpected {resp.status_code} response of type {ctype or 'unknown'}: "
                    + error_message(content),
                    status=resp.status_code,
                )
            try:
                async for chunk in gen:
                    yield chunk
                    clock.got_audio()
            finally:
                await gen.aclose()
        finally:
            await resp.aclose()  # before the body is read to the end this closes the socket

    async def _parse_raw(self, reader: _Reader, *, wav: bool) -> AsyncIterator[AudioChunk]:
        framer = _Framer()
        header = b""
        while True:
            data = await reader.next()
            if data is None:
                break
            if not wav and not framer.known:
                if self.options.format == "wav":
                    raise BackendError(not_wav_message(data))
                await self._assume_format(framer, "the raw PCM stream")
            if wav and not framer.known:
                header += data
                body = self._start_wav(framer, header)
                if body is None:
                    continue
                data = body
            framer.feed(data)
            chunk = framer.take()
            if chunk is not None:
                yield chunk
        if wav and not framer.known:
            raise BackendError(
                f"the WAV stream ended after {len(header)} bytes, before its header was complete"
            )
        chunk = framer.take(final=True)
        if chunk is not None:
            yield chunk
        framer.check_end(
            "the audio stream",
            "the server ended the stream without sending any audio",
            cut_note=": the connection was cut",
        )

    def _start_wav(self, framer: _Framer, header: bytes) -> bytes | None:
        """Once ``header`` holds a whole WAV header: set ``framer``'s format, return the audio after it."""
        fmt = parse_wav_header(header)
        if fmt is None:
            return None
        self._check_rate(fmt.sample_rate)
        framer.sample_rate, framer.channels = fmt.sample_rate, fmt.channels
        return header[fmt.data_offset :]

    def _check_rate(self, rate: int) -> None:
        pinned = self.options.sample_rate
        if pinned and rate != pinned:
            raise BackendError(
                f"the server's WAV header says {rate} Hz but sample_rate={pinned} was requested"
            )

    async def _parse_sse(self, reader: _Reader) -> AsyncIterator[AudioChunk]:
        parser, st = SseParser(), _SseState()
        while (data := await reader.next()) is not None:
            for ev in parser.feed(data):
                if st.finished:
                    raise BackendError(
                        f"the SSE stream sent {ev.event!r} after speech.audio.done "
                        "(exactly one terminal event is allowed)",
                        partial=True,
                    )
                kind, payload = wire.speech_event(ev)
                if kind == wire.DELTA:
                    chunk = await self._sse_delta(payload, st)
                elif kind == wire.DONE:
                    chunk = st.framer.take(final=True)
                    st.finished = True  # read on to EOF: nothing may follow the terminal event
                elif kind == wire.ERROR:
                    raise _error_event(ErrorEvent.from_payload(payload), st.framer)
                else:
                    continue  # other events (future additions) are ignored on purpose
                if chunk is not None:
                    yield chunk
                if kind == wire.DONE:
                    st.framer.check_end(
                        "the SSE audio", "the server finished (speech.audio.done) without any audio"
                    )
        if st.finished and not parser.pending:
            return
        partial = st.framer.index > 0
        if parser.pending:
            raise BackendError(
                "the SSE stream was cut in the middle of an event (malformed or truncated SSE)",
                partial=partial,
            )
        raise BackendError(
            "the SSE stream ended without speech.audio.done or speech.audio.error "
            f"after {st.framer.total_bytes} audio bytes: the connection was cut",
            partial=partial,
        )

    async def _sse_delta(self, payload: dict[str, Any], st: _SseState) -> AudioChunk | None:
        """One ``speech.audio.delta``: a wav stream's first deltas hold its header."""
        raw = wire.delta_audio(payload)
        st.fmt_name = st.fmt_name or payload.get("response_format") or self.options.format
        framer = st.framer
        if not framer.known:
            if st.fmt_name == "wav":
                st.header += raw
                body = self._start_wav(framer, st.header)
                if body is None:
                    return None
                raw = body
            else:
                if self.options.format == "wav":
                    raise BackendError(not_wav_message(raw))
                await self._assume_format(framer, "the PCM SSE stream")
        framer.feed(raw)
        return framer.take()

    async def _parse_whole_file(self, reader: _Reader, ctype: str) -> AsyncIterator[AudioChunk]:
        """A server that ignored the streaming flags (pure-diffusion models) sends a whole file."""
        import soundfile as sf

        parts = []
        while (data := await reader.next()) is not None:
            parts.append(data)
        try:
            x, sr = sf.read(io.BytesIO(b"".join(parts)), dtype="int16", always_2d=True)
        except Exception as e:
            raise BackendError(f"could not decode the server's {ctype} body: {e}") from None
        if not len(x):
            raise BackendError("the server returned an empty audio file")
        yield AudioChunk(np.ascontiguousarray(x).reshape(-1), int(sr), int(x.shape[1]), 0)

    # -- websocket

    def _ws_config(self, request: SpeechRequest) -> dict[str, Any]:
        cfg = wire.ws_message(wire.SESSION_CONFIG, **self._fields(request, WS_EXTRA))
        stream_audio = self.options.format == "pcm"
        cfg["response_format"] = self.options.format
        cfg["stream_audio"] = stream_audio
        cfg["split_granularity"] = "none"
        return cfg

    async def _ws_connect(self) -> Any:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidStatus

        url = self._ws_url("/v1/audio/speech/stream")
        try:
            return await connect(
                url,
                open_timeout=self.options.connect_timeout,
                max_size=64 * 1024 * 1024,
                ping_interval=None,
                close_timeout=2,
                proxy=None,
                additional_headers=self._auth_headers(),
            )
        except TimeoutError:
            raise StreamTimeout(
                f"could not open {url} within {self.options.connect_timeout} s (connect_timeout)"
            ) from None
        except InvalidStatus as e:
            r = e.response
            raise BackendError(
                error_message(r.body or b"", r.status_code), status=r.status_code
            ) from None
        except (OSError, InvalidHandshake) as e:
            raise BackendError(f"cannot open {url}: {e!r}") from None

    async def _stream_ws(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        from websockets.exceptions import ConnectionClosed

        clock = _Clock(self.options)
        ws = await self._ws_connect()
        st = _WsState(stream_audio=self.options.format == "pcm")
        framer = st.framer
        try:
            for m in (
                self._ws_config(request),
                wire.ws_message(wire.INPUT_TEXT, text=request.text),
                wire.ws_message(wire.INPUT_DONE),
            ):
                await ws.send(json.dumps(m))
            while True:
                try:
                    msg = await clock.wait(
                        ws.recv(), "audio" if not framer.index else "the next chunk"
                    )
                except ConnectionClosed as e:
                    raise BackendError(
                        f"the WebSocket closed before session.done ({e}) after {framer.total_bytes} audio bytes",
                        partial=framer.index > 0,
                    ) from None
                binary = isinstance(msg, bytes)
                chunk = self._ws_audio(msg, st) if binary else await self._ws_text(msg, st)
                if chunk is not None:
                    yield chunk
                    if binary:
                        clock.got_audio()
                if st.ending:
                    framer.check_end(
                        "the WebSocket audio",
                        "the server finished (session.done) without any audio",
                    )
                    st.done = True
                    return
        finally:
            if st.done:
                with contextlib.suppress(Exception):
                    close = wire.ws_message(wire.SESSION_CLOSE)
                    await asyncio.wait_for(ws.send(json.dumps(close)), 1)
            # Closing the socket is the only way to stop the server generating (no cancel message).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 2)
            with contextlib.suppress(Exception):
                ws.transport.abort()

    def _ws_audio(self, data: bytes, st: _WsState) -> AudioChunk | None:
        """A binary frame: PCM to frame (``stream_audio``), else one whole encoded file."""
        if not st.started:
            raise BackendError("WebSocket protocol error: audio before audio.start")
        if st.stream_audio:
            st.framer.feed(data)
            return st.framer.take()
        return self._decode_file(data, st.framer)

    async def _ws_text(self, msg: str, st: _WsState) -> AudioChunk | None:
        """A JSON message; at ``session.done`` the audio still buffered."""
        try:
            m = json.loads(msg)
        except ValueError:
            raise BackendError(f"WebSocket protocol error: not JSON: {msg[:120]!r}") from None
        kind = m.get("type") if isinstance(m, dict) else None
        framer = st.framer
        if kind == wire.AUDIO_START:
            st.started = True
            if st.stream_audio and not framer.known:
                await self._ws_format(framer, m)
        elif kind == wire.AUDIO_DONE:
            if m.get("error"):
                raise BackendError("the server reported a failed utterance (audio.done error:true)")
        elif kind == wire.SESSION_DONE:
            st.ending = True
            return framer.take(final=True)
        elif kind == wire.WS_ERROR:
            msg_text = str(m.get("message") or m)
            if m.get("partial_audio"):
                msg_text += (
                    f" (the server asked to discard the partial audio: {framer.total_bytes} bytes)"
                )
            raise BackendError(
                f"server error: {msg_text}",
                partial=bool(m.get("partial_audio") or framer.index),
            )
        # audio.chunk (word timestamps) and unknown messages are ignored
        return None

    async def _ws_format(self, framer: _Framer, start: dict[str, Any]) -> None:
        """The PCM format from ``audio.start``.

        Only an ``audio.start`` with ``sample_rate`` *and* ``channels`` states the format
        (listenlab api; the deferred form of newer vLLM-Omni). vLLM-Omni 0.30.0 sends
        ``audio.start`` before generating, with a constant nominal ``"sample_rate": 24000``
        and no ``channels`` (``serving_speech_stream.py`` ``_PCM_SAMPLE_RATE``) whatever the
        model's rate: that value is used only when nothing better is known.
        """
        stated = wire.stated_format(start)
        if stated is not None:
            self._check_rate(stated[0])
            framer.sample_rate, framer.channels = stated
            return
        sr, ch = start.get("sample_rate"), start.get("channels")
        what = (
            f"the WebSocket stream (audio.start's sample_rate={sr} is nominal: no channels)"
            if isinstance(sr, int) and sr > 0
            else "the WebSocket stream (audio.start has no sample_rate)"
        )
        try:
            await self._assume_format(framer, what, ch if isinstance(ch, int) else None)
        except BackendError:
            if not (isinstance(sr, int) and sr > 0):
                raise
            framer.sample_rate, framer.channels = sr, int(ch or 1)
            framer.assumed = f"{what}: {sr} Hz taken as stated, mono assumed"

    def _decode_file(self, data: bytes, framer: _Framer) -> AudioChunk:
        """``stream_audio:false``: one binary frame holds a whole encoded file."""
        import soundfile as sf

        try:
            x, sr = sf.read(io.BytesIO(data), dtype="int16", always_2d=True)
        except Exception as e:
            raise BackendError(
                f"could not decode the server's {self.options.format} frame: {e}"
            ) from None
        framer.sample_rate, framer.channels = int(sr), int(x.shape[1])
        framer.total_bytes += len(data)
        chunk = AudioChunk(
            np.ascontiguousarray(x).reshape(-1), int(sr), int(x.shape[1]), framer.index
        )
        framer.index += 1
        return chunk


# --------------------------------------------------------------------------- rules from a card


def rules_from_card(card: dict[str, Any]) -> SpeechRules:
    """A ``listenlab api`` model card's ``rules`` (lists where the table has sets)."""
    d = dict(card)
    d["sample_rates"] = frozenset(int(x) for x in d.get("sample_rates") or ())
    if d.get("languages") is not None:
        d["languages"] = frozenset(str(x) for x in d["languages"])
    if d.get("rate_range") is not None:
        lo, hi = d["rate_range"]
        d["rate_range"] = (int(lo), int(hi))
    d["embedding_dims"] = tuple((str(a), int(b)) for a, b in d.get("embedding_dims") or ())
    known = SpeechRules.__dataclass_fields__
    return SpeechRules(**{k: v for k, v in d.items() if k in known})


# --------------------------------------------------------------------------- timing


class _Clock:
    """One deadline at a time: first audio after the request, then between audio chunks."""

    def __init__(self, options: RemoteOptions):
        self.o = options
        self.t0 = time.monotonic()
        self.deadline = self.t0 + options.first_audio_timeout
        self.audio = False
        self.bytes_in_phase = 0

    def got_audio(self) -> None:
        self.audio = True
        self.bytes_in_phase = 0
        self.deadline = time.monotonic() + self.o.chunk_timeout

    async def wait(self, aw, what: str):
        try:
            async with asyncio.timeout(max(0.0, self.deadline - time.monotonic())):
                return await aw
        except TimeoutError:
            if self.audio:
                raise StreamTimeout(
                    f"no audio for {self.o.chunk_timeout:g} s (chunk_timeout) while waiting for {what}; "
                    f"{self.bytes_in_phase} bytes trickled in meanwhile"
                ) from None
            raise StreamTimeout(
                f"no audio within {self.o.first_audio_timeout:g} s of the request "
                f"(first_audio_timeout) while waiting for {what}; {self.bytes_in_phase} bytes arrived"
            ) from None


class _Reader:
    """Network reads bounded by the clock; transport errors become clear failures."""

    def __init__(self, it: AsyncIterator[bytes], clock: _Clock):
        self.it = it.__aiter__()
        self.clock = clock
        self.total = 0

    async def next(self) -> bytes | None:
        import httpx

        try:
            data = await self.clock.wait(
                self.it.__anext__(), "audio" if not self.clock.audio else "the next chunk"
            )
        except StopAsyncIteration:
            return None
        except httpx.HTTPError as e:
            raise BackendError(
                f"the connection was cut mid-stream after {self.total} bytes ({type(e).__name__}: {e})",
                partial=self.total > 0,
            ) from None
        self.total += len(data)
        self.clock.bytes_in_phase += len(data)
        return data
