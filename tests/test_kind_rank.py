"""The ranking kind (#42 item 1): N systems' takes of one prompt on one screen, put in order.

Its statistics against SciPy and known truth, its screening against careless rankers, and a
test run end to end on the real app: designed through the admin route (and refused past its
limit), the screens and the check screens planned, raters who stream every clip over
``/ll/ws`` and vote (refused before playing, and with a tie), one row per clip in the SQLite
file's ``rank_ratings``, the results, the Results tab's words and the export with its column
dictionary.
"""

from __future__ import annotations

import asyncio
import io
import json
import zipfile

import httpx
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from app.listening.columns import columns
from backends.errors import InvalidRequest
from benchmarks.listening_validity import RankModel, rank_data, rank_truth
from evaluation.listening.design import Design, plan
from evaluation.listening.kinds import KINDS
from evaluation.listening.kinds.base import ANCHOR
from evaluation.listening.kinds.rank import (
    CHECK_SCREENS,
    MAX_SYSTEMS,
    friedman,
    friedman_table,
    position_orders,
    rank_pairwise,
    rank_screening,
    rank_table,
    read_ranks,
)
from tests.support.app_util import create_test, listening_app, live_server
from tests.support.rater import RaterClient

RANK = KINDS["rank"]


# --------------------------------------------------------------------------- the answer


def test_a_ranking_is_a_permutation_without_ties():
    assert read_ranks([2, 3, 1], 3) == [2, 3, 1]
    for bad in ([1, 1, 3], [1, 2], [0, 1, 2], [1, 2, 4], [True, 2, 3], [1.0, 2, 3], "123", None):
        with pytest.raises(InvalidRequest, match=r"different place 1\.\.3"):
            read_ranks(bad, 3)


def test_screens_hold_every_system_and_the_checks_the_anchor():
    d = Design("rank", ("a", "b", "c"), ("p1", "p2", "p3", "p4"), 4, screening=True)
    items = plan(d, 0)
    screens = [it for it in items if it.role == "item"]
    checks = [it for it in items if it.role == "gold"]
    assert len(screens) == 4 and sorted(it.prompt for it in screens) == ["p1", "p2", "p3", "p4"]
    assert all(sorted(s.system for s in it.slots) == ["a", "b", "c"] for it in screens)
    assert len({tuple(s.system for s in it.slots) for it in plan(d, 5) if it.role == "item"}) > 1
    assert len(checks) == CHECK_SCREENS
    for c in checks:  # the anchor among the systems, expected last of four
        assert sorted(s.system for s in c.slots) == sorted(["a", "b", "c", ANCHOR])
        assert c.expected == 4.0 and [s.role for s in c.slots].count("anchor") == 1
    assert len({[s.system for s in c.slots].index(ANCHOR) for c in checks}) == 2  # two places
    assert items[0].role == "item"  # checks never first
    two = Design("rank", ("a", "b"), ("p",), 1, screening=False)
    assert not [it for it in plan(two, 0) if it.role != "item"]
    with pytest.raises(ValueError, match="at most 8 clips"):
        Design("rank", tuple(f"s{i}" for i in range(MAX_SYSTEMS + 1)), ("p",), 1).validate()


# --------------------------------------------------------------------------- the statistics


def test_friedman_is_scipys_and_takes_two_systems():
    rng = np.random.default_rng(4)
    m = rng.integers(1, 5, (12, 4)).astype(float)  # ties within rows: mid-ranks, corrected
    q, p, w = friedman(m)
    want = stats.friedmanchisquare(*m.T)
    assert q == pytest.approx(want.statistic) and p == pytest.approx(want.pvalue)
    assert w == pytest.approx(q / (12 * 3))
    two = np.array([[1, 2]] * 9 + [[2, 1]])  # two systems: 9 of 10 blocks one way
    q2, p2, _ = friedman(two)
    assert q2 == pytest.approx((9 - 1) ** 2 / 10)  # the sign test's chi-square
    assert p2 == pytest.approx(stats.chi2.sf(6.4, 1))


