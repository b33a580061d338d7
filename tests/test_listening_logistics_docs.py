"""The docs' "Rater logistics" section states the code's numbers (issue #42): every limit of
the questionnaire pages, the session cap, refill and the reliability score."""

from __future__ import annotations

from pathlib import Path

from app.listening import breaks, questionnaire, refill
from evaluation.listening import reliability

DOC = Path(__file__).resolve().parents[1] / "docs" / "listening-tests.md"


def section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index("## Rater logistics") : text.index("## Results (admin)")]


def test_every_limit_is_the_codes():
    s = section()
    q = questionnaire
    for n in (
        q.MAX_PAGES,
        q.MAX_FIELDS,
        q.MAX_OPTIONS,
        q.MAX_OPTION_CHARS,
        q.MAX_LABEL_CHARS,
        q.MAX_TEXT_CHARS,
        q.DEFAULT_TEXT_CHARS,
    ):
        assert f"**{n}**" in s, n
    assert "±**1e9**" in s and q.NUMBER_LIMIT == 1e9
    lo, hi = breaks.BREAK_AFTER_RANGE
    assert f"1 to **{hi}**" in s and lo == 1
    lo_s, hi_s = breaks.BREAK_MIN_RANGE
    assert f"**{lo_s:g}** to **{hi_s:g}** s, default **{breaks.BREAK_MIN_S:g}**" in s
    assert f"1 to **{refill.MAX_TARGET_VALID}**" in s
    assert f"from **{reliability.MIN_SHARED}** such stimuli" in s
    for c in reliability.COLUMNS:
        assert f"`{c}`" in s, c
