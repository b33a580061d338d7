"""Machine scores beside a listening test's human results, on real parts: a MOS test made by
``listenlab test create`` from a folder of real Piper takes (one clean system and the same
takes with white noise at 20, 10, 5 and 0 dB SNR), its texts in ``prompts.csv``, a real
SQLite file, the models of the ``[metrics]`` extra; human ratings written through the store
as raters' votes are; ``listenlab test score`` as a user runs it, the job of the admin page on
its worker thread, and the export.

Without the extra these tests skip (``LISTENLAB_METRICS_REQUIRED=1`` turns that into a
failure, as in tests/test_metrics.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import io
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from app.cli import main
from app.listening.scoring import ScoringJobs, score_test
from app.store import MosRating, Store
from app.store.listening import TestStore
from app.store.scores import scores_of
from backends.base import SpeechRequest
from evaluation.listening.results import test_results as results_of

EXTRA = ("torch", "distillmos", "speechmos", "resemblyzer", "pocketsphinx", "jiwer")
MISSING = [m for m in EXTRA if importlib.util.find_spec(m) is None]
if MISSING:
    if os.environ.get("LISTENLAB_METRICS_REQUIRED"):
        pytest.fail(f"the [metrics] extra is required here; missing: {MISSING}", pytrace=False)
    pytest.skip(f"the [metrics] extra is not installed ({MISSING})", allow_module_level=True)

TEXTS = {
    "h1": "The birch canoe slid on the smooth planks.",
    "h2": "Rice is often served in round bowls.",
    "h3": "The juice of lemons makes fine punch.",
}
SNR = {"clean": None, "n20": 20.0, "n10": 10.0, "n05": 5.0, "n00": 0.0}
HUMAN = {"clean": 4.6, "n20": 3.9, "n10": 3.0, "n05": 2.2, "n00": 1.4}
"""What the simulated raters think of each system (their scores scatter around it)."""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def noisy(x: np.ndarray, snr_db: float | None, seed: int) -> np.ndarray:
    if snr_db is None:
        return x
    n = np.random.default_rng(seed).standard_normal(len(x)).astype(np.float32)
    n *= np.sqrt(np.mean(x**2) / np.mean(n**2) / 10 ** (snr_db / 10))
    return np.clip(x + n, -1, 1).astype(np.float32)


def make_folder(root: Path, piper) -> Path:
    for i, (pid, text) in enumerate(TEXTS.items()):
        a = asyncio.run(piper.synthesize(SpeechRequest(text=text)))
        x = a.samples[:, 0].astype(np.float32) / 32768.0
        for system, snr in SNR.items():
            (root / system).mkdir(parents=True, exist_ok=True)
            sf.write(root / system / f"{pid}.wav", noisy(x, snr, i), a.sample_rate)
    rows = "".join(f'{k},"{v}"\n' for k, v in TEXTS.items())
    (root / "prompts.csv").write_text("prompt_id,text\n" + rows)
    return root


def rate(db: Path, tid: str, raters: int = 6) -> None:
    """Each rater scores every stimulus of a real system around its system's :data:`HUMAN`."""
    rng = np.random.default_rng(7)
    with Store.open(db) as store:
        tests = TestStore(store)
        st = tests.stimuli_frame(tid)
        st = st[st["system_id"].isin(list(SNR))]
        for r in range(raters):
            for s in st.itertuples():
                score = float(np.clip(np.round(HUMAN[s.system_id] + rng.normal(0, 0.4)), 1, 5))
                store.add_mos_rating(
                    MosRating(f"r{r}-{s.take_id}", tid, f"rater{r}", s.take_id, score, 60000.0)
                )


@pytest.fixture(scope="module")
def lab(tmp_path_factory, piper_det):
    """A MOS test of the five systems, rated; not scored yet."""
    root = tmp_path_factory.mktemp("machine")
    folder = make_folder(root / "study", piper_det)
    db = root / "lab.db"
    code, out, err = run(
        "test", "create", "--db", str(db), "--stimuli", str(folder), "--type", "mos",
        "--items-per-rater", "5", "--no-headphone-check", "--json",
    )  # fmt: skip
    assert code == 0, err
    tid = json.loads(out)["test_id"]
    rate(db, tid)
    return db, tid


