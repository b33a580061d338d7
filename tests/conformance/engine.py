"""The scripted engine client: what vLLM-Omni's serving code talks to instead of the GPU engine.

Runs in the conformance environment (``.venv-conformance``, vllm 0.30.0 + vllm-omni 0.30.0).
Everything the serving code reads from an ``AsyncOmni`` is here and nothing else: the
``model_config`` (``model``, ``hf_config``, ``max_model_len``, ``async_chunk``), the
``stage_configs`` that make ``OmniOpenAIServingSpeech`` pick the seed model's adapter, the
stage-0/1 ``default_sampling_params_list`` (real ``vllm.SamplingParams``), ``generate`` (an async
generator of real ``OmniRequestOutput`` objects), ``abort``, ``check_health`` and ``errored``.

``generate`` is the only scripted part. It reads the text out of the prompt the real adapter
built (so the adapter's prompt shape is checked on the way), speaks it with listenlab's Piper
voice (noise scales 0: deterministic), resamples it to the seed model's native rate, cuts it on
the model's codec-frame schedule (``backends/profile.py``, whose numbers
``test_wire_profiles_match_the_deploy_yamls`` checks against the real deploy YAMLs), paces it,
and yields it the way vLLM-Omni 0.30.0's output processor hands the final stage's payload on
(``outputs/output_processor.py``, ``outputs/mm_outputs.py``): DELTA drains the accumulated
audio after every step, so each output carries only the new chunk as one tensor; CUMULATIVE and
the finished output of FINAL_ONLY carry ``consolidate_tensors``' single tensor of all audio so
far; ``sr`` is metadata, its latest value as a 0-d tensor. Faults for the probe: ``replay`` (at the first seam
with 0.6 s of audio before it, the chunk starts with those 0.6 s again) and ``doubled`` (every DELTA chunk carries all audio so far, the
cumulative-as-delta bug of issues #3032/#2907). Like the real bugs, both reach streams only
(DELTA requests); whole-file requests stay correct.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

# --------------------------------------------------------------------------- seed models


@dataclass(frozen=True)
class Seed:
    """One seed model as vLLM-Omni 0.30.0 deploys it (facts from the installed package)."""

    name: str
    """The model unit's name (backends/vllm_omni/models/<name>.py)."""
    served: str
    """The Hugging Face id the server is started with (``--served-model-name``)."""
    deploy_yaml: str
    """vllm_omni/deploy/<file> of this model."""
    stages: tuple[tuple[str, str], ...]
    """(model_stage, model_arch) per stage, as the deploy/pipeline config names them."""
    config: dict[str, Any] = field(default_factory=dict)
    """config.json of the model directory (only the keys the serving code reads)."""
    audio_key: str = "model_outputs"
    """The multimodal key the final stage's model writes (``model_outputs`` or ``audio``)."""
    end_sentinel: bool = False
    """The model ends its stream on an empty chunk (MOSS-TTS-Nano's decode loop)."""
    tokenizer: bool = False
    """The adapter loads a tokenizer from the model directory (a byte-level one is written)."""

    @property
    def profile(self) -> str:
        """The unit's wire profile (backends/profile.py): its chunk schedule."""
        from backends.vllm_omni.models import UNITS

        return UNITS[self.name].profile


QWEN_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|voice|>", "<|audio_start|>", "<|audio_end|>"]

