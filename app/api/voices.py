"""``GET/POST/DELETE /v1/audio/voices``: vLLM-Omni's voice library over the backend's.

Why a listenlab backend can answer it: cloning backends keep uploaded voices
(``Backend.add_voice``); what vLLM-Omni also reports (consent, upload time, size, MIME type) is
kept per app in :attr:`~app.api.state.ApiState.uploads`.
"""

import contextlib
import mimetypes
import time
from typing import Any

from fastapi import APIRouter, Depends, File, Form, UploadFile

from app.api.clips import reference_wav
from app.api.errors import ApiError, api_error
from app.api.limits import MAX_UPLOAD_BYTES, UPLOAD_MIME
from app.api.state import ApiState, api_state
from backends.base import Voice
from backends.errors import UnknownVoice, Unsupported

router = APIRouter()


def uploaded_entry(v: Voice, meta: dict[str, Any]) -> dict[str, Any]:
    """One ``uploaded_voices`` item, as vLLM-Omni lists it."""
    d: dict[str, Any] = {
        "name": v.name,
        "consent": meta.get("consent", ""),
        "created_at": meta.get("created_at", 0),
        "file_size": meta.get("file_size", 0),
        "mime_type": meta.get("mime_type", "audio/wav"),
        "embedding_source": "audio",
        "embedding_dim": None,
    }
    if v.ref_text:
        d["ref_text"] = v.ref_text
    desc = v.description or meta.get("speaker_description")
    if desc:
        d["speaker_description"] = desc
    return d


@router.get("/v1/audio/voices")
async def list_voices(state: ApiState = Depends(api_state)):
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
    return {"voices": names, "uploaded_voices": uploaded}


async def _check_upload_allowed(state: ApiState, has_audio: bool, embedding: str | None) -> None:
    backend = state.backend
    caps = backend.capabilities
    if not caps.cloning:
        with contextlib.suppress(Exception):
            caps = await backend.refresh()
    if not caps.cloning:
        raise ApiError(
            f"the {backend.describe()} backend cannot clone voices, so voice uploads are not supported"
        )
    if embedding is not None:
        if has_audio:
            raise ApiError("Provide either audio_sample or speaker_embedding, not both")
        raise ApiError(
            "speaker_embedding uploads are Qwen3-only and not supported by listenlab api"
        )
    if not has_audio:
        raise ApiError("Either audio_sample or speaker_embedding is required")


async def _read_upload(audio_sample: UploadFile) -> tuple[bytes, str]:
    """The uploaded bytes (at most the limit) and their MIME type (from the name if unsaid)."""
    data = await audio_sample.read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        raise ApiError(f"Audio file too large (max {MAX_UPLOAD_BYTES // (1024 * 1024)} MB)")
    mime = (audio_sample.content_type or "").lower()
    if mime in ("", "application/octet-stream"):
        mime = (mimetypes.guess_type(audio_sample.filename or "")[0] or "").lower()
    if mime not in UPLOAD_MIME:
        raise ApiError(
            f"Unsupported audio MIME type {mime or 'unknown'!r}; allowed: {', '.join(sorted(UPLOAD_MIME))}"
        )
    return data, mime


@router.post("/v1/audio/voices")
async def upload_voice(
    name: str = Form(...),
    consent: str = Form(...),
    audio_sample: UploadFile | None = File(None),
    speaker_embedding: str | None = Form(None),
    ref_text: str | None = Form(None),
    speaker_description: str | None = Form(None),
    state: ApiState = Depends(api_state),
):
    await _check_upload_allowed(state, audio_sample is not None, speaker_embedding)
    assert audio_sample is not None
    clean = name.strip()
    if not clean or clean in (".", "..") or any(c in clean for c in "/\\\x00"):
        raise ApiError(f"Invalid voice name {name!r}")
    data, mime = await _read_upload(audio_sample)
    try:
        wav = await reference_wav(state, data, "the uploaded audio")
        v = await state.backend.add_voice(clean, wav, ref_text=ref_text or None, consent=consent)
    except Exception as e:
        raise api_error(e) from None
    meta = {
        "name": v.name,
        "consent": consent,
        "created_at": int(time.time()),
        "mime_type": mime,
        "file_size": len(data),
    }
    if v.ref_text or ref_text:
        meta["ref_text"] = v.ref_text or ref_text
    if speaker_description:
        meta["speaker_description"] = speaker_description
    state.uploads[clean.lower()] = meta
    return {"success": True, "voice": meta}


@router.delete("/v1/audio/voices/{name}")
async def delete_voice(name: str, state: ApiState = Depends(api_state)):
    try:
        await state.backend.delete_voice(name)
    except UnknownVoice:
        raise ApiError(f"Voice '{name}' not found", 404) from None
    except Unsupported as e:
        raise ApiError(str(e), 400) from None
    except Exception as e:
        raise api_error(e) from None
    state.uploads.pop(name.lower(), None)
    return {"success": True, "message": f"Voice '{name}' deleted successfully"}
