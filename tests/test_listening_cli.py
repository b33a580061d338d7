"""``listenlab test``: create, list, results, open/close through ``app.cli.main``, on a real
SQLite file and the real Piper voice (two Piper configurations are the two systems)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from app.cli import main
from app.listening.service import Listening
from app.store import Store

JOE = "joe=piper?deterministic=1"
FAST = "fast=piper?deterministic=1&speed=1.25"  # the same voice, faster: another configuration


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def created(tmp_path_factory):
    """One MOS test made by the CLI: 2 systems x 2 prompts from a file, screening on.
    (Module-scoped, so stdout/stderr are captured here rather than by ``capsys``.)"""
    folder = tmp_path_factory.mktemp("cli")
    db = folder / "lab.db"
    prompts = folder / "prompts.txt"
    prompts.write_text(
        "The birch canoe slid on the smooth planks.\n\nRice is often served in round bowls.\n"
    )
    spec = folder / "spec.json"  # the POST /ll/admin/tests body; flags override it
    spec.write_text(json.dumps({"name": "From a spec", "kind": "ab", "consent": "Agree?"}))
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(
            [
                "test",
                "create",
                "--db",
                str(db),
                "--spec",
                str(spec),
                "--type",
                "mos",
                "--system",
                JOE,
                "--system",
                FAST,
                "--prompts-file",
                str(prompts),
                "--items-per-rater",
                "2",
                "--no-headphone-check",
                "--completion-code",
                "DONE42",
                "--json",
            ]
        )
    assert code == 0, err.getvalue()
    return db, json.loads(out.getvalue()), err.getvalue()


def test_create_records_the_stimuli_with_a_progress_line(created):
    db, made, err = created
    tid = made["test_id"]
    assert made["url"] == f"/listen/{tid}" and made["status"] == "open"
    # the progress line counts up to 100 % (stderr is not a terminal here: one line per step)
    lines = [ln for ln in err.splitlines() if ln.startswith("generating stimuli")]
    pct = [float(ln.split("%")[0].split()[-1]) for ln in lines]
    assert pct[0] == 0.0 and pct[-1] == 100.0 and pct == sorted(pct) and len(pct) >= 5
    with Store.open(db, read_only=True) as store:
        svc = Listening(store)
        t = svc.tests.require_test(tid)
        assert (t.kind, t.name, t.status) == ("mos", "From a spec", "open")
        cfg = t.config
        assert cfg["consent"] == "Agree?" and cfg["completion_code"] == "DONE42"
        assert cfg["headphone_check"] is False and cfg["show_text"] is True  # MOS default
        assert [s["name"] for s in cfg["systems"]] == ["joe", "fast"]
        assert [s["backend"] for s in cfg["systems"]] == [JOE[4:], FAST[5:]]
        assert cfg["design"]["items_per_rater"] == 2 and len(cfg["design"]["prompts"]) == 2
        stim = svc.tests.stimuli(tid)
        kinds = sorted(s.kind for s in stim)
        # no natural recording and no marked clip: the gold "1" anchor and the trap, no gold
        # "5"; each made from both prompts, so raters in turn get different check clips
        assert kinds == ["anchor", "anchor", "item", "item", "item", "item", "trap", "trap"]
        checks = [s for s in stim if s.kind in ("anchor", "trap")]
        assert {(s.kind, s.prompt_id) for s in checks} == {
            (k, p) for k in ("anchor", "trap") for p in cfg["design"]["prompts"]
        }
        assert made["design"]["plan"][0]["items_per_rater"] == 2
        assert made["design"]["plan"][0]["clips_per_rater"] == 4
        items = [s for s in stim if s.kind == "item"]
        assert {(s.system_id, s.condition) for s in items} == {
            ("joe", "as_streamed"),
            ("fast", "as_streamed"),
        }
        prompts = {store.db["prompts"].get(s.prompt_id)["text"] for s in items}
        assert prompts == {
            "The birch canoe slid on the smooth planks.",
            "Rice is often served in round bowls.",
        }
        for s in items:  # real Piper audio, loudness-normalised, gain stored
            take = store.load_take(s.take_id)
            assert take.sample_rate == 22050 and take.duration_s > 1.0 and take.chunks
            assert s.loudness_lufs is not None and abs(s.gain_db) < 30
        d = {
            s.prompt_id: store.load_take(s.take_id).duration_s
            for s in items
            if s.system_id == "joe"
        }
        f = {
            s.prompt_id: store.load_take(s.take_id).duration_s
            for s in items
            if s.system_id == "fast"
        }
        assert all(f[p] < d[p] * 0.95 for p in d), (d, f)  # speed 1.25 really applied


def test_list_and_results_mirror_the_admin_json(created, capsys):
    db, made, _ = created
    tid = made["test_id"]
    code, out, _ = cli(capsys, "test", "list", "--db", str(db), "--json")
    assert code == 0
    (row,) = json.loads(out)["tests"]
    assert (row["test_id"], row["kind"], row["stimuli"], row["raters"]) == (tid, "mos", 8, 0)
    code, out, _ = cli(capsys, "test", "list", "--db", str(db))
    assert code == 0 and tid in out and "From a spec" in out

    # two raters vote through the service the routes use (real DB): joe 4, fast 2; the second
    # rater fails the low anchor and the trap, and is screened out
    with Store.open(db) as store:
        svc = Listening(store)
        for attentive in (True, False):
            tok = svc.join(tid)["token"]
            svc.consent(tid, tok)
            st = svc.status(tid, tok)
            while not st["finished"]:
                aid = st["item"]["assignment_id"]
                a = next(
                    x for x in store.assignments(tid, st["rater_id"]) if x.assignment_id == aid
                )
                take = store.load_take(a.take_id)
                svc.play_event(
                    tid,
                    tok,
                    aid,
                    0,
                    take.duration_s * 1000,
                    server_elapsed_ms=take.duration_s * 1000 + 100,
                    take_id=a.take_id,
                    condition="as_streamed",
                    duration_ms=take.duration_s * 1000,
                )
                if a.role == "item":
                    score = 4 if a.meta["systems"][0] == "joe" else 2
                else:
                    score = int(a.expected) if attentive else 5 if a.role == "gold" else 4
                svc.vote(
                    tid, tok, {"answer_id": f"{aid[:20]}x", "assignment_id": aid, "score": score}
                )
                st = svc.status(tid, tok)
        # the second rater's check items are other clips than the first's (another prompt)
        ids = svc.tests.raters_frame(tid)["rater_id"].tolist()
        checks = [{a.take_id for a in store.assignments(tid, r) if a.role != "item"} for r in ids]
        assert len(checks[0]) == 2 and checks[0].isdisjoint(checks[1])

    code, out, _ = cli(capsys, "test", "results", tid, "--db", str(db), "--json")
    assert code == 0
    res = json.loads(out)
    mos = {r["system_id"]: r for r in res["mos"]}
    assert mos["joe"]["mean"] == 4.0 and mos["fast"]["mean"] == 2.0 and mos["joe"]["n"] == 1
    raters = sorted(res["raters"], key=lambda r: r["seq"])
    assert [r["excluded"] for r in raters] == [False, True]
    assert "gold failed" in raters[1]["reasons"] and "trap failed" in raters[1]["reasons"]
    all_ = {r["system_id"]: r["n"] for r in res["mos_all_raters"]}
    assert all_ == {"joe": 2, "fast": 2}
    code, out, _ = cli(capsys, "test", "results", tid, "--db", str(db), "--include-screened")
    assert code == 0 and "== mos ==" in out and "== raters ==" in out and "joe" in out

    code, out, _ = cli(capsys, "test", "close", tid, "--db", str(db))
    assert code == 0 and "closed" in out
    code, out, _ = cli(capsys, "test", "list", "--db", str(db), "--json")
    assert json.loads(out)["tests"][0]["status"] == "closed"


def test_flags_build_the_admin_routes_spec():
    from app.cli import build_parser
    from app.listening.cli import spec_from_args

    args = build_parser().parse_args(
        ["test", "create", "--system", JOE, "--system", "piper", "--params", "seed=3&speed=1.1"]
        + ["--type", "ab", "--ab-mode", "forced", "--no-screening", "--harvard", "3"]
        + ["--no-show-text"]
    )
    spec = spec_from_args(args)
    assert spec["systems"] == [
        {"name": n, "backend": b, "voice": None, "condition": "as_streamed", "params": p}
        for n, b, p in (
            ("joe", "piper?deterministic=1", {"seed": 3, "speed": 1.1}),
            ("piper", "piper", {"seed": 3, "speed": 1.1}),
        )
    ]
    assert spec["prompts"] == {"source": "harvard", "n": 3}
    assert (spec["kind"], spec["ab_mode"], spec["screening"]) == ("ab", "forced", False)
    assert spec["show_text"] is False
    assert "headphone_check" not in spec and "open" not in spec  # the designer's defaults
    # imported stimuli: no systems needed, no Harvard default, the new fields passed through
    args = build_parser().parse_args(
        ["test", "create", "--stimuli", "study/", "--natural", "rec", "--title", "Voices"]
        + ["--instructions", "Rate.", "--gold-clip", "g.wav", "--target-lufs", "-24"]
    )
    spec = spec_from_args(args)
    assert spec["stimuli"] == "study/" and spec["natural"] == ["rec"] and "prompts" not in spec
    assert (spec["title"], spec["instructions"], spec["gold_clip"]) == ("Voices", "Rate.", "g.wav")
    assert spec["target_lufs"] == -24.0 and "systems" not in spec


@pytest.mark.parametrize(
    "argv, words",
    [
        (["test", "create", "--harvard", "2"], "give the systems"),
        (["test", "create", "--system", "x=nosuchengine"], "cannot load backend"),
        (["test", "create", "--system", JOE, "--type", "ab", "--harvard", "2"], "two systems"),
        (
            ["test", "create", "--system", JOE, "--system", FAST, "--type", "mushra"],
            "a MUSHRA test needs a reference system",
        ),
        (["test", "create", "--stimuli", "/nonexistent/folder"], "no stimuli folder"),
        (
            ["test", "create", "--system", JOE, "--target-lufs", "-3", "--harvard", "1"],
            "loudness target must be within",
        ),
        (["test", "results", "nosuchtest"], "no test"),
    ],
)
def test_bad_input_gets_a_clear_error(tmp_path, capsys, argv, words):
    db = tmp_path / "lab.db"
    if argv[1] == "results":
        Store.open(db).close()
    code, _, err = cli(capsys, *argv, "--db", str(db))
    assert code in (1, 2) and words in err, err
    if argv[1] == "create" and db.exists():
        with Store.open(db, read_only=True) as store:
            assert store.db.execute("SELECT count(*) FROM tests").fetchone()[0] == 0
