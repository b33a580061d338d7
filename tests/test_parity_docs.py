"""``docs/parity.md`` says what the code does: every measure's direction, default margin and
unit, the hub tier's margins, the planner's numbers, the limits, and the benchmark's tables
as ``benchmarks/results/parity.json`` has them. (Its commands are parsed by the real parser in
``tests/test_docs.py``, with every page's.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.cli.parity import CMOS_MARGIN, LISTENING_ITEMS
from evaluation.metrics.audio import MAX_FILE_BYTES, MAX_SECONDS
from evaluation.parity import CONFIDENCE, MEASURES, prompts_needed
from evaluation.parity.measures import HUB_MARGINS, MEMORY
from evaluation.parity.prompts import MAX_CSV_BYTES, MAX_PROMPTS
from evaluation.parity.report import WORST_PLAYERS
from evaluation.parity.sides import MAX_TAKES

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "parity.md"
RESULTS = ROOT / "benchmarks" / "results" / "parity.json"


def text() -> str:
    return PAGE.read_text(encoding="utf-8")


def flat() -> str:
    return " ".join(text().split())


def table_after(heading: str) -> list[list[str]]:
    """The rows of the first Markdown table after ``heading`` (cells stripped)."""
    lines = text()[text().index(heading) :].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    rows = []
    for ln in lines[start + 2 :]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip("|").split("|")])
    return rows


def number(cell: str) -> float | None:
    return None if cell == "off" else float(cell)


def test_the_measures_table_is_the_code():
    rows = {r[0].strip("`"): r for r in table_after("## What it compares")}
    for m in [*MEASURES, MEMORY]:
        r = rows.pop(m.name)
        assert r[2] == m.direction, m.name
        assert number(r[3]) == m.margin, m.name
        assert r[4] == m.delta_unit, m.name
    assert rows == {}, f"documented but not measured: {list(rows)}"


def test_the_words_tiers_margins_and_the_method_are_the_code():
    t = flat()
    wer, cer = (f"{HUB_MARGINS[k]:g}" for k in ("wer", "cer"))
    assert f"default margins of {wer} and {cer} points" in t
    assert f"Student's t interval at {CONFIDENCE:.0%}".replace("%", " %") in t
    assert f"for the {WORST_PLAYERS} prompts that lost most" in t
    assert f"(default {CMOS_MARGIN:g}) CMOS points worse" in t
    assert f"`--items-per-rater` defaults to {LISTENING_ITEMS}" in t


def test_the_limits_are_the_code():
    t = flat()
    assert f"at most {MAX_CSV_BYTES // 2**20} MiB and holds at most {MAX_PROMPTS:,} prompts" in t
    assert f"`--takes` is 1 to {MAX_TAKES}" in t
    assert f"at most {MAX_FILE_BYTES // 2**20} MiB and {MAX_SECONDS:g} s" in t
    assert "at most 5,000 characters" in t
    from backends.base import MAX_TEXT_CHARS

    assert MAX_TEXT_CHARS == 5000


def test_the_planner_table_is_the_planner():
    rows = table_after("### What a margin means")
    assert rows
    for r in rows:
        sd = float(r[1].split()[0])
        margin = float(r[2])
        assert int(r[3]) == prompts_needed(sd, margin), r
    assert "23 prompts of three takes instead of 64 of one" in flat()
    assert prompts_needed(0.24 / 3**0.5, 0.1) == 23 and prompts_needed(0.24, 0.1) == 64


@pytest.mark.skipif(not RESULTS.is_file(), reason="benchmarks/results/parity.json not written")
def test_the_benchmark_tables_are_the_results():
    import benchmarks.parity as bench

    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    page = text()
    for name, table in bench.docs_tables(results).items():
        assert table in page, (
            f"docs/parity.md's {name} table is not benchmarks/results/parity.json's"
        )
    pool = results["pool"]
    assert re.search(
        rf"renders {pool['prompts']} Harvard sentences {pool['piper_takes']} times", flat()
    )