@pytest.fixture(scope="module")
def scored(lab):
    """``listenlab test score`` run once, its output and the time it took."""
    db, tid = lab
    t0 = time.perf_counter()
    code, out, err = run("test", "score", tid, "--db", str(db))
    return code, out, err, time.perf_counter() - t0


def test_score_stores_one_row_per_stimulus_and_metric(lab, scored):
    db, tid = lab
    code, out, err, _s = scored
    assert code == 0, err
    n = len(TEXTS) * len(SNR)
    assert f"{n} stimuli" in out and f"{n * 3} scores computed, 0 already stored" in out
    progress = [ln for ln in err.splitlines() if ln.startswith("scoring ")]
    assert progress[0].startswith(f"scoring 1/{n} ") and progress[-1].startswith(f"scoring {n}/{n}")
    with Store.open(db, read_only=True) as store:
        rows = scores_of(store).of_takes(TestStore(store).stimuli_frame(tid)["take_id"])
        f = store.read_frame("SELECT metric, version, weights_sha256 FROM take_scores")
    # distillmos and dnsmos on every stimulus, the word check where the text is known (all)
    assert sorted({r.metric for r in rows}) == ["distillmos", "dnsmos", "words"]
    assert len(rows) == n * 3
    assert (f["weights_sha256"].str.len() == 64).all() and set(f["version"]) >= {"0.9.1-1"}


def test_a_second_run_computes_nothing(lab, scored):
    db, tid = lab
    code, out, err = run("test", "score", tid, "--db", str(db))
    n = len(TEXTS) * len(SNR)
    assert code == 0, err
    assert f"0 scores computed, {n * 3} already stored" in out


def test_results_show_machine_beside_human(lab, scored):
    db, tid = lab
    with Store.open(db, read_only=True) as store:
        tables = results_of(TestStore(store).test_data(tid))
    m = tables["machine"].set_index("system_id")
    assert list(m.index) == sorted(SNR) and (m["n_stimuli"] == len(TEXTS)).all()
    assert (m["human_scale"] == "MOS").all()
    assert m.loc["clean", "human_mean"] > m.loc["n00", "human_mean"]
    # noise costs predicted MOS, in order of the noise
    pm = m["predicted_mos"]
    assert pm["clean"] > pm["n20"] > pm["n00"] + 1.0
    assert m.loc["clean", "dnsmos_p808"] > m.loc["n00", "dnsmos_p808"] + 0.5
    assert (m["predicted_mos_low"] <= pm).all() and (pm <= m["predicted_mos_high"]).all()
    assert m.loc["clean", "sphinx_wer"] < m.loc["n00", "sphinx_wer"]
    a = tables["machine_agreement"].set_index(["column", "level"])
    sys_row = a.loc[("predicted_mos", "system")]
    assert sys_row["n"] == len(SNR) and sys_row["spearman"] >= 0.9
    assert sys_row["note"].startswith("strong")
    stim = a.loc[("predicted_mos", "stimulus")]
    assert stim["n"] == len(SNR) * len(TEXTS) and stim["spearman"] > 0.7
    assert a.loc[("sphinx_wer", "system"), "expected_sign"] == -1
    from app.listening.admin.results_tab import summary_markdown

    words = summary_markdown(tables)
    assert "**Machine scores" in words and "- clean (n=3): predicted_mos " in words
    assert "predicted_mos vs human per system: Spearman " in words
    methods = tables["methods"].set_index("table")
    assert "distillmos 0.9.1-1 (weights SHA-256 " in methods.loc["machine", "method"]