def test_mean_ranks_pairs_and_friedman_on_a_simulated_panel():
    m = RankModel(bad=())
    data, _ = rank_data(m, np.random.default_rng(11))
    d = data.table("rank_ratings")
    assert len(d) == 30 * 10 * 4 and set(d.groupby("assignment_id")["rank"].sum()) == {10}
    tab = rank_table(d).set_index("system_id")
    assert list(tab.index) == ["s3", "s4", "s2", "s1"] or list(tab.index) == [
        "s4",
        "s3",
        "s2",
        "s1",
    ]
    assert tab["mean_rank"].sum() == pytest.approx(10.0)  # 1 + 2 + 3 + 4
    for s, v in rank_truth(m).items():
        assert tab.loc[s, "ci_low"] < v < tab.loc[s, "ci_high"], s
        assert (tab.loc[s, "screens"], tab.loc[s, "raters"], tab.loc[s, "prompts"]) == (300, 30, 10)
    pw = rank_pairwise(d).set_index(["x", "y"])
    assert len(pw) == 6 and pw.loc[("s1", "s3"), "significant"]
    assert pw.loc[("s1", "s3"), "rank_diff_y_minus_x"] < 0  # s3 ranked better
    assert not pw.loc[("s3", "s4"), "significant"]  # equal systems
    assert set(pw["test"]) == {"cluster t"}
    fr = friedman_table(d).set_index("blocks")
    assert fr.loc["screens", "n_blocks"] == 300 and fr.loc["raters", "n_blocks"] == 30
    assert (fr["p"] < 1e-6).all() and (fr["df"] == 3).all()


def test_two_systems_one_always_ahead_falls_back_to_the_sign_test():
    rows = []
    for r in range(6):
        for p in range(3):
            aid = f"r{r}-{p}"
            rows += [[f"r{r}", aid, 0, "a", f"p{p}", 1, 2], [f"r{r}", aid, 1, "b", f"p{p}", 2, 2]]
    d = pd.DataFrame(
        rows,
        columns=["rater_id", "assignment_id", "slot", "system_id", "prompt_id", "rank", "clips"],
    )
    pw = rank_pairwise(d).iloc[0]
    assert pw["test"] == "sign" and pw["x_above_share"] == 1.0
    assert pw["p"] == pytest.approx(2 * 0.5**6)  # six raters, all one way
    tab = rank_table(d).set_index("system_id")
    assert tab.loc["a", "mean_rank"] == 1.0 and np.isnan(tab.loc["a", "ci_low"])
    assert "no spread" in tab.loc["a", "note"]


def test_careless_rankers_are_caught_and_honest_ones_kept():
    m = RankModel(raters=30)
    data, kinds = rank_data(m, np.random.default_rng(2))
    scr = rank_screening(data)
    ex = {r for r in scr.index if scr.loc[r, "excluded"]}
    assert {r for r, k in kinds.items() if k in ("position", "inverted")} <= ex
    assert len(ex & {r for r, k in kinds.items() if k == "honest"}) <= 1
    pos = next(r for r, k in kinds.items() if k == "position")
    assert scr.loc[pos, "same_order"] == 1.0 and scr.loc[pos, "position_p"] < 1e-6
    assert "ranked by position: 100% of 10 screens" in scr.loc[pos, "reasons"]
    inv = next(r for r, k in kinds.items() if k == "inverted")
    assert (
        scr.loc[inv, "check_failed"] == 2
        and "ranking check failed x2 of 2" in scr.loc[inv, "reasons"]
    )
    # the position rule on its own: one screen order p = N! * P(Bin(k, 1/N!) >= m)
    d = data.table("rank_ratings")
    po = position_orders(d[d["rater_id"] == pos])
    assert po.loc[pos, "position_p"] == pytest.approx(24 * (1 / 24) ** 10)


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app()) as lv:
        yield lv


SYSTEMS = [
    {"name": "joe", "backend": "piper"},
    {"name": "qwen", "backend": "qwen"},
    {"name": "fast", "backend": "piper", "params": {"speed": "1.3"}},
]
PROMPTS = [
    "The birch canoe slid on the smooth planks.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
]


def rank_test(live, **spec) -> str:
    body = {
        "name": "ranking",
        "kind": "rank",
        "systems": SYSTEMS,
        "prompts": PROMPTS,
        "items_per_rater": 3,
        "screening": True,
        "headphone_check": False,
        "completion_code": "RNK",
        **spec,
    }
    return create_test(live, **body)


