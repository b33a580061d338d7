"""Stand-in of ``vllm_omni/entrypoints/utils.py``: the delta-message helpers (PR #2911).

Same behaviour as the real ``coerce_param_message_types`` / ``maybe_coerce_to_message_type``:
streaming turns every stage's ``SamplingParams`` into DELTA outputs, non-streaming into
FINAL_ONLY, cloning the params unless ``skip_clone`` is set.
"""

from __future__ import annotations

from vllm_omni.sampling_params import RequestOutputKind, SamplingParams


def coerce_param_message_types(params: list, is_streaming: bool):
    for idx, sp in enumerate(params):
        if isinstance(sp, SamplingParams):
            params[idx] = maybe_coerce_to_message_type(sp, is_streaming)
    return params


def maybe_coerce_to_message_type(params: SamplingParams, is_streaming: bool):
    target = RequestOutputKind.DELTA if is_streaming else RequestOutputKind.FINAL_ONLY
    if params.output_kind == target:
        return params
    if not params.skip_clone:
        params = params.clone()
        params.skip_clone = True
    params.output_kind = target
    return params
