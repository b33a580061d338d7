"""docs/metrics.md's "Beside human results" says the code's numbers and names: the queue
limits, the agreement rule, the shown columns and the tables (no models needed)."""

from __future__ import annotations

from pathlib import Path

from app.listening import scoring
from app.web import take_scores
from evaluation.listening import machine

ROOT = Path(__file__).resolve().parents[1]


def section() -> str:
    page = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    return " ".join(page.split("## Beside human results", 1)[1].split("## The hub tier")[0].split())


def test_the_docs_say_the_limits_and_the_rule():
    s = section()
    assert f"more than {scoring.QUEUE_LIMIT} tests waiting is 429" in s
    assert f"at most {take_scores.QUEUE_LIMIT} takes wait" in s
    assert f'n < {machine.MIN_N} is "too few to judge"' in s
    assert f'|Spearman| < {machine.WEAK} is "weak", below {machine.STRONG} "moderate"' in s
    for shown in machine.SHOWN:
        assert f"`{shown.column}`" in s
    for table in ("machine", "machine_agreement", "machine_stimuli"):
        assert f"**`{table}`**" in s
    assert "`distillmos` and `dnsmos`; `words` where" in s
    assert scoring.METRICS == ("distillmos", "dnsmos", "words", "speaker")
    assert take_scores.METRICS == ("distillmos", "dnsmos", "words")
    arena = " ".join((ROOT / "docs" / "arena.md").read_text(encoding="utf-8").split())
    assert f"(at most {take_scores.QUEUE_LIMIT} at a time)" in arena


def test_the_note_follows_the_rule():
    assert machine.note(machine.MIN_N - 1, 1.0, 1).startswith("too few to judge")
    assert machine.note(machine.MIN_N, machine.WEAK - 0.01, 1).startswith("weak")
    assert machine.note(machine.MIN_N, machine.WEAK, 1).startswith("moderate")
    assert machine.note(machine.MIN_N, machine.STRONG, 1).startswith("strong")
    assert machine.note(machine.MIN_N, float("nan"), 1).startswith("undefined")
