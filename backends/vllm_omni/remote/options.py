"""The remote engine's settings, parsed once from its spec (``vllm-omni+http://…?…``).

Why alone: the backend, the server connection and every transport read them, and none of them
may read the environment (``app/config.py`` does, and passes the API key in as a spec default:
:func:`backends.settings.set_spec_defaults`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backends.errors import InvalidRequest

MODES = ("sse", "audio", "ws")
FORMATS = ("pcm", "wav")


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
    """The server's ``--api-key`` (sent as Bearer). Prefer ``$LISTENLAB_VLLM_API_KEY`` (read by
    ``app/config.py``, which hands it to every remote spec): a key in a spec is accepted but is
    a secret in a command line."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidRequest(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.format not in FORMATS:
            raise InvalidRequest(f"format must be pcm or wav, got {self.format!r}")

    @classmethod
    def from_params(cls, params: dict[str, str]) -> RemoteOptions:
        """The spec's parameters; an unknown or malformed one is refused with its name."""
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
                    kw[key] = p.pop(key).strip().lower() in {"1", "true", "yes", "on"}
        except ValueError as e:
            if isinstance(e, InvalidRequest):
                raise
            raise InvalidRequest(f"bad vllm-omni+http parameter: {e}") from None
        if p:
            raise InvalidRequest(f"unknown vllm-omni+http parameter(s): {', '.join(sorted(p))}")
        kw["mode"] = kw.get("mode") or "sse"
        kw.setdefault("format", "pcm" if kw["mode"] == "ws" else "wav")
        return cls(**kw)


__all__ = ["FORMATS", "MODES", "RemoteOptions"]
