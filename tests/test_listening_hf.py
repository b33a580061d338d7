"""A listening test as a Hugging Face dataset (``listenlab test export ID --format hf``): a
13-system MOS study made with the CPU voice and rated over the real routes
(:mod:`tests.support.results_study`), written as parquet with pyarrow alone and read back
with pyarrow (the stimuli's audio bytes equal to the store's files) and with ``datasets``
where it is installed; the raters without crowd ids; the methods card as README.md; the zip
stays the default format and carries the figures; ``--push`` fails clearly without a token
and without a network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app.cli import main as cli
from app.listening.hf_export import STIMULUS_COLUMNS
from app.store.listening import TestStore
from tests.support.app_util import listening_app, live_server
from tests.support.results_study import PROMPTS, SYSTEMS, run_study, stimuli_folder

pq = pytest.importorskip("pyarrow.parquet")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def study(tmp_path_factory, piper_det):
    folder = stimuli_folder(tmp_path_factory.mktemp("stim"), piper_det)
    app = listening_app()
    with live_server(app) as lv:
        s = run_study(lv.url, lv.state.store, folder, raters=4)
        yield lv, s, Path(lv.state.store.path)


def stored_audio(lv, tid: str) -> dict[str, bytes]:
    tests = TestStore(lv.state.store)
    return {
        s.stimulus_id: lv.state.store.audio_path(s.take_id).read_bytes() for s in tests.stimuli(tid)
    }


def test_the_dataset_loads_back_with_pyarrow_with_the_audio_intact(study, tmp_path):
    lv, s, db = study
    out = tmp_path / "ds"
    assert (
        cli(["test", "export", s.test_id, "--db", str(db), "--format", "hf", "--out", str(out)])
        == 0
    )
    stim = pq.read_table(out / "data" / "stimuli-00000-of-00001.parquet")
    assert stim.column_names == list(STIMULUS_COLUMNS)
    features = json.loads(stim.schema.metadata[b"huggingface"])["info"]["features"]
    assert features["audio"] == {"_type": "Audio"}
    rows = stim.to_pylist()
    files = stored_audio(lv, s.test_id)
    assert len(rows) == len(SYSTEMS) * len(PROMPTS) == len(files)
    for r in rows:
        assert r["audio"]["bytes"] == files[r["stimulus_id"]]
        assert r["audio"]["bytes"][:4] == b"RIFF"
        assert r["audio"]["path"].startswith(r["stimulus_id"])
    assert {r["system_id"] for r in rows} == set(SYSTEMS)
    ratings = pq.read_table(out / "data" / "ratings-00000-of-00001.parquet").to_pandas()
    assert len(ratings) == 5 * len(SYSTEMS)  # 4 raters and the straight-liner, 13 items each
    assert set(ratings["score"]) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    raters = pq.read_table(out / "data" / "raters-00000-of-00001.parquet").to_pandas()
    assert len(raters) == 5 and "crowd_id" not in raters.columns
    assert raters.set_index("rater_id").loc[s.straight_liner, "excluded"]
    blob = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert b"P0001" not in blob and b"P0099" not in blob  # no crowd id anywhere
    main = pq.read_table(out / "data" / "results-00000-of-00001.parquet").to_pandas()
    assert set(main["system_id"]) == set(SYSTEMS) and (main["raters"] == 4).all()
    card = (out / "README.md").read_text()
    assert card.startswith('---\npretty_name: "listenlab listening test')
    assert "path: data/stimuli-*.parquet" in card and "path: data/ratings-*.parquet" in card
    assert f"**{len(rows)} stimuli** ({len(rows)} with audio), **65 ratings**" in card
    assert "## Reporting items (ITU-T P.800.2)" in card  # the methods card follows
    assert "\n## thirteen: methods and results" in card or "methods and results" in card


def test_datasets_loads_the_stimuli_with_an_audio_feature(study, tmp_path):
    datasets = pytest.importorskip("datasets")
    lv, s, db = study
    out = tmp_path / "ds"
    assert (
        cli(["test", "export", s.test_id, "--db", str(db), "--format", "hf", "--out", str(out)])
        == 0
    )
    ds = datasets.load_dataset(
        "parquet",
        data_files=str(out / "data" / "stimuli-*.parquet"),
        cache_dir=str(tmp_path / "cache"),
    )["train"]
    assert isinstance(ds.features["audio"], datasets.Audio) and len(ds) == 26
    raw = ds.cast_column("audio", datasets.Audio(decode=False))
    files = stored_audio(lv, s.test_id)
    assert all(r["audio"]["bytes"] == files[r["stimulus_id"]] for r in raw)
    ratings = datasets.load_dataset(
        "parquet",
        data_files=str(out / "data" / "ratings-*.parquet"),
        cache_dir=str(tmp_path / "cache"),
    )["train"]
    assert len(ratings) == 65
    # the card's configs: the folder loads by name, each config its table
    by_card = datasets.load_dataset(str(out), "raters", cache_dir=str(tmp_path / "cache2"))
    assert len(by_card["train"]) == 5 and "crowd_id" not in by_card["train"].column_names
    default = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache3"))["train"]
    assert isinstance(default.features["audio"], datasets.Audio) and len(default) == 26


def test_the_zip_stays_the_default_and_carries_the_figures(study, tmp_path):
    lv, s, db = study
    out = tmp_path / "t.zip"
    assert cli(["test", "export", s.test_id, "--db", str(db), "--out", str(out)]) == 0
    z = zipfile.ZipFile(out)
    names = set(z.namelist())
    for fig in ("forest", "pairwise", "by_prompt", "by_rater"):
        assert {f"figures/{fig}.png", f"figures/{fig}.svg", f"figures/{fig}.csv"} <= names
    assert z.read("figures/forest.png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in z.read("figures/pairwise.svg")[:400]


def test_public_export_writes_the_public_card(study, tmp_path):
    lv, s, db = study
    out = tmp_path / "pub"
    assert (
        cli(
            [
                "test",
                "export",
                s.test_id,
                "--db",
                str(db),
                "--format",
                "hf",
                "--out",
                str(out),
                "--public",
            ]
        )
        == 0
    )
    card = (out / "README.md").read_text()
    assert "Public export" in card


def test_push_fails_clearly_without_a_token_or_a_network(study, tmp_path):
    lv, s, db = study
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env["HF_HOME"] = str(tmp_path / "hf")
    cmd = [
        sys.executable,
        "-m",
        "app.cli",
        "test",
        "export",
        s.test_id,
        "--db",
        str(db),
        "--format",
        "hf",
    ]
    r = subprocess.run(
        [*cmd, "--out", str(tmp_path / "a"), "--push", "me/test"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    assert "--push needs" in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "a" / "README.md").is_file()
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode
        or subprocess.run([sys.executable, "-c", "import huggingface_hub"]).returncode
    ):
        pytest.skip("unshare -n or huggingface_hub is not available here")
    env["HF_TOKEN"] = "hf_" + "x" * 34
    r = subprocess.run(
        ["unshare", "-n", *cmd, "--out", str(tmp_path / "b"), "--push", "me/test"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    assert "could not push to the Hugging Face dataset me/test" in r.stderr
    assert "Traceback" not in r.stderr


def test_zip_format_refuses_push(study, tmp_path, capsys):
    lv, s, db = study
    code = cli(
        ["test", "export", s.test_id, "--db", str(db), "--out", str(tmp_path), "--push", "me/x"]
    )
    assert code == 2
    assert "--push needs --format hf" in capsys.readouterr().err
