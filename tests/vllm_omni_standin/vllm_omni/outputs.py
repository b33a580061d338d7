"""Stand-in of ``vllm_omni/outputs.py`` ``OmniRequestOutput`` (the version with ``error`` and
``from_error``) and of the ``vllm.outputs.CompletionOutput`` it carries.

As in the real class: the stage's completion outputs are flattened onto the request output;
``multimodal_output`` is the payload of the first completion output that has one, else the
output's own ``_multimodal_output``. For TTS the payload is ``{"audio": …, "sr": …}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CompletionOutput:
    index: int = 0
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    multimodal_output: dict[str, Any] | None = None


@dataclass
class OmniRequestOutput:
    request_id: str = ""
    prompt: Any = None
    prompt_token_ids: list[int] | None = None
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True
    metrics: Any = field(default_factory=dict)
    stage_id: int | None = None
    final_output_type: str = "text"
    _multimodal_output: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_status_code: int | None = None
    error_type: str | None = None

    @classmethod
    def from_error(
        cls,
        request_id: str,
        error_message: str,
        *,
        status_code: int | None = None,
        error_type: str | None = None,
    ) -> OmniRequestOutput:
        return cls(
            request_id=request_id,
            finished=True,
            error=error_message,
            error_status_code=status_code,
            error_type=error_type,
        )

    @property
    def multimodal_output(self) -> Any:
        for output in self.outputs:
            if mm := getattr(output, "multimodal_output", None):
                return mm
        return self._multimodal_output
