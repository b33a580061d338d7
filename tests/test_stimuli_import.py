"""Your own audio as stimuli: ``listenlab test create --stimuli DIR`` on real WAV/FLAC files made
here with the real Piper voice (mono 22.05 kHz WAV "natural" recordings, a stereo 44.1 kHz FLAC
system), mixed with a generated Piper system, into a real SQLite store; and every kind of bad
folder refused with the file named and nothing created."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from app.cli import main
from app.listening.service import Listening
from app.store import Store
from backends.base import SpeechRequest
from evaluation.listening.design import GOLD

TEXTS = {
    "h1": "The birch canoe slid on the smooth planks.",
    "h2": "Rice is often served in round bowls.",
    "h3": "The juice of lemons makes fine punch.",
}
GEN = "gen=piper?deterministic=1&speed=1.2"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def speech(piper, text: str) -> tuple[np.ndarray, int]:
    a = asyncio.run(piper.synthesize(SpeechRequest(text=text)))
    return a.samples[:, 0].astype(np.float32) / 32768.0, a.sample_rate


def make_folder(root: Path, piper, *, prompts_csv: bool = True) -> Path:
    """natural/ID.wav (mono 22.05 kHz) and modelx/ID.flac (stereo 44.1 kHz, -10 dB, the right
    channel 0.4 dB lower): two systems' files as a researcher would bring them."""
    (root / "natural").mkdir(parents=True)
    (root / "modelx").mkdir()
    for pid, text in TEXTS.items():
        x, sr = speech(piper, text)
        sf.write(root / "natural" / f"{pid}.wav", x, sr, subtype="PCM_16")
        y = soxr.resample(x, sr, 44100) * 10 ** (-10 / 20)
        sf.write(root / "modelx" / f"{pid}.flac", np.stack([y, y * 10 ** (-0.4 / 20)], 1), 44100)
    if prompts_csv:
        rows = "".join(f'{k},"{v}"\n' for k, v in TEXTS.items())
        (root / "prompts.csv").write_text("prompt_id,text\n" + rows)
    (root / "README.txt").write_text("notes at the top level are left alone\n")
    return root


@pytest.fixture(scope="module")
def folder(tmp_path_factory, piper_det) -> Path:
    return make_folder(tmp_path_factory.mktemp("stimuli") / "study", piper_det)


@pytest.fixture(scope="module")
def mixed(folder, tmp_path_factory):
    """A MOS test: the imported natural + modelx systems and a generated Piper system."""
    db = tmp_path_factory.mktemp("mixed") / "lab.db"
    code, out, err = run(
        "test", "create", "--db", str(db), "--stimuli", str(folder), "--system", GEN,
        "--type", "mos", "--items-per-rater", "3", "--no-headphone-check",
        "--title", "How natural is this voice?", "--name", "internal: lab run 7",
        "--instructions", "Rate each clip.", "--json",
    )  # fmt: skip
    assert code == 0, err
    return db, json.loads(out)["test_id"]


def _stimuli(db: Path, tid: str):
    with Store.open(db, read_only=True) as store:
        svc = Listening(store)
        stim = svc.tests.stimuli(tid)
        takes = {s.take_id: store.load_take(s.take_id) for s in stim}
        return svc.tests.require_test(tid), stim, takes


def test_imported_and_generated_systems_in_one_test(mixed, folder):
    db, tid = mixed
    t, stim, takes = _stimuli(db, tid)
    items = [s for s in stim if s.kind == "item"]
    assert sorted({s.system_id for s in items}) == ["gen", "modelx", "natural"]
    assert len(items) == 9  # 3 systems x 3 prompts
    cfg = t.config
    assert cfg["title"] == "How natural is this voice?" and t.name == "internal: lab run 7"
    assert cfg["instructions"] == "Rate each clip."
    assert cfg["stimuli"]["natural"] == ["natural"] and cfg["gold"] == "natural"
    by_sys = {s["name"]: s for s in cfg["systems"]}
    assert by_sys["natural"]["imported"] and by_sys["natural"]["natural"]
    assert by_sys["modelx"]["imported"] and not by_sys["modelx"]["natural"]
    assert by_sys["gen"]["backend"] == GEN[4:]
    for s in items:
        take = takes[s.take_id]
        pid = s.prompt_id.split("-", 1)[1]
        assert take.request.text == TEXTS[pid]  # prompts.csv gives the text raters may see
        if s.system_id == "gen":  # generated: streamed, its chunk timeline kept
            assert s.meta["origin"] == "generated" and take.backend.startswith("piper")
            assert take.chunks[0].arrival_ms > 0  # the recorded arrival time
            assert take.sample_rate == 22050 and s.condition == "as_streamed"
            continue
        # imported: the file's own samples (rate, channels), times the stored gain, one chunk
        path = folder / s.system_id / f"{pid}.{'wav' if s.system_id == 'natural' else 'flac'}"
        raw, sr = sf.read(path, dtype="int16", always_2d=True)
        assert (take.sample_rate, take.channels) == (sr, raw.shape[1])
        assert (
            s.condition == "whole" and len(take.chunks) == 1 and take.chunks[0].frames == len(raw)
        )
        expect = np.clip(np.round(raw / 32768.0 * 10 ** (s.gain_db / 20) * 32768), -32768, 32767)
        assert np.abs(take.audio.astype(int) - expect.astype(int)).max() <= 1
        assert s.meta["origin"] == ("natural" if s.system_id == "natural" else "imported")
    assert {takes[s.take_id].channels for s in items if s.system_id == "modelx"} == {2}


