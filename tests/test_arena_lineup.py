"""Voices per system and prompts per language (app/arena/lineup.py, the arena file): the file
is checked and bounded; on a real app, a battle's pair speaks its text's language, a battle
without a text gets a prompt in a language both systems speak, and each side's voice is drawn
from its system's list and reaches the request."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from app.arena.battles import ArenaError
from app.arena.lineup import LineupError, language_tag, load_lineup, parse_lineup, text_key
from app.arena.ws import side_request
from app.server import create_app
from tests.support.app_util import tmp_db

SYSTEMS = {
    "en_only": "piper?deterministic=1",
    "bilingual": "piper?deterministic=1",
    "de_only": "piper?deterministic=1",
}
ARENA_FILE = """
default_language = "en"

[systems.bilingual]
voices = ["v1", "v2"]
languages = ["en", "de-DE"]

[systems.de_only]
languages = ["de"]

[[prompts]]
language = "de"
text = "Der Hund bellt laut."

[prompt_files]
de = "de.txt"
"""


def test_the_file_is_checked_and_bounded(tmp_path):
    (tmp_path / "de.txt").write_text("# comment\nZwei Katzen schlafen.\n\nEin Haus am See.\n")
    (tmp_path / "arena.toml").write_text(ARENA_FILE)
    lu = load_lineup(tmp_path / "arena.toml", 300)
    assert lu.voices("bilingual") == ("v1", "v2") and lu.voices("en_only") == ()
    assert lu.languages("bilingual") == {"en", "de"}
    assert lu.languages("en_only", ("en-US",)) == {"en"}  # the backend's, as a primary tag
    assert lu.languages("unknown") == {"en"}  # the default
    assert [(p.text, p.language) for p in lu.prompts] == [
        ("Der Hund bellt laut.", "de"),
        ("Zwei Katzen schlafen.", "de"),
        ("Ein Haus am See.", "de"),
    ]
    assert load_lineup(None, 300).systems == {}
    bad = [
        ({"sytems": {}}, "unknown keys in the arena file: sytems"),
        ({"systems": {"x": {"voices": "v1"}}}, "systems.x.voices must be a list"),
        ({"systems": {"x": {"voices": ["v"] * 65}}}, "at most 64 entries"),
        ({"systems": {"x": {"speed": 2}}}, "only 'voices' and 'languages'"),
        ({"systems": {"x": {"languages": ["english!"]}}}, "not a language tag"),
        ({"prompts": [{"text": "x" * 301, "language": "en"}]}, "2..300 characters"),
        ({"prompts": [{"language": "en"}]}, "needs a 'text'"),
        ({"prompt_files": {"de": "missing.txt"}}, "missing or over"),
        ([1, 2], "must hold a table"),
    ]
    for raw, msg in bad:
        with pytest.raises(LineupError, match=msg):
            parse_lineup(raw, tmp_path, 300)
    (tmp_path / "broken.toml").write_text("systems = [")
    with pytest.raises(LineupError, match="broken.toml"):
        load_lineup(tmp_path / "broken.toml", 300)
    assert language_tag("pt_BR") == "pt" and text_key("Hello,  World!") == "hello world"


@pytest.fixture
def svc(tmp_path, monkeypatch):
    (tmp_path / "de.txt").write_text("Zwei Katzen schlafen.\n")
    (tmp_path / "arena.toml").write_text(ARENA_FILE)
    monkeypatch.setenv("LISTENLAB_ARENA_CONFIG", str(tmp_path / "arena.toml"))
    app = create_app(SYSTEMS, tmp_db(), mount_ui=False)
    svc = app.state.arena
    svc.set_limits(battles_per_minute=1000, global_battles_per_minute=1000)
    return svc


def battle(svc, text=None, language=None, voter="ip:v"):
    return asyncio.run(svc.new_battle("o", text, voter, language=language, random=text is None))


def test_a_battle_speaks_a_language_both_systems_speak(svc):
    spoken = svc.spoken()
    assert spoken == {"en_only": {"en"}, "bilingual": {"en", "de"}, "de_only": {"de"}}
    pairs = Counter()
    for _ in range(40):  # a German prompt: only the two systems that speak German
        b = battle(svc, "Der Hund bellt laut.")
        row = svc.arena.rows.battle(b["battle_id"])
        assert b["language"] == row.language == "de" and row.text_source == "prompt"
        pairs[frozenset((row.system_a, row.system_b))] += 1
    assert set(pairs) == {frozenset({"bilingual", "de_only"})}
    for _ in range(40):  # a typed English text: en_only and bilingual
        row = svc.arena.rows.battle(battle(svc, "A typed English sentence.")["battle_id"])
        assert {row.system_a, row.system_b} == {"en_only", "bilingual"} and row.language == "en"
    seen = Counter()
    for _ in range(60):  # no text: the pair first, then a prompt both speak
        b = battle(svc)
        row = svc.arena.rows.battle(b["battle_id"])
        common = spoken[row.system_a] & spoken[row.system_b]
        assert row.language in common and row.text_source == "prompt"
        assert svc.prompt_language[row.text] == row.language
        seen[row.language] += 1
    assert set(seen) == {"en", "de"}
    with pytest.raises(ArenaError, match="no two systems on this arena speak fr"):
        battle(svc, "Une phrase en français.", language="fr")
    with pytest.raises(ArenaError, match="not a language tag"):
        battle(svc, "Some text.", language="<script>")


def test_each_side_gets_a_voice_from_its_system_and_the_request_carries_it(svc):
    voices = Counter()
    for _ in range(60):
        row = svc.arena.rows.battle(battle(svc, "A typed English sentence.")["battle_id"])
        for side in "ab":
            if row.system(side) == "bilingual":
                voices[row.voice(side)] += 1
            else:
                assert row.voice(side) is None
    assert set(voices) == {"v1", "v2"} and min(voices.values()) > 10
    row = svc.arena.rows.battle(battle(svc, "Der Hund bellt laut.")["battle_id"])
    side = "a" if row.system_a == "bilingual" else "b"
    entry = svc.state.backends["bilingual"]
    req = asyncio.run(side_request(svc, entry, row, side))
    assert req.text == "Der Hund bellt laut." and req.voice in ("v1", "v2")
    assert req.language == "de"  # Piper declares languages, so it is given one


def test_a_library_voice_that_is_gone_fails_only_that_side(svc, tmp_path):
    from dataclasses import replace

    row = svc.arena.rows.battle(battle(svc, "A typed English sentence.")["battle_id"])
    gone = replace(row, voice_a="lib:" + "0" * 32)
    with pytest.raises(ArenaError, match="this side could not be generated"):
        asyncio.run(side_request(svc, svc.state.backends[row.system_a], gone, "a"))
