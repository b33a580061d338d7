"""Who speaks on the arena and in what: each system's voices and languages, and the prompts per
language (the deployer's arena file, ``LISTENLAB_ARENA_CONFIG``, TOML or JSON).

Why a file of its own: a cloning model is judged on more than one voice (TTS Arena V3 cycles
a fixed voice pool; a one-voice board says more about the voice than the model), and a
multilingual arena must not ask an English-only system to read German. So a system may list
voices (a battle draws one per side, uniformly), and languages (default: what its backend
says it speaks, else the arena's default language); prompts carry a language, and a battle's
pair is drawn among systems that speak its text's language. The bundled English prompts
stay; the file adds more. Everything is checked and bounded when the file is read::

    default_language = "en"

    [systems.qwen-clone]
    voices = ["lib:0123456789abcdef", "Vivian"]   # "lib:<id>": a library voice; else a name
    languages = ["en", "de"]

    [[prompts]]
    language = "de"
    text = "Der Hund bellt laut."

    [prompt_files]        # one prompt per line; '#' starts a comment line
    de = "prompts/de.txt"  # relative to the arena file
"""

from __future__ import annotations

import json
import tomllib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from backends.errors import InvalidRequest

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_VOICES = 64
MAX_LANGUAGES = 64
MAX_PROMPTS = 100_000
MAX_NAME_CHARS = 200
DEFAULT_LANGUAGE = "en"


class LineupError(InvalidRequest):
    """The arena file is not usable (the message says where)."""


LANGUAGE_NAMES = {
    "chinese": "zh",
    "english": "en",
    "french": "fr",
    "german": "de",
    "italian": "it",
    "japanese": "ja",
    "korean": "ko",
    "portuguese": "pt",
    "russian": "ru",
    "spanish": "es",
}
"""The language names vLLM-Omni's models list (Qwen3-TTS's ``English``…) as tags; a model's
``Auto`` is no language and is skipped."""


def language_tag(value: Any) -> str:
    """A language as the arena compares it: the primary subtag, lower case (``en-US`` → ``en``,
    ``English`` → ``en``)."""
    s = str(value or "").strip().replace("_", "-").split("-")[0].lower()
    s = LANGUAGE_NAMES.get(s, s)
    if s == "auto":
        raise LineupError("'Auto' is no language")
    if not (2 <= len(s) <= 8 and s.isascii() and s.isalpha()):
        raise LineupError(f"not a language tag: {str(value)[:40]!r}")
    return s


def backend_language(tag: str | None, declared: tuple[str, ...]) -> str | None:
    """The backend's own name for the language ``tag`` (``en`` → Qwen3-TTS's ``English``,
    Piper's ``en-US``), so a request carries a value the backend accepts; the tag itself when
    the backend declares languages but none matches (the arena file said the system speaks
    it); None for a backend that declares none (it speaks its default)."""
    if not tag or not declared:
        return None
    for lang in declared:
        try:
            if language_tag(lang) == tag:
                return lang
        except LineupError:
            continue
    return tag


def text_key(text: str) -> str:
    """A text as the first-use rule compares it: Unicode NFKC, case-folded, letters and digits
    only (so 'Hello, world!' and 'hello world' are one text)."""
    t = unicodedata.normalize("NFKC", text).casefold()
    return " ".join("".join(c if c.isalnum() else " " for c in t).split())


@dataclass(frozen=True)
class Prompt:
    text: str
    language: str


@dataclass(frozen=True)
class Entry:
    """One system's voices and languages on the arena (empty: the backend's defaults)."""

    voices: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lineup:
    """The arena file, checked: systems' entries, extra prompts, the default language."""

    systems: dict[str, Entry] = field(default_factory=dict)
    prompts: tuple[Prompt, ...] = ()
    default_language: str = DEFAULT_LANGUAGE

    def voices(self, system: str) -> tuple[str, ...]:
        return self.systems.get(system, Entry()).voices

    def languages(self, system: str, backend_languages: tuple[str, ...] = ()) -> set[str]:
        """What ``system`` speaks: the file's list, else its backend's, else the default."""
        listed = self.systems.get(system, Entry()).languages
        if listed:
            return set(listed)
        spoken = set()
        for lang in backend_languages:
            try:
                spoken.add(language_tag(lang))
            except LineupError:
                continue
        return spoken or {self.default_language}


