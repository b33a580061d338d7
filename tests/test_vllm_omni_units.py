"""A model is a unit: one module of ``backends/vllm_omni/models/`` holds a model's facts (each
with its source), request rules, chunk schedule and embedded adapter, and everything else reads
it from there.

These tests check the sources' form (``tests/conformance/test_embedded_real.py`` reads each
cited line in the installed vLLM-Omni 0.30.0 wheel), that a model's refusals are written once
and the embedded adapter answers with them, and that a new model is one new module: a toy
module dropped into the package gets a wire profile that streams on its schedule and rules that
``listenlab api`` applies, with no other file touched.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

import backends.vllm_omni.models as models
from backends.base import SpeechRequest
from backends.errors import InvalidRequest
from backends.profile import ProfileBackend, unit_profile
from backends.vllm_omni.models import (
    ADAPTERS,
    MODELS,
    UNITS,
    VARIANTS,
    adapter_class,
    discover,
    speech_rules,
)
from backends.vllm_omni.models.base import AdapterContext
from backends.vllm_omni.models.unit import FACTS, OPTIONAL_FACTS, ModelUnit
from backends.vllm_omni.rules import RequestView, RuleContext, adapter_error
from evaluation.takes import record

ROOT = Path(__file__).resolve().parents[1]


def all_sources(unit: ModelUnit):
    for fact, sources in unit.sources.items():
        for s in sources:
            yield fact, s
    for s in unit.schedule.sources if unit.schedule else ():
        yield "schedule", s


@pytest.mark.parametrize("name", sorted(UNITS))
def test_every_fact_names_its_source(name):
    """Each fact cites a file of the vllm-omni wheel, its line and the words there, or says
    it is assumed and why; the schedule says what it assumes."""
    unit = UNITS[name]
    assert set(FACTS) <= set(unit.sources), set(FACTS) - set(unit.sources)
    assert set(unit.sources) <= {*FACTS, *OPTIONAL_FACTS}, set(unit.sources) - set(FACTS)
    # the voices: a built-in list, or "any name is taken", says where that was read
    assert bool(unit.presets or unit.open_voices) == ("presets" in unit.sources)
    assert (unit.max_model_len is not None) == ("max_model_len" in unit.sources)
    assert unit.schedule is not None and unit.schedule.sources and unit.schedule.assumptions
    for fact, s in all_sources(unit):
        if s.assumed:
            assert len(s.note) > 20, (fact, s)
            assert str(s).startswith("assumed: ")
        else:
            assert re.fullmatch(r"vllm_omni/[\w/]+\.(py|yaml)", s.path), (fact, s)
            assert s.line > 0 and s.quote.strip(), (fact, s)
            assert f"{s.path}:{s.line}" in str(s) and "0.30.0" in str(s)
    assert unit.rules.source == "; ".join(str(s) for s in unit.sources["rules"])


ADAPTERS_030 = [
    "audex",
    "audex_tta",
    "audio8_tts",
    "breeze_tts_2",
    "cosyvoice3",
    "covo_audio",
    "fish_speech",
    "gepard",
    "glm_tts",
    "higgs_audio_v2",
    "higgs_audio_v3",
    "indextts2",
    "indextts2_5",
    "ming_flash_omni_tts",
    "ming_tts",
    "minimax_music3",
    "moss_tts",
    "moss_tts_nano",
    "omnivoice",
    "qwen3_tts",
    "step_audio2",
    "voxcpm2",
    "voxtral_tts",
]
"""The 23 TTS adapters vLLM-Omni 0.30.0 registers (``tts_adapters/__init__.py``; fish_speech is
registered as ``fish_tts``), as issue #41 lists them; the conformance stage reads the
registry itself (``tests/conformance/test_rules.py``)."""


def test_every_tts_adapter_of_vllm_omni_030_is_a_unit_with_a_profile():
    from backends.profile import PROFILES

    assert sorted(UNITS) == sorted(ADAPTERS_030)
    for name in ADAPTERS_030:
        unit = UNITS[name]
        assert PROFILES[name.replace("_", "-")].unit == name
        assert unit.checkpoint and unit.schedule is not None
    # the embedded engine drives the five it can build prompts for without the checkpoint
    assert sorted(ADAPTERS) == [
        "cosyvoice3",
        "fish_speech",
        "moss_tts_nano",
        "qwen3_tts",
        "voxcpm2",
    ]


def test_models_known_by_name_only_say_so():
    """Families no 0.30.0 adapter serves (dots.tts, Zonos) are marked assumed, every fact;
    a variant of a unit (MOSS-TTS-Local) keeps its unit's rules."""
    named = [m for m in MODELS if m.name not in UNITS and m not in VARIANTS]
    assert sorted(m.name for m in named) == ["dots.tts", "zonos"]
    assert [v.rules for v in VARIANTS] == [UNITS["moss_tts"].rules]
    for m in named:
        assert m.schedule is None and m.checkpoint == ""
        assert all(s.assumed for _, s in all_sources(m))


