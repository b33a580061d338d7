"""What ``listenlab api``'s JSON routes answer, field for field as vLLM and vLLM-Omni 0.30.0
write it: one model per answer, which the route fills and dumps and ``/openapi.json`` declares.

Why models of our own rather than vLLM's: ``listenlab api`` must answer byte for byte as the
reference does (``tests/conformance``), without installing vLLM. The model list mirrors vLLM's
``ModelList``/``ModelCard``/``ModelPermission`` (``vllm/entrypoints/serve/engine/protocol.py``)
with listenlab's ``listenlab`` block; the voice answers are the dicts vLLM-Omni's
``api_server.py`` and ``serving_speech.py`` write (it declares them only as ``dict``); the
service routes are vLLM's (``/version``, ``/load``) and vLLM-Omni's ``/health``.

Each answer is dumped with ``exclude_unset=True``: a key vLLM-Omni leaves out unless it has a
value (an upload's ``ref_text``) is left unset and so absent, while one it writes as null (an
uploaded voice's ``embedding_dim``) is set to None and written. Keys keep the order the
reference writes them in. A key that is absent rather than null is typed ``| Absent``, so the
schema says "not required, never null".
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, WithJsonSchema
from pydantic.json_schema import SkipJsonSchema

from backends.vllm_omni.rules import SpeechRules

Absent = SkipJsonSchema[None]
"""``x: str | Absent = None``: a key written only when set."""


def dump(model: BaseModel) -> dict[str, Any]:
    """The answer's JSON: the fields the route set (see the module's docstring)."""
    return model.model_dump(exclude_unset=True)


# --------------------------------------------------------------------------- GET /v1/models

RulesCard = Annotated[
    dict[str, Any],
    WithJsonSchema(TypeAdapter(SpeechRules).json_schema(mode="serialization")),
]
"""The served model's request rules: :class:`SpeechRules` as JSON (sets sorted into lists,
tuples as lists; :func:`app.api.info.rules_card`)."""


class ModelPermission(BaseModel):
    """vLLM's ``ModelPermission`` (``listenlab api`` lists none)."""

    id: str
    object: str = "model_permission"
    created: int
    allow_create_engine: bool = False
    allow_sampling: bool = True
    allow_logprobs: bool = True
    allow_search_indices: bool = False
    allow_view: bool = True
    allow_fine_tuning: bool = False
    organization: str = "*"
    group: str | None = None
    is_blocking: bool = False


class ListenlabCard(BaseModel):
    """The card's ``listenlab`` block: what a remote listenlab (``vllm-omni+http``) needs
    before its first request. OpenAI clients ignore it."""

    backend: str
    streaming: bool
    cloning: bool
    languages: list[str]
    sample_rate: int | None
    channels: int
    speed: bool
    speed_streaming: bool
    instructions: bool
    seed: bool
    voice_library: bool
    rules: RulesCard
    model: str | None
    """The served model unit's name (None: a voice that stands in for no model)."""
    stand_in: str | None
    """What a stand-in does not do that the model would (None: it does it all)."""


class ModelCard(BaseModel):
    """vLLM's ``ModelCard`` (its fields and types) with the ``listenlab`` block.
    ``max_model_len`` is written only when the served model states one."""

    id: str
    object: str = "model"
    created: int
    owned_by: str
    root: str | None = None
    parent: str | None = None
    permission: list[ModelPermission] = Field(default_factory=list)
    max_model_len: int | None = None
    listenlab: ListenlabCard


class ModelList(BaseModel):
    """``GET /v1/models``: vLLM's ``ModelList``, one card (the served model)."""

    object: str = "list"
    data: list[ModelCard]


# --------------------------------------------------------------------------- /v1/audio/voices


class UploadedVoice(BaseModel):
    """One ``uploaded_voices`` item of ``GET /v1/audio/voices`` (vLLM-Omni's ``list_voices``)."""

    name: str
    consent: str
    created_at: int
    file_size: int
    mime_type: str
    embedding_source: Literal["audio", "direct"]
    embedding_dim: int | None
    """The embedding's length for an uploaded embedding; null for an audio clip."""
    ref_text: str | Absent = None
    speaker_description: str | Absent = None


class VoiceList(BaseModel):
    """``GET /v1/audio/voices``: every speaker name (built-in and uploaded, lower case,
    sorted, with ``default``), and the uploaded ones' details."""

    voices: list[str]
    uploaded_voices: list[UploadedVoice]


class UploadedVoiceInfo(BaseModel):
    """The ``voice`` of an upload's answer (``serving_speech.upload_voice``: an audio clip
    has ``mime_type`` and ``file_size``; ``upload_voice_embedding``: an embedding has
    ``embedding_source`` and ``embedding_dim``)."""

    name: str
    consent: str
    created_at: int
    mime_type: str | Absent = None
    file_size: int | Absent = None
    ref_text: str | Absent = None
    speaker_description: str | Absent = None
    embedding_source: Literal["direct"] | Absent = None
    embedding_dim: int | Absent = None


class VoiceUploaded(BaseModel):
    """``POST /v1/audio/voices``: the voice as stored."""

    success: bool
    voice: UploadedVoiceInfo


class VoiceDeleted(BaseModel):
    """``DELETE /v1/audio/voices/{name}``: ``Voice '<name>' deleted successfully``."""

    success: bool
    message: str


# --------------------------------------------------------------------------- service routes


class Healthy(BaseModel):
    """``GET /health`` 200."""

    status: Literal["healthy"]


class Unhealthy(BaseModel):
    """``GET /health`` 503: the backend's reason."""

    status: Literal["unhealthy"]
    reason: str


class Version(BaseModel):
    """``GET /version``: the vLLM release whose API is served."""

    version: str


class ServerLoad(BaseModel):
    """``GET /load``: requests in progress."""

    server_load: int


__all__ = [
    "Absent",
    "Healthy",
    "ListenlabCard",
    "ModelCard",
    "ModelList",
    "ModelPermission",
    "RulesCard",
    "ServerLoad",
    "Unhealthy",
    "UploadedVoice",
    "UploadedVoiceInfo",
    "Version",
    "VoiceDeleted",
    "VoiceList",
    "VoiceUploaded",
    "dump",
]
