"""Questionnaire pages a designer defines: fields (a choice, a number, a short text), each
required or not, on pages placed before the first item, after item N, or at the end.

Why its own module: what a page may ask, and what a rater may answer, is bounded here once,
for the designer (:func:`parse_pages`, when the test is made) and for the rater flow
(:meth:`Questionnaires.questionnaire`, on every answer). A test made with ``questionnaire:
true`` keeps the built-in page (:data:`app.listening.texts.QUESTIONNAIRE`, after consent).
Answers are stored with the rater (``test_raters.questionnaire``: one JSON object of every
answer by key, and ``_pages``, the pages answered). The status carries only the rater's own
due page (its fields, never another rater's answers); the page sets every text with
``textContent``; the export writes answers through the one CSV writer (formula cells
neutralised).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from app.listening.answers import Answer
from app.listening.flow import Denied, RaterFlow
from app.listening.texts import QUESTIONNAIRE, QUESTIONNAIRE_INTRO
from app.store.listening import RaterSession, TestRow
from backends.errors import InvalidRequest

MAX_PAGES = 5
MAX_FIELDS = 20
"""Fields per test, over all its pages."""
MAX_OPTIONS = 20
MAX_LABEL_CHARS = 300
MAX_OPTION_CHARS = 100
MAX_TEXT_CHARS = 2000
"""The longest ``max_length`` a short-text field may have."""
DEFAULT_TEXT_CHARS = 500
NUMBER_LIMIT = 1e9
"""A number field's bounds lie within ±this."""
KEY_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
TYPES = ("choice", "number", "text")
PAGES_KEY = "_pages"


@dataclass(frozen=True)
class Field:
    key: str
    label: str
    type: str
    required: bool = True
    options: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None
    max_length: int | None = None


@dataclass(frozen=True)
class Page:
    at: str
    """``start`` (before the first item), ``end`` (after the last), or ``after:N``."""
    title: str
    fields: tuple[Field, ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fields"] = [
            {k: v for k, v in asdict(f).items() if v not in (None, ())} for f in self.fields
        ]
        return d


def _text(v: Any, what: str, limit: int, *, empty: bool = False) -> str:
    if not isinstance(v, str) or (not v.strip() and not empty) or len(v) > limit:
        raise InvalidRequest(f"{what} must be a text of 1..{limit} characters")
    return v.strip()