async def rank_rater(live, tid: str, crowd: str, order: list[str]) -> tuple[list[int], list[dict]]:
    """Rate every screen: a vote before playing (409), one with a tie (400), then the ranks
    that put the systems in ``order`` (the oracle: the assignment's systems, read from the
    store; the page itself never learns them) and the check screens' anchor last."""
    store = live.state.store
    rater = RaterClient(live.url, tid, crowd_id=crowd)
    codes, votes = [], []
    try:
        await rater.join()
        st = await rater.status()
        own = {a.assignment_id: a for a in store.assignments(tid, st["rater_id"])}
        while st["item"] is not None:
            item = st["item"]
            aid, n = item["assignment_id"], item["slots"]
            assert item["kind"] == "rank" and item["labels"] == list("ABCD"[:n])
            early = await rater.vote({"assignment_id": aid, "ranks": list(range(1, n + 1))})
            codes.append(early.status_code)
            for slot in range(n):
                await rater.listen(aid, slot)
            tie = await rater.vote({"assignment_id": aid, "ranks": [1] * n})
            codes.append(tie.status_code)
            assert "different place" in tie.json()["detail"]
            systems = own[aid].meta["systems"]
            want = [*order, ANCHOR]
            ranks = [1 + sorted(systems, key=want.index).index(s) for s in systems]
            r = await rater.vote({"assignment_id": aid, "ranks": ranks})
            codes.append(r.status_code)
            votes.append({"systems": systems, "ranks": ranks, "role": own[aid].role})
            st = await rater.status()
        assert st["completion_code"] == "RNK"
        return codes, votes
    finally:
        await rater.aclose()


def test_a_ranking_test_end_to_end(live):
    tid = rank_test(live)
    orders = [["fast", "joe", "qwen"], ["fast", "qwen", "joe"], ["fast", "joe", "qwen"]]

    async def panel():
        return await asyncio.gather(
            *[rank_rater(live, tid, f"rank-{i}", o) for i, o in enumerate(orders)]
        )

    got = asyncio.run(panel())
    for codes, votes in got:
        assert codes == [409, 400, 200] * 5  # three screens, two check screens
        assert sorted(v["role"] for v in votes) == ["gold", "gold", "item", "item", "item"]
        for v in votes:
            if v["role"] == "gold":
                assert len(v["systems"]) == 4 and v["ranks"][v["systems"].index(ANCHOR)] == 4
    db = live.state.store.db
    rows = db.execute(
        "SELECT rater_id, assignment_id, system_id, rank, clips FROM rank_ratings WHERE test_id = ?",
        [tid],
    ).fetchall()
    assert len(rows) == 3 * 3 * 3 and {r[4] for r in rows} == {3}  # no check screen rows
    assert {r[2] for r in rows} == {"joe", "qwen", "fast"}
    fast = [r[3] for r in rows if r[2] == "fast"]
    assert fast == [1] * 9
    answers = db.execute(
        "SELECT payload FROM answers WHERE test_id = ? AND kind = 'rank'", [tid]
    ).fetchall()
    checks = [json.loads(p) for (p,) in answers if "anchor_rank" in json.loads(p)]
    assert len(checks) == 6 and {(c["clips"], c["anchor_rank"]) for c in checks} == {(4, 4)}

    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", timeout=120).json()
    tab = {r["system_id"]: r for r in res["rank"]}
    assert tab["fast"]["mean_rank"] == 1.0 and tab["fast"]["first_share"] == 1.0
    assert tab["joe"]["mean_rank"] == pytest.approx(2 + 1 / 3, abs=1e-3)
    assert tab["qwen"]["mean_rank"] == pytest.approx(2 + 2 / 3, abs=1e-3)
    assert [r["system_id"] for r in res["rank"]] == ["fast", "joe", "qwen"]
    assert {r["blocks"]: r["n_blocks"] for r in res["rank_friedman"]} == {"screens": 9, "raters": 3}
    pw = {(r["x"], r["y"]): r for r in res["rank_pairwise"]}
    assert pw[("fast", "joe")]["x_above_share"] == 1.0
    board = {r["system"]: r for r in res["rank_board"]}
    assert board["fast"]["wins"] == 18 and board["fast"]["losses"] == 0  # 9 screens x 2 pairs
    assert board["fast"]["rating"] > board["joe"]["rating"] > board["qwen"]["rating"]
    scr = {r["rater_id"]: r for r in res["rank_screening"]}
    assert all(r["checks"] == 2 and r["check_failed"] == 0 for r in scr.values())
    assert not any(r["excluded"] for r in res["raters"])
    methods = {m["table"]: m for m in res["methods"]}
    assert "two-way cluster-robust" in methods["rank"]["method"]
    assert "Friedman" in methods["rank_friedman"]["method"]

    z = zipfile.ZipFile(io.BytesIO(httpx.get(f"{live.url}ll/admin/tests/{tid}/export.zip").content))
    names = set(z.namelist())
    assert {"raw/rank_ratings.csv", "results/rank.csv", "results/rank_pairwise.csv"} <= names
    d = columns()
    files = ("raw/rank_ratings.csv", "results/rank.csv", "results/rank_friedman.csv")
    for f in (*files, "results/rank_board.csv", "results/rank_screening.csv"):
        head = z.read(f).decode().splitlines()[0].split(",")
        assert set(head) <= set(d[f]), (f, set(head) - set(d[f]))
    ratings = pd.read_csv(io.BytesIO(z.read("raw/ratings.csv")))
    assert len(ratings[ratings["kind"] == "rank"]) == 27 and set(ratings["rank"].dropna()) == {
        1,
        2,
        3,
    }