SEEDS: dict[str, Seed] = {
    s.name: s
    for s in (
        Seed(
            name="qwen3_tts",
            served="Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
            deploy_yaml="qwen3_tts.yaml",
            stages=(
                ("qwen3_tts", "Qwen3TTSTalkerForConditionalGeneration"),
                ("code2wav", "Qwen3TTSCode2Wav"),
            ),
            config={
                "architectures": ["Qwen3TTSForConditionalGeneration"],
                "model_type": "qwen3_tts",
                "tts_model_type": "custom_voice",
                "talker_config": {
                    # the CustomVoice speakers vLLM-Omni's docs list (docs/serving/speech_api.md,
                    # shared/reference/vllm-omni-speech-api.md section 5.1), in no order of ours;
                    # the ids are ASSUMED (only counted)
                    "spk_id": {
                        name: 3000 + i
                        for i, name in enumerate(
                            ("vivian", "serena", "uncle_fu", "dylan", "eric")
                            + ("ryan", "aiden", "ono_anna", "sohee")
                        )
                    },
                    # the official Qwen3-TTS languages (tts_adapters/base.py
                    # DEFAULT_TTS_LANGUAGES less Auto); the ids are ASSUMED (only counted)
                    "codec_language_id": {
                        lang: 2050 + i
                        for i, lang in enumerate(
                            ("chinese", "english", "german", "italian", "portuguese")
                            + ("spanish", "japanese", "korean", "french", "russian")
                        )
                    },
                    "spk_is_dialect": {},
                },
            },
        ),
        Seed(
            name="fish_speech",
            served="fishaudio/s2-pro",
            deploy_yaml="fish_qwen3_omni.yaml",
            stages=(
                ("fish_speech_slow_ar", "FishSpeechSlowARForConditionalGeneration"),
                ("fish_speech_dac_decoder", "FishSpeechDACDecoder"),
            ),
            config={"model_type": "fish_qwen3_omni"},
            tokenizer=True,
        ),
        Seed(
            name="cosyvoice3",
            served="FunAudioLLM/Fun-CosyVoice3-0.5B-2512",
            deploy_yaml="cosyvoice3.yaml",
            stages=(
                ("cosyvoice3_talker", "CosyVoice3Model"),
                ("cosyvoice3_code2wav", "CosyVoice3Model"),
            ),
            audio_key="audio",
            tokenizer=True,
        ),
        Seed(
            name="moss_tts_nano",
            served="OpenMOSS-Team/MOSS-TTS-Nano",
            deploy_yaml="moss_tts_nano.yaml",
            stages=(("moss_tts_nano", "MossTTSNanoForCausalLM"),),
            config={"architectures": ["MossTTSNanoForCausalLM"], "model_type": "moss_tts_nano"},
            end_sentinel=True,
        ),
        Seed(
            name="voxcpm2",
            served="openbmb/VoxCPM2",
            deploy_yaml="voxcpm2.yaml",
            stages=(("latent_generator", "VoxCPM2TalkerForConditionalGeneration"),),
            config={
                "architectures": ["VoxCPM2TalkerForConditionalGeneration"],
                # ASSUMED values; the keys are the ones build_voxcpm2_prompt reads
                "audio_vae_config": {"sample_rate": 16000, "encoder_rates": [2, 5, 8, 8]},
                "patch_size": 4,
            },
            tokenizer=True,
        ),
        # models whose adapters build their prompt without the checkpoint (no tokenizer)
        Seed(
            name="audex",
            served="nvidia/Nemotron-Labs-Audex-2B",
            deploy_yaml="audex_tts.yaml",
            stages=(("audex_thinker", "AudexThinker"), ("audex_code2wav", "AudexCode2Wav")),
        ),
        Seed(
            name="ming_flash_omni_tts",
            served="inclusionAI/Ming-flash-omni-2.0",
            deploy_yaml="ming_flash_omni_tts.yaml",
            stages=(("ming_tts", "MingFlashOmniTalkerForConditionalGeneration"),),
            audio_key="audio",
        ),
        Seed(
            name="step_audio2",
            served="stepfun-ai/Step-Audio2",
            deploy_yaml="step_audio_2.yaml",
            stages=(
                ("step_audio2_thinker", "StepAudio2ThinkerForConditionalGeneration"),
                ("token2wav", "StepAudio2Token2WavModel"),
            ),
        ),
    )
}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte <-> printable-character table (the byte-level BPE alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


def write_byte_tokenizer(path: Path, bos: bool) -> None:
    """A lossless byte-level tokenizer (no merges) with the Qwen control tokens, saved the way
    ``AutoTokenizer.from_pretrained`` loads it offline. The adapters encode with it and the
    scripted engine decodes the prompt's text back with it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(_bytes_to_unicode().values())}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>", *QWEN_SPECIAL]
    tok.add_special_tokens(specials)
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token=None
    )
    fast.save_pretrained(str(path))


def make_model_dir(seed: Seed, root: Path) -> Path:
    """A directory shaped like the seed model for everything the serving code reads (no weights)."""
    path = root / seed.served.split("/")[-1]
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(seed.config), encoding="utf-8")
    if seed.name == "qwen3_tts":  # read by tts_adapters/capabilities.load_codec_frame_rate
        (path / "speech_tokenizer").mkdir(exist_ok=True)
        (path / "speech_tokenizer" / "config.json").write_text(
            json.dumps({"output_sample_rate": 24000, "encode_downsample_rate": 1920}),
            encoding="utf-8",
        )
    if seed.tokenizer:
        write_byte_tokenizer(path, bos=seed.name == "voxcpm2")
        if seed.name == "cosyvoice3":
            write_byte_tokenizer(path / "CosyVoice-BlankEN", bos=False)
    return path


# --------------------------------------------------------------------------- the voice


class PiperVoice:
    """listenlab's own Piper voice (``piper?deterministic=1``) converted to the model's rate
    exactly as listenlab's wire profile converts it (``backends/profile.py``
    ``ProfileBackend``, unpaced), memoised per text. So the samples vLLM-Omni's serving code
    receives are the samples ``listenlab api`` serves for the same text, and the two servers'
    PCM can be compared byte for byte: every difference is then the serving code's."""

    def __init__(self) -> None:
        from backends.registry import load_backend

        self.piper = load_backend("piper?deterministic=1")
        self._cache: dict[tuple[str, int], np.ndarray] = {}

    def speak(self, text: str, rate: int) -> np.ndarray:
        """Mono float32 at ``rate``: int16 samples over 32768, exact in float32."""
        key = (text, rate)
        if key not in self._cache:
            from dataclasses import replace

            from backends.base import SpeechRequest
            from backends.profile import PROFILES, ProfileBackend

            profile = replace(PROFILES["custom"], sample_rate=rate, channels=1, pace=0.0)
            backend = ProfileBackend(self.piper, profile)

            async def collect() -> np.ndarray:
                return np.concatenate([c.pcm async for c in backend.stream(SpeechRequest(text))])

            pcm = asyncio.run(collect())
            self._cache[key] = pcm.astype(np.float32) / np.float32(32768.0)
        return self._cache[key]


