"""MOSS-TTS-Nano (``OpenMOSS-Team/MOSS-TTS-Nano``): one AR stage with its codec, cloning only.

Read from ``vllm-project/vllm-omni``:

* ``vllm_omni/entrypoints/openai/tts_adapters/moss_tts.py`` @ 0131cb55
  (``_build_moss_tts_params``, the "legacy nano path", and ``build``): placeholder prompt
  ``prompt_token_ids = [1]`` with ``additional_information = {"text": [text], "mode":
  ["voice_clone"], "prompt_audio_array": [[samples, sr]]}`` (+ ``"max_new_frames": [n]`` for
  ``max_new_tokens``, + ``"seed": [seed]`` because the model samples internally); ``ref_audio``
  is required ("MOSS-TTS-Nano requires 'ref_audio'"); ``ref_text`` and ``voice`` are not used;
  ``apply_max_new_tokens`` sets stage-0 ``max_tokens``; a ``cache_salt`` over the conditioning.
* ``vllm_omni/model_executor/models/moss_tts_nano/modeling_moss_tts_nano.py``: outputs come
  under ``model_outputs`` with ``sr`` = ``audio_tokenizer_sample_rate`` (48000) as a list of
  0-d tensors, and a last empty chunk marks the end. That version downmixes the codec's stereo
  to mono (``_to_mono_1d``); the older ``moss_tts_nano/gradio_demo.py`` played 2-channel
  interleaved audio. listenlab reads the layout of each chunk (``[T]`` mono, ``[2, T]``
  stereo), so either build plays correctly; Capabilities say mono (the current one).

The server accepts ``ref_text`` and drops it; listenlab does the same (the voice library always
sends a transcript with a clip), and says so in the README.
"""

from __future__ import annotations

import hashlib
from typing import Any

from backends.base import SpeechRequest
from backends.vllm_omni.model_table import seed_model
from backends.vllm_omni.models.base import ModelAdapter, decode_ref_audio, max_new_tokens


class MossTTSNano(ModelAdapter):
    name = "moss_tts_nano"
    aliases = ("moss-tts-nano",)
    facts = seed_model("moss_tts_nano")
    architectures = frozenset({"MossTTSNanoForCausalLM"})
    model_types = frozenset({"moss_tts_nano"})
    name_keys = ("mossttsnano",)
    requires_ref_audio = True
    sources = (
        "vllm_omni/entrypoints/openai/tts_adapters/moss_tts.py",
        "vllm_omni/model_executor/models/moss_tts_nano/modeling_moss_tts_nano.py",
        "examples/online_serving/text_to_speech/moss_tts_nano/gradio_demo.py",
    )

    def build_prompt(self, request: SpeechRequest) -> dict[str, Any]:
        self.check(request)
        wav, sr = decode_ref_audio(request.ref_audio or b"")
        info: dict[str, Any] = {
            "text": [request.text],
            "mode": ["voice_clone"],
            "prompt_audio_array": [[wav.tolist(), sr]],
        }
        n = max_new_tokens(request, self.default_max_new_tokens)
        if n is not None:
            info["max_new_frames"] = [n]
        if request.seed is not None:
            info["seed"] = [int(request.seed)]
        salt = hashlib.sha256(repr((request.text, n, request.seed)).encode())
        salt.update(wav.tobytes())
        return {
            "prompt_token_ids": [1],
            "additional_information": info,
            "cache_salt": f"listenlab-{salt.hexdigest()[:32]}",
        }
