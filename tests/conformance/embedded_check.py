"""What the embedded backend relies on, read from vLLM-Omni's real classes (conformance env).

Run with the conformance environment's Python; prints one JSON object that
``test_embedded_real.py`` (listenlab's env) compares with ``backends/vllm_omni/embedded.py`` and with the
stand-in in ``tests/vllm_omni_standin``. Nothing here needs a GPU: signatures are read with
``inspect``, output objects are built from the real classes, the deploy YAMLs are the shipped
ones, and listenlab's own output decoding runs on those real objects.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def params(fn) -> list[list[str]]:
    """[name, kind] per parameter (kind: POSITIONAL_OR_KEYWORD, KEYWORD_ONLY, VAR_KEYWORD, …)."""
    return [[p.name, p.kind.name] for p in inspect.signature(fn).parameters.values()]


def decode_real_outputs() -> dict:
    """listenlab's decoding (backends/vllm_omni/embedded.py) on real OmniRequestOutput objects shaped as
    vLLM-Omni 0.30's output processor shapes them (DELTA: one tensor per output; the finished
    FINAL_ONLY output: one consolidated tensor; sr: a 0-d tensor)."""
    import numpy as np
    import torch
    from vllm.outputs import CompletionOutput, RequestOutput
    from vllm_omni.outputs import OmniRequestOutput

    from backends.vllm_omni.embedded import OutputCursor, audio_payload

    def out(audio, finished: bool, key: str = "model_outputs"):
        c = CompletionOutput(
            index=0, text="", token_ids=[], cumulative_logprob=None, logprobs=None,
            finish_reason="stop" if finished else None,
        )  # fmt: skip
        c.multimodal_output = {key: audio, "sr": torch.tensor(24000)}
        ro = RequestOutput(
            request_id="r", prompt=None, prompt_token_ids=[], prompt_logprobs=None,
            outputs=[c], finished=finished,
        )  # fmt: skip
        return OmniRequestOutput.from_stage_output(
            ro, request_id="r", stage_id=1, final_output_type="audio", finished=finished
        )

    x = torch.linspace(-0.5, 0.5, 4800)
    chunks = [x[:1920], x[1920:3840], x[3840:]]
    result = {}
    for mode, outs in {
        "delta": [out(c, i == 2) for i, c in enumerate(chunks)],
        "final_only": [out(torch.cat(chunks), True)],
        "delta_audio_key": [out(c, i == 2, "audio") for i, c in enumerate(chunks)],
    }.items():
        cursor, pcm = OutputCursor(), []
        for o in outs:
            found = audio_payload(o)
            assert found is not None, mode
            pcm += [p.tolist() for p in cursor.new_pcm(*found)]
        flat = np.concatenate([np.asarray(p, dtype=np.int16) for p in pcm])
        want = (np.clip(x.numpy(), -1, 1) * 32767).astype(np.int16)
        result[mode] = {
            "exact": bool(np.array_equal(flat, want)),
            "rate": cursor.sample_rate,
            "outputs_have_multimodal_output": all(o.multimodal_output for o in outs),
        }
    return result


def constructed_async_omni(cls):
    """A real ``AsyncOmni`` built by its own ``__init__`` with only the engine replaced (no
    GPU here): what the embedded backend reads is checked on an instance, not in source text."""
    import tempfile
    from unittest.mock import MagicMock

    class NoEngine(cls):
        def _create_engine(self, **_kwargs):
            engine = MagicMock(name="engine")
            engine.default_sampling_params_list = []
            engine.stage_configs = []
            engine.async_chunk = False
            engine.num_stages = 1
            return engine

    return NoEngine(tempfile.mkdtemp(prefix="ll-asyncomni-"))


def main() -> None:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind
    from vllm_omni import AsyncOmni
    from vllm_omni.entrypoints import utils as omni_utils
    from vllm_omni.outputs import OmniRequestOutput
    from vllm_omni.platforms import current_omni_platform

    from tests.conformance.engine import SEEDS, deploy_chunking, load_deploy

    coerced = omni_utils.coerce_param_message_types([SamplingParams(), SamplingParams()], True)
    live = constructed_async_omni(AsyncOmni)
    refused = {}
    for legacy in ("stage_configs_path", "deploy_config"):
        try:
            omni_utils.prepare_stage_config_inputs("m", {legacy: "/x.yaml"}, trust_remote_code=None)
            refused[legacy] = None
        except ValueError as e:
            refused[legacy] = str(e)
    import vllm_omni

    report = {
        "version": getattr(vllm_omni, "__version__", None),
        "wheel_root": str(Path(vllm_omni.__file__).resolve().parents[1]),
        "engine_kwargs_refused": refused,
        "async_omni": {
            "init": params(AsyncOmni.__init__),
            "generate": params(AsyncOmni.generate),
            "abort": params(AsyncOmni.abort),
            "has": {
                name: hasattr(live, name)
                for name in (
                    "check_health",
                    "shutdown",
                    "abort",
                    "default_sampling_params_list",
                    "model_config",
                    "errored",
                )
            },
        },
        "coerce_param_message_types": {
            "params": params(omni_utils.coerce_param_message_types),
            "streaming_kind": [p.output_kind.name for p in coerced],
            "non_streaming_kind": [
                p.output_kind.name
                for p in omni_utils.coerce_param_message_types([SamplingParams()], False)
            ],
            "kinds": {k.name: k.value for k in RequestOutputKind},
        },
        "omni_request_output": {
            "fields": sorted(OmniRequestOutput.__dataclass_fields__),
            "multimodal_output_is_property": isinstance(
                inspect.getattr_static(OmniRequestOutput, "multimodal_output", None), property
            ),
            "from_error": params(OmniRequestOutput.from_error),
        },
        "platform": {
            "is_available": hasattr(current_omni_platform, "is_available"),
            "is_cuda": hasattr(current_omni_platform, "is_cuda"),
        },
        "decode": decode_real_outputs(),
        "chunking": {name: deploy_chunking(seed) for name, seed in SEEDS.items()},
        "deploy": {
            name: {
                "async_chunk": load_deploy(seed).get("async_chunk"),
                "stages": len(load_deploy(seed).get("stages") or []),
                "stage0_sampling": (load_deploy(seed)["stages"][0].get("default_sampling_params")),
            }
            for name, seed in SEEDS.items()
        },
    }
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