def reference_format(seed: Seed, model_dir: Path) -> tuple[int, int, int]:
    """``(rate, codec_channels, served_channels)`` of a seed model, read from vLLM-Omni's own
    code and configs, never from listenlab's tables: Qwen3-TTS's Code2Wav reads
    ``speech_tokenizer/config.json`` ``output_sample_rate``; Fish Speech's DAC is
    ``dac_utils.DAC_SAMPLE_RATE``; CosyVoice3 is ``CosyVoice3Config().sample_rate``;
    MOSS-TTS-Nano's codec is stereo at ``audio_tokenizer_sample_rate`` (48000, the
    ``MossTTSNano`` default) and the model mixes it down with ``_to_mono_1d``, run here on a
    stereo chunk to learn what it serves; VoxCPM2's talker uses ``config.sample_rate`` with
    the default 48000 (its checkpoint config has none)."""
    if seed.name == "qwen3_tts":
        cfg = json.loads((model_dir / "speech_tokenizer" / "config.json").read_text())
        return int(cfg["output_sample_rate"]), 1, 1
    if seed.name == "fish_speech":
        from vllm_omni.model_executor.models.fish_speech.dac_utils import DAC_SAMPLE_RATE

        return int(DAC_SAMPLE_RATE), 1, 1
    if seed.name == "cosyvoice3":
        from vllm_omni.transformers_utils.configs.cosyvoice3 import CosyVoice3Config

        return int(CosyVoice3Config().sample_rate), 1, 1
    if seed.name == "moss_tts_nano":
        import torch
        from vllm_omni.model_executor.models.moss_tts_nano.modeling_moss_tts_nano import (
            _to_mono_1d,
        )

        served = _to_mono_1d(torch.zeros(2, 8))
        return 48000, 2, 1 if served.ndim == 1 else int(served.shape[0])
    if seed.name == "audex":
        from vllm_omni.model_executor.models.audex.speech_decoder.configuration_audex_causal_speech_decoder import (  # noqa: E501
            AudexCausalSpeechDecoderConfig,
        )

        return int(AudexCausalSpeechDecoderConfig().sample_rate), 1, 1
    if seed.name == "ming_flash_omni_tts":
        from vllm_omni.model_executor.models.common.ming.audio_vae import AudioVAEConfig

        return int(AudioVAEConfig().sample_rate), 1, 1
    if seed.name == "step_audio2":
        from vllm_omni.model_executor.models.step_audio2.step_audio2_constants import (
            DEFAULT_TOKEN2WAV_CONFIG,
        )

        return int(DEFAULT_TOKEN2WAV_CONFIG.sample_rate), 1, 1
    return 48000, 1, 1