def test_gold_five_is_the_natural_recording_never_a_system_under_test(mixed):
    db, tid = mixed
    _t, stim, takes = _stimuli(db, tid)
    golds = [s for s in stim if s.kind == "gold"]  # one per check prompt (they vary by rater)
    assert 1 <= len(golds) == len({g.prompt_id for g in golds})
    natural_takes = {s.take_id for s in stim if s.kind == "item" and s.system_id == "natural"}
    tested = {s.take_id for s in stim if s.kind == "item" and s.system_id != "natural"}
    for gold in golds:
        assert gold.system_id == GOLD and gold.expected == 5.0
        assert gold.meta["origin"] == "natural"
        assert gold.source_take_id in natural_takes and gold.source_take_id not in tested
        src = takes[gold.source_take_id]
        assert np.array_equal(takes[gold.take_id].audio, src.audio)  # the recording itself
    gold_takes = {g.take_id for g in golds}
    # and every rater's gold item plays that clip
    with Store.open(db) as store:
        svc = Listening(store)
        for _ in range(3):
            tok = svc.join(tid)["token"]
            rid = svc.status(tid, tok)["rater_id"]
            golds = [a for a in store.assignments(tid, rid) if a.role == "gold"]
            assert {a.expected for a in golds} == {1.0, 5.0}
            five = next(a for a in golds if a.expected == 5.0)
            assert five.take_id in gold_takes


def test_without_natural_or_marked_clip_only_the_anchor_gold(folder, tmp_path):
    db = tmp_path / "lab.db"
    only = tmp_path / "only"
    (only / "modelx").mkdir(parents=True)
    for f in (folder / "modelx").iterdir():
        (only / "modelx" / f.name).write_bytes(f.read_bytes())
    (only / "prompts.csv").write_bytes((folder / "prompts.csv").read_bytes())
    code, out, err = run(
        "test", "create", "--db", str(db), "--stimuli", str(only), "--system", GEN,
        "--type", "mos", "--items-per-rater", "2", "--no-headphone-check", "--json",
    )  # fmt: skip
    assert code == 0, err
    tid = json.loads(out)["test_id"]
    t, stim, _ = _stimuli(db, tid)
    assert [s for s in stim if s.kind == "gold"] == [] and t.config["gold"] is None
    assert not t.config["design"]["gold"]
    with Store.open(db) as store:
        svc = Listening(store)
        tok = svc.join(tid)["token"]
        rid = svc.status(tid, tok)["rater_id"]
        checks = sorted(
            (a.role, a.expected) for a in store.assignments(tid, rid) if a.role != "item"
        )
        assert checks == [("gold", 1.0), ("trap", 2.0)]  # the low anchor and the trap only
    # an admin-marked known-good clip becomes the gold "5"
    db2 = tmp_path / "lab2.db"
    clip = folder / "natural" / "h2.wav"
    code, out, err = run(
        "test", "create", "--db", str(db2), "--stimuli", str(only), "--system", GEN,
        "--type", "mos", "--items-per-rater", "2", "--no-headphone-check",
        "--gold-clip", str(clip), "--json",
    )  # fmt: skip
    assert code == 0, err
    t, stim, takes = _stimuli(db2, json.loads(out)["test_id"])
    (gold,) = [s for s in stim if s.kind == "gold"]
    assert gold.system_id == GOLD and gold.meta["origin"] == "admin_gold"
    assert gold.take_id not in {s.take_id for s in stim if s.kind == "item"}
    raw, _ = sf.read(clip, dtype="int16", always_2d=True)
    assert takes[gold.take_id].frames == len(raw)