def test_a_models_refusals_are_written_once():
    """The messages of a model's rules appear once in the backends' source: the embedded
    adapter, ``listenlab api`` and the remote client all use the unit's value."""
    source = "\n".join(p.read_text() for p in (ROOT / "backends").rglob("*.py"))
    for unit in UNITS.values():
        for message in (unit.rules.requires_ref_audio, unit.rules.ref_text_message):
            if message:
                assert source.count(message) == 1, message


@pytest.mark.parametrize("name", ["cosyvoice3", "fish_speech", "moss_tts_nano"])
def test_the_embedded_adapter_refuses_in_the_units_words(tmp_path, name):
    """The adapter's clip rules are the unit's: the same message as ``listenlab api``'s."""
    rules = UNITS[name].rules
    adapter = adapter_class(name)(AdapterContext(tmp_path), {})
    view = RequestView(input="Hello.")
    ctx = RuleContext(UNITS[name].checkpoint, rules)
    if rules.requires_ref_audio:
        with pytest.raises(InvalidRequest) as err:
            adapter.check(SpeechRequest("Hello."))
        assert str(err.value) == rules.requires_ref_audio == adapter_error(view, ctx)
    if rules.ref_text_message:
        with pytest.raises(InvalidRequest) as err:
            adapter.check(SpeechRequest("Hello.", ref_audio=b"RIFF"))
        view = RequestView(input="Hello.", ref_audio="data:audio/wav;base64,AAAA")
        assert str(err.value) == rules.ref_text_message == adapter_error(view, ctx)


TOY = '''
"""A toy model: what a new model's module holds."""

from backends.vllm_omni.models.unit import ChunkSchedule, ModelUnit, assumed
from backends.vllm_omni.rules import SpeechRules

MODEL = ModelUnit(
    name="toy_tts",
    title="Toy-TTS",
    keys=("toy-tts",),
    checkpoint="Example/Toy-TTS-1B",
    sample_rate=16000,
    channels=2,
    cloning=True,
    rules=SpeechRules(
        "toy_tts",
        "the toy's own",
        sample_rates=frozenset({16000}),
        requires_ref_audio="Toy-TTS requires 'ref_audio' (reference audio for voice cloning)",
    ),
    schedule=ChunkSchedule(
        frame_hz=10.0,
        first_frames=(2,),
        chunk_frames=5,
        async_chunk=True,
        sources=(assumed("a toy schedule for the test of one new module"),),
        assumptions="all of it",
    ),
)
'''


@pytest.fixture
def toy_package(tmp_path):
    """``backends/vllm_omni/models/`` with one more module in it (on a second path entry,
    so nothing is written into the repository), for this test only."""
    folder = tmp_path / "more_models"
    folder.mkdir()
    models.__path__.append(str(folder))
    try:
        yield folder
    finally:
        models.__path__.remove(str(folder))
        for name in [m for m in sys.modules if m.startswith("backends.vllm_omni.models.toy")]:
            del sys.modules[name]


async def test_a_new_model_is_one_module(toy_package, piper_det):
    (toy_package / "toy_tts.py").write_text(textwrap.dedent(TOY))
    units, adapters = discover()
    assert set(units) == {*UNITS, "toy_tts"} and set(adapters) == set(ADAPTERS)
    toy = units["toy_tts"]
    profile = unit_profile(toy)
    assert (profile.name, profile.model, profile.sample_rate, profile.channels) == (
        "toy-tts",
        "Example/Toy-TTS-1B",
        16000,
        2,
    )
    take = await record(ProfileBackend(piper_det, profile), SpeechRequest("Hello there, toy."))
    assert take.ok and (take.sample_rate, take.channels) == (16000, 2)
    frames = [c.frames for c in take.chunks]
    assert frames[:3] == [3200, 8000, 8000] and frames[-1] <= 8000  # 2 frames, then 5
    # its rules, by served name, as listenlab api applies them
    ctx = RuleContext("Example/Toy-TTS-1B", toy.rules)
    assert adapter_error(RequestView(input="Hi."), ctx) == toy.rules.requires_ref_audio
    assert speech_rules("Example/Toy-TTS-1B") is not toy.rules  # the live registry: unchanged


def test_a_module_that_is_no_unit_fails_at_once(toy_package):
    (toy_package / "half_done.py").write_text('"""No MODEL here."""\n')
    with pytest.raises(ImportError, match=r"half_done\.py is no model unit"):
        discover()
    for name in [m for m in sys.modules if m.endswith(".half_done")]:
        del sys.modules[name]
