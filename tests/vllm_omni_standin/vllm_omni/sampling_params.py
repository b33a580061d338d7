"""Stand-in of the two vLLM types the backend touches through ``default_sampling_params_list``.

Real: ``vllm.sampling_params.SamplingParams`` and ``RequestOutputKind`` (CUMULATIVE = 0,
DELTA = 1, FINAL_ONLY = 2). Only the attributes vLLM-Omni's speech serving reads or writes are
here: ``temperature``, ``top_p``, ``top_k``, ``max_tokens``, ``min_tokens``,
``repetition_penalty``, ``stop_token_ids``, ``seed``, ``extra_args``,
``output_kind``, ``skip_clone`` and ``clone()``. (In vLLM they live in the ``vllm`` package; the
stand-in keeps them inside ``vllm_omni`` so that it never shadows a real ``vllm``.)
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass
from typing import Any


class RequestOutputKind(enum.Enum):
    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int | None = 16
    min_tokens: int = 0
    repetition_penalty: float = 1.0
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    extra_args: dict[str, Any] | None = None
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE
    skip_clone: bool = False

    def clone(self) -> SamplingParams:
        return copy.deepcopy(self)
