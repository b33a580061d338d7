"""The hub tier: the scores papers report, from weights the user already has on disk.

Why a separate tier: Whisper-large-v3 WER, WavLM speaker similarity and UTMOS need weights
from a model hub (gigabytes; a Space has internet, a lab machine may not). listenlab never
downloads them: each model is loaded only from a folder the user names (``--model
whisper=DIR``) or from a Hugging Face cache folder the user names (``--hub-cache DIR``, the
layout ``hf download`` writes: ``models--ORG--NAME/snapshots/COMMIT``). Without either, or with
the model missing there, the metric fails at once with :class:`ModelUnavailable` naming what
to download; nothing here opens a socket (``local_files_only=True`` everywhere).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from backends.errors import ModelUnavailable
from evaluation.metrics.audio import MODEL_RATE, at_rate
from evaluation.metrics.base import Audio, Item, Metric, MetricInfo, Value, file_sha256, require
from evaluation.metrics.text import errors

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".ckpt", ".pth")


@dataclass(frozen=True)
class HubConfig:
    """Where hub models are: ``paths`` maps a metric name to a model folder; ``cache_dir`` is a
    Hugging Face cache folder searched for each metric's default repository."""

    paths: dict[str, str] = field(default_factory=dict)
    cache_dir: str | None = None


def hf_snapshot(cache_dir: str | Path, repo_id: str) -> Path | None:
    """The snapshot folder of ``repo_id`` in a Hugging Face cache (``refs/main``), or None."""
    base = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    ref = base / "refs" / "main"
    if ref.is_file():
        snap = base / "snapshots" / ref.read_text().strip()
        if snap.is_dir():
            return snap
    snaps = sorted((base / "snapshots").glob("*")) if (base / "snapshots").is_dir() else []
    return snaps[-1] if snaps else None


