"""Create a listening test from a spec: systems, prompts, type, design; generate its stimuli.

The admin JSON route (``POST /ll/admin/tests``) and the Gradio designer both call
:func:`create_test`, so a test made by script and one made by clicking are the same.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.listening.service import SHOW_TEXT_KINDS
from app.state import ASSETS, BackendEntry
from backends.base import InvalidRequest
from evaluation.listening.design import Design
from evaluation.listening.stimuli import CONDITIONS, SystemSource, generate
from evaluation.listening.tables import TestStore

MAX_PROMPTS = 200
MAX_PROMPT_CHARS = 600
MAX_SYSTEMS = 8
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


def harvard_sentences() -> list[str]:
    for folder in (ASSETS / "harvard", Path.cwd() / "assets" / "harvard"):
        f = folder / "harvard.txt"
        if f.is_file():
            return [s.strip() for s in f.read_text(encoding="utf-8").splitlines() if s.strip()]
    raise InvalidRequest("the bundled Harvard sentences (assets/harvard/harvard.txt) are missing")


def parse_prompts(text: str) -> list[str]:
    """One prompt per non-empty line (pasted text or an uploaded .txt file)."""
    out = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not out:
        raise InvalidRequest("no prompts: give at least one non-empty line")
    if len(out) > MAX_PROMPTS:
        raise InvalidRequest(f"at most {MAX_PROMPTS} prompts")
    for p in out:
        if len(p) > MAX_PROMPT_CHARS:
            raise InvalidRequest(f"a prompt is over {MAX_PROMPT_CHARS} characters")
    return out


@dataclass
class SystemSpec:
    name: str
    backend: str
    """A configured backend label, or a backend spec (e.g. ``piper?profile=qwen3-tts``)."""
    voice: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    condition: str = "as_streamed"


@dataclass
class TestSpec:
    __test__ = False

    name: str
    kind: str
    systems: list[SystemSpec]
    prompts: list[str]
    items_per_rater: int
    reference: str | None = None
    ab_mode: str = "cmos"
    screening: bool = True
    headphone_check: bool = True
    show_text: bool | None = None
    """Show the prompt's text on the vote page; None: yes for MOS and A/B, no otherwise."""
    consent: str | None = None
    completion_code: str | None = None
    redirect_url: str | None = None
    open: bool = True
    seed: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TestSpec:
        if not isinstance(d, dict):
            raise InvalidRequest("a test spec must be a JSON object")
        systems = d.get("systems")
        if not isinstance(systems, list) or not 1 <= len(systems) <= MAX_SYSTEMS:
            raise InvalidRequest(f"systems must be a list of 1..{MAX_SYSTEMS}")
        prompts = d.get("prompts")
        if isinstance(prompts, dict) and prompts.get("source") == "harvard":
            n = int(prompts.get("n", 10))
            prompts = harvard_sentences()[: max(1, min(n, 50))]
        elif isinstance(prompts, str):
            prompts = parse_prompts(prompts)
        elif isinstance(prompts, list):
            prompts = parse_prompts("\n".join(str(p) for p in prompts))
        else:
            raise InvalidRequest("prompts: a list, pasted text, or {source: harvard, n}")
        try:
            return cls(
                name=str(d.get("name") or "Listening test")[:120],
                kind=str(d.get("kind", "mos")),
                systems=[
                    SystemSpec(
                        name=str(s["name"]),
                        backend=str(s["backend"]),
                        voice=(str(s["voice"]) if s.get("voice") else None),
                        params=dict(s.get("params") or {}),
                        condition=str(s.get("condition") or "as_streamed"),
                    )
                    for s in systems
                ],
                prompts=prompts,
                items_per_rater=int(d.get("items_per_rater", 10)),
                reference=d.get("reference") or None,
                ab_mode=str(d.get("ab_mode", "cmos")),
                screening=bool(d.get("screening", True)),
                headphone_check=bool(d.get("headphone_check", True)),
                show_text=None if d.get("show_text") is None else bool(d["show_text"]),
                consent=(str(d["consent"])[:4000] if d.get("consent") else None),
                completion_code=(
                    str(d["completion_code"])[:64] if d.get("completion_code") else None
                ),
                redirect_url=(str(d["redirect_url"])[:500] if d.get("redirect_url") else None),
                open=bool(d.get("open", True)),
                seed=int(d.get("seed", 0)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidRequest(f"bad test spec: {e}") from None


def _source(state: Any, s: SystemSpec) -> tuple[SystemSource, BackendEntry | None]:
    if not NAME_RE.match(s.name):
        raise InvalidRequest("a system name must be 1-40 letters, digits, '.', '-' or '_'")
    if s.condition not in CONDITIONS:
        raise InvalidRequest(f"condition must be one of {', '.join(CONDITIONS)}")
    allowed = {"seed", "speed", "language", "instructions"}
    if set(s.params) - allowed:
        raise InvalidRequest(f"system params may be {', '.join(sorted(allowed))}")
    entry = state.backends.get(s.backend)
    if entry is not None:
        return SystemSource(
            s.name, entry.backend, entry.spec, s.voice, s.params, s.condition
        ), entry
    from backends.registry import load_backend

    try:
        be = load_backend(s.backend)
    except Exception as e:
        raise InvalidRequest(f"system {s.name}: cannot load backend {s.backend!r}: {e}") from None
    if s.condition == "live":
        raise InvalidRequest("the live condition needs a configured backend (listenlab serve)")
    return SystemSource(s.name, be, s.backend, s.voice, s.params, s.condition), None


async def create_test(
    state: Any, spec: TestSpec, progress: Callable[[float, str], None] | None = None
) -> str:
    """Validate, create the test, record its stimuli; returns the new test id."""
    tests = TestStore(state.store)
    names = [s.name for s in spec.systems]
    design = Design(
        kind=spec.kind,
        systems=tuple(names),
        prompts=tuple(f"p{i + 1:03d}" for i in range(len(spec.prompts))),
        items_per_rater=spec.items_per_rater,
        reference=spec.reference,
        ab_mode=spec.ab_mode,
        screening=spec.screening,
        seed=spec.seed,
    )
    try:
        design.validate()
    except ValueError as e:
        raise InvalidRequest(str(e)) from None
    if spec.redirect_url and not spec.redirect_url.startswith("https://"):
        raise InvalidRequest("the redirect URL must start with https://")
    sources, live = {}, {}
    for s in spec.systems:
        src, entry = _source(state, s)
        sources[s.name] = src
        if entry is not None:
            live[s.name] = entry.label
    test_id = uuid.uuid4().hex[:12]
    prompt_ids = {
        f"{test_id}-{pid}": text for pid, text in zip(design.prompts, spec.prompts, strict=True)
    }
    design = Design(**{**design.to_dict(), "prompts": tuple(prompt_ids), "systems": tuple(names)})
    config = {
        "design": design.to_dict(),
        "systems": [
            {
                "name": s.name,
                "backend": sources[s.name].spec,
                "voice": s.voice,
                "params": s.params,
                "condition": s.condition,
            }
            for s in spec.systems
        ],
        "backends": live,
        "headphone_check": spec.headphone_check,
        "show_text": spec.show_text if spec.show_text is not None else spec.kind in SHOW_TEXT_KINDS,
        "consent": spec.consent,
        "completion_code": spec.completion_code,
        "redirect_url": spec.redirect_url,
    }
    tests.create_test(test_id, spec.kind, spec.name, config, status="draft")
    trap = next(
        (e.backend for e in state.backends.values() if e.spec.startswith("piper")),
        None,
    )
    await generate(
        tests, test_id, design, sources, prompt_ids, trap_backend=trap, progress=progress
    )
    if spec.open:
        tests.set_status(test_id, "open")
    return test_id


__all__ = ["SystemSpec", "TestSpec", "create_test", "harvard_sentences", "parse_prompts"]