def test_export_has_raw_and_per_system_scores(lab, scored, tmp_path):
    db, tid = lab
    code, _out, err = run("test", "results", tid, "--db", str(db), "--csv", str(tmp_path))
    assert code == 0, err
    per = pd.read_csv(tmp_path / "results" / "machine.csv")
    assert set(per["system_id"]) == set(SNR)
    raw = pd.read_csv(tmp_path / "results" / "machine_stimuli.csv")
    assert len(raw) == len(SNR) * len(TEXTS)
    assert {"take_id", "system_id", "prompt_id", "predicted_mos", "human_mean"} <= set(raw)
    from app.listening.columns import columns

    said = columns()
    for f in (
        "results/machine.csv",
        "results/machine_agreement.csv",
        "results/machine_stimuli.csv",
    ):
        unexplained = set(pd.read_csv(tmp_path / f).columns) - set(said[f])
        assert not unexplained, (f, unexplained)
    md = (tmp_path / "methods.md").read_text()
    assert "- machine: " in md and "weights SHA-256" in md


def test_the_background_job_reports_progress(lab, scored):
    """The admin's job: on its own thread, idempotent (everything is stored already, so it
    only reads), its progress counted item by item."""
    db, tid = lab
    with Store.open(db) as store:
        jobs = ScoringJobs(store)
        job = jobs.start(tid)
        assert jobs.start(tid) is job  # a second start joins the running job
        deadline = time.monotonic() + 300
        while job.state in {"queued", "running"} and time.monotonic() < deadline:
            time.sleep(0.2)
        assert job.state == "done", job.message
        n = len(SNR) * len(TEXTS)
        assert job.events == [(i, n) for i in range(1, n + 1)]
        assert job.run["computed"] == 0 and job.run["stored_before"] == n * 3
    with pytest.raises(Exception, match="no scoring job"):
        jobs.status("nope")


def test_speaker_similarity_with_a_reference_voice(lab, scored, tmp_path, piper_det):
    db, tid = lab
    a = asyncio.run(piper_det.synthesize(SpeechRequest(text="Glue the sheet to the blue wall.")))
    ref = tmp_path / "ref.wav"
    sf.write(ref, a.samples[:, 0].astype(np.float32) / 32768.0, a.sample_rate)
    with Store.open(db) as store:
        run_ = score_test(store, tid, reference_voice=ref)
        assert run_.computed == len(SNR) * len(TEXTS)  # only the speaker scores were new
        tables = results_of(TestStore(store).test_data(tid))
    sim = tables["machine"].set_index("system_id")["speaker_sim"]
    assert sim["clean"] > 0.75 and sim["clean"] > sim["n00"]