def test_manifest_csv_and_mushra_reference_defaults_to_natural(folder, tmp_path):
    man = tmp_path / "m"
    (man / "audio").mkdir(parents=True)
    lines = ["system,prompt_id,path,text"]
    for sysname, ext in (("natural", "wav"), ("modelx", "flac")):
        for pid, text in TEXTS.items():
            dest = man / "audio" / f"{sysname}-{pid}.{ext}"
            dest.write_bytes((folder / sysname / f"{pid}.{ext}").read_bytes())
            lines.append(f'{sysname},{pid},audio/{dest.name},"{text}"')
    (man / "list.csv").write_text("\n".join(lines) + "\n")
    db = tmp_path / "lab.db"
    code, out, err = run(
        "test", "create", "--db", str(db), "--stimuli", str(man / "list.csv"), "--type", "mushra",
        "--items-per-rater", "2", "--no-headphone-check", "--json",
    )  # fmt: skip
    assert code == 0, err
    t, stim, takes = _stimuli(db, json.loads(out)["test_id"])
    assert t.config["design"]["reference"] == "natural"
    anchors = [s for s in stim if s.kind == "anchor"]
    assert sorted(s.meta["anchor"] for s in anchors) == ["low"] * 3 + ["mid"] * 3
    ref = {s.prompt_id: s.take_id for s in stim if s.kind == "item" and s.system_id == "natural"}
    assert all(a.source_take_id == ref[a.prompt_id] for a in anchors)
    assert {takes[s.take_id].request.text for s in stim if s.kind == "item"} == set(TEXTS.values())


def _bad(tmp_path: Path, folder: Path, name: str) -> Path:
    """A copy of the good folder to break."""
    dest = tmp_path / name
    for src in folder.rglob("*"):
        if src.is_file():
            (dest / src.relative_to(folder)).parent.mkdir(parents=True, exist_ok=True)
            (dest / src.relative_to(folder)).write_bytes(src.read_bytes())
    return dest


def _refused(tmp_path: Path, source: Path, *extra: str) -> str:
    db = tmp_path / "refused.db"
    code, out, err = run(
        "test", "create", "--db", str(db), "--stimuli", str(source), "--type", "mos",
        "--items-per-rater", "2", "--no-headphone-check", *extra,
    )  # fmt: skip
    assert code == 2 and out == "", (code, out, err)
    with Store.open(db, read_only=True) as store:  # nothing created
        for table in ("tests", "stimuli", "takes", "systems", "prompts"):
            assert store.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
    return err


