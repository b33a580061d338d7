"""``GET/POST/DELETE /v1/audio/voices``: vLLM-Omni's voice library over the backend's.

Why a listenlab backend can answer it: cloning backends keep uploaded voices
(``Backend.add_voice``); what vLLM-Omni also reports (consent, upload time, size, MIME type) is
kept per app in :attr:`~app.api.state.ApiState.uploads`.
"""

import contextlib
import time
from typing import Any

from fastapi import APIRouter, Depends, File, Form, UploadFile
from fastapi.responses import JSONResponse

from app.api.answers import (
    UploadedVoice,
    UploadedVoiceInfo,
    VoiceDeleted,
    VoiceList,
    VoiceUploaded,
    dump,
)
from app.api.clips import reference_wav
from app.api.errors import ApiError, api_error, declared
from app.api.limits import MAX_UPLOAD_BYTES, UPLOAD_MIME
from app.api.state import ApiState, api_state
from app.web.openapi import DeclaredRoute, ok
from backends.base import Voice
from backends.errors import UnknownVoice, Unsupported

router = APIRouter(route_class=DeclaredRoute)


def uploaded_entry(v: Voice, meta: dict[str, Any]) -> UploadedVoice:
    """One ``uploaded_voices`` item, as vLLM-Omni lists it."""
    entry = UploadedVoice(
        name=v.name,
        consent=meta.get("consent", ""),
        created_at=meta.get("created_at", 0),
        file_size=meta.get("file_size", 0),
        mime_type=meta.get("mime_type", "audio/wav"),
        embedding_source="audio",
        embedding_dim=None,
    )
    if v.ref_text:
        entry.ref_text = v.ref_text
    desc = v.description or meta.get("speaker_description")
    if desc:
        entry.speaker_description = desc
    return entry


def embedding_entry(meta: dict[str, Any]) -> UploadedVoice:
    """An uploaded embedding's ``uploaded_voices`` item."""
    return UploadedVoice(
        name=meta.get("name", ""),
        consent=meta.get("consent", ""),
        created_at=meta.get("created_at", 0),
        file_size=meta.get("file_size", 0),
        mime_type=meta.get("mime_type", ""),
        embedding_source="direct",
        embedding_dim=meta["embedding_dim"],
    )


@router.get(
    "/v1/audio/voices",
    response_class=JSONResponse,
    responses={**ok(VoiceList), **declared(500, 502)},
)
async def list_voices(state: ApiState = Depends(api_state)) -> JSONResponse:
    try:
        voices = await state.backend.voices()
    except Exception as e:
        raise api_error(e) from None
    names = sorted({v.name.lower() for v in voices} | {"default"})
    uploaded = [
        uploaded_entry(v, state.uploads.get(v.name.lower(), {}))
        for v in voices
        if v.kind == "uploaded"
    ]
    for meta in state.uploads.values():
        if meta.get("embedding_source") == "direct":
            names.append(meta["name"].lower())
            uploaded.append(embedding_entry(meta))
    names.sort()
    return JSONResponse(dump(VoiceList(voices=names, uploaded_voices=uploaded)))


def clean_name(name: str) -> str:
    """``_validate_speaker_name``: trimmed, not empty, no path separators or NUL."""
    trimmed = (name or "").strip()
    if not trimmed or trimmed in (".", "..") or any(c in trimmed for c in "/\\\x00"):
        raise ApiError(f"Invalid voice name {name!r}: must be non-empty, no path separators or NUL")
    return trimmed


async def check_registration(state: ApiState, name: str) -> None:
    """``_check_registration_allowed``: a built-in speaker's name is taken."""
    voices = await state.backend.voices()
    if any(v.kind != "uploaded" and v.name.lower() == name.lower() for v in voices):
        raise ApiError(
            f"Voice name '{name}' is reserved by a built-in speaker of this model; "
            "choose a different name."
        )


def upload_mime(audio_sample: UploadFile) -> str:
    """The MIME type as vLLM-Omni decides it: the part's own, or from the file name's
    extension when that is ``application/octet-stream`` (else ``audio/wav``)."""
    mime = audio_sample.content_type or ""
    if mime == "application/octet-stream":
        ext = (audio_sample.filename or "").lower().rsplit(".", 1)[-1]
        by_ext = {"wav": "audio/wav", "mp3": "audio/mpeg", "mpeg": "audio/mpeg"}
        by_ext |= {"flac": "audio/flac", "ogg": "audio/ogg", "aac": "audio/aac"}
        by_ext |= {"webm": "audio/webm", "mp4": "audio/mp4"}
        mime = by_ext.get(ext, "audio/wav")
    if mime not in UPLOAD_MIME:
        raise ApiError(f"Unsupported MIME type: {mime}. Allowed: {set(UPLOAD_MIME)}")
    return mime


async def read_upload(audio_sample: UploadFile) -> bytes:
    """The uploaded bytes (at most the limit: a bigger file is refused as vLLM-Omni does)."""
    data = await audio_sample.read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        audio_sample.file.seek(0, 2)
        size = audio_sample.file.tell()
        raise ApiError(f"File size exceeds maximum limit of 10MB. Got {size} bytes.")
    return data