# --------------------------------------------------------------------------- prompt reading

_FISH_TAG = re.compile(r"<\|speaker:\d+\|>")
_TEMPLATES = {
    "audex": re.compile(
        r"<\|text to speech\|> Generate speech for this transcription\.(.*)<\|im_end\|>", re.S
    ),
    "step_audio2": re.compile(
        r"<\|im_start\|>user\n(.*)<\|im_end\|>\n<\|im_start\|>assistant", re.S
    ),
}
"""Where a chat-template prompt (Audex's, Step-Audio2's) carries the text."""


class PromptError(ValueError):
    """The adapter built a prompt this model's stage would not accept."""


def _one(info: dict, key: str) -> Any:
    v = info.get(key)
    if isinstance(v, list):
        if len(v) != 1:
            raise PromptError(f"additional_information[{key!r}] must be a one-item list")
        return v[0]
    return v


def spoken_text(seed: Seed, prompt: Any, tokenizer: Any) -> str:
    """The text the model would speak, read from the prompt the real adapter built."""
    if not isinstance(prompt, dict):
        raise PromptError(f"{seed.name}: the prompt must be a dict, got {type(prompt).__name__}")
    if seed.name == "cosyvoice3":
        text = prompt.get("prompt")
        if not isinstance(text, str) or "audio" not in (prompt.get("multi_modal_data") or {}):
            raise PromptError("cosyvoice3: prompt needs the text and multi_modal_data['audio']")
        return text
    if seed.name in _TEMPLATES:  # a chat-template string with the text in the user turn
        m = _TEMPLATES[seed.name].search(str(prompt.get("prompt")))
        if m is None:
            raise PromptError(f"{seed.name}: the prompt is not the model's template")
        return m.group(1).strip()
    info = prompt.get("additional_information")
    ids = prompt.get("prompt_token_ids")
    if not isinstance(info, dict) or not isinstance(ids, list) or not ids:
        raise PromptError(f"{seed.name}: prompt needs prompt_token_ids and additional_information")
    if seed.name == "voxcpm2":
        text_ids = _one(info, "text_token_ids")
        return tokenizer.decode(text_ids, skip_special_tokens=True)
    text = _one(info, "text")
    if not isinstance(text, str):
        raise PromptError(f"{seed.name}: additional_information['text'] is not a string")
    if seed.name == "ming_flash_omni_tts" and info.get("ming_task") != "instruct":
        raise PromptError("ming_flash_omni_tts: ming_task must be instruct")
    if seed.name == "moss_tts_nano" and _one(info, "mode") != "voice_clone":
        raise PromptError("moss_tts_nano: mode must be voice_clone")
    return _FISH_TAG.sub("", text).strip() if seed.name == "fish_speech" else text


# --------------------------------------------------------------------------- the engine


@dataclass
class Script:
    """What ``generate`` does besides speaking: pace and injected faults."""

    pace: float = 0.0
    """Chunks are released at ``pace`` x real time from the request (0 = as fast as possible)."""
    fault: str | None = None
    """``replay`` or ``doubled`` (see the module docstring)."""
    fault_seconds: float = 0.6