def weights_hash(folder: Path) -> str:
    """SHA-256 over the folder's weight files: a cache blob's name is already its file's
    SHA-256 (Hugging Face names LFS blobs so), otherwise the bytes are hashed."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.suffix in WEIGHT_SUFFIXES):
        real = Path(os.path.realpath(f))
        if real.parent.name == "blobs" and len(real.name) == 64:
            h.update(f"{f.name}:{real.name}\n".encode())
        else:
            h.update(f"{f.name}:{file_sha256(real)}\n".encode())
    return h.hexdigest()


class HubMetric(Metric):
    """A metric whose model comes from ``HubConfig``; subclasses say ``repo_id`` and load."""

    repo_id = ""
    download = ""
    """What to fetch, in words, for the error message."""

    def __init__(self, hub: HubConfig) -> None:
        self.hub = hub
        self.model: Any = None
        self.hash: str | None = None

    def folder(self) -> Path:
        name = self.info.name
        where = self.hub.paths.get(name)
        if where:
            p = Path(where)
            if not p.is_dir():
                raise ModelUnavailable(f"{name}: {where} is not a folder. {self.how()}")
            return p
        if self.hub.cache_dir:
            snap = hf_snapshot(self.hub.cache_dir, self.repo_id)
            if snap is None:
                raise ModelUnavailable(
                    f"{name}: {self.repo_id} is not in the Hugging Face cache "
                    f"{self.hub.cache_dir}. {self.how()}"
                )
            return snap
        raise ModelUnavailable(f"{name} needs weights from a hub. {self.how()}")

    def how(self) -> str:
        return (
            f"Download {self.download or self.repo_id} where there is internet "
            f"(`hf download {self.repo_id} --cache-dir DIR`), then pass --hub-cache DIR or "
            f"--model {self.info.name}=FOLDER; listenlab never downloads models"
        )

    def weights(self) -> list[Path]:
        return [self.folder()]

    @property
    def weights_sha256(self) -> str:  # type: ignore[override]
        if self.hash is None:
            self.hash = weights_hash(self.folder())
        return self.hash


class WhisperWer(HubMetric):
    info = MetricInfo(
        name="whisper",
        version="1",
        tier="hub",
        columns=("wer", "cer", "asr_text"),
        needs=frozenset({"text"}),
        summary="WER/CER of a Whisper transcript against the text (Seed-TTS-eval's English ASR)",
        license="Apache-2.0 (weights: MIT)",
    )
    repo_id = "openai/whisper-large-v3"

    def load(self) -> None:
        if self.model is not None:
            return
        require("transformers")
        from transformers import WhisperForConditionalGeneration, WhisperProcessor

        d = self.folder()
        self.processor = WhisperProcessor.from_pretrained(d, local_files_only=True)
        self.model = WhisperForConditionalGeneration.from_pretrained(d, local_files_only=True)
        self.model.eval()

    def transcribe(self, audio: Audio) -> str:
        import torch

        self.load()
        x = at_rate(audio, MODEL_RATE)
        feats = self.processor(x, sampling_rate=MODEL_RATE, return_tensors="pt").input_features
        with torch.inference_mode():
            ids = self.model.generate(feats, language="en", task="transcribe")
        return self.processor.batch_decode(ids, skip_special_tokens=True)[0].strip()

    def score(self, item: Item) -> dict[str, Value]:
        assert item.text is not None
        said = self.transcribe(item.audio)
        e = errors(item.text, said)
        return {"wer": e.wer, "cer": e.cer, "asr_text": said}


class WavlmSim(HubMetric):
    info = MetricInfo(
        name="wavlm",
        version="1",
        tier="hub",
        columns=("wavlm_sim",),
        needs=frozenset({"reference_voice"}),
        summary="speaker similarity, cosine of WavLM x-vectors (wavlm-base-plus-sv)",
        license="MIT",
    )
    repo_id = "microsoft/wavlm-base-plus-sv"

    def load(self) -> None:
        if self.model is not None:
            return
        require("transformers")
        from transformers import AutoFeatureExtractor, WavLMForXVector

        d = self.folder()
        self.extractor = AutoFeatureExtractor.from_pretrained(d, local_files_only=True)
        self.model = WavLMForXVector.from_pretrained(d, local_files_only=True).eval()

    def embed(self, audio: Audio) -> np.ndarray:
        import torch

        self.load()
        x = at_rate(audio, MODEL_RATE)
        inputs = self.extractor(x, sampling_rate=MODEL_RATE, return_tensors="pt")
        with torch.inference_mode():
            e = self.model(**inputs).embeddings[0].numpy()
        return e / np.linalg.norm(e)

    def score(self, item: Item) -> dict[str, Value]:
        assert item.reference_voice is not None
        sim = float(np.dot(self.embed(item.audio), self.embed(item.reference_voice)))
        return {"wavlm_sim": round(sim, 4)}


class Utmos(HubMetric):
    info = MetricInfo(
        name="utmos",
        version="1",
        tier="hub",
        columns=("utmos",),
        summary="UTMOS22 strong predicted MOS, 1-5 (SpeechMOS's torch.hub entry)",
        license="MIT",
    )
    repo_id = "tarepan/SpeechMOS"
    download = (
        "a clone of github.com/tarepan/SpeechMOS (v1.2.0) and, in the same folder, its "
        "utmos22_strong checkpoint (utmos22_strong_step7459_v1.pt from the repository's releases)"
    )

    def how(self) -> str:
        return f"Fetch {self.download}, then pass --model utmos=FOLDER; listenlab never downloads"

    def folder(self) -> Path:
        where = self.hub.paths.get("utmos")
        if not where or not (Path(where) / "hubconf.py").is_file():
            raise ModelUnavailable(f"utmos needs weights from a hub. {self.how()}")
        return Path(where)

    def weights(self) -> list[Path]:
        found = sorted(self.folder().glob("utmos22_strong*.pt"))
        if not found:
            raise ModelUnavailable(f"utmos: no utmos22_strong*.pt in {self.folder()}. {self.how()}")
        return found[:1]

    @property
    def weights_sha256(self) -> str:  # type: ignore[override]
        if self.hash is None:
            self.hash = file_sha256(*self.weights())
        return self.hash

    def load(self) -> None:
        if self.model is not None:
            return
        require("torch")
        import torch

        ckpt = self.weights()[0]
        net = torch.hub.load(
            str(self.folder()), "utmos22_strong", source="local", trust_repo=True, pretrained=False
        )
        net.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True))
        self.model = net.eval()

    def score(self, item: Item) -> dict[str, Value]:
        import torch

        self.load()
        x = torch.from_numpy(at_rate(item.audio, MODEL_RATE))[None]
        with torch.inference_mode():
            return {"utmos": round(float(self.model(x, MODEL_RATE)[0]), 4)}


HUB_METRICS: dict[str, type[HubMetric]] = {m.info.name: m for m in (WhisperWer, WavlmSim, Utmos)}

__all__ = ["HUB_METRICS", "HubConfig", "HubMetric", "Utmos", "WavlmSim", "WhisperWer"]
