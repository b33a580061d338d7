"""The export of a finished study is its methods section: a real server (uvicorn on
127.0.0.1, the Piper voice, a SQLite file), a Prolific rater who answers the questionnaire,
passes the headphone screen and rates every item, one who fails the screen; then the zip is
read as a reader of the paper would: version, design, every text as shown, playback format,
each stimulus's file and SHA-256, the screen's keys and answers, the timing from the first
sound, the column dictionary against every CSV, ``--public`` without any crowd id or code,
and ``listenlab test results --csv`` writing exactly the zip's files."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import zipfile
from importlib import metadata

import httpx
import pandas as pd
import pytest

from tests.support.app_util import LISTENING_BACKENDS, TWO_PROMPTS, create_test, live_server, tmp_db
from tests.support.rater import RaterClient

PW = "export-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
PID, STUDY, SESSION, CODE = "PPID0123456789", "STUDY42", "SESSION7", "C0MPLETE"
INSTRUCTIONS = "Rate the voice as if it read you the news."


@pytest.fixture(scope="module")
def finished():
    """A finished MOS study and the server it ran on."""
    import os

    from app.server import create_app

    db = tmp_db()
    old = os.environ.get("LISTENLAB_ADMIN_PASSWORD")
    os.environ["LISTENLAB_ADMIN_PASSWORD"] = PW
    try:
        app = create_app(dict(LISTENING_BACKENDS), db, mount_ui=False)
    finally:
        if old is None:
            os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
        else:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old
    with live_server(app) as lv:
        tid = create_test(
            lv,
            ADMIN,
            screening=True,
            questionnaire=True,
            instructions=INSTRUCTIONS,
            completion_code=CODE,
            screenout_code="SCREENED1",
        )
        good, bad = asyncio.run(_study(lv, tid))
        yield lv, tid, good, bad, db


async def _rater(lv, tid: str, crowd: str, passes: bool) -> str:
    c = RaterClient(lv.url, tid)
    r = await c.post(
        "join",
        {"crowd_id": crowd, "source": "PROLIFIC_PID", "study_id": STUDY, "session_id": SESSION},
    )
    c.token = r.json()["token"]
    (await c.post("consent")).raise_for_status()
    st = await c.status()
    assert st["stage"] == "questionnaire"
    answers = {"device": "Headphones", "headphone_type": "Over-ear"}
    answers |= {"native_language": "English", "age_band": "30-39"}
    bad = await c.post("questionnaire", {"answers": {**answers, "age_band": "<img>"}})
    assert bad.status_code == 400 and "age_band" in bad.json()["detail"]
    (await c.post("questionnaire", {"answers": answers})).raise_for_status()
    await c.headphone(correct=passes)
    st = await c.status()
    db = lv.state.store
    while passes and not st["finished"]:
        aid = st["item"]["assignment_id"]
        role, expected = db.db.execute(
            "SELECT role, expected FROM assignments WHERE assignment_id = ?", [aid]
        ).fetchone()
        await c.listen(aid, 0)
        score = int(expected) if role != "item" else 4
        (await c.vote({"assignment_id": aid, "score": score})).raise_for_status()
        st = await c.status()
    await c.aclose()
    return st["rater_id"]


async def _study(lv, tid: str) -> tuple[str, str]:
    good = await _rater(lv, tid, PID, True)
    bad = await _rater(lv, tid, "PBAD000000001", False)
    return good, bad


def _zip(lv, tid: str, **params) -> dict[str, bytes]:
    r = httpx.get(
        lv.url + f"ll/admin/tests/{tid}/export.zip", headers=ADMIN, params=params, timeout=120
    )
    assert r.status_code == 200, r.text
    z = zipfile.ZipFile(io.BytesIO(r.content))
    return {n: z.read(n) for n in z.namelist()}


def _csv(files: dict[str, bytes], name: str) -> pd.DataFrame:
    data = files[name]
    return pd.read_csv(io.BytesIO(data)) if data.strip() else pd.DataFrame()


def test_the_export_holds_the_methods_section(finished):
    lv, tid, good, bad, _db = finished
    files = _zip(lv, tid)
    st = json.loads(files["study.json"])
    assert st["listenlab_version"] == metadata.version("listenlab")
    d = st["design"]
    assert (d["items_per_rater"], d["check_items_per_rater"]) == (2, 2)  # anchor and trap
    assert [p["text"] for p in d["prompts"]] == TWO_PROMPTS
    assert [p["prompt_key"] for p in d["prompts"]] == ["p001", "p002"]
    t = st["texts"]
    from app.listening.flow import DEFAULT_CONSENT
    from evaluation.listening.kinds import KINDS

    assert t["consent"] == DEFAULT_CONSENT and t["consent_is_default"] is True
    assert (
        t["instructions"] == KINDS["mos"].instructions and t["admin_instructions"] == INSTRUCTIONS
    )
    assert t["scale"]["labels"] == [
        [5, "Excellent"],
        [4, "Good"],
        [3, "Fair"],
        [2, "Poor"],
        [1, "Bad"],
    ]
    assert "one attempt" in t["screen"]["intro"] and t["screen"]["questions"]["antiphase"]
    assert [q["key"] for q in t["questionnaire"]["questions"]] == [
        "device",
        "headphone_type",
        "native_language",
        "age_band",
    ]
    assert st["playback"]["sample_rate"] >= 22050 and st["playback"]["normalised"] is True
    store = lv.state.store
    for s in st["stimuli"]:  # each stimulus as played: its file's SHA-256 and its gain
        take = next(
            x
            for x in store.db.execute(
                "SELECT take_id FROM stimuli WHERE stimulus_id=?", [s["stimulus_id"]]
            )
        )
        audio = store.audio_path(take[0])
        assert s["audio_file"] == audio.name
        assert s["audio_sha256"] == hashlib.sha256(audio.read_bytes()).hexdigest()
        assert isinstance(s["gain_db"], float)
    assert {s["kind"] for s in st["stimuli"]} == {"item", "anchor", "trap"}
    hp = st["screening"]["headphone_screen"]
    assert (hp["trials_per_test"], hp["attempts"]) == (6, 1) and hp["pass"].startswith(">= 5")
    raters = {r["rater_id"]: r for r in st["raters"]}
    assert not raters[good]["excluded"] and raters[bad]["excluded"]
    assert raters[good]["crowd_id"] == PID  # the private export keeps the crowd id
    methods = {m["table"]: m for m in st["analysis"]}
    assert "Welch-Satterthwaite" in methods["mos"]["method"] and methods["mos"]["assumes"]

    trials = _csv(files, "raw/screen_trials.csv")  # the screen's keys and every answer
    assert len(trials) == 12 and set(trials["rater_id"]) == {good, bad}
    keys = trials["key"].map(lambda k: json.loads(k)["answer"])
    mine = trials["rater_id"] == good
    assert (keys[mine] == trials.loc[mine, "answer"]).sum() >= 5
    assert (keys[~mine] == trials.loc[~mine, "answer"]).sum() < 5
    tr = _csv(files, "raw/test_raters.csv").set_index("rater_id")
    assert json.loads(tr.loc[good, "questionnaire"])["device"] == "Headphones"
    assert (tr.loc[good, "study_id"], tr.loc[good, "session_id"]) == (STUDY, SESSION)

    rat = _csv(files, "raw/ratings.csv")
    assert len(rat) == 4 and set(rat["prompt_key"].dropna()) <= {"p001", "p002"}
    first = rat.sort_values("answered_at").iloc[0]
    # the first item's time on screen starts at its first sound, not at consent: the
    # questionnaire and the headphone screen (its trials play for 3.05 s at least) lie between
    assert first["time_on_item_ms"] > 0
    assert first["time_since_previous_ms"] - first["time_on_item_ms"] > 3050
    assert (rat["time_on_item_ms"] > 0).all()
    # #38 item 14: a check item's row names its pseudo system (its take names none)
    checks = rat[rat["role"] != "item"]
    assert sorted(checks["system_id"]) == ["__anchor__", "__trap__"]
    assert rat.loc[rat["role"] == "item", "system_id"].notna().all()

    md = files["methods.md"].decode()
    assert f"listenlab {st['listenlab_version']}" in md and INSTRUCTIONS in md
    assert "one attempt" in md and "(the default text)" in md and "MOS a:" in md
    # #38 item 19: the exclusion rule where the rule belongs, the check items' judging apart
    assert "- A rater was excluded from the results on: headphone screen" in md
    assert "excluded when: a trap answer is not exactly the one asked" in md
    assert "- How the check items were judged: trap: exactly the answer the clip asks for" in md
    assert "- Rule: " not in md
    assert "shown the completion code like every rater" in st["screening"]["excluded_raters"]


def test_every_exported_column_is_in_the_dictionary(finished):
    from app.listening.columns import columns

    COLUMNS = columns()

    lv, tid, *_ = finished
    files = _zip(lv, tid)
    missing = []
    for name, data in files.items():
        if not name.endswith(".csv") or not data.strip():
            continue
        cols = pd.read_csv(io.BytesIO(data), nrows=0).columns
        known = COLUMNS.get(name, {})
        if name == "results/glitches_by_seam.csv":
            continue  # its columns are seam numbers
        missing += [f"{name}:{c}" for c in cols if c not in known]
    assert not missing, missing
    assert json.loads(files["study.json"])["columns"] == COLUMNS


def test_public_export_holds_no_crowd_id_or_code(finished):
    lv, tid, *_ = finished
    files = _zip(lv, tid, public="true")
    for name, data in files.items():
        for secret in (PID, "PBAD000000001", STUDY, SESSION, CODE, "SCREENED1"):
            assert secret.encode() not in data, (name, secret)
    st = json.loads(files["study.json"])
    assert st["public"] is True and "crowd_id" not in st["raters"][0]
    assert "completion_code" not in _csv(files, "raw/test_raters.csv").columns
    private = _zip(lv, tid)
    assert PID.encode() in private["raw/test_raters.csv"] and CODE.encode() in private["test.json"]


def test_the_terminal_writes_exactly_the_zip(finished, tmp_path, capsys):
    from app.cli import main

    lv, tid, _good, _bad, db = finished
    for public in (False, True):
        out = tmp_path / ("public" if public else "all")
        args = ["test", "results", tid, "--db", str(db), "--csv", str(out)]
        assert main([*args, *(["--public"] if public else [])]) == 0
        files = _zip(lv, tid, **({"public": "true"} if public else {}))
        written = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
        assert written == files
    capsys.readouterr()