def test_the_admin_routes_start_the_job_and_report_progress(lab, scored):
    """A real server on the test's SQLite file: the admin starts the job over HTTP and reads
    its progress until it is done; a visitor without the password is refused; an unknown
    test is a 404. The stored scores make the job a read-only pass."""
    import httpx

    from app.server import create_app
    from tests.support.app_util import LISTENING_BACKENDS, live_server

    db, tid = lab
    old = os.environ.get("LISTENLAB_ADMIN_PASSWORD")
    os.environ["LISTENLAB_ADMIN_PASSWORD"] = "machine-pw"
    try:
        app = create_app(dict(LISTENING_BACKENDS), db, mount_ui=False)
    finally:
        if old is None:
            os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
        else:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old
    admin = {"Authorization": "Bearer machine-pw"}
    with live_server(app) as lv:
        url = lv.url + f"ll/admin/tests/{tid}/score"
        assert httpx.post(url, timeout=30).status_code == 403
        r = httpx.post(url, headers=admin, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["state"] in {"queued", "running", "done"}
        deadline, seen = time.monotonic() + 300, []
        while time.monotonic() < deadline:
            job = httpx.get(url, headers=admin, timeout=30).json()
            seen.append(job["done"])
            if job["state"] not in {"queued", "running"}:
                break
            time.sleep(0.2)
        assert job["state"] == "done", job
        n = len(SNR) * len(TEXTS)
        assert (job["done"], job["total"]) == (n, n) and job["run"]["computed"] == 0
        assert seen == sorted(seen)
        r = httpx.get(lv.url + "ll/admin/tests/nope/score", headers=admin, timeout=30)
        assert r.status_code == 404 and "no scoring job" in r.json()["detail"]
        r = httpx.post(lv.url + "ll/admin/tests/nope/score", headers=admin, timeout=30)
        assert r.status_code == 404
        res = httpx.get(lv.url + f"ll/admin/tests/{tid}/results", headers=admin, timeout=60)
        assert {"machine", "machine_agreement", "machine_stimuli"} <= set(res.json())


def test_bad_input_gets_a_clear_error_and_stores_nothing(lab, scored, tmp_path):
    db, tid = lab
    with Store.open(db, read_only=True) as store:
        before = len(store.read_frame("SELECT take_id FROM take_scores"))
    code, _out, err = run("test", "score", "nosuchtest", "--db", str(db))
    assert code != 0 and "nosuchtest" in err
    bad = tmp_path / "voice.wav"
    bad.write_bytes(b"this is not audio at all" * 10)
    code, _out, err = run("test", "score", tid, "--db", str(db), "--reference-voice", str(bad))
    assert code != 0 and "voice.wav" in err
    with Store.open(db, read_only=True) as store:
        assert len(store.read_frame("SELECT take_id FROM take_scores")) == before


@pytest.mark.browser
def test_the_score_button_on_the_admin_page(lab, scored):
    """Chromium on the admin page (localhost admin): pick the test on the Tests tab, press
    *Score the stimuli*; the line under it follows the job to ``done`` (every score is stored
    already, so the job only reads)."""
    from app.server import create_app
    from tests.support.app_util import LISTENING_BACKENDS, chromium, live_server

    db, tid = lab
    old = os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
    try:
        app = create_app(dict(LISTENING_BACKENDS), db)
    finally:
        if old is not None:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old
    with live_server(app) as live, chromium() as browser:
        page = browser.new_page()
        page.goto(live.url + "admin/tests/")
        page.get_by_role("tab", name="Tests").click()
        page.click("#lt-tests-pick input", timeout=60_000)
        page.locator("[role=option]", has_text=tid).first.click()
        page.click("#lt-score")
        line = page.locator("#lt-score-status")
        line.locator(f"text=Scoring {tid}: done.").wait_for(timeout=300_000)
        n = len(SNR) * len(TEXTS)
        assert f"{n} stimuli: 0 scores computed, {n * 3} already stored" in line.inner_text()


def test_a_mushra_reference_is_the_reference_voice(lab, tmp_path):
    """A MUSHRA test's reference system (``natural``: the clean takes) is the reference voice
    of speaker similarity: every other system's stimulus is compared with the natural take of
    its prompt, and the natural takes themselves get none."""
    db, _tid = lab
    src = Path(tmp_path / "mushra")
    for system, dest in (("clean", "natural"), ("n10", "n10"), ("n00", "n00")):
        (src / dest).mkdir(parents=True)
        for pid in TEXTS:
            (src / dest / f"{pid}.wav").write_bytes(
                (db.parent / "study" / system / f"{pid}.wav").read_bytes()
            )
    (src / "prompts.csv").write_bytes((db.parent / "study" / "prompts.csv").read_bytes())
    code, out, err = run(
        "test", "create", "--db", str(db), "--stimuli", str(src), "--type", "mushra",
        "--no-headphone-check", "--json",
    )  # fmt: skip
    assert code == 0, err
    mid = json.loads(out)["test_id"]
    with Store.open(db) as store:
        r = score_test(store, mid, metrics=("speaker",))
        assert r.skipped == {"speaker": len(TEXTS)} and not r.errors  # the natural takes
        tables = results_of(TestStore(store).test_data(mid))
    per = tables["machine_stimuli"]
    assert per.loc[per["system_id"] == "natural", "speaker_sim"].isna().all()
    sim = per[per["system_id"] != "natural"].groupby("system_id")["speaker_sim"].mean()
    assert (sim > 0).all() and sim["n10"] > sim["n00"]
    assert (tables["machine"]["human_scale"] == "MUSHRA").all()