def _number(v: Any, what: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise InvalidRequest(f"{what} must be a number")
    if abs(v) > NUMBER_LIMIT:
        raise InvalidRequest(f"{what} must be within ±{NUMBER_LIMIT:g}")
    return float(v)


def _field(d: Any) -> Field:
    if not isinstance(d, dict):
        raise InvalidRequest("a questionnaire field must be an object {key, label, type, …}")
    key = d.get("key")
    if not isinstance(key, str) or not KEY_RE.match(key):
        raise InvalidRequest("a field's key must be 1-40 of a-z, 0-9 and _, starting with a letter")
    kind = d.get("type")
    if kind not in TYPES:
        raise InvalidRequest(f"field {key}: type must be one of {', '.join(TYPES)}")
    label = _text(d.get("label"), f"field {key}'s label", MAX_LABEL_CHARS)
    req = d.get("required", True)
    if not isinstance(req, bool):
        raise InvalidRequest(f"field {key}: required must be true or false")
    if kind == "choice":
        opts = d.get("options")
        if not isinstance(opts, list) or not 2 <= len(opts) <= MAX_OPTIONS:
            raise InvalidRequest(f"field {key}: a choice needs 2..{MAX_OPTIONS} options")
        got = tuple(_text(o, f"field {key}'s option", MAX_OPTION_CHARS) for o in opts)
        if len(set(got)) != len(got):
            raise InvalidRequest(f"field {key}: each option once")
        return Field(key, label, kind, req, options=got)
    if kind == "number":
        lo, hi = (
            _number(d.get("min"), f"field {key}'s min"),
            _number(d.get("max"), f"field {key}'s max"),
        )
        if lo is None or hi is None or lo > hi:
            raise InvalidRequest(f"field {key}: a number needs min <= max")
        return Field(key, label, kind, req, min=lo, max=hi)
    n = d.get("max_length", DEFAULT_TEXT_CHARS)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_TEXT_CHARS:
        raise InvalidRequest(f"field {key}: max_length must be 1..{MAX_TEXT_CHARS}")
    return Field(key, label, kind, req, max_length=n)


def _at(v: Any, items: int) -> str:
    if v in ("start", "end"):
        return str(v)
    if isinstance(v, int) and not isinstance(v, bool) and 1 <= v < items:
        return f"after:{v}"
    raise InvalidRequest(f'a page\'s "at" must be "start", "end" or an item 1..{items - 1}')


def parse_pages(value: Any, items: int) -> list[dict[str, Any]] | bool:
    """The designer's ``questionnaire``: ``true``/``false`` (the built-in page or none), or
    a list of pages ``{at, title, fields: [...]}``, checked and bounded (``items``: the
    items per rater, for ``at: N``). Returns what the test's config stores."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_PAGES:
        raise InvalidRequest(f"questionnaire: true, or a list of 1..{MAX_PAGES} pages")
    pages, keys, places = [], set(), set()
    for p in value:
        if not isinstance(p, dict) or not isinstance(p.get("fields"), list) or not p["fields"]:
            raise InvalidRequest("a questionnaire page is {at, title, fields: [...]}")
        at = _at(p.get("at", "start"), items)
        if at in places:
            raise InvalidRequest(f"two questionnaire pages at {at}")
        places.add(at)
        fields = tuple(_field(f) for f in p["fields"])
        keys_here = [f.key for f in fields]
        if keys & set(keys_here) or len(set(keys_here)) != len(keys_here):
            raise InvalidRequest("each questionnaire field key once in the test")
        keys |= set(keys_here)
        if len(keys) > MAX_FIELDS:
            raise InvalidRequest(f"a questionnaire has at most {MAX_FIELDS} fields")
        title = _text(p.get("title") or "A few questions", "a page's title", MAX_LABEL_CHARS)
        pages.append(Page(at, title, fields).to_dict())
    return pages


BUILT_IN = Page(
    "start",
    QUESTIONNAIRE_INTRO,
    tuple(
        Field(q["key"], q["question"], "choice", True, tuple(q["options"])) for q in QUESTIONNAIRE
    ),
)


def pages_of(config: dict[str, Any]) -> list[Page]:
    """The test's pages (the built-in one for ``questionnaire: true``)."""
    q = config.get("questionnaire")
    if not q:
        return []
    if not isinstance(q, list):
        return [BUILT_IN]
    return [
        Page(
            p["at"],
            p["title"],
            tuple(Field(**{**f, "options": tuple(f.get("options") or ())}) for f in p["fields"]),
        )
        for p in q
    ]


def stored(r: RaterSession) -> dict[str, Any]:
    try:
        got = json.loads(r.questionnaire) if r.questionnaire else {}
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def done_pages(r: RaterSession) -> set[str]:
    got = stored(r)
    if PAGES_KEY in got:
        return set(got[PAGES_KEY])
    return {"start"} if got else set()  # a built-in page stored before pages had places


def due_page(config: dict[str, Any], r: RaterSession, answered: int, total: int) -> Page | None:
    """The first page the rater has reached and not answered."""
    done = done_pages(r)
    for p in pages_of(config):
        if p.at in done:
            continue
        n = 0 if p.at == "start" else total if p.at == "end" else int(p.at.split(":")[1])
        if answered >= min(n, total):  # a page after more items than a rater has: at the end
            return p
    return None


def read_answer(f: Field, v: Any) -> Any:
    """One field's answer, checked (None: left empty, allowed when not required)."""
    if v is None or v == "":
        if f.required:
            raise InvalidRequest(f"{f.key}: this question needs an answer")
        return None
    if f.type == "choice":
        if v not in f.options:
            raise InvalidRequest(f"{f.key}: choose one of {', '.join(f.options)}")
        return v
    if f.type == "number":
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise InvalidRequest(f"{f.key}: a number")
        if not f.min <= v <= f.max:  # type: ignore[operator]
            raise InvalidRequest(f"{f.key}: a number within {f.min:g}..{f.max:g}")
        return v
    if not isinstance(v, str) or len(v) > (f.max_length or DEFAULT_TEXT_CHARS):
        raise InvalidRequest(f"{f.key}: a text of at most {f.max_length} characters")
    return v


class QuestionnaireStored(Answer):
    """``POST /ll/listen/{id}/questionnaire``: whether the answers were stored (false: no page
    was due), and the page they answered (absent when none)."""

    stored: bool
    page: str | None = None
    """The page's place: ``start``, ``after:N`` or ``end``."""


class Questionnaires(RaterFlow):
    """The rater's questionnaire pages: which one is due, and its answers."""

    def questionnaire(self, test_id: str, token: str, answers: Any) -> dict[str, Any]:
        """Answer the rater's due page: every field checked, stored once (a second call for
        the same page keeps the first answers: the next page, if any, is then due)."""
        t = self.load_test(test_id)
        r = self.rater(test_id, token)
        if not r.consent_at:
            raise Denied("consent first")
        if not t.config.get("questionnaire"):
            raise InvalidRequest("this test has no questionnaire")
        answered = len(self.tests.answered(test_id, r.rater_id))
        total = len(self.store.assignments(test_id, r.rater_id))
        page = due_page(t.config, r, answered, total)
        if page is None:
            return QuestionnaireStored(stored=False).wire()
        if not isinstance(answers, dict):
            raise InvalidRequest("answers: {question: answer}")
        extra = set(answers) - {f.key for f in page.fields}
        if extra:
            raise InvalidRequest(f"unknown question {sorted(extra)[0][:40]!r}")
        got = {f.key: read_answer(f, answers.get(f.key)) for f in page.fields}
        have = stored(r)
        if t.config["questionnaire"] is True:  # the built-in page: its flat answers, as before
            out = got
        else:
            out = {**have, **got, PAGES_KEY: [*have.get(PAGES_KEY, []), page.at]}
        self.tests.update_rater(test_id, r.rater_id, questionnaire=json.dumps(out))
        return QuestionnaireStored(stored=True, page=page.at).wire()

    def page_state(self, t: TestRow, r: RaterSession, answered: int, total: int):
        """The due page as the rater page draws it, or None."""
        p = due_page(t.config, r, answered, total)
        return None if p is None else p.to_dict()

    def require_no_page(self, t: TestRow, r: RaterSession) -> None:
        """A vote while a questionnaire page is due is refused."""
        answered = len(self.tests.answered(t.test_id, r.rater_id))
        total = len(self.store.assignments(t.test_id, r.rater_id))
        if due_page(t.config, r, answered, total) is not None:
            raise Denied("answer the questionnaire page first")


__all__ = [
    "DEFAULT_TEXT_CHARS",
    "MAX_FIELDS",
    "MAX_LABEL_CHARS",
    "MAX_OPTIONS",
    "MAX_OPTION_CHARS",
    "MAX_PAGES",
    "MAX_TEXT_CHARS",
    "NUMBER_LIMIT",
    "Field",
    "Page",
    "QuestionnaireStored",
    "Questionnaires",
    "due_page",
    "pages_of",
    "parse_pages",
    "read_answer",
]
