"""Every text a rater reads, in one dictionary: the page shows these and the export prints them.

Why here and not in the page's script: a methods section must quote what raters saw, word for
word. The rater page receives these texts with its status (``status()["test"]["texts"]``)
and puts them on the page with ``textContent``; the export's ``study.json`` and
``methods.md`` print the same dictionary (:func:`rater_texts`). The words of the answer (the
built-in instructions, the question, the answers) are the test kind's
(:attr:`TestKind.instructions`, :meth:`TestKind.scale`); the rest are the flow's, here. A
test's own texts (title, consent, the admin's instructions) are added to the built-in ones,
never in their place.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from app.listening.answers import Answer
from evaluation.listening.design import Design
from evaluation.listening.kinds import kind_of
from evaluation.listening.screening import PASS, TRIALS

ADMIN_INSTRUCTIONS_LABEL = "From the researcher:"
"""Shown before the test's own instructions (they follow the built-in ones)."""

SCREEN_QUESTION = {
    "antiphase": "Each trial plays three tones. Which tone was the quietest?",
    "huggins": "Each trial plays three noises. One of them has a faint tone in it. Which one?",
}
SCREEN_INTRO = (
    "Put on headphones. This check tells whether you are wearing headphones. It takes one "
    f"attempt: {TRIALS} trials, each played once or a few times, and you need {PASS} of "
    f"{TRIALS} right to go on. Your first answer to each trial counts."
)
SCREEN_LEVEL = "Play a level-setting tone, set a comfortable volume, then leave it."
SCREEN_PASSED = "Headphone check passed ({correct} of {trials} right). The test starts now."
SCREEN_FAILED = (
    "This study needs headphones, and the headphone check did not pass ({correct} of "
    "{trials} right), so the study ends here."
)
FAMILIAR_INTRO = (
    "Listen to these clips: they show the range of what you will hear. You do not rate them."
)
CONNECTION = {
    "lost": "The connection to the server was lost. Reconnecting (try {n}, the next in {s} s). "
    "Your answers so far are saved; a clip you play now starts once the connection is back.",
    "connecting": "Connecting to the server (try {n})…",
    "back": "Connected to the server again.",
    "cut": "The clip stopped: the connection to the server was lost. Press Play again once it "
    "is back.",
}
"""What the rater page says while its connection to the server is down (the page reconnects
with a timeout and a growing wait: ``app/player/static/player-core.js``)."""
SCREENOUT_HEADING = "Thank you for your time"
DONE_HEADING = "Thank you!"
BREAK = {
    "heading": "Time for a break",
    "text": "You have rated {answered} of {total} clips. Rest your ears for at least {min} "
    "seconds; you continue where you were.",
    "wait": "You can continue in {left} s.",
    "ready": "You can continue when you are ready.",
    "continue": "Continue",
}
"""The break page of a test with a session cap (``break_after``; :mod:`app.listening.breaks`)."""
COUNTER = "Clip {n} of {total}"
"""The progress counter: shown only while rating, it counts every clip the rater rates."""

QUESTIONNAIRE = [
    {
        "key": "device",
        "question": "What are you listening with?",
        "options": ["Headphones", "Earbuds", "Laptop or phone speakers", "Other speakers"],
    },
    {
        "key": "headphone_type",
        "question": "If headphones or earbuds: which kind?",
        "options": ["Over-ear", "On-ear", "In-ear", "Not using headphones"],
    },
    {
        "key": "native_language",
        "question": "What is your native language?",
        "options": ["English", "Other"],
    },
    {
        "key": "age_band",
        "question": "Your age",
        "options": ["18-29", "30-39", "40-49", "50-59", "60 or over", "Prefer not to say"],
    },
]
"""The optional rater questionnaire (ITU-T P.808 asks for the listening device, and the
panel's language and age): multiple choice only, so nothing free-form is stored."""
QUESTIONNAIRE_INTRO = "A few questions about you and how you listen (this is part of the study)."


class ScreenTexts(Answer):
    """The headphone screen's texts (:data:`SCREEN_INTRO`, :data:`SCREEN_QUESTION`, …)."""

    intro: str
    questions: dict[str, str]
    """The question of each screen the test uses, by screen (``antiphase``, ``huggins``)."""
    level: str
    passed: str
    failed: str


class RaterTexts(Answer):
    """Every text a rater of a test reads, by place (:func:`rater_texts`; ``{n}``-style
    fields are filled in by the page)."""

    consent: str
    instructions: str
    """The kind's built-in instructions."""
    admin_instructions: str
    admin_instructions_label: str
    scale: dict[str, Any]
    """The kind's question and answers: ``{question, labels: [[value, label], …]}``, or
    ``bands`` (MUSHRA), or ``scales`` (P.835): :meth:`TestKind.scale`."""
    screen: ScreenTexts | None
    familiar_intro: str
    questionnaire: dict[str, Any] | None
    """The questionnaire's intro, pages and questions (:func:`questionnaire_texts`)."""
    counter: str
    pause: dict[str, str] | None = Field(alias="break")
    """The break page's texts (:data:`BREAK`), for a test with a session cap."""
    connection: dict[str, str]
    screenout_heading: str
    done_heading: str


def rater_texts(kind: str, config: dict[str, Any], consent: str) -> dict[str, Any]:
    """Every text a rater of this test reads, by place (the page's and the export's)."""
    mode = config.get("screening") or "antiphase"
    k = kind_of(kind)
    return {
        "consent": consent,
        "instructions": k.instructions,
        "admin_instructions": config.get("instructions") or "",
        "admin_instructions_label": ADMIN_INSTRUCTIONS_LABEL,
        "scale": k.scale(answer_mode(config)),
        "screen": {
            "intro": SCREEN_INTRO,
            "questions": {k: v for k, v in SCREEN_QUESTION.items() if mode in (k, "both")},
            "level": SCREEN_LEVEL,
            "passed": SCREEN_PASSED,
            "failed": SCREEN_FAILED,
        }
        if mode != "none"
        else None,
        "familiar_intro": FAMILIAR_INTRO,
        "questionnaire": questionnaire_texts(config.get("questionnaire")),
        "counter": COUNTER,
        "break": BREAK if config.get("break_after") else None,
        "connection": CONNECTION,
        "screenout_heading": SCREENOUT_HEADING,
        "done_heading": DONE_HEADING,
    }


def questionnaire_texts(q: Any) -> dict[str, Any] | None:
    """The questionnaire's texts: the built-in page's (``true``), the designer's pages, or
    None."""
    if not q:
        return None
    if isinstance(q, list):  # ``questions``: every field, as the methods section lists them
        questions = [
            {"key": f["key"], "question": f["label"], "options": f.get("options") or []}
            for p in q
            for f in p["fields"]
        ]
        return {"intro": None, "pages": q, "questions": questions}
    return {"intro": QUESTIONNAIRE_INTRO, "questions": QUESTIONNAIRE}


def answer_mode(config: dict[str, Any]) -> str:
    """The test's answer mode (A/B: ``cmos`` or ``forced``), the design's default if unset."""
    d = config.get("design") or {}
    return str(d.get("ab_mode") or Design.ab_mode)


__all__ = [
    "ADMIN_INSTRUCTIONS_LABEL",
    "BREAK",
    "CONNECTION",
    "COUNTER",
    "QUESTIONNAIRE",
    "SCREEN_QUESTION",
    "RaterTexts",
    "ScreenTexts",
    "answer_mode",
    "rater_texts",
]
