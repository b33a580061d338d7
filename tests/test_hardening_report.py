"""Reports on every shape of data, and reading a live store without harming it.

Property-style: random small stores (single-chunk takes, takes without votes, one rater, no
raters, marks on takes without seams, formula-like texts) must all report and export, and every
CSV cell a spreadsheet would run as a formula is neutralised.
"""

from __future__ import annotations

import csv
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from app.store import (
    AbVote,
    GlitchReport,
    ListeningTest,
    MosRating,
    Prompt,
    Rater,
    Store,
    StoreError,
    System,
)
from app.store.listening import TestStore
from backends.base import SpeechRequest
from evaluation.report import ReportOptions, export_csv, neutralise_cell, write_report
from evaluation.takes import ChunkRecord, Take
from tests.support.remote_util import cli

ROOT = Path(__file__).resolve().parents[1]
NASTY = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "\t=1", "plain", "é ü"]


def _take(rng: random.Random, chunks: int, text: str) -> Take:
    sr = 16000
    frames = [rng.randint(800, 4000) for _ in range(chunks)]
    audio = (np.sin(np.arange(sum(frames)) / 7.0) * 3000).astype(np.int16).reshape(-1, 1)
    recs, off, t = [], 0, rng.uniform(20, 200)
    for i, f in enumerate(frames):
        recs.append(ChunkRecord(i, t, off, f))
        off += f
        t += rng.uniform(10, 300)
    return Take(SpeechRequest(text=text), "synthetic", sr, 1, recs, audio, t)


def random_store(path: Path, seed: int) -> Store:
    rng = random.Random(seed)
    store = Store.open(path)
    systems = [f"sys{i}" for i in range(rng.randint(1, 3))]
    for s in systems:
        store.add_system(System(s, backend=rng.choice(NASTY), label=rng.choice(NASTY)))
    takes: list[tuple[str, str]] = []
    for i in range(rng.randint(0, 5)):
        sysid = rng.choice(systems)
        pid = f"p{i}"
        text = rng.choice(NASTY) + f" sentence {i}."
        store.add_prompt(Prompt(pid, text))
        t = _take(rng, rng.choice([1, 1, 2, 3]), text)
        takes.append((store.save_take(t, system_id=sysid, prompt_id=pid), sysid))
    raters = [f"r{i}" for i in range(rng.choice([0, 1, 1, 2, 3]))]
    for r in raters:
        store.add_rater(Rater(r, name=rng.choice(NASTY)))
    store.add_test(ListeningTest("mos", "mos"))
    store.add_test(ListeningTest("ab", "ab"))
    store.add_test(ListeningTest("gl", "glitch"))
    for r in raters:
        for tid, _ in takes:
            if rng.random() < 0.6:
                store.add_mos_rating(
                    MosRating(f"m-{r}-{tid}", "mos", r, tid, rng.randint(1, 5), played_ms=1e6)
                )
            if rng.random() < 0.5:
                store.add_glitch_report(
                    GlitchReport(
                        f"g-{r}-{tid}",
                        tid,
                        r,
                        position_ms=rng.uniform(0, 500),
                        kind=rng.choice(["click", None]),
                        note=rng.choice(NASTY),
                    )
                )
        for (a, _), (b, _) in zip(takes, takes[1:], strict=False):
            if rng.random() < 0.7:
                store.add_ab_vote(
                    AbVote(f"v-{r}-{a}-{b}", "ab", r, a, b, rng.choice(["a", "b", "tie"]))
                )
    for tid, _ in takes:
        if rng.random() < 0.5:
            store.add_auto_findings(
                tid,
                [
                    {
                        "kind": "click",
                        "time_s": rng.uniform(0, 0.3),
                        "boundary_index": None,
                        "severity": 1.0,
                        "evidence": {"why": rng.choice(NASTY)},
                    }
                ],
            )
    return store


