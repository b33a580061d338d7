"""Word and character error rates against the input text, after one text normaliser.

Why one normaliser for every recogniser: WER moves by several points with casing, punctuation
and "Mr." against "mister" alone. Both the text and the transcript go through Whisper's English
normaliser (``whisper-normalizer``, MIT, the same rules as Seed-TTS-eval's English side), then
``jiwer`` 4 (``process_words``/``process_characters``) counts edits. English only: for other
languages the normaliser is wrong and these columns are not meaningful.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluation.metrics.base import require

_NORMALISER: list[Any] = []


def normalise(text: str) -> str:
    if not _NORMALISER:
        require("whisper_normalizer")
        from whisper_normalizer.english import EnglishTextNormalizer

        _NORMALISER.append(EnglishTextNormalizer())
    return " ".join(_NORMALISER[0](text).split())


@dataclass(frozen=True)
class Errors:
    wer: float
    cer: float
    deletions: int
    """Reference words missing from the transcript (a dropped word shows here)."""


def errors(reference: str, hypothesis: str) -> Errors:
    """WER/CER of ``hypothesis`` against ``reference``, both normalised (1.0 when nothing was
    recognised; 0.0 when the reference normalises to nothing and so does the transcript)."""
    require("jiwer")
    import jiwer

    ref, hyp = normalise(reference), normalise(hypothesis)
    if not ref:
        return Errors(0.0 if not hyp else 1.0, 0.0 if not hyp else 1.0, 0)
    if not hyp:
        return Errors(1.0, 1.0, len(ref.split()))
    w = jiwer.process_words(ref, hyp)
    c = jiwer.process_characters(ref, hyp)
    return Errors(round(w.wer, 4), round(c.cer, 4), int(w.deletions))


__all__ = ["Errors", "errors", "normalise"]