def _strings(value: Any, what: str, limit: int) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise LineupError(f"{what} must be a list of non-empty strings")
    if len(value) > limit:
        raise LineupError(f"{what}: at most {limit} entries, got {len(value)}")
    if any(len(v) > MAX_NAME_CHARS for v in value):
        raise LineupError(f"{what}: an entry is longer than {MAX_NAME_CHARS} characters")
    return tuple(dict.fromkeys(v.strip() for v in value))


def _entry(name: str, raw: Any) -> Entry:
    if not isinstance(raw, dict) or set(raw) - {"voices", "languages"}:
        raise LineupError(f"systems.{name}: only 'voices' and 'languages' may be set")
    voices = _strings(raw.get("voices", []), f"systems.{name}.voices", MAX_VOICES)
    langs = _strings(raw.get("languages", []), f"systems.{name}.languages", MAX_LANGUAGES)
    return Entry(voices, tuple(dict.fromkeys(language_tag(x) for x in langs)))


def _prompt_lines(path: Path, language: str) -> list[Prompt]:
    if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
        raise LineupError(f"prompt file {path}: missing or over {MAX_FILE_BYTES} bytes")
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return [Prompt(ln, language) for ln in lines if ln and not ln.startswith("#")]


def parse_lineup(raw: Any, base: Path, max_chars: int) -> Lineup:
    """A :class:`Lineup` from the file's parsed content (``base``: its folder)."""
    if not isinstance(raw, dict):
        raise LineupError("the arena file must hold a table (TOML) or an object (JSON)")
    unknown = set(raw) - {"default_language", "systems", "prompts", "prompt_files"}
    if unknown:
        raise LineupError(f"unknown keys in the arena file: {', '.join(sorted(unknown))}")
    default = language_tag(raw.get("default_language", DEFAULT_LANGUAGE))
    systems_raw = raw.get("systems", {})
    if not isinstance(systems_raw, dict):
        raise LineupError("'systems' must be a table of system labels")
    systems = {str(k): _entry(str(k), v) for k, v in systems_raw.items()}
    prompts: list[Prompt] = []
    for k, p in enumerate(raw.get("prompts", [])):
        if not isinstance(p, dict) or not isinstance(p.get("text"), str):
            raise LineupError(f"prompts[{k}] needs a 'text' (and a 'language')")
        prompts.append(Prompt(p["text"].strip(), language_tag(p.get("language", default))))
    files = raw.get("prompt_files", {})
    if not isinstance(files, dict):
        raise LineupError("'prompt_files' must map a language to a file")
    for lang, rel in files.items():
        prompts += _prompt_lines(base / str(rel), language_tag(lang))
    if len(prompts) > MAX_PROMPTS:
        raise LineupError(f"at most {MAX_PROMPTS} prompts, got {len(prompts)}")
    for p in prompts:
        if not 2 <= len(p.text) <= max_chars:
            raise LineupError(f"a prompt must be 2..{max_chars} characters: {p.text[:40]!r}")
    return Lineup(systems, tuple(prompts), default)


def load_lineup(path: str | Path | None, max_chars: int) -> Lineup:
    """The arena file at ``path`` (None: no file, every default)."""
    if path is None or str(path) == "":
        return Lineup()
    p = Path(path)
    if not p.is_file() or p.stat().st_size > MAX_FILE_BYTES:
        raise LineupError(f"arena file {p}: missing or over {MAX_FILE_BYTES} bytes")
    text = p.read_text(encoding="utf-8")
    try:
        raw = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        raise LineupError(f"arena file {p}: {e}") from None
    return parse_lineup(raw, p.parent, max_chars)


def allowed_pairs(spoken: list[set[str]], language: str | None) -> np.ndarray:
    """The n × n mask of pairs that may battle: both speak ``language`` (None: any language
    they share)."""
    n = len(spoken)
    m = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            both = spoken[i] & spoken[j]
            m[i, j] = i != j and (language in both if language else bool(both))
    return m


__all__ = [
    "backend_language",
    "DEFAULT_LANGUAGE",
    "Entry",
    "Lineup",
    "LineupError",
    "Prompt",
    "allowed_pairs",
    "language_tag",
    "load_lineup",
    "parse_lineup",
    "text_key",
]