def embedding_values(state: ApiState, raw: str) -> list[float]:
    """``upload_voice_embedding``'s checks, in its words."""
    import json
    import math

    from app.api.checks import RuleContext
    from backends.vllm_omni.models import speech_rules
    from backends.vllm_omni.rules import embedding_dim

    try:
        emb = json.loads(raw)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ApiError(f"'speaker_embedding' must be valid JSON: {exc}") from None
    if not isinstance(emb, list) or not emb:
        raise ApiError("'speaker_embedding' must be a non-empty list of numbers")
    if len(emb) > 4096:
        raise ApiError("'speaker_embedding' exceeds maximum length (4096 elements)")
    if not all(isinstance(x, int | float) for x in emb):
        raise ApiError("'speaker_embedding' must contain only numeric values")
    if not all(math.isfinite(x) for x in emb):
        raise ApiError("'speaker_embedding' values must be finite (no NaN or Inf)")
    ctx = RuleContext(state.served_model, speech_rules(state.served_model))
    dim = embedding_dim(ctx) if ctx.rules.task_types else None
    if dim is not None and len(emb) != dim:
        raise ApiError(
            f"speaker_embedding has {len(emb)} dimensions; expected {dim} "
            "for the loaded Qwen3-TTS model"
        )
    return [float(x) for x in emb]


async def upload_embedding(state: ApiState, raw: str, consent: str, name: str) -> UploadedVoiceInfo:
    """An embedding upload: kept as metadata only (listenlab's voices clone from audio, so a
    request naming it gets the reference's refusal for the served model)."""
    clean = clean_name(name)
    emb = embedding_values(state, raw)
    await check_registration(state, clean)
    voice = UploadedVoiceInfo(
        name=clean,
        consent=consent,
        created_at=int(time.time()),
        embedding_source="direct",
        embedding_dim=len(emb),
    )
    state.uploads[clean.lower()] = {**dump(voice), "mime_type": "application/x-safetensors"}
    state.voice_cache = None
    return voice


async def upload_audio(state: ApiState, audio_sample: UploadFile, form: dict) -> UploadedVoiceInfo:
    """An audio upload: checked as vLLM-Omni checks it, then stored by the backend."""
    clean = clean_name(form["name"])
    ref_text = (form.get("ref_text") or "").strip() or None
    description = (form.get("speaker_description") or "").strip() or None
    data = await read_upload(audio_sample)
    mime = upload_mime(audio_sample)
    await check_registration(state, clean)
    backend = state.backend

    def keeps_voices() -> bool:  # a stand-in keeps uploads for any model, as vLLM-Omni does
        caps = backend.capabilities
        return caps.cloning or caps.voice_library or backend.note() is not None

    if not keeps_voices():
        with contextlib.suppress(Exception):
            await backend.refresh()
    if not keeps_voices():
        raise ApiError(
            f"the {backend.describe()} backend cannot clone voices, so voice uploads are not supported"
        )
    try:
        wav = await reference_wav(state, data, "the uploaded audio")
        v = await backend.add_voice(clean, wav, ref_text=ref_text, consent=form["consent"])
    except ApiError:
        raise
    except Exception as e:
        raise api_error(e) from None
    voice = UploadedVoiceInfo(
        name=v.name,
        consent=form["consent"],
        created_at=int(time.time()),
        mime_type=mime,
        file_size=len(data),
    )
    if v.ref_text or ref_text:
        voice.ref_text = v.ref_text or ref_text
    if description:
        voice.speaker_description = description
    state.uploads[clean.lower()] = dump(voice)
    state.voice_cache = None
    return voice


@router.post(
    "/v1/audio/voices",
    response_class=JSONResponse,
    responses={**ok(VoiceUploaded), **declared(400, 500, 502)},
)
async def upload_voice(
    # vLLM-Omni's parameter order (api_server.py upload_voice): a form missing both fields
    # lists consent first, and its ``param`` is ``body.consent``
    audio_sample: UploadFile | None = File(None),
    speaker_embedding: str | None = Form(None),
    consent: str = Form(...),
    name: str = Form(...),
    ref_text: str | None = Form(None),
    speaker_description: str | None = Form(None),
    state: ApiState = Depends(api_state),
) -> JSONResponse:
    if speaker_embedding is not None and audio_sample is not None:
        raise ApiError("'audio_sample' and 'speaker_embedding' are mutually exclusive")
    if speaker_embedding is not None:
        voice = await upload_embedding(state, speaker_embedding, consent, name)
    elif audio_sample is not None:
        form = {"name": name, "consent": consent, "ref_text": ref_text}
        form["speaker_description"] = speaker_description
        voice = await upload_audio(state, audio_sample, form)
    else:
        raise ApiError("Either 'audio_sample' or 'speaker_embedding' must be provided")
    return JSONResponse(dump(VoiceUploaded(success=True, voice=voice)))


def deleted(name: str) -> JSONResponse:
    return JSONResponse(
        dump(VoiceDeleted(success=True, message=f"Voice '{name}' deleted successfully"))
    )


@router.delete(
    "/v1/audio/voices/{name}",
    response_class=JSONResponse,
    responses={**ok(VoiceDeleted), **declared(400, 404, 500, 502)},
)
async def delete_voice(name: str, state: ApiState = Depends(api_state)) -> JSONResponse:
    """Only an uploaded voice can be deleted; any other name is vLLM-Omni's 404."""
    meta = state.uploads.get(name.lower())
    if meta is not None and meta.get("embedding_source") == "direct":
        state.uploads.pop(name.lower(), None)
        state.voice_cache = None
        return deleted(name)
    try:
        await state.backend.delete_voice(name)
    except (UnknownVoice, Unsupported):
        raise ApiError(f"Voice '{name}' not found", 404, "NotFoundError") from None
    except Exception as e:
        raise api_error(e) from None
    state.uploads.pop(name.lower(), None)
    state.voice_cache = None
    return deleted(name)
