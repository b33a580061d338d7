"""Report, CSV export and the analyze/report/export commands, on a real store of Piper takes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from app.store import (
    AbVote,
    Assignment,
    GlitchReport,
    ListeningTest,
    MosRating,
    Prompt,
    Rater,
    Store,
    System,
)
from app.store.listening import TestStore
from evaluation.glitches import detect
from evaluation.report import ReportOptions, compute_tables, write_report
from tests.support.evaluation_util import inject_double, inject_replay, synthesize
from tests.support.remote_util import cli

TEXTS = [
    "The quick brown fox jumps over the lazy dog, and then it runs away into the forest.",
    "Is it going to rain tomorrow? I honestly have no idea, but the forecast says maybe.",
]


@pytest.fixture(scope="module")
def lab(piper_det, tmp_path_factory):
    """A store with two systems, MOS ratings, A/B votes, glitch marks and findings."""
    root = tmp_path_factory.mktemp("lab")
    takes = synthesize(piper_det, TEXTS)
    store = Store.open(root / "lab.db")
    store.add_system(System("clean", "piper?deterministic=1", voice="joe"))
    store.add_system(System("buggy", "piper?deterministic=1", voice="joe", label="replays"))
    ids = {}
    for i, t in enumerate(takes):
        store.add_prompt(Prompt(f"p{i}", t.request.text))
        ids[("clean", i)] = store.save_take(t, system_id="clean", prompt_id=f"p{i}")
        bad = inject_replay(t, len(t.boundaries) - 1, "restart")
        bad = type(bad)(**{**bad.__dict__, "take_id": f"bad{i}"})
        ids[("buggy", i)] = store.save_take(bad, system_id="buggy", prompt_id=f"p{i}")
    for tid in ids.values():
        store.add_auto_findings(tid, detect(store.load_take(tid)))
    store.add_test(ListeningTest("mos", "mos"))
    store.add_test(ListeningTest("ab", "ab"))
    store.add_test(ListeningTest("gl", "glitch"))
    for r in range(4):
        rid = f"r{r}"
        store.add_rater(Rater(rid))
        for (sys_id, i), tid in ids.items():
            score = (4 + (r + i) % 2) if sys_id == "clean" else (2 + r % 2)
            store.add_mos_rating(
                MosRating(f"m{r}{sys_id}{i}", "mos", rid, tid, score, played_ms=1e6)
            )
            store.add_assignment(
                Assignment(
                    f"a{r}{sys_id}{i}", "gl", rid, len(ids) * 0 + i * 2 + (sys_id == "buggy"), tid
                )
            )
        for i in range(2):
            a, b = (
                (ids[("clean", i)], ids[("buggy", i)])
                if r % 2
                else (ids[("buggy", i)], ids[("clean", i)])
            )
            store.add_ab_vote(
                AbVote(f"v{r}{i}", "ab", rid, a, b, "a" if r % 2 else "b", cmos=-2 if r % 2 else 2)
            )
        bad = store.load_take(ids[("buggy", 0)])
        seam_ms = bad.boundaries[-2] * 1000 / bad.sample_rate
        store.add_glitch_report(
            GlitchReport(f"g{r}", ids[("buggy", 0)], rid, seam_ms + 120, kind="repeat")
        )
    yield store, ids, takes, root
    store.close()


def test_compute_tables(lab):
    store, ids, takes, _ = lab
    t = compute_tables(store, ReportOptions(n_boot=50), tests=TestStore(store).all_test_data())
    mos = t["mos"].set_index("system_id")
    assert mos.loc["clean", "n"] == 8 and mos.loc["clean", "mean"] == pytest.approx(4.5)
    assert mos.loc["buggy", "mean"] == pytest.approx(2.5)
    ab = t["ab"].iloc[0]
    assert (ab["x"], ab["y"], ab["x_wins"], ab["y_wins"]) == ("buggy", "clean", 0, 8)
    assert ab["cmos_y"] == pytest.approx(2.0)  # clean is 2 better, whichever side it was shown on
    assert list(t["leaderboard"]["system"]) == ["clean", "buggy"]
    fk = t["findings_by_kind"].set_index("system_id")
    assert fk.loc["buggy", "replay"] == 2 and "clean" not in fk.index
    gr = t["glitch_rates"].set_index("system_id")
    assert gr.loc["buggy", "reports"] == 4 and gr.loc["buggy", "at_seam"] == 4
    ag = t["agreement"].iloc[0]
    assert ag["marks"] == 4 and ag["recall"] == 0.25  # one replay finding, four raters marked it


def test_write_report_html_and_csv(lab, tmp_path):
    store, ids, *_ = lab
    out = write_report(
        store,
        tmp_path / "r.html",
        tmp_path / "csv",
        ReportOptions(n_boot=30),
        tests=TestStore(store).all_test_data(),
    )
    page = out.read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == 4  # MOS, A/B matrix, leaderboard, glitches
    for heading in (
        "MOS per system",
        "A/B preference",
        "Bradley–Terry leaderboard",
        "Glitch reports",
    ):
        assert heading in page
    for name in store.report_tables():
        assert (tmp_path / "csv" / f"{name}.csv").is_file()
    assert len(pd.read_csv(tmp_path / "csv" / "mos_ratings.csv")) == 16
    assert len(pd.read_csv(tmp_path / "csv" / "stats_leaderboard.csv")) == 2


def test_cli_analyze_files_and_db(lab, tmp_path):
    store, ids, takes, root = lab
    clean = takes[0]
    side = clean.save(tmp_path / "clean.wav")
    p = cli("analyze", str(side))
    assert "no findings" in p.stdout
    bad = inject_double(clean)
    bside = bad.save(tmp_path / "bad.wav")
    p = cli("analyze", str(tmp_path / "bad.wav"), "--reference", str(side), "--json")
    out = json.loads(p.stdout)
    kinds = {f["kind"] for f in out["findings"]}
    assert {"replay", "duration"} <= kinds and out["metrics"]["chunk_count"] == len(bad.chunks)
    assert cli("analyze", str(bside), "--strict", check=False).returncode == 1
    db_ref = f"{root / 'lab.db'}:{ids[('buggy', 1)]}"
    p = cli("analyze", db_ref, "--save")
    assert "replay" in p.stdout
    assert cli("analyze", str(tmp_path / "nope.take.json"), check=False).returncode == 2
    p = cli("analyze", str(side), "--set", "nonsense=1", check=False)
    assert p.returncode == 2 and "unknown detector setting" in p.stderr


def test_cli_report_and_export(lab, tmp_path):
    store, *_ = lab
    db = str(store.path)
    cli("report", db, "-o", str(tmp_path / "rep.html"), "--boot", "20", "--min-votes", "1")
    assert (tmp_path / "rep.html").is_file() and (tmp_path / "rep_csv" / "stats_mos.csv").is_file()
    cli("export", db, "--csv", str(tmp_path / "x"))
    assert len(pd.read_csv(tmp_path / "x" / "ab_votes.csv")) == 8
    assert cli("report", str(tmp_path / "missing.db"), check=False).returncode == 2


def test_empty_store_reports(tmp_path):
    Store.open(tmp_path / "e.db").close()
    cli("report", str(tmp_path / "e.db"), "-o", str(tmp_path / "e.html"))
    page = (tmp_path / "e.html").read_text(encoding="utf-8")
    assert "no data" in page and "data:image/png" not in page
    assert (tmp_path / "e_csv" / "takes.csv").is_file()


def test_report_is_per_test_unless_pooled(lab, tmp_path):
    """A system called ``natural`` in two tests is two rows; ``--pool`` makes it one row,
    and says so in the file name and the page."""
    _, _, takes, _ = lab
    store = Store.open(tmp_path / "two.db")
    store.add_system(System("natural", "import:natural"))
    store.add_prompt(Prompt("p0", takes[0].request.text))
    take = store.save_take(takes[0], system_id="natural", prompt_id="p0")
    for test, base in (("t1", 4), ("t2", 2)):
        store.add_test(ListeningTest(test, "mos"))
        for r in range(3):
            store.add_rater(Rater(f"{test}r{r}"))
            store.add_mos_rating(
                MosRating(f"{test}m{r}", test, f"{test}r{r}", take, base + r % 2, played_ms=1e6)
            )
    db = str(store.path)
    store.close()
    cli("report", db, "-o", str(tmp_path / "per.html"), "--boot", "10")
    per = pd.read_csv(tmp_path / "per_csv" / "stats_mos.csv").set_index("test_id")
    assert list(per["system_id"]) == ["natural", "natural"]
    assert per.loc["t1", "mean"] == pytest.approx(13 / 3) and per.loc["t2", "n"] == 3
    assert "POOLED" not in (tmp_path / "per.html").read_text(encoding="utf-8")
    cli("report", db, "-o", str(tmp_path / "pool.html"), "--boot", "10", "--pool")
    pooled = pd.read_csv(tmp_path / "pool_csv" / "stats_pooled_mos.csv")
    assert len(pooled) == 1 and pooled.loc[0, "mean"] == pytest.approx(20 / 6)
    assert not (tmp_path / "pool_csv" / "stats_mos.csv").exists()
    assert "POOLED ACROSS TESTS by system name" in (tmp_path / "pool.html").read_text(
        encoding="utf-8"
    )
    cli("report", db, "-o", str(tmp_path / "one.html"), "--boot", "10", "--test", "t2")
    one = pd.read_csv(tmp_path / "one_csv" / "stats_mos.csv")
    assert list(one["test_id"]) == ["t2"]
    assert cli("report", db, "--test", "nope", check=False).returncode == 2