class ScriptedEngine:
    """Stands in for ``AsyncOmni`` towards ``OmniOpenAIServingSpeech`` (see the module docstring)."""

    def __init__(self, seed: Seed, model_dir: Path, script: Script, served: str) -> None:
        from vllm import SamplingParams

        from backends.profile import PROFILES

        self.seed, self.script = seed, script
        self.rate, self.codec_channels, self.channels = reference_format(seed, model_dir)
        # the chunk schedule is the profile's (checked against the deploy YAMLs); the rate and
        # channels are vLLM-Omni's own (reference_format)
        self.profile = replace(
            PROFILES[seed.profile], sample_rate=self.rate, channels=self.channels
        )
        cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        hf: Any = SimpleNamespace(**cfg)
        if seed.name == "cosyvoice3":  # its config.json says nothing; vLLM-Omni's class does
            from vllm_omni.transformers_utils.configs.cosyvoice3 import CosyVoice3Config

            hf = CosyVoice3Config()
        if "talker_config" in cfg:
            hf.talker_config = SimpleNamespace(**cfg["talker_config"])
        deploy = load_deploy(seed)
        self.max_model_len = int(deploy["stages"][0].get("max_model_len") or 4096)
        self.model_config = SimpleNamespace(
            model=str(model_dir),
            served_model_name=served,
            hf_config=hf,
            max_model_len=self.max_model_len,
            async_chunk=bool(deploy.get("async_chunk", False)),
            runner_type="generate",
            allowed_local_media_path="",  # ModelConfig defaults (no --allowed-local-media-path)
            allowed_media_domains=None,
        )
        self.stage_configs = [
            SimpleNamespace(
                stage_id=i,
                stage_type="llm",
                engine_args=SimpleNamespace(model_stage=st, model_arch=arch, worker_type="ar"),
                tts_args={},
            )
            for i, (st, arch) in enumerate(seed.stages)
        ]
        self.default_sampling_params_list = [
            SamplingParams(**_sampling_kwargs(s.get("default_sampling_params") or {}))
            for s in deploy["stages"][: len(seed.stages)]
        ]
        while len(self.default_sampling_params_list) < len(seed.stages):
            self.default_sampling_params_list.append(SamplingParams(temperature=0.0))
        self.renderer = None
        self.input_processor = None
        self.vllm_config = None
        self.tts_batch_max_items = 32
        self.tts_max_instructions_length = None
        self.errored = False
        self.dead_error = RuntimeError("the scripted engine is dead")
        self.voice = PiperVoice()
        self._tokenizer: Any = None
        self.submitted: list[dict[str, Any]] = []
        self.aborted: list[str] = []
        self.closed: list[str] = []
        self.live: dict[str, str] = {}

    # -- what the serving code calls besides generate

    async def check_health(self) -> None:
        if self.errored:
            raise self.dead_error

    async def abort(self, request_id: Any, *, timeout: float | None = None) -> None:
        ids = [request_id] if isinstance(request_id, str) else list(request_id)
        self.aborted.extend(ids)
        for internal in [k for k, ext in self.live.items() if ext in ids]:
            self.live.pop(internal, None)

    async def get_supported_tasks(self) -> tuple[str, ...]:
        return ()

    def tokenizer(self) -> Any:
        if self._tokenizer is None and self.seed.tokenizer:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model_config.model)
        return self._tokenizer

    def stats(self) -> dict[str, Any]:
        return {
            "submitted": [
                {k: v for k, v in s.items() if k in ("request_id", "text", "output_kind", "stages")}
                for s in self.submitted
            ],
            "aborted": list(self.aborted),
            "closed": list(self.closed),
            "live": sorted(set(self.live.values())),
        }

    def last_reference(self) -> dict[str, Any]:
        """The last request's text and the exact s16le bytes vLLM-Omni must have sent for it:
        the engine's float audio through the serving code's own conversion (soundfile RAW
        PCM_16, ``AudioMixin.create_audio``), interleaved."""
        import base64
        import io

        import soundfile as sf

        if not self.submitted:
            return {"text": None}
        text = self.submitted[-1]["text"]
        audio = self._audio(text)
        buf = io.BytesIO()
        sf.write(buf, audio.T, self.profile.sample_rate, format="RAW", subtype="PCM_16")
        return {
            "text": text,
            "sample_rate": self.profile.sample_rate,
            "channels": int(audio.shape[0]),
            "codec_channels": self.codec_channels,
            "chunk_sizes": self.profile.chunk_sizes(audio.shape[-1]),
            "pcm_b64": base64.b64encode(buf.getvalue()).decode("ascii"),
        }

    # -- generation

    def _audio(self, text: str) -> np.ndarray:
        """(channels, samples) float32 at the model's rate, as the model hands it to the
        serving code: MOSS-TTS-Nano's stereo codec output goes through its own down-mix."""
        x = self.voice.speak(text, self.rate)
        codec = np.stack([x] * self.codec_channels)
        if self.seed.name == "moss_tts_nano":
            import torch
            from vllm_omni.model_executor.models.moss_tts_nano.modeling_moss_tts_nano import (
                _to_mono_1d,
            )

            mixed = _to_mono_1d(torch.from_numpy(codec)).numpy()
            return mixed[np.newaxis, :] if mixed.ndim == 1 else mixed
        return codec

    def _chunks(self, audio: np.ndarray, streaming: bool) -> list[np.ndarray]:
        sizes = self.profile.chunk_sizes(audio.shape[-1])
        out, start = [], 0
        for n in sizes:
            out.append(audio[..., start : start + n])
            start += n
        if self.script.fault == "replay" and streaming:
            # at the first seam with enough audio before it, the decoder re-emits its left
            # context: the chunk starts with the last fault_seconds again
            back = int(self.script.fault_seconds * self.profile.sample_rate)
            before = np.cumsum([c.shape[-1] for c in out])
            seam = next((i for i in range(1, len(out)) if before[i - 1] >= back), None)
            if seam is not None:
                tail = np.concatenate(out[:seam], axis=-1)[..., -back:]
                out[seam] = np.concatenate([tail, out[seam]], axis=-1)
        return out

    def _tensor(self, chunk: np.ndarray) -> Any:
        import torch

        x = chunk[0] if chunk.shape[0] == 1 else chunk
        return torch.from_numpy(np.ascontiguousarray(x))

    def _output(self, request_id: str, audio: Any, n_chunks: int, finished: bool) -> Any:
        """The final stage's output as the orchestrator hands it to the serving code."""
        import torch
        from vllm.outputs import CompletionOutput, RequestOutput
        from vllm_omni.outputs import OmniRequestOutput

        # sr is metadata: consolidate_tensors keeps its latest value, a 0-d tensor
        mm = {self.seed.audio_key: audio, "sr": torch.tensor(self.profile.sample_rate)}
        completion = CompletionOutput(
            index=0,
            text="",
            token_ids=[],
            cumulative_logprob=None,
            logprobs=None,
            finish_reason="stop" if finished else None,
        )
        completion.multimodal_output = mm
        stage_out = RequestOutput(
            request_id=request_id,
            prompt=None,
            prompt_token_ids=[],
            prompt_logprobs=None,
            outputs=[completion],
            finished=finished,
        )
        return OmniRequestOutput.from_stage_output(
            stage_out,
            request_id=request_id,
            stage_id=len(self.seed.stages) - 1,
            final_output_type="audio",
            finished=finished,
        )

    def check_prompt_len(self, n: int) -> None:
        """vLLM's own prompt-length check (``InputProcessor._validate_prompt_len``, run by the
        engine's input processor before scheduling), on this engine's model config: its
        refusal and its words, not the script's."""
        from types import SimpleNamespace

        from vllm.v1.engine.input_processor import InputProcessor

        proc = SimpleNamespace(
            skip_prompt_length_check=False,
            supports_mm_inputs=False,
            mm_encoder_cache_size=0,
            model_config=SimpleNamespace(max_model_len=self.max_model_len, runner_type="generate"),
        )
        InputProcessor._validate_prompt_len(proc, n, "decoder")

    async def generate(
        self,
        prompt: Any,
        sampling_params: Any = None,
        request_id: str = "",
        *,
        sampling_params_list: Any = None,
        output_modalities: list[str] | None = None,
        arrival_time: float | None = None,
        **_kw: Any,
    ):
        from vllm.sampling_params import RequestOutputKind

        t0 = time.monotonic()
        internal = f"{request_id}-{uuid.uuid4().hex[:8]}"
        params = (
            list(sampling_params_list)
            if sampling_params_list is not None
            else list(self.default_sampling_params_list)
        )
        if len(params) != len(self.seed.stages):
            raise ValueError(f"Expected {len(self.seed.stages)} sampling params, got {len(params)}")
        ids = prompt.get("prompt_token_ids") if isinstance(prompt, dict) else None
        if isinstance(ids, list):
            self.check_prompt_len(len(ids))
        text = spoken_text(self.seed, prompt, self.tokenizer())
        kind = params[-1].output_kind
        self.submitted.append(
            {
                "request_id": request_id,
                "text": text,
                "output_kind": kind.name,
                "stages": len(params),
            }
        )
        self.live[internal] = request_id
        try:
            audio = await asyncio.to_thread(self._audio, text)
            chunks = self._chunks(audio, kind == RequestOutputKind.DELTA)
            if self.seed.end_sentinel:
                chunks.append(audio[..., :0])
            offsets = self.profile.planned_offsets([c.shape[-1] for c in chunks])
            sent: list[np.ndarray] = []
            for i, chunk in enumerate(chunks):
                if internal not in self.live:
                    return  # aborted
                if self.script.pace:
                    due = t0 + offsets[i] * self.profile.pace / self.script.pace
                    await asyncio.sleep(max(0.0, due - time.monotonic()))
                sent.append(chunk)
                last = i == len(chunks) - 1
                if kind == RequestOutputKind.FINAL_ONLY and not last:
                    continue
                if kind == RequestOutputKind.DELTA and self.script.fault != "doubled":
                    payload = self._tensor(chunk)  # drained after every step
                else:  # consolidated: everything accumulated so far, as one tensor
                    payload = self._tensor(np.concatenate(sent, axis=-1))
                yield self._output(request_id, payload, len(sent), last)
        except (GeneratorExit, asyncio.CancelledError):
            self.closed.append(request_id)
            raise
        finally:
            self.live.pop(internal, None)