def _all_cells(folder: Path) -> list[str]:
    out = []
    for p in sorted(folder.glob("*.csv")):
        with p.open(newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                out.extend(row)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_random_small_stores_report_and_export(tmp_path, seed):
    store = random_store(tmp_path / "lab.db", seed)
    store.close()
    with Store.open(tmp_path / "lab.db", read_only=True) as ro:
        out = write_report(
            ro,
            tmp_path / "r.html",
            tmp_path / "csv",
            ReportOptions(n_boot=20),
            tests=TestStore(ro).all_test_data(),
        )
    html = out.read_text(encoding="utf-8")
    assert "listenlab report" in html and "<script" not in html.lower()
    cells = _all_cells(tmp_path / "csv")
    assert cells, "CSV files were written"
    for c in cells:
        assert c[:1] not in ("=", "+", "-", "@", "\t", "\r") or _is_number(c), c


def _is_number(c: str) -> bool:
    try:
        float(c)
    except ValueError:
        return False
    return True


def test_single_chunk_takes_with_every_mark(tmp_path):
    """The reproduced crash: every glitch mark on a single-chunk take (no seam at all)."""
    rng = random.Random(1)
    store = Store.open(tmp_path / "lab.db")
    store.add_system(System("s", "piper"))
    store.add_rater(Rater("r"))
    tid = store.save_take(_take(rng, 1, "Hi."), system_id="s")
    store.add_glitch_report(GlitchReport("g1", tid, "r", position_ms=120.0))
    store.close()
    p = cli("report", str(tmp_path / "lab.db"), "-o", str(tmp_path / "r.html"), check=False)
    assert p.returncode == 0, p.stderr
    rates = list(csv.DictReader((tmp_path / "r_csv" / "stats_glitch_rates.csv").open()))
    assert rates[0]["system_id"] == "s" and rates[0]["reports"] == "1"
    assert rates[0]["at_seam"] == "0" and rates[0]["seams"] == "0"


def test_formula_cells_are_neutralised(tmp_path):
    for bad in ("=1+1", "+cmd", "-2+3", "@A1", "\t=x", "\r=x"):
        assert neutralise_cell(bad).startswith("'")
    assert neutralise_cell("-2.5") == "-2.5"  # a number stays a number
    assert neutralise_cell("hello") == "hello"
    store = Store.open(tmp_path / "lab.db")
    store.add_system(System("s", "piper"))
    store.add_prompt(Prompt("p", '=HYPERLINK("http://evil","click")'))
    store.close()
    with Store.open(tmp_path / "lab.db", read_only=True) as ro:
        export_csv(ro, tmp_path / "csv", tests=TestStore(ro).all_test_data())
    rows = list(csv.DictReader((tmp_path / "csv" / "prompts.csv").open()))
    assert rows[0]["text"] == '\'=HYPERLINK("http://evil","click")'


def test_read_only_open_never_changes_or_writes(tmp_path):
    s = Store.open(tmp_path / "lab.db", journal_mode="delete")
    s.add_system(System("s", "piper"))
    s.close()
    before = (tmp_path / "lab.db").read_bytes()
    with Store.open(tmp_path / "lab.db", read_only=True) as ro:
        assert ro.journal_mode == "delete"
        assert len(ro.frame("systems")) == 1
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only"):
            ro.db.execute("INSERT INTO prompts (prompt_id, text, created_at) VALUES ('x','y','z')")
    assert (tmp_path / "lab.db").read_bytes() == before
    con = sqlite3.connect(tmp_path / "lab.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()


def test_journal_mode_change_refused_while_open_elsewhere(tmp_path):
    live = Store.open(tmp_path / "lab.db", journal_mode="delete")
    live.add_system(System("s", "piper"))
    with pytest.raises(StoreError, match="refusing to switch it to wal"):
        Store.open(tmp_path / "lab.db", journal_mode="wal")
    assert live.db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    live.add_system(System("s2", "piper"))  # the live store still writes
    live.close()
    again = Store.open(tmp_path / "lab.db", journal_mode="wal")  # nobody else: allowed
    assert again.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again.close()