def test_non_audio_file_is_refused_by_name(folder, tmp_path):
    d = _bad(tmp_path, folder, "text")
    (d / "modelx" / "h2.flac").write_text("this is a text file, not audio\n" * 20)
    assert "modelx/h2.flac is not readable audio: it is text" in _refused(tmp_path, d)
    d = _bad(tmp_path, folder, "notes")
    (d / "natural" / "notes.txt").write_text("hello")
    assert "natural/notes.txt is not a .wav or .flac file" in _refused(tmp_path, d)
    d = _bad(tmp_path, folder, "mp3")  # the decoder knows mp3; stimuli are WAV/FLAC only
    (d / "natural" / "h1.wav").write_bytes(b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb" * 900)
    assert "natural/h1.wav is mp3 audio; only wav or flac is accepted" in _refused(tmp_path, d)


def test_huge_file_is_refused_before_reading(folder, tmp_path):
    d = _bad(tmp_path, folder, "huge")
    big = d / "natural" / "h3.wav"
    with big.open("r+b") as f:  # a sparse 12 MB file: refused by its size, never decoded
        f.truncate(12 * 1024 * 1024)
    err = _refused(tmp_path, d)
    assert "natural/h3.wav is 12.6 MB; a stimulus file may be at most 10 MB" in err


def test_path_traversal_in_the_manifest_is_refused(folder, tmp_path):
    outside = tmp_path / "outside.wav"
    outside.write_bytes((folder / "natural" / "h1.wav").read_bytes())
    man = tmp_path / "man"
    man.mkdir()
    (man / "manifest.csv").write_text("system,prompt_id,path\nnatural,h1,../outside.wav\n")
    err = _refused(tmp_path, man)
    assert "manifest.csv line 2: path '../outside.wav' points outside the stimuli folder" in err
    (man / "manifest.csv").write_text(f"system,prompt_id,path\nnatural,h1,{outside}\n")
    assert "points outside the stimuli folder" in _refused(tmp_path, man)


def test_symlink_outside_the_folder_is_refused(folder, tmp_path):
    d = _bad(tmp_path, folder, "link")
    outside = tmp_path / "elsewhere.wav"
    outside.write_bytes((folder / "natural" / "h3.wav").read_bytes())
    (d / "natural" / "h3.wav").unlink()
    os.symlink(outside, d / "natural" / "h3.wav")
    assert "natural/h3.wav points outside the stimuli folder" in _refused(tmp_path, d)
    d2 = _bad(tmp_path, folder, "dirlink")  # a whole system folder linked from elsewhere
    os.symlink(folder / "modelx", d2 / "other")
    assert "other points outside the stimuli folder" in _refused(tmp_path, d2)
    # a link that stays inside the folder is fine (checked without creating a test)
    from app.listening.imported import scan

    d3 = _bad(tmp_path, folder, "inner")
    (d3 / "natural" / "h1.wav").unlink()
    os.symlink(d3 / "modelx" / "h1.flac", d3 / "natural" / "h1.wav")
    assert scan(d3).systems == ("modelx", "natural")


def test_mismatched_prompts_and_empty_folder_are_refused(folder, tmp_path):
    d = _bad(tmp_path, folder, "missing")
    (d / "modelx" / "h3.flac").unlink()
    err = _refused(tmp_path, d)
    assert (
        "prompts do not match across systems: natural/h3.wav has no counterpart in system "
        "'modelx' (missing h3)" in err
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no stimuli in" in _refused(tmp_path, empty)
    assert "no stimuli folder or manifest at" in _refused(tmp_path, tmp_path / "nope")


def test_generated_systems_need_the_prompt_texts(folder, tmp_path):
    d = _bad(tmp_path, folder, "notext")
    (d / "prompts.csv").unlink()
    err = _refused(tmp_path, d, "--system", GEN)
    assert "generated systems need each prompt's text; prompt 'h1' has none" in err
    d = _bad(tmp_path, folder, "clash")  # one name, two sources
    (d / "gen").mkdir()
    for pid in TEXTS:
        (d / "gen" / f"{pid}.wav").write_bytes((folder / "natural" / f"{pid}.wav").read_bytes())
    assert "system 'gen' is both imported and generated" in _refused(tmp_path, d, "--system", GEN)


def test_uploaded_zip_is_unpacked_safely(folder, tmp_path):
    import zipfile

    from app.listening.imported import ImportProblem, scan, unpack_zip

    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as z:
        for f in folder.rglob("*"):
            if f.is_file():
                z.write(f, f"study/{f.relative_to(folder)}")
    root = unpack_zip(good, tmp_path / "u1")
    s = scan(root)
    assert s.systems == ("modelx", "natural") and s.natural == ("natural",)
    assert s.texts["h1"] == TEXTS["h1"]

    def bad(name: str, build) -> str:
        z_path = tmp_path / f"{name}.zip"
        with zipfile.ZipFile(z_path, "w", zipfile.ZIP_DEFLATED) as z:
            build(z)
        (tmp_path / name).mkdir()
        with pytest.raises(ImportProblem) as e:
            unpack_zip(z_path, tmp_path / name)
        assert not (tmp_path / "escaped.wav").exists()
        return str(e.value)

    wav = (folder / "natural" / "h1.wav").read_bytes()
    assert "../escaped.wav in the .zip points outside" in bad(
        "trav", lambda z: z.writestr("../escaped.wav", wav)
    )

    def link(z):
        info = zipfile.ZipInfo("natural/h1.wav")
        info.external_attr = 0o120777 << 16  # a symlink entry
        z.writestr(info, "/etc/passwd")

    assert "natural/h1.wav in the .zip is a symlink" in bad("link", link)
    # a zip bomb: 12 MB of zeros compress to a few kB; refused while reading, at 100:1
    err = bad("bomb", lambda z: z.writestr("natural/h1.wav", b"\0" * (12 * 2**20)))
    assert "natural/h1.wav in the .zip unpacks to over 100 times its compressed size" in err
    # a member stored whole but over the per-file limit: refused while reading, at 10 MB
    big = zipfile.ZipInfo("natural/h1.wav")
    err = bad("big", lambda z: z.writestr(big, b"\1" * (12 * 2**20)))
    assert "natural/h1.wav in the .zip unpacks to over 10 MB" in err
    (tmp_path / "junk.zip").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ImportProblem, match="not a readable .zip"):
        unpack_zip(tmp_path / "junk.zip", tmp_path / "j")
