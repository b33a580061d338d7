"""An offline word check with PocketSphinx (5.1.1, BSD-style; US English model in the wheel).

Why only a check: PocketSphinx's WER on clean CPU-voice speech is about 0.2, so it cannot
rank good systems; it does tell a take that lost words, said other words or went silent from
one that did not (a dropped word raises its WER and its deletion count). For the WER papers
report, use the hub tier's Whisper (:mod:`evaluation.metrics.hub`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluation.metrics.audio import MODEL_RATE, at_rate
from evaluation.metrics.base import Item, Metric, MetricInfo, Value, package_file, require
from evaluation.metrics.text import errors


class WordCheck(Metric):
    info = MetricInfo(
        name="words",
        version="5.1.1-1",
        tier="bundled",
        columns=("sphinx_wer", "sphinx_cer", "sphinx_deletions", "sphinx_text"),
        needs=frozenset({"text"}),
        summary="offline word check: PocketSphinx transcript's WER/CER against the text",
        license="BSD-2-Clause",
    )

    def __init__(self) -> None:
        self.decoder: Any = None

    def weights(self) -> list[Path]:
        base = ("model", "en-us", "en-us")
        return [
            package_file("pocketsphinx", *base, "mdef"),
            package_file("pocketsphinx", *base, "means"),
            package_file("pocketsphinx", "model", "en-us", "en-us.lm.bin"),
        ]

    def load(self) -> None:
        if self.decoder is None:
            require("pocketsphinx")
            from pocketsphinx import Decoder

            self.decoder = Decoder(samprate=MODEL_RATE, loglevel="FATAL")

    def transcribe(self, x: np.ndarray) -> str:
        self.load()
        pcm = (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()
        self.decoder.start_utt()
        self.decoder.process_raw(pcm, full_utt=True)
        self.decoder.end_utt()
        hyp = self.decoder.hyp()
        return hyp.hypstr if hyp is not None else ""

    def score(self, item: Item) -> dict[str, Value]:
        assert item.text is not None
        said = self.transcribe(at_rate(item.audio, MODEL_RATE))
        e = errors(item.text, said)
        return {
            "sphinx_wer": e.wer,
            "sphinx_cer": e.cer,
            "sphinx_deletions": e.deletions,
            "sphinx_text": said,
        }


__all__ = ["WordCheck"]
