"""docs/detector.md says what the detector does: its settings table names every
``DetectorConfig`` field with its default, every ``name`` = value it quotes is the default, its
benchmark tables are the ones the benchmark prints from its own JSON, and its Limits section
quotes only figures those tables hold (issue #38 item 19: it once contradicted its own table)."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

from evaluation.glitches import DetectorConfig

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "detector.md"
RESULTS = ROOT / "benchmarks" / "results" / "detector.json"
DEFAULTS = {f.name: f.default for f in fields(DetectorConfig)}


def section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def number(s: str) -> float | None:
    s = s.strip().replace("−", "-")
    return None if s == "None" else float(s)


def test_the_settings_table_names_every_field_with_its_default():
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section("Settings"), re.M))
    assert set(rows) == set(DEFAULTS), set(rows) ^ set(DEFAULTS)
    wrong = {k: (rows[k], v) for k, v in DEFAULTS.items() if number(rows[k]) != v}
    assert not wrong, wrong


def test_every_setting_the_page_quotes_is_its_default():
    quoted = re.findall(r"`(\w+)` = (−?-?\d+(?:\.\d+)?)", DOC.read_text(encoding="utf-8"))
    assert len(quoted) >= 10
    wrong = [(k, v) for k, v in quoted if k in DEFAULTS and number(v) != DEFAULTS[k]]
    unknown = [k for k, _ in quoted if k not in DEFAULTS]
    assert not wrong and not unknown, (wrong, unknown)


def test_the_benchmark_tables_are_the_benchmarks_own():
    from benchmarks.detector import markdown_tables

    result = json.loads(RESULTS.read_text(encoding="utf-8"))
    tables = markdown_tables(result, "heldout")
    assert tables in DOC.read_text(encoding="utf-8"), tables
    # the held-out human rows exist: the JSON was made with the P.501 / P.835 clips
    assert "P.501" in tables and "P.835" in tables


def test_the_limits_quote_only_figures_the_tables_hold():
    from benchmarks.detector import markdown_tables

    result = json.loads(RESULTS.read_text(encoding="utf-8"))
    tables = markdown_tables(result, "heldout") + markdown_tables(result, "dev")
    limits = section("Limits")
    figures = set(re.findall(r"(?<![\d.])\d\.\d\d(?![\d])", limits))
    assert figures, "the Limits section quotes no figure"
    missing = sorted(f for f in figures if f not in tables)
    assert not missing, missing