def _sampling_kwargs(d: dict[str, Any]) -> dict[str, Any]:
    keep = ("temperature", "top_p", "top_k", "max_tokens", "min_tokens", "seed")
    keep += ("repetition_penalty", "stop_token_ids", "detokenize")
    return {k: v for k, v in d.items() if k in keep}


def load_deploy(seed: Seed) -> dict[str, Any]:
    """The model's deploy YAML as shipped in the installed vLLM-Omni (``platforms:`` ignored)."""
    import vllm_omni
    import yaml

    path = Path(vllm_omni.__file__).parent / "deploy" / seed.deploy_yaml
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def deploy_chunking(seed: Seed) -> dict[str, Any]:
    """The chunking numbers of the deploy YAML: ``async_chunk``, the connectors'
    ``*chunk*``/``*frames*`` settings, and any ``*_runtime_config`` block (VoxCPM2's lives in
    ``stages[0].engine_extras.hf_overrides``), wherever they are nested."""
    data = load_deploy(seed)
    out: dict[str, Any] = {"async_chunk": data.get("async_chunk")}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k.endswith("runtime_config") and isinstance(v, dict):
                    out[k] = v
                elif k in ("connectors", "extra") or isinstance(v, dict | list):
                    walk(v)
                elif ("chunk" in k or "frames" in k) and k != "async_chunk":
                    out.setdefault(k, v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk({k: v for k, v in data.items() if k != "platforms"})
    return out
