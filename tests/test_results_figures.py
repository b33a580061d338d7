"""The Results tab's figures and the export's reporting items.

A MOS test with check items (the degraded low anchor, the trap) is rated over the real
routes by three raters (the Piper voice, a SQLite file, uvicorn on 127.0.0.1); its export is
read for ITU-T P.800.2's items (votes and raters per condition, the scale and its labels, the
anchors, the intervals' method) in ``results/p800_2.csv`` and ``methods.md``, and for the
figures (PNG, SVG, and the CSV each was drawn from, redrawn from it). The matrix, the machine
tables and the escaping are read from the functions that draw them, on results frames as
:func:`evaluation.listening.results.test_results` makes them. The docs' numbers are read
against the code."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pandas as pd
import pytest

from app.listening.export import export_all
from app.listening.figures import (
    FIGURE_FORMATS,
    figure_files,
    matrix_of,
    pairwise_matrix,
    test_figures,
)
from app.store.listening import TestStore
from tests.support.app_util import create_test, listening_app, live_server
from tests.support.rater import RaterClient


def _tab():
    """The Results tab's modules (imported when a test runs: the admin page pulls in Gradio,
    which collecting the suite must not)."""
    import importlib

    return (
        importlib.import_module("app.listening.admin.results_tab"),
        importlib.import_module("app.listening.admin.results_html"),
    )


def results_view(tables):
    return _tab()[0].results_view(tables)


def summary_markdown(tables):
    return _tab()[0].summary_markdown(tables)


def results_html(*a, **kw):
    return _tab()[1].results_html(*a, **kw)


def matrix_html(*a, **kw):
    return _tab()[1].matrix_html(*a, **kw)


ROOT = Path(__file__).resolve().parents[1]
HOSTILE = '<img src=x onerror="alert(1)">'


async def rate(lv, tid: str, seed: int) -> str:
    """One rater: the trap answered 2, the low anchor 1, items by system (a 4 or 5, b 2 or 3)."""
    c = RaterClient(lv.url, tid, crowd_id=f"P{seed}")
    await c.join()
    st = await c.status()
    k = seed
    while not st["finished"]:
        aid = st["item"]["assignment_id"]
        a = next(
            x for x in lv.state.store.assignments(tid, st["rater_id"]) if x.assignment_id == aid
        )
        await c.listen(aid, 0)
        k += 1
        system = a.meta["systems"][0]
        score = 2 if a.role == "trap" else {"__anchor__": 1, "__gold__": 5}.get(system)
        if score is None:
            score = (4 + k % 2) if system == "a" else (2 + k % 2)
        r = await c.vote({"assignment_id": aid, "score": score})
        assert r.status_code == 200, r.text
        st = await c.status()
    await c.aclose()
    return st["rater_id"]


@pytest.fixture(scope="module")
def checked():
    """A finished MOS test with check items; its export (all files) and its tables."""
    with live_server(listening_app()) as lv:
        tid = create_test(lv, screening=True, headphone_check=False, items_per_rater=4)

        async def go():
            return await asyncio.gather(*(rate(lv, tid, n) for n in (1, 2, 3)))

        raters = asyncio.run(go())
        tests = TestStore(lv.state.store)
        yield tid, raters, export_all(tests, tid), tests


def csv(files: dict[str, bytes], name: str) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(files[name]), keep_default_na=False)


def test_p800_2_items_are_in_the_export(checked):
    tid, raters, files, tests = checked
    rep = csv(files, "results/p800_2.csv")
    assert list(rep.columns) == ["item", "condition", "value"]
    mos = csv(files, "results/mos.csv").set_index("system_id")
    votes = rep[rep["item"] == "votes"].set_index("condition")["value"].astype(int)
    who = rep[rep["item"] == "raters"].set_index("condition")["value"].astype(int)
    assert dict(votes) == {s: int(mos.loc[s, "n"]) for s in mos.index} == {"a": 6, "b": 6}
    assert dict(who) == {"a": 3, "b": 3}
    labels = rep[rep["item"] == "scale_label"]
    assert dict(zip(labels["condition"], labels["value"], strict=True)) == {
        "5": "Excellent",
        "4": "Good",
        "3": "Fair",
        "2": "Poor",
        "1": "Bad",
    }
    anchors = " ".join(rep.loc[rep["item"] == "anchor", "value"])
    assert "low anchor: a degraded copy" in anchors and "expected rating 1" in anchors
    assert "trap" in anchors
    one = rep.set_index("item")["value"]
    assert one["scale_question"] == "How good is the quality of the speech?"
    assert (one["raters_joined"], one["raters_finished"], one["raters_excluded"]) == ("3", "3", "0")
    method = csv(files, "results/methods.csv").set_index("table").loc["mos", "method"]
    assert one["interval_method"] == method and "two-way cluster-robust" in method

    md = files["methods.md"].decode()
    sec = md[md.index("## Reporting items (ITU-T P.800.2)") : md.index("## Results")]
    assert "  - a: 6 votes from 3 raters" in sec and "  - b: 6 votes from 3 raters" in sec
    assert "- Scale labels: 5 = Excellent; 4 = Good; 3 = Fair; 2 = Poor; 1 = Bad" in sec
    assert "- Anchors: " in sec and "low anchor" in sec
    assert "- Raters: 3 joined, 3 finished, 0 excluded." in sec
    assert f"- Intervals: {method}." in sec


def test_each_figure_is_png_svg_and_the_csv_it_was_drawn_from(checked):
    tid, raters, files, tests = checked
    for name in ("forest", "pairwise", "by_prompt", "by_rater"):
        assert files[f"figures/{name}.png"][:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in files[f"figures/{name}.svg"][:500]
    forest = csv(files, "figures/forest.csv")
    mos = csv(files, "results/mos.csv")
    assert list(forest["row"]) == ["a", "b"]  # best first
    assert forest["value"].tolist() == mos.sort_values("mean", ascending=False)["mean"].tolist()
    pw = csv(files, "figures/pairwise.csv").set_index(["row", "column"])
    diff = csv(files, "results/mos_pairwise.csv").iloc[0]
    assert (diff["x"], diff["y"]) == ("a", "b")
    assert pw.loc[("b", "a"), "effect"] == pytest.approx(diff["diff_y_minus_x"])
    assert pw.loc[("a", "b"), "effect"] == pytest.approx(-diff["diff_y_minus_x"])
    by_rater = csv(files, "figures/by_rater.csv")
    assert set(by_rater["rater_id"]) == set(raters) and (by_rater["n"] == 2).all()
    # the same numbers draw the same files (no date in them)
    again = export_all(tests, tid)
    assert {k: v for k, v in again.items() if k.startswith("figures/")} == {
        k: v for k, v in files.items() if k.startswith("figures/")
    }


def interval_rows(systems: list[str], means: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "system_id": systems,
            "n": 8,
            "raters": 4,
            "prompts": 2,
            "mean": means,
            "ci_low": [m - 0.4 for m in means],
            "ci_high": [m + 0.4 for m in means],
        }
    )


def mos_tables(systems: list[str], means: list[float]) -> dict[str, pd.DataFrame]:
    """Results frames as test_results makes them for a MOS test (a pair for every two)."""
    rows = []
    for i, x in enumerate(systems):
        for j in range(i + 1, len(systems)):
            y = systems[j]
            rows.append([x, y, 4, means[j] - means[i], 0.5, 0.01, 0.04 * (i + j), i + j < 3])
    pw = pd.DataFrame(
        rows,
        columns=[
            "x",
            "y",
            "raters",
            "diff_y_minus_x",
            "rank_biserial",
            "p",
            "p_holm",
            "significant",
        ],
    )
    mos = interval_rows(systems, means)
    raters = pd.DataFrame(
        {
            "rater_id": ["r1"],
            "crowd_id": [None],
            "finished": [True],
            "headphones": ["not done"],
            "excluded": [False],
            "reasons": [""],
            "answered": [4],
        }
    )
    methods = pd.DataFrame(
        [("mos", "MOS per system", "m", "a"), ("mos_pairwise", "MOS: every pair", "w", "a")],
        columns=["table", "title", "method", "assumes"],
    )
    return {"raters": raters, "mos": mos, "mos_pairwise": pw, "methods": methods}


def test_a_hostile_system_name_reaches_the_page_as_text():
    tables = mos_tables(["good", HOSTILE, "bad"], [4.5, 3.0, 1.5])
    page = matrix_html(matrix_of(tables))
    assert "<img" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    text = summary_markdown(tables)
    assert "<img" not in text and "&lt;img" in text
    v = results_view(tables)
    assert "<img" not in v["html"].replace('<img src="data:image/png', "")


def test_the_matrix_is_oriented_row_over_column_best_first():
    tables = mos_tables(["s1", "s2", "s3"], [2.0, 4.0, 3.0])
    m = matrix_of(tables)
    assert list(m.effect.index) == ["s2", "s3", "s1"]  # the forest plot's order
    assert m.effect.at["s2", "s1"] == pytest.approx(2.0)
    assert m.effect.at["s1", "s2"] == pytest.approx(-2.0)
    ab = pd.DataFrame(
        [["a", "b", 8, 2, 0.8, 0.1, 0.1, False]],
        columns=["x", "y", "raters_x", "raters_y", "rater_share_x", "p", "p_holm", "significant"],
    )
    e = pairwise_matrix(ab).effect
    assert e.at["a", "b"] == pytest.approx(0.3) and e.at["b", "a"] == pytest.approx(-0.3)


def test_many_pairs_are_one_line_and_few_are_listed():
    many = summary_markdown(mos_tables([f"s{i:02d}" for i in range(13)], [3.0] * 13))
    assert "pairs differ significantly (Holm-adjusted p < 0.05)" in many
    assert "of 78 pairs" in many
    few = mos_tables(["a", "b", "c"], [1.0, 2.0, 3.0])
    assert len(few["mos_pairwise"]) <= _tab()[0].MAX_PAIR_LINES


def test_machine_scores_are_drawn_and_shown_when_present():
    """The machine room's tables as evaluation/listening/machine.py writes them: a panel per
    shown score against the human mean, the bounds not drawn as metrics."""
    tables = mos_tables(["s1", "s2", "s3"], [2.0, 4.0, 3.0])
    tables["machine"] = pd.DataFrame(
        {
            "system_id": ["s1", "s2", "s3"],
            "n_stimuli": [4, 4, 4],
            "human_scale": ["MOS"] * 3,
            "human_mean": [2.0, 4.0, 3.0],
            "predicted_mos": [2.1, 3.9, 3.5],
            "predicted_mos_low": [1.9, 3.7, 3.3],
            "predicted_mos_high": [2.3, 4.1, 3.7],
            "dnsmos_p808": [2.5, 3.1, 3.0],
            "dnsmos_p808_low": [2.3, 2.9, 2.8],
            "dnsmos_p808_high": [2.7, 3.3, 3.2],
        }
    )
    tables["machine_agreement"] = pd.DataFrame(
        {
            "column": ["predicted_mos", "dnsmos_p808"],
            "level": ["system", "system"],
            "n": [3, 3],
            "spearman": [1.0, 1.0],
            "p_spearman": [0.0, 0.0],
            "pearson": [0.98, 0.99],
            "p_pearson": [0.1, 0.1],
            "note": ["too few to judge (n < 5)"] * 2,
        }
    )
    figs = {f.name: f for f in test_figures(tables)}
    assert "machine" in figs and figs["machine"].numbers.equals(tables["machine"])
    ax = figs["machine"].draw().axes
    assert [a.get_xlabel() for a in ax] == ["predicted_mos", "dnsmos_p808"]
    files = figure_files([figs["machine"]])
    assert set(files) == {f"figures/machine.{x}" for x in (*FIGURE_FORMATS, "csv")}
    v = results_view(tables)
    assert v["machine"] is not None and v["machine_agreement"]["column"].tolist() == [
        "predicted_mos",
        "dnsmos_p808",
    ]
    assert "s2 (n=4): predicted_mos 3.90" in v["summary"] and "human MOS 4.00" in v["summary"]
    assert 'id="lt-fig-machine"' in results_html(None, list(figs.values()))
    assert "machine" not in {f.name for f in test_figures(mos_tables(["a", "b"], [1.0, 2.0]))}
    no_human = tables["machine"].assign(human_mean=float("nan"))  # an A/B test's
    assert "machine" not in {f.name for f in test_figures({**tables, "machine": no_human})}


def test_the_docs_state_the_code_numbers():
    from app.arena.export import ROW_GROUP, SHARD_BYTES

    text = " ".join((ROOT / "docs/listening-tests.md").read_text().split())
    assert f"Past {_tab()[0].MAX_PAIR_LINES} pairs" in text
    assert f"row groups of {ROW_GROUP} rows" in text
    assert f"a new file past {SHARD_BYTES // 2**20} MiB of audio" in text
    assert "`NAME.png` (150 dpi)" in text

    from evaluation.listening.machine import SHOWN

    shown = ", ".join(f"`{s.column}`" for s in SHOWN)
    assert f"a panel for each machine score the table has, {shown} in that order" in text
    src = (ROOT / "evaluation/plots.py").read_text()
    assert re.search(r'dpi=150, bbox_inches="tight"', src)


async def rate_any(lv, tid: str, k: int) -> None:
    """One rater of an A/B or MUSHRA test: every clip listened to, varied answers."""
    c = RaterClient(lv.url, tid)
    await c.join()
    st = await c.status()
    while not st["finished"]:
        it = st["item"]
        for i in range(it["slots"]):
            await c.listen(it["assignment_id"], i)
        body = {"assignment_id": it["assignment_id"]}
        if it["kind"] == "mushra":
            body["scores"] = [(37 * (i + k)) % 101 for i in range(it["slots"])]
        else:
            body["cmos"] = [2, -1, 1][k % 3]
        r = await c.vote(body)
        assert r.status_code == 200, r.text
        k += 1
        st = await c.status()
    await c.aclose()


@pytest.mark.parametrize("kind", ["ab", "mushra"])
def test_the_other_kinds_export_their_figures_and_items(kind):
    """A/B (its pairs as the forest's rows, the raters' preference share as the matrix) and
    MUSHRA export their figures and P.800.2's items through the same code."""
    with live_server(listening_app()) as lv:
        extra = {"reference": "a", "items_per_rater": 1} if kind == "mushra" else {}
        tid = create_test(lv, kind=kind, screening=False, headphone_check=False, **extra)

        async def go():
            await asyncio.gather(*(rate_any(lv, tid, k) for k in range(3)))

        asyncio.run(go())
        files = export_all(TestStore(lv.state.store), tid)
    rep = csv(files, "results/p800_2.csv")
    labels = rep.loc[rep["item"] == "scale_label", "value"].tolist()
    assert labels and rep.set_index("item").loc["raters_joined", "value"] == "3"
    main = csv(files, f"results/{kind}.csv")
    if kind == "ab":
        assert len(main) == 1 and "figures/pairwise.svg" in files
        pw = csv(files, "figures/pairwise.csv").set_index(["row", "column"])
        share = csv(files, "results/ab_pairwise.csv").iloc[0]
        assert pw.loc[(share["x"], share["y"]), "effect"] == pytest.approx(
            share["rater_share_x"] - 0.5, abs=1e-3
        )
        assert (
            csv(files, "figures/forest.csv")["row"].tolist()
            == main.assign(pair=main["y"] + " vs " + main["x"])["pair"].tolist()
        )
    else:
        assert "hidden reference: a" in " ".join(rep.loc[rep["item"] == "anchor", "value"])
        if not main.empty:
            assert "figures/forest.png" in files