def test_the_results_tab_words_and_the_designer_limits(live):
    tid = rank_test(live, name="words", screening=False, items_per_rater=1)
    assert (
        httpx.post(
            f"{live.url}ll/admin/tests",
            json={
                "name": "too many",
                "kind": "rank",
                "systems": [{"name": f"s{i}", "backend": "piper"} for i in range(9)],
                "prompts": PROMPTS,
                "items_per_rater": 1,
            },
            timeout=60,
        ).json()["detail"]
        == "9 systems; a ranking screen holds at most 8 clips (a rater compares each with "
        "every other): split the systems into two tests"
    )
    got = asyncio.run(rank_rater(live, tid, "words-0", ["qwen", "joe", "fast"]))
    assert got[0] == [409, 400, 200]
    tables = {
        k: pd.DataFrame(v)
        for k, v in httpx.get(f"{live.url}ll/admin/tests/{tid}/results", timeout=60).json().items()
        if isinstance(v, list)
    }
    text = "\n".join(RANK.summary(tables, {}))
    assert "- rank qwen: 1.00 (too few ratings) n=1, raters=1" in text
    assert "rank(joe) - rank(fast)" in text


# --------------------------------------------------------------------------- the command line


def test_listenlab_test_create_type_rank_and_its_results(tmp_path, capsys):
    """``listenlab test create --type rank`` on the real Piper voice; two raters vote through
    the service the routes use (the real SQLite file), the second ranks by position and
    puts the anchor first, and ``listenlab test results`` screens them out."""
    from app.cli import main
    from app.listening.service import Listening
    from app.store import Store

    db = tmp_path / "lab.db"
    code = main(
        ["test", "create", "--db", str(db), "--type", "rank", "--harvard", "3"]
        + [
            "--system",
            "joe=piper?deterministic=1",
            "--system",
            "fast=piper?deterministic=1&speed=1.3",
        ]
        + ["--system", "slow=piper?deterministic=1&speed=0.8", "--items-per-rater", "3"]
        + ["--no-headphone-check", "--json"]
    )
    made = json.loads(capsys.readouterr().out)
    assert code == 0 and made["status"] == "open"
    tid = made["test_id"]
    with Store.open(db) as store:
        svc = Listening(store)
        stim = svc.tests.stimuli(tid)
        assert sorted(s.kind for s in stim).count("item") == 9  # 3 systems x 3 prompts
        assert {s.system_id for s in stim if s.kind == "anchor"} == {ANCHOR}
        for attentive in (True, False):
            tok = svc.join(tid)["token"]
            svc.consent(tid, tok)
            st = svc.status(tid, tok)
            while not st["finished"]:
                aid = st["item"]["assignment_id"]
                a = next(
                    x for x in store.assignments(tid, st["rater_id"]) if x.assignment_id == aid
                )
                for slot, take_id in enumerate(a.slots):
                    ms = store.load_take(take_id).duration_s * 1000
                    svc.play_event(
                        tid, tok, aid, slot, ms, server_elapsed_ms=ms + 100, take_id=take_id,
                        condition="as_streamed", duration_ms=ms,
                    )  # fmt: skip
                systems = a.meta["systems"]
                want = ["fast", "joe", "slow", ANCHOR]
                ranks = [1 + sorted(systems, key=want.index).index(s) for s in systems]
                if not attentive:  # by position, the anchor (if any) first
                    rest = iter(range(2 if ANCHOR in systems else 1, len(systems) + 1))
                    ranks = [1 if s == ANCHOR else next(rest) for s in systems]
                svc.vote(
                    tid, tok, {"answer_id": f"{aid[:20]}x", "assignment_id": aid, "ranks": ranks}
                )
                st = svc.status(tid, tok)
    code = main(["test", "results", tid, "--db", str(db), "--json"])
    res = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [r["system_id"] for r in res["rank"]] == ["fast", "joe", "slow"]
    assert [r["mean_rank"] for r in res["rank"]] == [1.0, 2.0, 3.0]
    raters = sorted(res["raters"], key=lambda r: r["seq"])
    assert [r["excluded"] for r in raters] == [False, True]
    assert "ranking check failed x2 of 2" in raters[1]["reasons"]
    assert raters[1]["rank_check_failed"] == 2 and raters[0]["rank_check_failed"] == 0
    # the store-wide report: the kind's tables and its rows (the check screens left out)
    out = tmp_path / "report.html"
    assert main(["report", str(db), "-o", str(out), "--csv", str(tmp_path / "csv")]) == 0
    capsys.readouterr()
    page = out.read_text(encoding="utf-8")
    assert "Mean rank per system, 1 = best" in page and "ranking check failed x2 of 2" in page
    assert {p.name for p in (tmp_path / "csv").glob("stats_test_*_rank*.csv")} == {
        f"stats_test_{tid}_{t}.csv"
        for t in ("rank", "rank_pairwise", "rank_friedman", "rank_board", "rank_screening")
    }
    assert len(pd.read_csv(tmp_path / "csv" / "rank_ratings.csv")) == 2 * 3 * 3


