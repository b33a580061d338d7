"""The remote engine: ``vllm-omni+http://host:port[/prefix]?model=…&mode=sse|audio|ws
&format=pcm|wav&sample_rate=…&voice=…&connect_timeout=…&first_audio_timeout=…&chunk_timeout=…``

Why the backend checks the served model's rules before sending: a request the server would
refuse should fail here, naming the field, not as a 400 after a round trip (and a stream must
never be asked for what vLLM-Omni only does to whole files, such as speed). The rules are the
server's own when it states them (a ``listenlab api`` model card), else the served model's unit
(``backends/vllm_omni/models/``). The traps of the streaming protocol
(``shared/reference/vllm-omni-speech-api.md`` §3, §4, §11) are handled by the transports:
:mod:`.http` with :mod:`.raw` and :mod:`.sse`, and :mod:`.ws`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from backends.base import Audio, AudioChunk, Backend, Capabilities, Health, SpeechRequest, Voice
from backends.errors import BackendError, InvalidRequest, UnknownVoice
from backends.registry import register
from backends.vllm_omni.models import clones, model_unit, speech_rules, table_format
from backends.vllm_omni.remote.http import stream_http, whole_file
from backends.vllm_omni.remote.options import RemoteOptions
from backends.vllm_omni.remote.server import RemoteServer
from backends.vllm_omni.remote.ws import stream_ws
from backends.vllm_omni.request import HTTP_EXTRA, WS_EXTRA, request_fields
from backends.vllm_omni.rules import (
    SpeechRules,
    max_new_tokens_error,
    rules_from_card,
    sample_rate_error,
)
from backends.vllm_omni.wire import error_message


@register
class VllmOmniHttpBackend(Backend):
    """A vLLM-Omni speech server (or another listenlab via ``listenlab api``)."""

    name = "vllm-omni+http"

    def __init__(self, base_url: str, options: RemoteOptions = RemoteOptions()):
        self.options = options
        self.server = RemoteServer(base_url, options)
        self.base_url = self.server.base_url

    @classmethod
    def from_params(cls, params: dict[str, str], target: str | None = None) -> VllmOmniHttpBackend:
        if not target:
            raise InvalidRequest("vllm-omni+http needs a URL: vllm-omni+http://host:port?model=…")
        return cls(target, RemoteOptions.from_params(params))

    async def aclose(self) -> None:
        await self.server.aclose()

    def auth_headers(self) -> dict[str, str]:
        """What every request to the server is signed with (never shown)."""
        return self.server.auth_headers()

    # -- metadata

    @property
    def capabilities(self) -> Capabilities:
        """Known from the spec, and refined by ``/v1/models`` once the card was read
        (:meth:`refresh`, or any call that needed it)."""
        o = self.options
        model = (self.server.model or "").lower()
        card = self.server.listenlab_card
        unit = model_unit(model)
        fmt = (o.sample_rate, None) if o.sample_rate else table_format(model)
        cloning = o.cloning
        if cloning is None:
            cloning = bool(card["cloning"]) if "cloning" in card else clones(model)
        speed_streaming = o.speed_streaming
        if speed_streaming is None:
            speed_streaming = bool(card.get("speed_streaming", bool(unit and unit.speed_streaming)))
        return Capabilities(
            streaming=bool(card.get("streaming", True)),
            cloning=cloning,
            languages=tuple(card.get("languages") or ()),
            sample_rate=card.get("sample_rate") or (fmt[0] if fmt else None),
            channels=int(card.get("channels") or (fmt[1] if fmt and fmt[1] else 1)),
            speed=bool(card.get("speed", True)),
            speed_streaming=speed_streaming,
            instructions=bool(card.get("instructions", bool(unit and unit.instructions))),
            seed=bool(card.get("seed", True)),
            voice_library=bool(card.get("voice_library", cloning)),
        )

    async def refresh(self) -> Capabilities:
        """Read ``/v1/models`` and re-derive the capabilities."""
        await self.server.read_card()
        return self.capabilities

    async def models(self) -> list[str]:
        status, d = await self.server.get_json("/v1/models")
        if status >= 400:
            raise BackendError(str(d), status=status)
        return [str(m.get("id")) for m in d.get("data") or [] if isinstance(m, dict)]

    async def health(self) -> Health:
        import httpx

        s = self.server
        try:
            r = await s.http().get(s.url("/health"), timeout=self.options.connect_timeout + 5)
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

    # -- voices

    async def voices(self) -> list[Voice]:
        status, d = await self.server.get_json("/v1/audio/voices")
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
        s = self.server
        try:
            r = await s.http().post(s.url("/v1/audio/voices"), data=data, files=files, timeout=60)
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

        s = self.server
        try:
            r = await s.http().delete(s.url(f"/v1/audio/voices/{quote(name, safe='')}"), timeout=30)
        except httpx.HTTPError as e:
            raise BackendError(f"cannot reach {self.base_url}: {e!r}") from None
        if r.status_code == 404:  # both shapes: OpenAI error or {"success":false,"error":…}
            raise UnknownVoice(error_message(r.content))
        if r.status_code >= 400:
            raise BackendError(error_message(r.content, r.status_code), status=r.status_code)

    def usage(self, request_id: str) -> dict[str, Any] | None:
        """What the server reported for ``request_id`` (its usage headers or the SSE
        ``speech.audio.done`` usage), taken once."""
        return self.server.usage.pop(request_id, None)

    @property
    def unit(self) -> Any:
        """The served model's unit, by the server's model name (None: a model no unit knows)."""
        return model_unit(self.upstream_model)

    # -- the served model's rules

    @property
    def upstream_model(self) -> str | None:
        """The served model's name (the spec's ``model``, else the server's model card):
        ``listenlab api`` serves it under that name by default."""
        return self.server.model

    def rules(self) -> SpeechRules:
        """The served model's request rules: the server's own when it states them (a
        ``listenlab api`` card), else its unit's for its name."""
        card = self.server.listenlab_card.get("rules")
        if isinstance(card, dict):
            try:
                return rules_from_card(card)
            except (TypeError, ValueError):
                pass
        return speech_rules(self.upstream_model)

    def prepare(self, request: SpeechRequest, *, whole: bool = False) -> SpeechRequest:
        """The request with the spec's voice, checked against the served model's rules."""
        # no character bound: never refuse in front of the server what it would take (it
        # counts the prompt's tokens against its model's max_model_len itself)
        request = request.validated(None)
        if request.voice is None and self.options.voice:
            request = replace(request, voice=self.options.voice)
        self.check_rules(request, whole=whole)
        return request

    def check_rules(self, request: SpeechRequest, *, whole: bool = False) -> None:
        """Never send what the served model refuses: each refusal names the field. ``whole``:
        the request goes as one non-streaming HTTP request (:meth:`synthesize`), where
        vLLM-Omni stretches speed itself."""
        rules = self.rules()
        o = self.options
        model = self.upstream_model or "the served model"
        err = sample_rate_error(rules, o.sample_rate)
        if err and o.sample_rate != self.server.native_rate():
            raise InvalidRequest(
                f"sample_rate={o.sample_rate} cannot be asked of {model}: "
                f"vLLM-Omni would answer {err!r}"
            )
        streamed = not whole and (o.mode != "ws" or o.format == "pcm")
        unit = model_unit(self.upstream_model)
        native = o.speed_streaming or bool(unit and unit.speed_streaming)
        if streamed and request.speed != 1.0 and not native:
            raise InvalidRequest(
                f"speed={request.speed:g} cannot be streamed from {model}: vLLM-Omni stretches "
                "speed on whole files only (send speed 1, or use synthesize())"
            )
        lang = request.language or o.language
        if rules.languages is not None and lang and lang.title() not in rules.languages:
            raise InvalidRequest(
                f"language={lang!r} is not one of {model}'s: {', '.join(sorted(rules.languages))}"
            )
        tokens = (request.extra or {}).get("max_new_tokens")
        if rules.checks_max_new_tokens and isinstance(tokens, int):
            err = max_new_tokens_error(tokens)
            if err:
                raise InvalidRequest(f"max_new_tokens={tokens}: {err}")

    # -- request bodies

    def sent_rate(self) -> int | None:
        """``sample_rate`` goes in the body only when the model accepts it; a pin equal to the
        model's own rate is kept for checking the stream instead."""
        rate = self.options.sample_rate
        return rate if rate and sample_rate_error(self.rules(), rate) is None else None

    def fields(self, request: SpeechRequest, allowed_extra: frozenset[str]) -> dict[str, Any]:
        o = self.options
        return request_fields(
            request,
            allowed_extra,
            model=o.model,
            language=o.language,
            task_types=self.rules().task_types,
        )

    def http_body(self, request: SpeechRequest, *, stream: bool) -> dict[str, Any]:
        body = {"input": request.text, **self.fields(request, HTTP_EXTRA)}
        if stream:
            body["response_format"] = self.options.format
            body["stream"] = True
            body["stream_format"] = "sse" if self.options.mode == "sse" else "audio"
        else:
            body["response_format"] = "wav"
        if self.sent_rate():
            body["sample_rate"] = self.sent_rate()
        return body

    # -- audio

    async def synthesize(self, request: SpeechRequest) -> Audio:
        """One non-streaming request (``response_format: wav``, no ``stream``), as vLLM-Omni's
        own clients send it: its whole-file path is a different code path from its streams
        (speed is a post-hoc stretch there, and streaming bugs such as replayed chunks, issues
        #3032/#2907, never reached it), so the probe's offline reference must come from it.
        ``mode=ws`` keeps to the WebSocket (its whole-file form: one binary frame per unit)."""
        # over HTTP a whole file (speed allowed); mode=ws streams it (checked as a stream)
        request = self.prepare(request, whole=self.options.mode != "ws")
        if self.options.mode == "ws":
            return await super().synthesize(request)
        body = self.http_body(request, stream=False)
        return await whole_file(self.server, body, request.request_id)

    def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        request = self.prepare(request)
        if self.options.mode == "ws":
            return stream_ws(self.server, self.fields(request, WS_EXTRA), request.text)
        return stream_http(self.server, self.http_body(request, stream=True), request.request_id)


__all__ = ["VllmOmniHttpBackend"]
