"""The arena's Hugging Face export (app/arena/export.py, ``listenlab arena export``): real Piper
clips in a real store, battles played and voted through the arena's rules, written as parquet
with pyarrow and read back with pyarrow (and ``datasets`` where it is installed), audio bytes
intact; ``--public``; ``--push`` failing clearly without a token and without a network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.arena.audit import Audit
from app.arena.battles import Arena, Limits
from app.arena.export import VOTE_COLUMNS, export_hf
from app.cli import main as cli
from app.store import Store
from tests.support.evaluation_util import synthesize

pq = pytest.importorskip("pyarrow.parquet")

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "The birch canoe slid on the smooth planks."
TYPED = "My neighbour's phone number is secret."
T0 = 1_700_000_000.0
V1, V2 = "ip:" + "1" * 24, "ip:" + "2" * 24


def battle(arena, takes, owner, voter, text, source, choice, now):
    """One battle played to its end on both sides (real takes) and voted."""
    bt = arena.new_battle(
        owner,
        text,
        ["piper", "qwen"],
        np.random.default_rng(int(now)),
        text_source=source,
        now=now,
        voter=voter,
    )
    for k, side in enumerate("ab"):
        take = takes.pop(0)
        arena.start_stream(bt, side, take.take_id, "s-" + owner, now=now + 10 * k)
        arena.finish_stream(take.take_id, "ok", take.duration_s, now + 10 * k + 0.1)
        arena.played(
            bt.battle_id,
            owner,
            side,
            take.take_id,
            take.duration_s * 1000,
            now=now + 10 * k + 0.2 + take.duration_s,
        )
    voted, _ = arena.vote(bt.battle_id, owner, choice, now=now + 30, voter=voter)
    return voted


@pytest.fixture(scope="module")
def arena_db(tmp_path_factory, piper_det):
    """Three votes: V1 on a prompt, V1 on the same prompt again (kept, not counted), V2 on a
    typed text; V2 excluded by the admin."""
    path = tmp_path_factory.mktemp("arena") / "ll.db"
    store = Store.open(path)
    takes = synthesize(piper_det, [PROMPT, PROMPT, PROMPT, PROMPT, TYPED, TYPED])
    for t in takes:
        store.save_take(t)
    files = {t.take_id: store.audio_path(t.take_id).read_bytes() for t in takes}
    arena = Arena(store, Limits(battles_per_minute=100))
    queue = list(takes)
    b1 = battle(arena, queue, "o1", V1, PROMPT, "prompt", "a", T0)
    b2 = battle(arena, queue, "o1", V1, PROMPT.upper(), "prompt", "b", T0 + 100)
    b3 = battle(arena, queue, "o2", V2, TYPED, "typed", "tie", T0 + 200)
    Audit(arena.rows).exclude(V2, "test: a voter on a typed text", "tester (localhost)")
    store.close()
    yield path, [b1, b2, b3], [t.take_id for t in takes], files


def read(out: Path):
    files = sorted((out / "data").glob("votes-*.parquet"))
    return pq.read_table(files[0]) if len(files) == 1 else None, files


def test_the_votes_load_back_with_pyarrow_with_their_audio_intact(arena_db, tmp_path):
    path, (b1, b2, b3), take_ids, files = arena_db
    store = Store.open(path, read_only=True)
    s = export_hf(store, tmp_path / "ds", min_votes=1)
    store.close()
    assert (s.votes, s.clips) == (3, 6)
    table, parts = read(tmp_path / "ds")
    assert [p.name for p in parts] == ["votes-00000-of-00001.parquet"]
    assert table.column_names == [*VOTE_COLUMNS, "voter_hash"]
    features = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    assert features["audio_a"] == {"_type": "Audio"} == features["audio_b"]
    rows = table.to_pylist()
    assert [r["battle_id"] for r in rows] == [b1.battle_id, b2.battle_id, b3.battle_id]
    for r, (ta, tb) in zip(rows, [take_ids[0:2], take_ids[2:4], take_ids[4:6]], strict=True):
        assert r["audio_a"]["bytes"] == files[ta] and r["audio_b"]["bytes"] == files[tb]
        assert r["audio_a"]["bytes"][:4] == b"RIFF"
        assert r["audio_a"]["path"] == f"{r['battle_id']}_a.wav"
    r1, r2, r3 = rows
    assert (r1["choice"], r1["winner"], r1["loser"]) == ("a", b1.system_a, b1.system_b)
    assert (r2["choice"], r2["winner"]) == ("b", b2.system_b)
    assert (r3["choice"], r3["winner"], r3["loser"]) == ("tie", None, None)
    assert (r1["counted"], r2["counted"], r2["uncounted"]) == (True, False, "repeat_text")
    assert (r1["excluded"], r3["excluded"], r3["counted"]) == (False, True, True)
    assert [r["voter"] for r in rows] == [1, 1, 2]
    assert [r["voter_hash"] for r in rows] == [V1, V1, V2]
    assert (r1["text"], r1["text_source"], r3["text_source"]) == (PROMPT, "prompt", "typed")
    board = pq.read_table(tmp_path / "ds" / "data" / "leaderboard.parquet").to_pylist()
    assert sum(r["votes"] for r in board) == 2  # one counted vote: two systems' appearances
    card = (tmp_path / "ds" / "README.md").read_text()
    assert card.startswith("---\npretty_name: listenlab arena votes")
    assert "**3 votes** on 2 systems, 6 clips; 1 count on the board" in card
    assert "path: data/votes-*.parquet" in card and "repeat_text" in card
    for secret in ("o1", "owner", "network"):
        assert secret not in table.column_names


def test_public_leaves_out_voter_hashes_and_typed_texts(arena_db, tmp_path):
    path, (b1, b2, _b3), _ids, _files = arena_db
    assert (
        cli(["arena", "export", "--db", str(path), "--out", str(tmp_path / "pub"), "--public"]) == 0
    )
    table, _ = read(tmp_path / "pub")
    assert table.column_names == list(VOTE_COLUMNS)
    assert [r["battle_id"] for r in table.to_pylist()] == [b1.battle_id, b2.battle_id]
    blob = b"".join(p.read_bytes() for p in (tmp_path / "pub").rglob("*") if p.is_file())
    assert TYPED.encode() not in blob and b"2" * 24 not in blob and b"1" * 24 not in blob
    card = (tmp_path / "pub" / "README.md").read_text()
    assert "the 1 votes on texts visitors typed are left out" in card


def test_datasets_loads_the_parquet_with_audio_features(arena_db, tmp_path):
    datasets = pytest.importorskip("datasets")
    path, _battles, take_ids, files = arena_db
    store = Store.open(path, read_only=True)
    export_hf(store, tmp_path / "ds")
    store.close()
    ds = datasets.load_dataset(
        "parquet",
        data_files=str(tmp_path / "ds" / "data" / "votes-*.parquet"),
        cache_dir=str(tmp_path / "cache"),
    )["train"]
    assert isinstance(ds.features["audio_a"], datasets.Audio)
    assert ds.features["text"].dtype == "string" and len(ds) == 3
    # decoding needs torchcodec (torch); the bytes are there without it
    raw = ds.cast_column("audio_a", datasets.Audio(decode=False))
    raw = raw.cast_column("audio_b", datasets.Audio(decode=False))
    assert raw[0]["audio_a"]["bytes"] == files[take_ids[0]]
    assert raw[2]["audio_b"]["bytes"] == files[take_ids[5]]
    assert raw["counted"] == [True, False, True]


def test_push_fails_clearly_without_a_token_or_a_network(arena_db, tmp_path):
    path, *_ = arena_db
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env["HF_HOME"] = str(tmp_path / "hf")  # no cached login
    cmd = [sys.executable, "-m", "app.cli", "arena", "export", "--db", str(path)]
    r = subprocess.run(
        [*cmd, "--out", str(tmp_path / "a"), "--push", "me/votes"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    assert "--push needs a Hugging Face token: set HF_TOKEN" in r.stderr
    assert (tmp_path / "a" / "README.md").is_file()  # the dataset is written all the same
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode
    ):
        pytest.skip("unshare -n is not available here")
    env["HF_TOKEN"] = "hf_" + "x" * 34
    r = subprocess.run(
        ["unshare", "-n", *cmd, "--out", str(tmp_path / "b"), "--push", "me/votes"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    assert "could not push to the Hugging Face dataset me/votes" in r.stderr
    assert f"the dataset is written at {tmp_path / 'b'}" in r.stderr
    assert "Traceback" not in r.stderr