# --------------------------------------------------------------------------- the docs


def example_text() -> str:
    """The Results tab's words for the docs' simulated panel (9 honest raters, one who ranks by
    position, three systems), through the results every test gets."""
    from evaluation.listening.results import test_results
    from evaluation.listening.screening import TestScreening

    m = RankModel(system_means=(3.0, 3.5, 4.2), raters=9, prompts=10, bad=("position",))
    data, _ = rank_data(m, np.random.default_rng(42))
    data.raters["seq"] = range(len(data.raters))
    data.raters["answered"] = 12
    tables = test_results(data, screening=TestScreening(require_headphones=False))
    titles = dict(zip(tables["methods"]["table"], tables["methods"]["title"], strict=True))
    return "\n\n".join(RANK.summary(tables, titles))


def test_the_docs_example_is_what_the_results_say():
    import re
    import textwrap
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "listening-tests.md").read_text()
    section = doc[doc.index("## Ranking tests (`rank`)") : doc.index("## Screening")]
    block = re.search(r"  ```text\n(.*?)  ```", section, re.S).group(1)
    assert textwrap.dedent(block).strip() == example_text()
    for number in ("**2**", "**8**", "**3**", "**0.001**", "min(3 s, 95 % of the clip)"):
        assert number in section, number
    from evaluation.listening.kinds.rank import RULES

    assert (RULES.min_screens, RULES.position_p, CHECK_SCREENS, MAX_SYSTEMS) == (3, 0.001, 2, 8)
    assert RULES.max_check_failures == 1 and "on **both** check screens" in section


def test_the_results_tab_shows_the_ranking():
    """The admin Results tab's view of a ranking test: the words, a plot of the mean ranks
    with their intervals, the mean-rank table first and the pairs as the pairwise table."""
    from app.listening.admin.results_tab import results_view
    from evaluation.listening.results import test_results
    from evaluation.listening.screening import TestScreening

    m = RankModel(system_means=(3.0, 3.5, 4.2), raters=9, prompts=10, bad=("position",))
    data, _ = rank_data(m, np.random.default_rng(42))
    data.raters["seq"] = range(len(data.raters))
    data.raters["answered"] = 12
    tables = test_results(data, screening=TestScreening(require_headphones=False))
    view = results_view(tables)
    assert list(view["main"]["system_id"]) == ["s3", "s2", "s1"]
    assert list(view["pairwise"][["x", "y"]].itertuples(index=False, name=None)) == [
        ("s1", "s2"),
        ("s1", "s3"),
        ("s2", "s3"),
    ]
    assert view["plot"] is not None
    assert "ranking check failed x2 of 2" in view["summary"]
    assert "ranked by position: 100% of 10 screens" in view["summary"]
    assert "Friedman" in view["summary"] and "- rank s3: 1.38" in view["summary"]


def test_the_statistics_page_prints_the_ranking_rows_it_measured():
    """docs/statistics.md prints the benchmark's ranking tables (``rank_markdown``) of the JSON
    in the repo: every cell of the grid at >= 0.93, and the tests' false positives."""
    from pathlib import Path

    from benchmarks.listening_validity import grid_cells, rank_checks, rank_markdown

    root = Path(__file__).resolve().parents[1]
    res = json.loads((root / "benchmarks/results/listening_validity.json").read_text())
    part = res["rank"]
    assert len(part["cells"]) == len(grid_cells()) == 27
    assert min(c["tests"] for c in part["cells"].values()) >= 200
    assert part["minimum"]["coverage"] >= 0.93
    assert all(rank_checks(res).values()) and res["checks"] == res["checks"] | rank_checks(res)
    page = (root / "docs" / "statistics.md").read_text(encoding="utf-8")
    assert rank_markdown(res) in page
    assert f"{part['minimum']['coverage']:.3f}" in page
